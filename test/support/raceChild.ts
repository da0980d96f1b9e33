/**
 * `waypoint mcp` (MCP over stdio) with a starting gun, for the race-to-own tests:
 * the process loads, says `ready` on stderr, waits for the go file to name an
 * instant, and at that instant runs exactly what `waypoint mcp --verbose` runs
 * (resolve the store: own it, or relay to its owner). The parent writes the go file
 * only once every contender is loaded, so two of these race for the owner lock
 * within a millisecond of each other however slowly each one started.
 *
 *   node raceChild.js WORKSPACE GO_FILE
 */
import * as fs from 'node:fs';
import { Logger } from '../../src/core/log';
import { runStdio } from '../../src/mcp/stdio';

async function goTime(file: string): Promise<number> {
  for (;;) {
    try {
      const t = Number(fs.readFileSync(file, 'utf8'));
      if (t > 0) return t;
    } catch {
      // not written yet
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function main(): Promise<void> {
  const [workspace, goFile] = process.argv.slice(2);
  const log = new Logger((_level, line) => process.stderr.write(`waypoint: ${line}\n`));
  process.stderr.write('ready\n');
  const at = await goTime(goFile);
  // Sleep to just before the instant, then spin: a timer alone fires late on a loaded machine.
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
