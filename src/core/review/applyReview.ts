import type { Engine } from '../engine/engine';
import type { WorkspaceEdit } from '../engine/reviewEdits';
import { WaypointError } from '../model/errors';
import { resolveInsideSync, sha256Hex } from '../snapshot';
import { planApply, StaleDecisionError, type FileDecision, type PlanInput } from './applyPlan';
import type { CommitOutcome, Committer } from './gitCli';
import { baseContent, fingerprint, readWorkspaceFile, requireBase } from './reviewModel';

export interface ApplyReviewInput {
  taskId: string;
  message: string;
  decisions: readonly (FileDecision & { fingerprint?: string })[];
}

export interface ApplyReviewResult {
  preApplyCheckpointId: string;
  committed: string[];
  reverted: string[];
  commit: CommitOutcome;
}

/**
 * Turns a review into workspace changes and a commit:
 *  1. the task is moved to waiting_review (refused here, before anything changes,
 *     if it cannot be: e.g. a step still in progress);
 *  2. the engine takes a pre-apply checkpoint (rolling back to it undoes all of
 *     this) and makes the plan durable, then reverts rejected hunks and files to
 *     the base checkpoint's content (finished on the next open if a crash cuts in);
 *  3. exactly the approved paths are committed (the committer decides how);
 *  4. the task completes, recording the commit hash.
 * Files without a decision are left alone and are not committed (drift, by default).
 */
export async function applyReview(engine: Engine, input: ApplyReviewInput, committer: Committer): Promise<ApplyReviewResult> {
  let task = engine.task(input.taskId);
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
  if (task.state !== 'waiting_review') {
    await engine.requestReview({ taskId: task.id, summary: undefined });
    task = engine.task(task.id);
  }
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
  // The engine writes through its serialized runner with a durable plan, so a crash
  // mid-apply is finished on the next open instead of leaving a half-reverted workspace.
  const r = await engine.applyReviewEdits({ taskId: task.id, edits }, () => committer.commit(plan.commitPaths, input.message));
  const commit = r.commit;
  return { preApplyCheckpointId: r.preApplyCheckpointId, committed: commit.sha ? plan.commitPaths : [], reverted: plan.reverted, commit };
}
