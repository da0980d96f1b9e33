import assert from 'node:assert/strict';

// Proves the pipeline reports failures: with WAYPOINT_DELIBERATE_FAILURE=1 this
// test fails, and `npm test` must then exit non-zero. Without it, the test checks
// that the launcher's environment reached the extension host, which the result
// file (and the deliberate-failure switch itself) depend on.
describe('harness', () => {
  it('sees the launcher environment (fails when WAYPOINT_DELIBERATE_FAILURE=1)', () => {
    assert.notEqual(process.env.WAYPOINT_DELIBERATE_FAILURE, '1', 'deliberate failure requested');
    assert.ok(process.env.WAYPOINT_TEST_RESULT_FILE, 'WAYPOINT_TEST_RESULT_FILE reached the host');
  });
});
