// The demo agent talks to Waypoint only through its public CLI, as any agent would:
// `node dist/cli.js <command> … --workspace DIR --json` (exit 0 ok, 1 refused, 2 usage).
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { repoRoot } from '../harness/versions';

export const cliPath = path.join(repoRoot, 'dist', 'cli.js');

export class CliError extends Error {}

export function waypointCli(workspace: string) {
  return function run<T = Record<string, unknown>>(...args: string[]): T {
    const r = spawnSync(process.execPath, [cliPath, ...args, '--workspace', workspace, '--json'], {
      encoding: 'utf8', timeout: 30_000,
    });
    if (r.status !== 0) {
      throw new CliError(`waypoint ${args.join(' ')} exited ${r.status ?? r.signal}: ${r.stderr.trim()}`);
    }
    return JSON.parse(r.stdout) as T;
  };
}

/** Whether dist/cli.js is the real CLI (and not the skeleton's placeholder). */
export function cliAvailable(): boolean {
  const r = spawnSync(process.execPath, [cliPath, '--help'], { encoding: 'utf8' });
  return /effect begin/.test(`${r.stdout}${r.stderr}`);
}
