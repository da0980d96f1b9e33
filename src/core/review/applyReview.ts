import * as fs from 'node:fs';
import type { Engine, FinishTask } from '../engine/engine';
import type { WorkspaceEdit } from '../engine/reviewEdits';
import { WaypointError } from '../model/errors';
import { resolveInsideSync, sha256Hex } from '../snapshot';
import { planApply, StaleDecisionError, type FileDecision, type PlanInput } from './applyPlan';
import type { CommitFile, CommitOutcome, Committer } from './gitCli';
import { baseContent, fingerprint, readWorkspaceFile, requireBase } from './reviewModel';

export interface ApplyReviewInput {
  taskId: string;
  message: string;
  decisions: readonly (FileDecision & { fingerprint?: string })[];
  /** Complete the task with the commit: yes, no, or only when its plan is done (the default). */
  finish?: FinishTask;
}

export interface ApplyReviewResult {
  preApplyCheckpointId: string;
  committed: string[];
  /** Paths with discarded changes (put back to the base). */
  reverted: string[];
  /** Paths with changes left out of the commit, still in the working tree. */
  left: string[];
  /** Paths whose discard was not written because they changed on disk while the apply ran (your save is kept), with why. */
  conflicts: { path: string; reason: string }[];
  commit: CommitOutcome;
  finished: boolean;
}

/**
 * Turns a review into a commit and workspace changes, whole or not at all:
 *  1. every decision is checked against the content the person saw, and the
 *     committer checks what git would refuse (identity, an index lock, a merge or
 *     rebase in progress) — all before anything changes;
 *  2. the engine makes a pre-apply checkpoint and the plan durable, then the commit
 *     is made from the approved contents (a partly approved file commits only its
 *     approved hunks; the working tree is not touched);
 *  3. only then are discarded hunks and files put back to the base, and the task
 *     completes if `finish` says so.
 * If git still refuses (a pre-commit hook, say), no file, index entry or task
 * state has changed, and the same decisions can be applied again.
 * Files without a decision are left alone and are not committed (drift, by default).
 */
export async function applyReview(engine: Engine, input: ApplyReviewInput, committer: Committer): Promise<ApplyReviewResult> {
  const task = engine.task(input.taskId);
  const base = requireBase(engine, task);
  const seen = new Set<string>();
  const inputs: PlanInput[] = [];
  for (const d of input.decisions) {
    if (seen.has(d.path)) throw new WaypointError('invalid_input', `Two decisions for ${d.path}.`);
    seen.add(d.path);
    resolveInsideSync(engine.workspace, d.path); // refuses unsafe keys before anything is read
    const [b, c] = [await baseContent(engine, base, d.path), readWorkspaceFile(engine, d.path)];
    if (d.fingerprint && d.fingerprint !== fingerprint(b, c)) {
      throw new WaypointError('invalid_input', `${d.path} changed since you reviewed it. Refresh the review and decide again.`);
    }
    inputs.push({ path: d.path, base: b, current: c, decision: d });
  }
  let plan;
  try {
    plan = planApply(inputs);
  } catch (e) {
    if (e instanceof StaleDecisionError) throw new WaypointError('invalid_input', e.message);
    throw e;
  }
  await committer.check();
  const commitFiles: CommitFile[] = plan.commit.map((c) => ({ path: c.path, content: c.content, kind: gitKind(engine, c.path), asInWorkTree: c.asInWorkTree }));
  const manifest = await engine.workspaceSnapshots!.load(base);
  const current = new Map(inputs.map((i) => [i.path, i.current]));
  const edits: WorkspaceEdit[] = [];
  for (const a of plan.actions) {
    if (a.kind === 'unchanged') continue;
    const seenBytes = current.get(a.path) ?? null;
    const expect = seenBytes ? sha256Hex(seenBytes) : null;
    if (a.kind === 'delete') {
      edits.push({ path: a.path, expect, to: { kind: 'absent' } });
      continue;
    }
    const entry = a.restored ? manifest.get(a.path) : undefined;
    if (entry?.type === 'symlink') edits.push({ path: a.path, expect, to: { kind: 'symlink', target: entry.target } });
    else edits.push({ path: a.path, expect, to: { kind: 'file', content: a.content, mode: entry?.type === 'file' ? entry.mode : undefined } });
  }
  // The engine runs this through its serialized runner with a durable plan, so a crash
  // mid-apply is finished on the next open instead of leaving a half-reverted workspace.
  const r = await engine.applyReviewEdits({ taskId: task.id, edits, finish: input.finish ?? 'if_plan_done' }, () => committer.commit(commitFiles, input.message));
  const commit = r.commit;
  const kept = new Set(r.conflicts.map((c) => c.path));
  return { preApplyCheckpointId: r.preApplyCheckpointId, committed: commit.sha ? plan.commitPaths : [], reverted: plan.reverted.filter((p) => !kept.has(p)), left: plan.left, conflicts: r.conflicts, commit, finished: r.finished };
}

/** How git should record a committed path, from the workspace file (the commit keeps its mode). */
function gitKind(engine: Engine, key: string): CommitFile['kind'] {
  const st = fs.lstatSync(resolveInsideSync(engine.workspace, key), { throwIfNoEntry: false });
  if (st?.isSymbolicLink()) return 'symlink';
  return st && st.mode & 0o111 ? 'executable' : 'file';
}
