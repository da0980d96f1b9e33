'use strict';
// `npm run test:unit`: the unit suite across worker processes. The tests mostly wait on
// fsync, child processes and PostgreSQL, not on their own CPU, so one worker more than
// there are cores keeps both cores of a CI machine busy (docs/test-times.md).
// WAYPOINT_TEST_JOBS overrides the count.
//
// Files are handed to workers in the order listed, each to the next free worker, so the
// longest start first: a long file started last would run alone at the end while the
// other workers idle. The list is the measured slowest (docs/test-times.md); the rest
// follow in name order. A file not found here is simply run with the rest.
//
// Run one file without this config (`npx mocha test/unit/x.test.ts`): a file given on
// the command line is added to this config's list, not put in its place.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const base = require('../../.mocharc.json');

const SLOWEST_FIRST = [
  'cli.footguns',
  'chaos',
  'cli.relay',
  'pg.fleetSoak',
  'store.crash',
  'cli.workspace',
  'engine.diskFull',
  'concurrency',
  'rollback.hostile',
  'pg.crash',
  'displayText',
  'engine.retry',
  'engine.workspace',
  'engine.notCaptured',
].map((n) => `test/unit/${n}.test.ts`);

const all = fs
  .readdirSync(__dirname, { recursive: true })
  .map((f) => path.join('test/unit', String(f)).split(path.sep).join('/'))
  .filter((f) => f.endsWith('.test.ts'))
  .sort();
const first = SLOWEST_FIRST.filter((f) => all.includes(f));

const cores = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;

module.exports = {
  ...base,
  spec: [...first, ...all.filter((f) => !first.includes(f))],
  parallel: true,
  jobs: Number(process.env.WAYPOINT_TEST_JOBS) || Math.max(2, cores + 1),
  // Builds dist/ once, in the main process, before any worker starts (see the file).
  require: ['test/support/noBackgroundOwner.cjs', 'test/support/globalSetup.ts'],
};
