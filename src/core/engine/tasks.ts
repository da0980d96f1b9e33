/**
 * Tasks: their start, plan, review, completion and the ways they stop (abandon,
 * suspend, interrupt, delete), and their resume under a new driver. Each change is
 * one operation through the core's runner, keyed so a repeat is recognised.
 */
import { randomUUID } from 'node:crypto';
import { WaypointError } from '../model/errors';
import { validatePlan } from '../model/plan';
import type { Task, TaskState } from '../model/schema';
import { assertTaskTransition, ACTIVE_TASK_STATES } from '../model/stateMachine';
import type { NewEvent } from '../store/eventLog';
import type { NotCapturedReport } from './checkpointCapture';
import type { EngineCore } from './engineCore';
import { newId } from './ids';
import { stepName } from './stepName';
import { AbandonTaskInput, CompleteTaskInput, ExtendPlanInput, RequestReviewInput, ResumeTaskInput, StartTaskInput, SuspendTaskInput, TaskRef } from './inputs';
import { interruptedEvent } from '../store/interruption';
import { heldError, resolvePolicy } from './retryPolicy';
import { renderMarkdown, type ResumeContext } from './resumeContext';

export class Tasks {
  constructor(
    private readonly core: EngineCore,
    /** The resume context a resume answers with (see reads.ts). */
    private readonly resumeContext: (taskId: string) => Promise<ResumeContext>,
  ) {}

  async start(input: StartTaskInput): Promise<{ taskId: string; baseCheckpointId: string; state: TaskState; correlationId: string } & NotCapturedReport> {
    const plan = input.plan ?? [];
    validatePlan(plan);
    const key = input.idempotencyKey ?? `task.start:${randomUUID()}`;
    const owner = this.core.ownerOf(input.owner);
    return this.core.run('task.start', key, async () => {
      const taskId = newId('t');
      const corr = randomUUID();
      const leaseTtlMs = input.leaseTtlMs ?? this.core.defaultLeaseTtlMs;
      const title = input.title ?? (input.goal.length > 80 ? `${input.goal.slice(0, 77)}…` : input.goal);
      const started: NewEvent = {
        type: 'task.started',
        taskId,
        corr,
        by: owner.id,
        key,
        // The effective policy is recorded, so a replay decides retries as this call did whatever the settings are later.
        data: { goal: input.goal, title, agent: input.agent ?? null, plan, owner, leaseTtlMs, retry: resolvePolicy(this.core.retry, input.retry) },
      };
      const pseudo = { id: taskId, correlationId: corr, lastCheckpointId: null } as Task;
      const { event, checkpoint, report } = await this.core.captureCheckpoint(pseudo, 'task_base', null, null);
      const result = { taskId, baseCheckpointId: checkpoint.id, state: 'running' as TaskState, correlationId: corr, ...report };
      this.core.log.info(`task ${taskId} started: ${title}`, corr);
      return { events: [started, event], result };
    });
  }

  async extendPlan(input: ExtendPlanInput): Promise<{ taskId: string; added: string[] }> {
    const key = input.idempotencyKey ?? `plan:${input.taskId}:${input.plan.map((p) => p.id).join(',')}`;
    return this.core.run('task.plan', key, () => {
      const task = this.core.requireTask(input.taskId);
      this.core.requireActive(task, 'change its plan');
      validatePlan(input.plan, this.core.queries.steps(task.id));
      const by = this.core.ownerOf(input.owner).id;
      return {
        events: [this.core.ev('task.plan_updated', task, by, { added: input.plan }, key)],
        result: { taskId: task.id, added: input.plan.map((p) => p.id) },
      };
    });
  }

  /** The agent says it is done: the task waits for the person's review. */
  async requestReview(input: RequestReviewInput): Promise<{ taskId: string; state: TaskState }> {
    const key = input.idempotencyKey ?? `task.review:${input.taskId}:${this.core.queries.findTask(input.taskId)?.attempt ?? 0}`;
    return this.core.run('task.review', key, () => {
      const task = this.core.requireTask(input.taskId);
      assertTaskTransition(task.id, task.state, 'waiting_review', 'complete it');
      const open = this.core.queries.steps(task.id).filter((s) => s.status === 'in_progress');
      if (open.length) {
        throw new WaypointError('illegal_transition', `Task ${task.id} still has ${open.length === 1 ? 'a step' : 'steps'} in progress: ${open.map(stepName).join(', ')}. Complete or fail ${open.length === 1 ? 'it' : 'them'} first.`, { stepIds: open.map((s) => s.id) });
      }
      return {
        events: [this.core.ev('task.review_requested', task, this.core.ownerOf(input.owner).id, { summary: input.summary ?? null }, key)],
        result: { taskId: task.id, state: 'waiting_review' as TaskState },
      };
    });
  }

  /** The person accepts the task (after review, optionally with the commit that holds it). */
  async complete(input: CompleteTaskInput): Promise<{ taskId: string; state: TaskState }> {
    // After a reopen the same task completes again: the key names that round (unchanged for a task never reopened).
    const reopenedAt = this.core.queries.findTask(input.taskId)?.reopened?.at;
    const key = input.idempotencyKey ?? `task.complete:${input.taskId}${reopenedAt ? `:${reopenedAt}` : ''}`;
    return this.core.run('task.complete', key, () => {
      const task = this.core.requireTask(input.taskId);
      assertTaskTransition(task.id, task.state, 'completed', 'approve it');
      return {
        events: [this.core.ev('task.completed', task, null, { summary: input.summary ?? null, commit: input.commit ?? null }, key)],
        result: { taskId: task.id, state: 'completed' as TaskState },
      };
    });
  }

  async abandon(input: AbandonTaskInput): Promise<{ taskId: string; state: TaskState }> {
    const key = input.idempotencyKey ?? `task.abandon:${input.taskId}`;
    return this.core.run('task.abandon', key, () => {
      const task = this.core.requireTask(input.taskId);
      assertTaskTransition(task.id, task.state, 'abandoned', 'abandon it');
      return { events: [this.core.ev('task.abandoned', task, null, { reason: input.reason ?? null }, key)], result: { taskId: task.id, state: 'abandoned' as TaskState } };
    });
  }

  async suspend(input: SuspendTaskInput): Promise<{ taskId: string; state: TaskState }> {
    return this.core.run('task.suspend', input.idempotencyKey ?? `task.suspend:${input.taskId}:${this.core.queries.findTask(input.taskId)?.attempt ?? 0}`, () => {
      const task = this.core.requireTask(input.taskId);
      assertTaskTransition(task.id, task.state, 'suspended', 'suspend it');
      return {
        events: [this.core.ev('task.suspended', task, null, { reason: input.reason ?? null }, '')],
        result: { taskId: task.id, state: 'suspended' as TaskState },
      };
    });
  }

  /** Marks a live task interrupted (its driver went away: a terminal closed, an editor quit). */
  async interrupt(input: AbandonTaskInput): Promise<{ taskId: string; state: TaskState }> {
    const pre = this.core.queries.findTask(input.taskId);
    return this.core.run('task.interrupt', input.idempotencyKey ?? `task.interrupt:${input.taskId}:${pre?.attempt ?? 0}`, () => {
      const task = this.core.requireTask(input.taskId);
      assertTaskTransition(task.id, task.state, 'interrupted', 'interrupt it');
      return {
        events: [interruptedEvent(this.core, task, input.reason ?? 'interrupted')],
        result: { taskId: task.id, state: 'interrupted' as TaskState },
      };
    });
  }

  /** Deletes a task's projections (its events stay in the log); its checkpoints' unique blobs become garbage. */
  async delete(input: TaskRef): Promise<{ taskId: string; deleted: true }> {
    return this.core.run('task.delete', input.idempotencyKey ?? `task.delete:${input.taskId}`, () => {
      const task = this.core.requireTask(input.taskId);
      if (task.state === 'running' || task.state === 'waiting_tool' || task.state === 'planning') {
        throw new WaypointError('illegal_transition', `Task ${task.id} is ${task.state}; abandon it before deleting it.`);
      }
      return { events: [this.core.ev('task.deleted', task, null, {}, '')], result: { taskId: task.id, deleted: true as const } };
    });
  }

  /**
   * Resumes a task under the caller: a new attempt, a fresh lease, and the resume
   * context to continue from. Resuming a task that is already running under the
   * same owner returns the context without a new attempt.
   */
  async resume(input: ResumeTaskInput): Promise<ResumeContext> {
    const owner = this.core.ownerOf(input.owner);
    const current = this.core.requireTask(input.taskId);
    // Resuming would only meet the same refusal at the step: the person's decision comes first.
    if (current.hold?.cause === 'retries_exhausted') throw heldError({ ...current, hold: current.hold }, 'resume');
    const sameOwnerRunning = ACTIVE_TASK_STATES.includes(current.state) && current.lease?.owner === owner.id;
    if (!sameOwnerRunning) {
      const key = input.idempotencyKey ?? `task.resume:${current.id}:${current.attempt + 1}`;
      await this.core.run('task.resume', key, () => {
        const task = this.core.requireTask(input.taskId);
        if (ACTIVE_TASK_STATES.includes(task.state)) {
          // Taking over a live task from another owner: interrupt it first, so the log says why.
          return {
            events: [
              this.core.ev('task.interrupted', task, null, { reason: `taken over by ${owner.id}`, class: 'recoverable', stepId: null }, `${key}#takeover`),
              this.core.ev('task.resumed', task, owner.id, { owner, leaseTtlMs: input.leaseTtlMs ?? this.core.defaultLeaseTtlMs, attempt: task.attempt + 1 }, `${key}#resume`),
            ],
            result: { taskId: task.id, attempt: task.attempt + 1 },
          };
        }
        assertTaskTransition(task.id, task.state, 'running', 'resume it');
        return {
          events: [this.core.ev('task.resumed', task, owner.id, { owner, leaseTtlMs: input.leaseTtlMs ?? this.core.defaultLeaseTtlMs, attempt: task.attempt + 1 }, '')],
          result: { taskId: task.id, attempt: task.attempt + 1 },
        };
      });
    }
    const ctx = await this.resumeContext(input.taskId);
    // The context is read after the resume, when the task runs: it says what the task was before it.
    const resumed = { ...ctx, resumedFrom: current.state };
    return { ...resumed, markdown: renderMarkdown(resumed) };
  }
}
