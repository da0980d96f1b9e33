import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Engine } from '../engine/engine';
import { WaypointError } from '../model/errors';
import { resolveInsideSync } from '../snapshot';
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
 *  2. a pre-apply checkpoint, so rolling back to it undoes all of this;
 *  3. rejected hunks and files are reverted to the base checkpoint's content;
 *  4. exactly the approved paths are committed (the committer decides how);
 *  5. the task completes, recording the commit hash.
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
  const pre = await engine.checkpoint({ taskId: task.id, kind: 'manual', label: 'before review apply' });
  const manifest = await engine.workspaceSnapshots!.load(base);
  for (const a of plan.actions) {
    if (a.kind === 'unchanged') continue;
    const abs = resolveInsideSync(engine.workspace, a.path);
    if (a.kind === 'delete') {
      fs.rmSync(abs, { force: true });
      continue;
    }
    const entry = manifest.get(a.path);
    fs.mkdirSync(path.dirname(abs), { recursive: true });
    if (a.restored && entry?.type === 'symlink') {
      fs.rmSync(abs, { force: true });
      fs.symlinkSync(entry.target, abs);
      continue;
    }
    // Temp + rename: a crash leaves the old file or the new one, never half of one.
    const tmp = `${abs}.waypoint-review-${process.pid}`;
    fs.writeFileSync(tmp, a.content, { mode: entry?.type === 'file' ? entry.mode : undefined });
    fs.renameSync(tmp, abs);
  }
  const commit = await committer.commit(plan.commitPaths, input.message);
  await engine.completeTask({ taskId: task.id, commit: commit.sha ?? undefined });
  return { preApplyCheckpointId: pre.checkpointId, committed: commit.sha ? plan.commitPaths : [], reverted: plan.reverted, commit };
}
