import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawn } from 'node:child_process';
import { buildCli, CLI, isAlive, waitExit } from './mcp';
import { LOG_FILE } from '../../src/ownership/backgroundStart';

/**
 * Real processes of the built CLI (dist/cli.js) in temporary workspaces nobody owns, as an
 * agent's hook or a person's shell would run them, and the background owners they start.
 */

export interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

export function cli(args: string[], env: Record<string, string | undefined> = {}, cwd?: string): Promise<Run> {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const e: NodeJS.ProcessEnv = { ...process.env, WAYPOINT_DAEMON: '1', WAYPOINT_DAEMON_IDLE_SECONDS: '60', ...env };
    // The unit suite turns background owners off for every other test (test/support/noBackgroundOwner.cjs).
    if (!('WAYPOINT_NO_DAEMON' in env)) delete e.WAYPOINT_NO_DAEMON;
    for (const [k, v] of Object.entries(e)) if (v === undefined) delete e[k];
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: e, cwd });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const kill = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.once('close', (status) => {
      clearTimeout(kill);
      resolve({ status, stdout, stderr, ms: Date.now() - t0 });
    });
  });
}

export async function json<T = Record<string, unknown>>(p: Promise<Run>): Promise<T> {
  const r = await p;
  assert.equal(r.status, 0, `exit ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

export type Status = { owner: { pid: number; ownerId: string; background: boolean } | null; status?: { pid: number; rssBytes: number; idleMs: number; watch: { kind: string; hinted?: number } } };

export function tree(dir: string, dirs: number, files: number): void {
  for (let d = 0; d < dirs; d++) {
    fs.mkdirSync(path.join(dir, `d${d}`), { recursive: true });
    for (let f = 0; f < files; f++) fs.writeFileSync(path.join(dir, `d${d}`, `f${f}.txt`), `file ${d}/${f}\n`);
  }
}

export function servingLines(ws: string): number {
  const log = fs.readFileSync(path.join(ws, '.waypoint', LOG_FILE), 'utf8');
  return log.split('\n').filter((l) => / serving .* at http/.test(l)).length;
}

/**
 * The background owner the last call started, once it serves (a call that owned the store
 * starts it as it ends, so it may still be starting when the call returns).
 */
export async function servingOwner(ws: string, ms = 30_000): Promise<Status> {
  const deadline = Date.now() + ms;
  for (;;) {
    const r = await cli(['status', '--json', '-w', ws], { WAYPOINT_NO_DAEMON: '1' });
    const s = r.status === 0 ? (JSON.parse(r.stdout) as Status) : null;
    if (s?.owner?.background && s.status) return s;
    if (Date.now() > deadline) throw new Error(`no background owner serves ${ws}: ${r.stdout} ${r.stderr}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** Owners and folders a test made, stopped and removed after each test (a stopped owner is woken first, so it can leave). */
export function ownedAfterEach(): { cleanups: (() => void)[]; pids: number[] } {
  const made = { cleanups: [] as (() => void)[], pids: [] as number[] };
  before(() => buildCli());
  afterEach(async () => {
    for (const pid of made.pids.splice(0)) {
      if (isAlive(pid)) {
        process.kill(pid, 'SIGCONT');
        process.kill(pid, 'SIGTERM');
      }
      await waitExit(pid);
    }
    for (const c of made.cleanups.splice(0)) c();
  });
  return made;
}
