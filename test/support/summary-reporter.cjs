'use strict';
// Mocha's spec reporter, plus one closing line in the plain form CI reads
// ("N passed, N failed"), so a run is judged by its counts and not only its exit code.
//
// With --parallel the spec output of each file arrives whole when its worker finishes,
// so a failure is repeated at the end with its file, title and error: the closing
// lines alone say what broke, without scrolling through interleaved files.
//
// WAYPOINT_TEST_TIMES=<file> (serial runs: a parallel worker reports a file only when it
// is done) also writes each test file's wall time (first test start
// to last test end, hooks included) as JSON, for docs/test-times.md.
const fs = require('node:fs');
const path = require('node:path');
const Mocha = require('mocha');
const { EVENT_RUN_END, EVENT_SUITE_BEGIN, EVENT_SUITE_END, EVENT_TEST_PASS, EVENT_TEST_FAIL, EVENT_TEST_PENDING } = Mocha.Runner.constants;

/** The spec file a runnable or suite came from, walking up to the first one that knows. */
function fileOf(node) {
  for (let n = node; n; n = n.parent) if (n.file) return n.file;
  return '(unknown file)';
}

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    const label = process.env.WAYPOINT_SUITE_LABEL || 'unit';
    const timesFile = process.env.WAYPOINT_TEST_TIMES;
    const t0 = Date.now();
    /** file → { start, end, tests } in ms since the run began. */
    const files = new Map();
    const failed = [];
    const touch = (node, counts) => {
      const f = fileOf(node);
      const now = Date.now() - t0;
      const e = files.get(f) ?? { start: now, end: now, tests: 0 };
      e.end = now;
      if (counts) e.tests++;
      files.set(f, e);
    };
    runner.on(EVENT_SUITE_BEGIN, (s) => {
      if (s.file) touch(s, false);
    });
    runner.on(EVENT_SUITE_END, (s) => {
      if (s.file) touch(s, false);
    });
    runner.on(EVENT_TEST_PASS, (t) => touch(t, true));
    runner.on(EVENT_TEST_PENDING, (t) => touch(t, true));
    runner.on(EVENT_TEST_FAIL, (t, err) => {
      touch(t, true);
      failed.push({ file: fileOf(t), title: typeof t.fullTitle === 'function' ? t.fullTitle() : t.title, err });
    });
    runner.once(EVENT_RUN_END, () => {
      const s = runner.stats || {};
      if (failed.length) {
        process.stdout.write(`\n${label}: failures\n`);
        failed.forEach((f, i) => {
          const msg = ((f.err && (f.err.message || String(f.err))) || '(no message)').split('\n').filter((l) => l.trim()).join('\n');
          process.stdout.write(`  ${i + 1}) ${path.relative(process.cwd(), f.file)}: ${f.title}\n     ${msg.split('\n').slice(0, 6).join('\n     ')}\n`);
        });
      }
      if (timesFile) {
        const rows = [...files].map(([f, e]) => ({ file: path.relative(process.cwd(), f), ms: e.end - e.start, tests: e.tests }));
        rows.sort((a, b) => b.ms - a.ms);
        fs.writeFileSync(timesFile, JSON.stringify({ wallMs: Date.now() - t0, files: rows }, null, 2) + '\n');
      }
      const skipped = s.pending ? `, ${s.pending} skipped` : '';
      process.stdout.write(`\n${label}: ${s.passes || 0} passed, ${s.failures || 0} failed${skipped}\n`);
    });
  }
}
module.exports = SummaryReporter;
