/**
 * Review apply: applying a person's review whole
 * or not at all (the reviewed commit first, then the rejected changes reverted), and
 * finishing on open an apply a crash cut short. It runs over the engine's serialized
 * runner and helpers (EngineCore) and holds no state of its own.
 */
import { randomUUID } from 'node:crypto';
import { WaypointError } from '../model/errors';
import type { EventDataOf } from '../model/schema';
import { assertTaskTransition, FINAL_TASK_STATES } from '../model/stateMachine';
import type { EngineCore } from './engineCore';
import type { NewEvent } from '../store/eventLog';
import { finishInterruptedPlans, type InterruptedPlan } from './interruptedPlans';
import { newId } from './ids';
import { plural } from '../model/plural';
import { displayText } from '../model/displayText';
import { editedManifest, type WorkspaceEdit } from './reviewEdits';

export interface ReviewApplyResult<C> {
  applyId: string;
  /** Rolling back to it undoes the apply. */
  preApplyCheckpointId: string;
  written: string[];
  removed: string[];
  /** Paths changed on disk after the pre-apply checkpoint (a save while it ran): left as they are, with why. */
  conflicts: { path: string; reason: string }[];
  commit: C;
  /** Whether the task was completed with this apply (else it stays open). */
  finished: boolean;
}

/**
 * Whether a review apply completes the task: always, never, or only when its
 * plan is done (every step completed or skipped — nothing pending, in progress,
 * failed or abandoned waiting to be redone).
 */
export type FinishTask = boolean | 'if_plan_done';

/** The files an apply left as they were (changed while it ran), for its recorded note; null when none. */
function keptNote(conflicts: readonly { path: string }[]): string | null {
  if (conflicts.length === 0) return null;
  const shown = conflicts.slice(0, 5).map((c) => c.path).join(', ') + (conflicts.length > 5 ? ', …' : '');
  return `${plural(conflicts.length, 'file')} changed while it ran ${conflicts.length === 1 ? 'was' : 'were'} left as you had ${conflicts.length === 1 ? 'it' : 'them'}, not reverted: ${shown}.`;
}

/** Steps that keep a task from finishing: begun and not ended, or not begun at all. */
export function openSteps<S extends { status: string }>(steps: readonly S[]): S[] {
  return steps.filter((s) => s.status === 'in_progress' || s.status === 'pending');
}

export class ReviewApplies {
  constructor(private readonly core: EngineCore) {}

  /**
   * Applies a review whole or not at all, in the serialized runner: a pre-apply
   * checkpoint (rolling back to it undoes the apply) and the exact plan of the
   * discards are durable first; then `commit` makes the person's reviewed commit
   * from the approved contents without touching the working tree; only when it
   * succeeded are the discards written (temp + rename, idempotent) and the outcome
   * recorded, with the task's completion when `finish` says so. A refused commit
   * changes no file and no task state, so the same decisions can be applied again.
   * A crash after the plan is durable is finished on the next open
   * (`recoverReviewApplies`), so the workspace is never left half-reverted.
   * Refused before anything changes: a final task, finishing the task while a step
   * of its plan is still open (a commit that keeps the task open never looks at its
   * steps), an edit whose path changed since it was reviewed, or one that would overwrite or
   * delete content no checkpoint can hold (a file over the snapshot size limit).
   */
  async applyReviewEdits<C extends { sha: string | null }>(
    input: { taskId: string; edits: readonly WorkspaceEdit[]; idempotencyKey?: string; finish?: FinishTask },
    commit: () => Promise<C>,
  ): Promise<ReviewApplyResult<C>> {
    const ws = this.core.snapshots();
    const key = input.idempotencyKey ?? `review.apply:${randomUUID()}`;
    return this.core.run<ReviewApplyResult<C>>('review.apply', key, async () => {
      const task = this.core.requireTask(input.taskId);
      const steps = this.core.queries.steps(task.id);
      const planDone = steps.every((s) => s.status === 'completed' || s.status === 'skipped');
      const finish = input.finish === 'if_plan_done' || input.finish === undefined ? planDone : input.finish;
      // A person reviews files: a commit that keeps the task open leaves its steps to the agent, whatever
      // state they are in. Only finishing the task asks that none is still open (started or not yet begun).
      if (finish) {
        const open = openSteps(steps);
        if (open.length) {
          throw new WaypointError(
            'illegal_transition',
            `The task cannot be finished with this commit: ${open.length === 1 ? 'a step of its plan is' : `${open.length} steps of its plan are`} still open: ${open.map((s) => `“${displayText(s.title)}” (${s.status === 'pending' ? 'not begun' : 'in progress'})`).join(', ')}. Complete, skip or fail ${open.length === 1 ? 'it' : 'them'} first, or commit without finishing the task.`,
            { taskId: task.id, openSteps: open.map((s) => ({ id: s.id, title: s.title, status: s.status })) },
          );
        }
        // Completing goes through review (running → waiting_review → completed); checked now, recorded only after the commit.
        if (task.state !== 'waiting_review') assertTaskTransition(task.id, task.state, 'waiting_review', 'commit its review and finish it');
      } else if (FINAL_TASK_STATES.includes(task.state)) {
        assertTaskTransition(task.id, task.state, 'completed', 'apply its review');
      }
      // 1. The before state becomes a checkpoint; the plan and any new content are durable with it.
      const scannedAtMs = Date.now(); // before the checkpoint's scan: what changed after it is re-checked before it is replaced
      const { event: preEvent, checkpoint: pre } = await this.core.captureCheckpoint(task, 'manual', null, 'before review apply');
      const current = await ws.load(pre);
      const target = await editedManifest(current, input.edits, ws.blobs);
      const paths = input.edits.map((e) => e.path);
      const plan = paths.length ? await ws.plan(current, target, paths) : { writes: [], removes: [], kept: [], unchanged: 0 };
      if (plan.kept.length) {
        const k = plan.kept[0]!;
        throw new WaypointError(
          'invalid_input',
          `${k.path} cannot be reverted safely (${k.reason.replace(/_/g, ' ')}): Waypoint holds no copy of its current content, so the change could not be undone. Approve it, or revert it by hand.`,
          { path: k.path, reason: k.reason },
        );
      }
      plan.scannedAtMs = scannedAtMs;
      const planRef = await ws.savePlan(plan);
      const applyId = newId('a');
      await this.core.record([
        { ...preEvent, key: `${key}#pre` },
        this.core.ev('review.apply_started', task, null, { applyId, preApplyCheckpointId: pre.id, planRef, paths }, `${key}#start`),
      ]);
      const done = (outcome: { outcome: 'applied' | 'failed'; written: number; removed: number; commit: string | null; note: string | null }) =>
        this.core.ev(
          'review.apply_done',
          task,
          null,
          { applyId, outcome: outcome.outcome, filesWritten: outcome.written, filesRemoved: outcome.removed, recovered: false, commit: outcome.commit, note: outcome.note },
          key,
        );
      // 2. The reviewed commit, before any file changes: it is built from the approved
      //    contents, not from the working tree, so a refused commit leaves the workspace,
      //    the index and the task as they were (only this apply's record says it failed).
      let made: C;
      try {
        made = await commit();
      } catch (e) {
        await this.core.record([done({ outcome: 'failed', written: 0, removed: 0, commit: null, note: `the commit failed, nothing was changed: ${(e as Error).message}` })]);
        throw e;
      }
      // 3. Discarded changes leave the working tree (idempotent: a crash here is finished on the next open).
      const applied = await ws.apply(plan);
      for (const c of applied.conflicts) this.core.log.warn(`[review] ${c.path}: ${c.reason}`, task.correlationId);
      const result: ReviewApplyResult<C> = { applyId, preApplyCheckpointId: pre.id, written: applied.written, removed: applied.removed, conflicts: applied.conflicts, commit: made, finished: finish };
      const closing = finish
        ? [
            ...(task.state === 'waiting_review' ? [] : [this.core.ev('task.review_requested', task, null, { summary: null }, `${key}#review`)]),
            this.core.ev('task.completed', task, null, { summary: null, commit: made.sha }, `${key}#complete`),
          ]
        : [];
      const events = [done({ outcome: 'applied', written: applied.written.length, removed: applied.removed.length, commit: made.sha, note: keptNote(applied.conflicts) }), ...closing];
      this.core.log.info(
        `review of task ${task.id} applied: commit ${made.sha ?? 'none'}, ${applied.written.length} written, ${applied.removed.length} removed, task ${finish ? 'completed' : 'kept open'}`,
        task.correlationId,
      );
      // The outcome comes back to the runner, which records it under the call's key.
      return { result, events };
    }, { space: false });
  }

  /**
   * Review applies whose plan is durable but whose outcome is not recorded: a crash
   * cut them short. Their tasks are still waiting for review (only the outcome's
   * batch completes a task). Read from the review_applies projection, so open stays
   * fast on a long history (and finds an apply whose events an export archived).
   */
  unfinishedReviewApplies(): { key: string; taskId: string; data: EventDataOf<'review.apply_started'> }[] {
    return this.core.queries.unfinishedReviewApplies().map((r) => ({ key: r.key, taskId: r.taskId, data: JSON.parse(r.data) as EventDataOf<'review.apply_started'> }));
  }

  /**
   * Finishes review applies that a crash interrupted after their plan was durable:
   * the plan is applied again (it converges), so the workspace holds exactly the
   * person's decisions. The commit is not made here (it is the person's to make);
   * the task stays waiting for review, and the note says so.
   */
  async recoverReviewApplies(): Promise<string[]> {
    const plans: InterruptedPlan[] = this.unfinishedReviewApplies().map((r) => ({
      taskId: r.taskId,
      planRef: r.data.planRef,
      outcome: async (replay, task) => {
        const started = r.data;
        const what = `A review apply${task ? ` of “${task.title}”` : ''}`;
        const kept = replay.ok ? keptNote(replay.conflicts.map((path) => ({ path }))) : null;
        const note = replay.ok
          ? `${what} was interrupted; it was finished on open, so the workspace holds your decisions (rejected changes reverted), but no commit was recorded: check git, and apply the review again to commit. Roll back to checkpoint ${started.preApplyCheckpointId} to undo it.${kept ? ` ${kept}` : ''}`
          : `${what} was interrupted and could not be finished (${replay.error}); the workspace may be partly reverted. Roll back to checkpoint ${started.preApplyCheckpointId} to return to the state before it.`;
        const events: NewEvent[] = [
          {
            type: 'review.apply_done',
            taskId: r.taskId,
            corr: task?.correlationId ?? null,
            by: null,
            key: `${r.key.replace(/#start$/, '')}#recovered`,
            data: { applyId: started.applyId, outcome: replay.ok ? 'applied' : 'failed', filesWritten: replay.ok ? replay.written : 0, filesRemoved: replay.ok ? replay.removed : 0, recovered: true, commit: null, note },
          },
        ];
        return { events, note };
      },
    }));
    return finishInterruptedPlans(this.core, plans);
  }
}
