import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cli } from '../support/mcp';
import type { RecordedRequest } from './scriptedServer';

/**
 * What every real agent's scripted session shares: its folders, the workspace it works in
 * (a git repository holding a.txt and b.txt, set up by `waypoint connect <agent>`), the
 * CLI's answers, and the checks that end every session.
 */
export interface AgentRun {
  root: string;
  /** The git workspace. */
  ws: string;
  /** The agent's fresh home (not created: some agents want to make it themselves). */
  home: string;
  /** Where captureHook.cjs appends the agent's hook payloads. */
  capture: string;
}

export function agentWorkspace(prefix: string, agent: string): AgentRun {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), `wp-agents-${prefix}-`));
  const ws = path.join(root, 'ws');
  fs.mkdirSync(ws);
  const git = (...a: string[]) => execFileSync('git', ['-c', 'user.email=t@example.invalid', '-c', 'user.name=t', ...a], { cwd: ws, stdio: 'pipe' });
  git('init', '-q');
  fs.writeFileSync(path.join(ws, 'a.txt'), 'hello\n');
  fs.writeFileSync(path.join(ws, 'b.txt'), 'bee\n');
  git('add', '.');
  git('commit', '-qm', 'start');
  const r = cli(['connect', agent, '--yes', '--workspace', ws]);
  assert.equal(r.status, 0, r.stderr);
  return { root, ws, home: path.join(root, 'home'), capture: path.join(root, 'hooks.jsonl') };
}

/** A `waypoint … --json` answer in the workspace; any other exit fails the test. */
export function waypoint(ws: string, args: string[]): any {
  const r = cli([...args, '--workspace', ws, '--json']);
  assert.equal(r.status, 0, `waypoint ${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** Nothing in `.waypoint/hooks.log`: no hook was refused or failed. */
export function assertCleanHookLog(ws: string): void {
  const log = path.join(ws, '.waypoint', 'hooks.log');
  assert.equal(fs.existsSync(log) ? fs.readFileSync(log, 'utf8') : '', '');
}

/** Every request the scripted servers saw came to 127.0.0.1. */
export function assertLoopbackOnly(requests: readonly RecordedRequest[]): void {
  assert.ok(requests.length > 0, 'the agent asked the scripted server');
  for (const q of requests) assert.match(String(q.headers.host), /^127\.0\.0\.1:\d+$/);
}

export function removeAgentRun(run: AgentRun | undefined): void {
  // Retried: an agent's own background process may still be closing files in its home.
  if (run && process.env.WAYPOINT_KEEP_AGENT_RUN !== '1') fs.rmSync(run.root, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
}
