/**
 * The liveedits phase's person (liveWriter.ts, a process of its own) and its check:
 * every save the person made is on disk, or was replaced by a rollback, an undo or
 * a recovery that captured it first (a checkpoint holds that content at that path).
 * A save replaced with no checkpoint holding it is an edit lost: a violation.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import type { Engine } from '../../src/core/engine/engine';
import { bundleScript } from '../support/bundle';
import { LIVE_DIR } from './live';

/** Running totals of one workspace's person, as of the last check. */
export interface LiveTotals {
  /** Saves the person made. */
  saves: number;
  /** Saves a rollback (or undo, or recovery) replaced, each held by a checkpoint. */
  replacedHeld: number;
  /** Files a rollback left as the person had them (reported conflicts under live/). */
  kept: number;
}

let writerScript: string | undefined;

export class LiveWriter {
  private readonly child: ChildProcess;
  private exited = false;
  private err = '';
  readonly log: string;
  private readonly control: string;

  constructor(workspace: string, sidecar: string, tag: string, seed: number) {
    writerScript ??= bundleScript(path.join(__dirname, 'liveWriter.ts'));
    this.control = path.join(sidecar, `live-${tag}`);
    fs.mkdirSync(this.control, { recursive: true });
    this.log = path.join(this.control, 'saves.log');
    fs.writeFileSync(this.log, '');
    this.child = spawn(process.execPath, [writerScript, workspace, this.log, this.control, String(seed)], { stdio: ['ignore', 'ignore', 'pipe'] });
    this.child.stderr!.on('data', (d: Buffer) => (this.err += d.toString()));
    this.child.on('exit', () => (this.exited = true));
  }

  /** Stops the person between two saves (so no save is half-written when the disk is compared). */
  async pause(): Promise<void> {
    fs.writeFileSync(path.join(this.control, 'pause'), '');
    const deadline = Date.now() + 30_000;
    while (!fs.existsSync(path.join(this.control, 'paused'))) {
      if (this.exited) throw new Error(`the live writer ended: ${this.err.trim()}`);
      if (Date.now() > deadline) throw new Error('the live writer did not pause within 30 s');
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  resume(): void {
    fs.rmSync(path.join(this.control, 'pause'), { force: true });
  }

  async stop(): Promise<void> {
    if (!this.exited) {
      this.child.kill('SIGKILL');
      await new Promise((r) => this.child.once('exit', r));
    }
    fs.rmSync(this.control, { recursive: true, force: true });
  }
}

const hashOf = (abs: string): string => {
  try {
    return createHash('sha256').update(fs.readFileSync(abs)).digest('hex');
  } catch {
    return 'absent';
  }
};

/**
 * With the person paused: each save either is on disk or is held by a checkpoint at
 * its path. `held` caches, per manifest ref, the `path\0hash` pairs under live/.
 */
export async function checkLiveEdits(engine: Engine, workspace: string, logFile: string, held: Map<string, string[]>, conflictsSeen: number): Promise<{ checks: number; violations: string[]; totals: LiveTotals }> {
  const ws = engine.workspaceSnapshots!;
  const holds = new Set<string>();
  for (const c of engine.queries.checkpoints()) {
    if (!c.manifestRef || c.damaged) continue;
    let pairs = held.get(c.manifestRef);
    if (!pairs) {
      pairs = [];
      for (const [key, e] of await ws.load(c)) if (key.startsWith(`${LIVE_DIR}/`) && e.type === 'file') pairs.push(`${key}\0${e.hash}`);
      held.set(c.manifestRef, pairs);
    }
    for (const p of pairs) holds.add(p);
  }
  const violations: string[] = [];
  let checks = 0;
  let saves = 0;
  let replacedHeld = 0;
  const last = new Map<string, string>();
  const lost = (rel: string, h: string, how: string) => violations.push(`the person's save of ${rel} (${h.slice(0, 12)}…) was ${how}, and no checkpoint holds it: an edit lost`);
  for (const line of fs.readFileSync(logFile, 'utf8').split('\n')) {
    const [word, rel, h] = line.split(' ');
    if (!rel || !h) continue;
    if (word === 'wrote') {
      saves++;
      last.set(rel, h);
    } else if (word === 'displaced') {
      checks++;
      if (last.get(rel) === h) last.delete(rel);
      if (holds.has(`${rel}\0${h}`)) replacedHeld++;
      else lost(rel, h, 'replaced while the person kept working');
    }
  }
  for (const [rel, h] of last) {
    checks++;
    if (hashOf(path.join(workspace, rel)) === h) continue;
    if (holds.has(`${rel}\0${h}`)) replacedHeld++;
    else lost(rel, h, 'not on disk at the check');
  }
  return { checks, violations, totals: { saves, replacedHeld, kept: conflictsSeen } };
}
