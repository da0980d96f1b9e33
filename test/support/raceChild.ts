/**
 * `waypoint mcp` (MCP over stdio) with a starting gun, for the race-to-own tests:
 * the process loads, waits until the wall-clock instant given on its command line,
 * and only then runs exactly what `waypoint mcp --verbose` runs (resolve the store:
 * own it, or relay to its owner). Two of these released at the same instant race
 * for the owner lock within a millisecond of each other, instead of being staggered
 * by their start-up time.
 *
 *   node raceChild.js WORKSPACE START_AT_MS
 */
import { Logger } from '../../src/core/log';
import { runStdio } from '../../src/mcp/stdio';

async function main(): Promise<void> {
  const [workspace, startAt] = process.argv.slice(2);
  const log = new Logger((_level, line) => process.stderr.write(`waypoint: ${line}\n`));
  const at = Number(startAt);
  // Sleep to just before the instant, then spin: a timer alone fires tens of ms late on a loaded machine.
  const wait = at - Date.now() - 30;
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  while (Date.now() < at) {
    // spin
  }
  process.stderr.write(`go ${Date.now()}\n`);
  await runStdio({ workspace, log, agentRollback: 'deny', sweepIntervalMs: 1_000 });
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`raceChild failed: ${(e as Error).stack ?? e}\n`);
    process.exit(1);
  },
);
