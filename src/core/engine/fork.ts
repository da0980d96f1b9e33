/**
 * Forks: a new task started from a checkpoint of another (`waypoint fork`). The
 * workspace goes to the checkpoint the way a rollback goes there, recorded on the
 * new task; the original task gets no event at all.
 */
import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import { WaypointError, errorMessage, notFound } from '../model/errors';
import { validatePlan } from '../model/plan';
import type { CheckpointMeta, Task } from '../model/schema';
import type { NewEvent } from '../store/eventLog';
import type { NotCapturedReport } from './checkpointCapture';
import type { EngineCore } from './engineCore';
import { forkInheritance, type ForkInheritance } from './forkInheritance';
import { newId } from './ids';
import { ForkTaskInput } from './inputs';
import type { RollbackResult } from './rollbacks';


/** What `forkTask` did (or, with `preview`, would do); `taskId` is null on a preview. */
export interface ForkResult extends NotCapturedReport {
  taskId: string | null;
  preview: boolean;
  forkedFrom: { taskId: string; checkpointId: string; stepId: string | null };
  goal: string;
  baseCheckpointId: string | null;
  /** The workspace before the fork; the fork's Undo Last Rollback returns to it. */
  preRollbackCheckpointId: string | null;
  rollbackId: string | null;
  changes: RollbackResult['changes'];
  kept: RollbackResult['kept'];
  /** Paths the fork left as they were because they changed on disk while it ran (a person's save), also in `kept` with why. */
  conflicts: string[];
  filesWritten: number;
  filesRemoved: number;
  /** Step ids of the original finished by the checkpoint. */
  inherited: string[];
  /** Step ids the original worked on without finishing by the checkpoint. */
  leftBehind: string[];
  /** The fork's plan, by step id. */
  plan: string[];
}

export class Forks {
  constructor(private readonly core: EngineCore) {}

  /**
   * Starts a new task from a checkpoint of another task (`waypoint fork`). The
   * workspace goes to the checkpoint the way a rollback goes there, recorded on the
   * new task: a `pre_rollback` checkpoint of the workspace before, the plan durable
   * before any file changes (a crash half-way is finished on open), and the fork's
   * Undo Last Rollback returns the workspace. The fork's base checkpoint is taken
   * after the restore, so it holds the forked checkpoint's state, with that checkpoint
   * as its parent in the checkpoint tree. The original task gets no event at all.
   * Refused before anything changes: an unknown or damaged checkpoint, one with no
   * files, no task or a deleted task.
   */
  async fork(input: ForkTaskInput): Promise<ForkResult> {
    if (input.plan) validatePlan(input.plan);
    return this.forkNow(input);
  }

  /** The checkpoint to fork from, its task and what a fork inherits, or a refusal saying why not. */
  private async forkSource(checkpointId: string): Promise<{ target: CheckpointMeta; original: Task; inheritance: ForkInheritance }> {
    const target = this.core.queries.checkpoint(checkpointId);
    if (!target) {
      const gone = this.core.queries.deletedCheckpointTask(checkpointId);
      if (gone) throw new WaypointError('not_found', `Checkpoint ${checkpointId} belonged to task ${gone}, which was deleted; nothing of it is left to fork from.`, { checkpointId, taskId: gone });
      throw notFound('checkpoint', checkpointId);
    }
    if (target.damaged) {
      throw new WaypointError('corrupt', `Checkpoint ${target.id} is damaged (${target.damaged}); a fork cannot start from it. Fork from an earlier checkpoint, or run 'waypoint verify' to see what was lost.`, { checkpointId: target.id });
    }
    if (!target.taskId) throw new WaypointError('invalid_input', `Checkpoint ${target.id} belongs to no task (it is workspace history); a fork starts from a task's checkpoint. Roll back to it instead.`, { checkpointId: target.id });
    if (!target.manifestRef) throw new WaypointError('invalid_input', `Checkpoint ${target.id} records no files (a metadata-only checkpoint); there is no workspace state to fork from.`, { checkpointId: target.id });
    const original = this.core.queries.findTask(target.taskId);
    if (!original) throw new WaypointError('not_found', `Checkpoint ${target.id} belonged to task ${target.taskId}, which was deleted; nothing of it is left to fork from.`, { checkpointId: target.id });
    const inheritance = forkInheritance(await this.core.eventLog.read({ taskId: original.id }), target.id);
    if (!inheritance) throw new WaypointError('corrupt', `The history of task ${original.id} no longer holds checkpoint ${target.id}'s record; a fork cannot say what it inherits.`, { checkpointId: target.id });
    return { target, original, inheritance };
  }

  private async forkNow(input: z.output<typeof ForkTaskInput>): Promise<ForkResult> {
    const ws = this.core.snapshots();
    const key = input.idempotencyKey ?? `task.fork:${randomUUID()}`;
    const owner = this.core.ownerOf(input.owner);
    // A repeat after a crash before the end finds the task the first call made (keyed on its own), not a second fork.
    const begun = (): { result: ForkResult; seq: number } | null => {
      const b = this.core.queries.idempotent(`${key}#task`);
      return b ? { result: b.result as ForkResult, seq: b.seq } : null;
    };
    return this.core.run<ForkResult>('task.fork', key, async () => {
      const { target, original, inheritance } = await this.forkSource(input.checkpointId);
      // Loading the manifest checks it: a checkpoint whose objects are gone is refused here, before anything is recorded.
      const targetManifest = await ws.load(target);
      const scannedAtMs = Date.now(); // before the scan: what changed after it is re-checked before it is replaced
      const current = await ws.scanNow(this.core.latestCheckpoint());
      const plan = await ws.plan(current, targetManifest);
      plan.scannedAtMs = scannedAtMs;
      const changes: RollbackResult['changes'] = [
        ...plan.writes.map((w) => ({ path: w.path, action: current.has(w.path) ? ('modify' as const) : ('create' as const) })),
        ...plan.removes.map((r) => ({ path: r.path, action: 'delete' as const })),
      ].sort((a, b) => (a.path < b.path ? -1 : 1));
      const kept = plan.kept.map((k) => ({ path: k.path, reason: k.reason as string }));
      const forkedFrom = { taskId: original.id, checkpointId: target.id, stepId: target.stepId };
      const goal = input.goal ?? original.goal;
      const steps = input.plan ?? inheritance.remaining;
      const base: ForkResult = {
        taskId: null,
        preview: input.preview === true,
        forkedFrom,
        goal,
        baseCheckpointId: null,
        preRollbackCheckpointId: null,
        rollbackId: null,
        changes,
        kept,
        conflicts: [],
        filesWritten: 0,
        filesRemoved: 0,
        inherited: inheritance.inherited.map((s) => s.id),
        leftBehind: inheritance.leftBehind.map((s) => s.id),
        plan: steps.map((s) => s.id),
      };
      if (input.preview) return { result: base };
      await ws.validate(plan);

      const taskId = newId('t');
      const corr = randomUUID();
      const title = input.title ?? (goal.length > 80 ? `${goal.slice(0, 77)}…` : goal);
      const task = { id: taskId, correlationId: corr, lastCheckpointId: null } as Task;
      const started: NewEvent = {
        type: 'task.started',
        taskId,
        corr,
        by: owner.id,
        key: `${key}#task`,
        // Keyed on its own, so a repeat of the call after a crash before the end finds the task it made, not a second fork.
        op: 'task.fork.started',
        result: { ...base, taskId },
        data: { goal, title, agent: input.agent ?? original.agent, plan: steps, owner, leaseTtlMs: input.leaseTtlMs ?? this.core.defaultLeaseTtlMs, forkedFrom },
      };
      // 1. The task, the before state and the plan are durable before any file changes (as a rollback's are).
      const { event: preEvent, checkpoint: pre } = await this.core.captureCheckpoint(task, 'pre_rollback', null, `before forking from ${target.id}`);
      const planRef = await ws.savePlan(plan);
      const rollbackId = newId('r');
      await this.core.record([
        started,
        { ...preEvent, key: `${key}#pre` },
        this.core.ev('rollback.started', task, null, { rollbackId, targetCheckpointId: target.id, preRollbackCheckpointId: pre.id, paths: null, mode: 'all', planRef }, `${key}#start`),
      ]);
      // 2. Apply; a stop part-way is recorded as a failed rollback of the fork, which its Undo reverses.
      let applied: Awaited<ReturnType<typeof ws.apply>>;
      try {
        applied = await ws.apply(plan);
      } catch (e) {
        await ws.sweepTemps(plan).catch((err: unknown) => this.core.log.warn(`[fork] could not remove its temp files: ${errorMessage(err)}`, corr));
        const note = `The fork from ${target.id} stopped part-way (${errorMessage(e)}); the workspace is partly restored. Everything it held before is in checkpoint ${pre.id}: undo the fork's rollback (waypoint rollback --task ${taskId} --undo) to return to it.`;
        await this.core.record([this.core.ev('rollback.done', task, null, { rollbackId, outcome: 'failed', filesWritten: 0, filesRemoved: 0, recovered: false, abandonedSteps: [], conflicts: [], note }, `${key}#failed`)]).catch(() => undefined);
        throw new WaypointError('io', note, { taskId, preRollbackCheckpointId: pre.id });
      }
      // 3. The outcome, then the fork's base: the workspace as the checkpoint left it, branching from it.
      const done = this.core.ev('rollback.done', task, null, { rollbackId, outcome: 'applied', filesWritten: applied.written.length, filesRemoved: applied.removed.length, recovered: false, abandonedSteps: [], conflicts: applied.conflicts.map((c) => c.path), note: `fork of ${original.id} from ${target.id}` }, `${key}#done`);
      const { event: baseEvent, checkpoint: baseCp, report } = await this.core.captureCheckpoint({ ...task, lastCheckpointId: target.id }, 'task_base', null, `forked from ${target.label ?? target.id}`);
      const keptNow = new Set(applied.conflicts.map((c) => c.path));
      const result: ForkResult = {
        ...base,
        ...report,
        taskId,
        baseCheckpointId: baseCp.id,
        preRollbackCheckpointId: pre.id,
        rollbackId,
        filesWritten: applied.written.length,
        filesRemoved: applied.removed.length,
        changes: changes.filter((c) => !keptNow.has(c.path)),
        kept: [...kept, ...applied.conflicts.map((c) => ({ path: c.path, reason: c.reason }))],
        conflicts: applied.conflicts.map((c) => c.path),
      };
      this.core.log.info(`task ${taskId} forked from task ${original.id} at ${target.id}: ${result.filesWritten} written, ${result.filesRemoved} removed`, corr);
      return { result, events: [done, { ...baseEvent, key: `${key}#base` }] };
    }, { repeat: begun, space: input.preview ? false : 'a fork' });
  }
}
