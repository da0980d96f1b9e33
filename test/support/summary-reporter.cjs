'use strict';
// Mocha's spec reporter, plus one closing line in the plain form CI reads
// ("N passed, N failed"), so a run is judged by its counts and not only its exit code.
const Mocha = require('mocha');
const { EVENT_RUN_END } = Mocha.Runner.constants;

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    const label = process.env.WAYPOINT_SUITE_LABEL || 'unit';
    runner.once(EVENT_RUN_END, () => {
      const s = runner.stats || {};
      const skipped = s.pending ? `, ${s.pending} skipped` : '';
      process.stdout.write(`\n${label}: ${s.passes || 0} passed, ${s.failures || 0} failed${skipped}\n`);
    });
  }
}
module.exports = SummaryReporter;
