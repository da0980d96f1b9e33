/**
 * The workloads the chaos driver SIGKILLs, one per phase, run in a child process
 * (bundled by test/support/bundle.ts). Each drives the real engine on a real
 * workspace with choices from a seeded PRNG and reports on stdout, one line at a
 * time (pipes are written synchronously on Linux, so a printed line reached the
 * parent before the next call started):
 *   ready                          the engine is open
 *   ack <kind> <taskId> <id>       the engine acknowledged a call (see Ack in driver.ts)
 *   expect <file>                  an operation that rewrites the workspace begins; the
 *                                  file holds the before and after trees it may leave
 *   settled                        that operation returned
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Engine } from '../../src/core/engine/engine';
import { applyReview } from '../../src/core/review/applyReview';
import type { FileDecision } from '../../src/core/review/applyPlan';
import { GitCliCommitter } from '../../src/core/review/gitCli';
import { applyDecisions, computeHunks } from '../../src/core/review/hunks';
import { fingerprint } from '../../src/core/review/reviewModel';
import type { ChildPhase } from './phases';
import { Prng } from './prng';
import { LIVE_DIR } from './live';
import { diskTree, fileValue, manifestTree, withoutPrefix, type Expectation, type Tree } from './tree';


export interface WorkloadContext {
  engine: Engine;
  workspace: string;
  rng: Prng;
  runId: string;
  say(line: string): void;
  /** Records what an operation may leave behind, then announces it. */
  expect(e: Expectation): void;
}

const say = (line: string) => process.stdout.write(line + '\n');

/** Text with lines a review can cut into several hunks. */
function textFile(rng: Prng, tag: string, lines = 20 + rng.int(40)): string {
  return Array.from({ length: lines }, (_, i) => `${tag} line ${i} ${rng.int(1000)}\n`).join('');
}

/** Changes a few scattered lines, adds one and drops one: several hunks. */
function editText(rng: Prng, text: string, tag: string): string {
  const lines = text.split('\n');
  for (let n = 1 + rng.int(4); n > 0; n--) lines[rng.int(lines.length)] = `${tag} edited ${rng.int(1000)}`;
  if (rng.chance(0.5)) lines.splice(rng.int(lines.length), 0, `${tag} inserted`);
  if (rng.chance(0.5) && lines.length > 3) lines.splice(rng.int(lines.length - 1), 1);
  return lines.join('\n');
}

/** A person's or an agent's edits to a workspace: text and binary files, deletes, modes, symlinks. */
function mutateWorkspace(rng: Prng, ws: string, tag: string, files = 40): void {
  for (let n = 1 + rng.int(6); n > 0; n--) {
    const rel = `${rng.pick(['src', 'src/deep/er', 'docs', 'bin'])}/f${rng.int(files)}${rng.pick(['.txt', '.md', '.bin'])}`;
    const abs = path.join(ws, rel);
    const r = rng.next();
    fs.mkdirSync(path.dirname(abs), { recursive: true });
    // Never write through a symlink planted by an earlier edit: replace it.
    if (fs.lstatSync(abs, { throwIfNoEntry: false })?.isSymbolicLink()) fs.rmSync(abs);
    if (r < 0.5) fs.writeFileSync(abs, textFile(rng, tag));
    else if (r < 0.62) fs.writeFileSync(abs, Buffer.from(Array.from({ length: 1 + rng.int(96 * 1024) }, () => rng.int(256))));
    else if (r < 0.8) fs.rmSync(abs, { force: true });
    else if (r < 0.9 && fs.existsSync(abs) && !fs.lstatSync(abs).isSymbolicLink()) fs.chmodSync(abs, rng.chance(0.5) ? 0o755 : 0o644);
    else {
      fs.rmSync(abs, { force: true });
      fs.symlinkSync(`../src/f${rng.int(files)}.txt`, abs);
    }
  }
}

// --- phase 1: event floods (tasks, steps, side effects; small export threshold → exports and journal rotations) ---

async function events(c: WorkloadContext): Promise<void> {
  const { engine, workspace, rng, runId } = c;
  const tasks: { id: string; next: number }[] = [];
  let i = 0;
  const worker = async (w: number) => {
    for (;;) {
      const key = `${runId}-${w}-${i++}`;
      const r = rng.next();
      if (tasks.length === 0 || r < 0.2) {
        const t = await engine.startTask({ goal: `goal ${key}`, plan: [{ id: 'a', title: 'A' }, { id: 'b', title: 'B', dependsOn: ['a'] }], idempotencyKey: key });
        tasks.push({ id: t.taskId, next: 0 });
        c.say(`ack task ${t.taskId} ${key}`);
      } else {
        const t = rng.pick(tasks);
        if (r < 0.55 && t.next < 2) {
          const stepId = t.next === 0 ? 'a' : 'b';
          try {
            // Real edits, so checkpoints write blobs and manifests that a kill can interrupt.
            fs.mkdirSync(path.join(workspace, 'src'), { recursive: true });
            fs.writeFileSync(path.join(workspace, 'src', `f${rng.int(20)}.txt`), `${key}\n`.repeat(1 + rng.int(200)));
            await engine.startStep({ taskId: t.id, stepId, idempotencyKey: `${key}-s`, inputs: { key } });
            c.say(`ack key ${t.id} ${key}-s`);
            await engine.completeStep({ taskId: t.id, stepId, outputs: { key }, idempotencyKey: `${key}-c` });
            c.say(`ack key ${t.id} ${key}-c`);
            t.next++;
          } catch {
            t.next = 2; // another worker raced us on this task: leave it
          }
        } else {
          const b = await engine.beginSideEffect({ taskId: t.id, key, kind: 'shell', description: `effect ${key}` });
          if (b.decision === 'proceed') c.say(`ack effect ${t.id} ${key}`);
          if (rng.chance(0.5)) {
            await engine.endSideEffect({ taskId: t.id, key, ok: true, result: { key }, idempotencyKey: `${key}-e` });
            c.say(`ack key ${t.id} ${key}-e`);
          }
        }
      }
    }
  };
  await Promise.all([worker(0), worker(1), worker(2)]);
}

// --- phase 2: checkpoints of a changing workspace (blob writes, manifests, retention deleting blobs) ---

async function checkpoints(c: WorkloadContext): Promise<void> {
  const { engine, workspace, rng, runId } = c;
  const key = `${runId}-task`;
  // A bulk first checkpoint (past 256 new files): workers write raw packs, which are
  // compressed in the background after it, so kills land in both and in the
  // compaction a next open resumes.
  // Most runs replace the bulk directory with one under a new name (a changed file is
  // not a new one), so most start with a bulk checkpoint: past the first 256 new files,
  // the workers store content raw.
  const bulkDirs = fs.readdirSync(workspace).filter((n) => n.startsWith('bulk-'));
  if (bulkDirs.length === 0 || rng.chance(0.6)) {
    for (const d of bulkDirs) fs.rmSync(path.join(workspace, d), { recursive: true, force: true });
    for (let i = 0; i < 600; i++) {
      const file = path.join(workspace, `bulk-${runId}`, `d${i % 8}`, `f${i}.ts`);
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, textFile(rng, `bulk ${runId} ${i}`));
    }
  }
  const { taskId } = await engine.startTask({ goal: `checkpoints ${runId}`, idempotencyKey: key });
  c.say(`ack task ${taskId} ${key}`);
  for (let i = 0; ; i++) {
    mutateWorkspace(rng, workspace, `${runId}-${i}`);
    const r = rng.next();
    if (r < 0.1) {
      await engine.gc({ maxPerTask: 4 });
    } else if (r < 0.3) {
      const s = await engine.startStep({ taskId, title: `step ${i}`, idempotencyKey: `${runId}-${i}-s` });
      c.say(`ack key ${taskId} ${runId}-${i}-s`);
      mutateWorkspace(rng, workspace, `${runId}-${i}b`);
      await engine.completeStep({ taskId, stepId: s.stepId, idempotencyKey: `${runId}-${i}-c` });
      c.say(`ack key ${taskId} ${runId}-${i}-c`);
    } else {
      const cp = await engine.checkpoint({ taskId, label: `cp ${i}`, idempotencyKey: `${runId}-${i}` });
      c.say(`ack checkpoint ${taskId} ${cp.checkpointId}`);
    }
  }
}

// --- phase 3: rollbacks and undo ---

/** `ignore`: a prefix of paths a person edits meanwhile (the liveedits phase), left out of the expected trees. */
async function rollbacks(c: WorkloadContext, ignore?: string): Promise<void> {
  const { engine, workspace, rng, runId } = c;
  const key = `${runId}-task`;
  if (Object.keys(diskTree(workspace)).length === 0) mutateWorkspace(rng, workspace, `${runId}-seed`, 12);
  const { taskId, baseCheckpointId } = await engine.startTask({ goal: `rollbacks ${runId}`, idempotencyKey: key });
  c.say(`ack task ${taskId} ${key}`);
  const ws = engine.workspaceSnapshots!;
  for (let i = 0; ; i++) {
    const r = rng.next();
    if (r < 0.4) {
      // Whole-file rewrites of many files, so a rollback has real work to be cut in the middle of.
      for (let n = 0; n < 3; n++) mutateWorkspace(rng, workspace, `${runId}-${i}-${n}`, 30);
      const cp = await engine.checkpoint({ taskId, idempotencyKey: `${runId}-${i}` });
      c.say(`ack checkpoint ${taskId} ${cp.checkpointId}`);
      continue;
    }
    // What the engine would undo (the last rollback not already undone), as Undo Last Rollback asks it.
    const last = engine.queries.lastUndoableRollback(taskId);
    const undo = r < 0.6 && last;
    const cps = engine.queries.checkpoints(taskId).filter((x) => x.manifestRef);
    const target = undo ? engine.queries.checkpoint(last.preRollbackCheckpointId)! : rng.chance(0.3) ? engine.queries.checkpoint(baseCheckpointId)! : rng.pick(cps);
    const op = undo ? 'undo rollback' : `rollback to ${target.id}`;
    c.expect({ op, before: withoutPrefix(diskTree(workspace), ignore), after: withoutPrefix(manifestTree(await ws.load(target)), ignore), ...(ignore ? { ignore } : {}) });
    const k = `${runId}-${i}-rb`;
    if (undo) await engine.undoRollback({ taskId, idempotencyKey: k });
    else await engine.rollback({ taskId, checkpointId: target.id, idempotencyKey: k });
    c.say('settled');
    c.say(`ack key ${taskId} ${k}`);
  }
}

// --- phase 4: review applies (pre-apply checkpoint, rejected hunks and files reverted, git commit) ---

async function review(c: WorkloadContext): Promise<void> {
  const { engine, workspace, rng, runId } = c;
  const ws = engine.workspaceSnapshots!;
  for (let i = 0; ; i++) {
    const tag = `${runId}-${i}`;
    const { taskId, baseCheckpointId } = await engine.startTask({ goal: `review ${tag}`, idempotencyKey: `${tag}-task` });
    c.say(`ack task ${taskId} ${tag}-task`);
    const s = await engine.startStep({ taskId, title: 'edit', idempotencyKey: `${tag}-s` });
    c.say(`ack key ${taskId} ${tag}-s`);
    // The agent edits text files (several hunks each), adds some and deletes some: enough
    // files that the apply's writes take long enough for kills to land among them.
    const existing = Object.keys(diskTree(workspace)).filter((p) => p.endsWith('.txt'));
    for (let n = 6 + rng.int(24); n > 0; n--) {
      const r = rng.next();
      if (r < 0.6 && existing.length) {
        const p = rng.pick(existing);
        const abs = path.join(workspace, p);
        if (fs.existsSync(abs)) fs.writeFileSync(abs, editText(rng, fs.readFileSync(abs, 'utf8'), tag));
      } else if (r < 0.85 || !existing.length) {
        const abs = path.join(workspace, 'src', `new-${tag}-${n}.txt`);
        fs.mkdirSync(path.dirname(abs), { recursive: true });
        fs.writeFileSync(abs, textFile(rng, tag, 50 + rng.int(2000)));
      } else {
        fs.rmSync(path.join(workspace, rng.pick(existing)), { force: true });
      }
    }
    await engine.completeStep({ taskId, stepId: s.stepId, idempotencyKey: `${tag}-c` });
    c.say(`ack key ${taskId} ${tag}-c`);
    // The person decides file by file, sometimes hunk by hunk; the oracle computes the result independently.
    const base = engine.queries.checkpoint(baseCheckpointId)!;
    const { changes } = await engine.diff({ from: baseCheckpointId });
    const before = diskTree(workspace);
    const after: Tree = { ...before };
    const decisions: (FileDecision & { fingerprint: string })[] = [];
    for (const ch of changes) {
      if (rng.chance(0.15)) continue; // left undecided: untouched, not committed
      const abs = path.join(workspace, ch.path);
      const b = await ws.fileAt(base, ch.path);
      const cur = fs.existsSync(abs) ? fs.readFileSync(abs) : null;
      // A reverted file gets its base mode back; a partly approved one keeps its current mode.
      const baseMode = ch.before?.type === 'file' ? ch.before.mode : 0o644;
      const curMode = cur && fs.statSync(abs).mode & 0o111 ? 0o755 : 0o644;
      const fp = fingerprint(b, cur);
      const r = rng.next();
      if (r < 0.35) {
        decisions.push({ path: ch.path, action: 'approve', fingerprint: fp });
      } else if (r < 0.65 || !b || !cur) {
        decisions.push({ path: ch.path, action: 'reject', fingerprint: fp });
        if (b) after[ch.path] = fileValue(b, baseMode);
        else delete after[ch.path];
      } else {
        const hunks = computeHunks(b.toString('utf8'), cur.toString('utf8'));
        const approved = [...hunks.hunks.keys()].filter(() => rng.chance(0.5));
        decisions.push({ path: ch.path, action: 'hunks', approved, hunkCount: hunks.hunks.length, fingerprint: fp });
        after[ch.path] = fileValue(Buffer.from(applyDecisions(hunks, new Set(approved)), 'utf8'), curMode);
      }
    }
    c.expect({ op: `review apply of ${taskId}`, before, after });
    await applyReview(engine, { taskId, message: `review ${tag}`, decisions }, new GitCliCommitter(workspace));
    c.say('settled');
    c.say(`ack completed ${taskId} ${tag}`);
  }
}

// --- phase 7: rollbacks and undo while a person keeps saving files under live/ (see liveWriter.ts) ---

const liveedits = (c: WorkloadContext) => rollbacks(c, `${LIVE_DIR}/`);

const WORKLOADS: Record<ChildPhase, (c: WorkloadContext) => Promise<void>> = { events, checkpoints, rollbacks: (c) => rollbacks(c), review, liveedits };

async function main(): Promise<void> {
  const [phase, workspace, seedArg, sidecar, runId] = process.argv.slice(2) as [ChildPhase, string, string, string, string];
  const rng = new Prng(Number(seedArg));
  const engine = await Engine.open({
    workspace,
    owner: { id: `chaos-${runId}`, pid: process.pid },
    // Small exports, so kills land in exports and journal rotations too.
    // The stall phase shortens the lease so a SIGSTOP outlasts it in a second or two.
    store: { exportThresholdBytes: 4096 + rng.int(32768), lock: { waitMs: 5_000, ...(process.env.WAYPOINT_CHAOS_LEASE_MS ? { leaseMs: Number(process.env.WAYPOINT_CHAOS_LEASE_MS) } : {}) } },
  });
  let n = 0;
  const expect = (e: Expectation) => {
    const file = path.join(sidecar, `${runId}-${n++}.json`);
    fs.writeFileSync(file, JSON.stringify(e));
    say(`expect ${file}`);
  };
  say('ready');
  await WORKLOADS[phase]({ engine, workspace, rng, runId, say, expect });
}

main().catch((e) => {
  process.stderr.write(`chaos workload failed: ${(e as Error).stack}\n`);
  process.exit(3);
});
