import * as assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { runChaos } from '../chaos/driver';

/**
 * Crash tests of the event store: the crash matrix's event-flood phase
 * (test/chaos) — a child drives the engine with explicit idempotency keys and
 * prints every acknowledged call; it is SIGKILLed at a random moment (mid-append,
 * mid-fdatasync, mid-export, mid-rotation). After each kill the store must open,
 * hold every acknowledged event, equal a rebuild of its projections, keep every
 * blob its checkpoints refer to, and leave no temp files behind.
 *
 * WAYPOINT_CRASH_KILLS sets the number of kills (default 150 here — with the crash matrix slice (60) and the rollback kills (40), 250 in `npm test`; `npm run stress`
 * runs 2,000); WAYPOINT_CRASH_SEED replays a seed (printed on failure).
 */
const KILLS = Number(process.env.WAYPOINT_CRASH_KILLS ?? 150);

describe('crash safety (SIGKILL during appends, exports and rotations)', function () {
  this.timeout(0);

  it(`keeps every acknowledged event across ${KILLS} random kills`, async () => {
    const seed = Number(process.env.WAYPOINT_CRASH_SEED ?? randomInt(0, 2 ** 31));
    const r = await runChaos({ seed, phases: ['events'], killsPerPhase: KILLS });
    const p = r.phases[0]!;
    assert.equal(r.first, null, r.first ? `kill ${r.first.kill}: ${r.first.message} (replay: WAYPOINT_CRASH_SEED=${seed} WAYPOINT_CRASH_KILLS=${r.first.kill})` : '');
    assert.ok(p.acked > KILLS, `the workload acknowledged too little to prove anything (${p.acked} calls)`);
    process.stdout.write(`      seed ${seed}: ${p.kills} kills, ${p.acked} acknowledged calls, ${p.checks} invariant checks, 0 violations\n`);
  });
});
