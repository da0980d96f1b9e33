/**
 * Steps: their start (with the retry policy's refusals and a wait for a backoff),
 * completion, failure (retryable, exhausted into a hold, or fatal to the task),
 * skip and the person's grant of more attempts; and the checkpoints taken within
 * them on request. Each is one operation through the core's runner.
 */
import { randomUUID } from 'node:crypto';
import { WaypointError, notFound } from '../model/errors';
import type { LeaseOwner, Step, Task, TaskState } from '../model/schema';
import { assertStepTransition, assertTaskTransition, FINAL_TASK_STATES } from '../model/stateMachine';
import { boundedJson } from '../model/validate';
import type { NewEvent } from '../store/eventLog';
import type { NotCapturedReport } from './checkpointCapture';
import type { EngineCore } from './engineCore';
import { CheckpointInput, CompleteStepInput, FailStepInput, GrantAttemptsInput, SkipStepInput, StartStepInput } from './inputs';
import { stepName } from './stepName';
import { plural } from '../model/plural';
import { assertMayStart, backoffFor, exhaustedReason, failureExhausts, heldError, startWhenAllowed } from './retryPolicy';

/** How long a `wait: true` start waits in the engine: under the RPC timeout, so a relayed call still answers. */
const ENGINE_RETRY_WAIT_MS = 60_000;

export class Steps {
  constructor(private readonly core: EngineCore) {}

  /**
   * Steps may be ended by their agent while the task is driven, or by a person
   * settling them by hand in any state but a final one (see StepBy in inputs.ts).
   */
  private requireSettleable(task: Task, by: 'agent' | 'person' | undefined, action: string): void {
    if (by !== 'person') return this.core.requireActive(task, action);
    if (FINAL_TASK_STATES.includes(task.state)) {
      throw new WaypointError('illegal_transition', `Task ${task.id} is ${task.state}; cannot ${action}: ${task.state} is final.`, { taskId: task.id, state: task.state, action });
    }
  }

  async start(input: StartStepInput): Promise<{ taskId: string; stepId: string; checkpointId: string; attempt: number; maxAttempts: number } & NotCapturedReport> {
    if (input.wait) {
      const once = { ...input, wait: undefined };
      return startWhenAllowed(() => this.start(once), () => this.core.now(), (ms) => new Promise((r) => setTimeout(r, ms)), ENGINE_RETRY_WAIT_MS);
    }
    const inputs = boundedJson(input.inputs, 'step inputs');
    const owner = this.core.ownerOf(input.owner);
    // The key is derived from the transition, so a repeat of the same start (a retried call) is recognised.
    const pre = this.core.requireTask(input.taskId);
    const preStep = input.stepId ? this.core.queries.step(pre.id, input.stepId) : null;
    // A step already in progress in this task attempt is a repeat of the same start.
    const repeat = preStep?.status === 'in_progress' && preStep.taskAttempt === pre.attempt;
    const stepAttempt = preStep ? (repeat ? preStep.attempts : preStep.attempts + 1) : 1;
    const key = input.idempotencyKey ?? (input.stepId ? `step.start:${pre.id}:${input.stepId}:${stepAttempt}` : `step.start:${randomUUID()}`);
    return this.core.run('step.start', key, async () => {
      const task = this.core.requireTask(input.taskId);
      if (task.hold) throw heldError({ ...task, hold: task.hold }, 'start a step');
      this.core.requireActive(task, 'start a step');
      const steps = this.core.queries.steps(task.id);
      const step: Step | undefined = input.stepId ? steps.find((s) => s.id === input.stepId) : undefined;
      let stepId = input.stepId;
      const adhoc = !step;
      if (!step) {
        stepId ??= nextAdhocId(steps);
        for (const d of input.dependsOn ?? []) {
          if (!steps.some((s) => s.id === d)) throw new WaypointError('invalid_input', `Step '${stepId}' depends on unknown step '${d}'.`);
        }
      } else {
        assertStepTransition(task.id, step.id, step.status, 'in_progress', 'start it');
        assertMayStart(task, step, this.core.now());
        const blocked = step.dependsOn.filter((d) => {
          const dep = steps.find((s) => s.id === d);
          return !dep || (dep.status !== 'completed' && dep.status !== 'skipped');
        });
        if (blocked.length) {
          const names = blocked.map((d) => stepName(steps.find((x) => x.id === d) ?? { id: d, title: d }));
          throw new WaypointError('illegal_transition', `Step ${stepName(step)} of task ${task.id} depends on ${names.join(', ')}, which ${blocked.length > 1 ? 'are' : 'is'} not completed.`, {
            blocked,
          });
        }
      }
      const attempt = step ? step.attempts + 1 : 1;
      const title = input.title ?? step?.title ?? stepId!;
      const { event, checkpoint, report } = await this.core.captureCheckpoint(task, 'step_start', stepId!, null, input.dirty);
      return {
        events: [this.core.ev('step.started', task, owner.id, { stepId: stepId!, title, attempt, taskAttempt: task.attempt, inputs, adhoc, dependsOn: input.dependsOn ?? [] }, ''), event],
        result: { taskId: task.id, stepId: stepId!, checkpointId: checkpoint.id, attempt, maxAttempts: step?.maxAttempts ?? task.retry.maxAttempts, ...report },
      };
    });
  }

  async complete(input: CompleteStepInput): Promise<{ taskId: string; stepId: string; checkpointId: string; filesChanged: number } & NotCapturedReport> {
    const outputs = boundedJson(input.outputs, 'step outputs');
    const owner = this.core.ownerOf(input.owner);
    const pre = this.core.queries.step(input.taskId, input.stepId);
    const key = input.idempotencyKey ?? `step.complete:${input.taskId}:${input.stepId}:${pre?.attempts ?? 0}`;
    return this.core.run('step.complete', key, async () => {
      const task = this.core.requireTask(input.taskId);
      this.requireSettleable(task, input.by, 'complete a step');
      const step = this.core.queries.step(task.id, input.stepId);
      if (!step) throw notFound(`step of task ${task.id}`, input.stepId);
      assertStepTransition(task.id, step.id, step.status, 'completed', 'complete it');
      const { event, checkpoint, report } = await this.core.captureCheckpoint(task, 'step_end', step.id, null, input.dirty);
      return {
        events: [this.core.ev('step.completed', task, input.by === 'person' ? null : owner.id, { stepId: step.id, outputs, summary: input.summary ?? null }, ''), event],
        result: { taskId: task.id, stepId: step.id, checkpointId: checkpoint.id, filesChanged: checkpoint.filesChanged, ...report },
      };
    });
  }

  /**
   * A recoverable failure keeps the step retryable (attempt count + backoff hint);
   * an unrecoverable one fails the task, keeping the error context.
   */
  async fail(input: FailStepInput): Promise<{
    taskId: string;
    stepId: string;
    state: TaskState;
    /** The next attempt and when it may start; null when there is none without a person. */
    retry: { attempt: number; maxAttempts: number; backoffMs: number; retryAt: number } | null;
    hold: Task['hold'];
  }> {
    const owner = this.core.ownerOf(input.owner);
    const pre = this.core.queries.step(input.taskId, input.stepId);
    const key = input.idempotencyKey ?? `step.fail:${input.taskId}:${input.stepId}:${pre?.attempts ?? 0}`;
    return this.core.run('step.fail', key, () => {
      const task = this.core.requireTask(input.taskId);
      const person = input.by === 'person';
      this.requireSettleable(task, input.by, 'fail a step');
      const step = this.core.queries.step(task.id, input.stepId);
      if (!step) throw notFound(`step of task ${task.id}`, input.stepId);
      assertStepTransition(task.id, step.id, step.status, 'failed', 'fail it');
      // The last allowed attempt failing hands the task to a person: no backoff to wait out.
      // A person failing it by hand is that person already: no hold, and no backoff for the agent.
      const exhausted = input.recoverable && !person && failureExhausts(step);
      const backoffMs = input.recoverable && !exhausted && !person ? backoffFor(task.retry, task.id, step.id, step.attempts) : null;
      const cls = input.recoverable ? 'recoverable' : 'unrecoverable';
      const events = [this.core.ev('step.failed', task, person ? null : owner.id, { stepId: step.id, error: input.error, recoverable: input.recoverable, class: cls, attempt: step.attempts, backoffMs }, '')];
      let hold: Task['hold'] = null;
      if (!input.recoverable) {
        assertTaskTransition(task.id, task.state, 'failed', 'fail it');
        events.push(this.core.ev('task.failed', task, null, { reason: `step ${step.id} failed: ${input.error}`, stepId: step.id, class: 'unrecoverable' }, `${key}#task`));
      } else if (exhausted) {
        assertTaskTransition(task.id, task.state, 'suspended', 'hold it for a person');
        const reason = exhaustedReason(step, input.error);
        // `by` names the driver that used the last attempt: a grant hands the task back to it.
        events.push(this.core.ev('task.held', task, owner.id, { cause: 'retries_exhausted', stepId: step.id, reason }, `${key}#held`));
        hold = { cause: 'retries_exhausted', stepId: step.id, reason, since: this.core.now() };
        this.core.log.warn(`task ${task.id} waits for a person: ${reason}`, task.correlationId);
      }
      const state: TaskState = !input.recoverable ? 'failed' : exhausted ? 'suspended' : task.state;
      const now = this.core.now();
      return {
        events,
        result: {
          taskId: task.id,
          stepId: step.id,
          state,
          retry: backoffMs !== null ? { attempt: step.attempts + 1, maxAttempts: step.maxAttempts, backoffMs, retryAt: now + backoffMs } : null,
          hold,
        },
      };
    });
  }

  async skip(input: SkipStepInput): Promise<{ taskId: string; stepId: string }> {
    return this.core.run('step.skip', input.idempotencyKey ?? `step.skip:${input.taskId}:${input.stepId}`, async () => {
      const task = this.core.requireTask(input.taskId);
      // Skipping the step that used its attempts is one of the person's answers to the hold.
      const answersHold = task.hold?.cause === 'retries_exhausted' && task.hold.stepId === input.stepId;
      if (!answersHold) this.requireSettleable(task, input.by, 'skip a step');
      const step = this.core.queries.step(task.id, input.stepId);
      if (!step) throw notFound(`step of task ${task.id}`, input.stepId);
      assertStepTransition(task.id, step.id, step.status, 'skipped', 'skip it');
      const owner = this.core.ownerOf(input.owner);
      const events = [this.core.ev('step.skipped', task, input.by === 'person' ? null : owner.id, { stepId: step.id, reason: input.reason ?? null }, '')];
      if (answersHold) events.push(await this.release(task, owner));
      return { events, result: { taskId: task.id, stepId: step.id } };
    });
  }

  /**
   * A person lets a step try `attempts` more times (default 1) and waives its backoff.
   * A task held because that step used its attempts goes back to running, under the
   * caller, so the next start of the step runs.
   */
  async grantAttempts(input: GrantAttemptsInput): Promise<{ taskId: string; stepId: string; attempts: number; maxAttempts: number; state: TaskState }> {
    const pre = this.core.queries.step(input.taskId, input.stepId);
    const key = input.idempotencyKey ?? `step.grant:${input.taskId}:${input.stepId}:${pre?.attempts ?? 0}:${pre?.maxAttempts ?? 0}`;
    return this.core.run('step.grant', key, async () => {
      const task = this.core.requireTask(input.taskId);
      const step = this.core.queries.step(task.id, input.stepId);
      if (!step) throw notFound(`step of task ${task.id}`, input.stepId);
      const answersHold = task.hold?.cause === 'retries_exhausted' && task.hold.stepId === step.id;
      if (!answersHold) this.core.requireActive(task, `grant step ${step.id} more attempts`);
      if (step.status === 'completed' || step.status === 'skipped') {
        throw new WaypointError('illegal_transition', `Step ${stepName(step)} of task ${task.id} is ${step.status}; it needs no more attempts.`, { taskId: task.id, stepId: step.id, status: step.status });
      }
      const attempts = input.attempts ?? 1;
      // Counted from what the step used, so a grant after the limit gives exactly `attempts` more runs.
      const maxAttempts = Math.max(step.maxAttempts, step.attempts) + attempts;
      const owner = this.core.ownerOf(input.owner);
      const events = [this.core.ev('step.attempts_granted', task, owner.id, { stepId: step.id, attempts, maxAttempts, reason: input.reason ?? null }, '')];
      if (answersHold) events.push(await this.release(task, owner));
      this.core.log.info(`step ${step.id} of task ${task.id} granted ${plural(attempts, 'more attempt', 'more attempts')} (${maxAttempts} in all)`, task.correlationId);
      return { events, result: { taskId: task.id, stepId: step.id, attempts, maxAttempts, state: (answersHold ? 'running' : task.state) as TaskState } };
    });
  }

  /**
   * A held task goes back to running (a new task attempt, as a resume is), leased to
   * the driver whose failure put it on hold: the agent carries on, and its calls
   * renew the lease. If it is gone, the lease runs out and the sweep says so. A
   * person answering the hold does not become the task's driver.
   */
  private async release(task: Task, answeredBy: LeaseOwner): Promise<NewEvent> {
    const held = (await this.core.eventLog.read({ taskId: task.id })).filter((e) => e.type === 'task.held').pop();
    const owner: LeaseOwner = held?.by ? { id: held.by } : answeredBy;
    return this.core.ev('task.resumed', task, owner.id, { owner, leaseTtlMs: this.core.defaultLeaseTtlMs, attempt: task.attempt + 1 }, '');
  }


  async checkpoint(input: CheckpointInput): Promise<{ taskId: string; checkpointId: string; filesChanged: number } & NotCapturedReport> {
    const key = input.idempotencyKey ?? `checkpoint:${randomUUID()}`;
    return this.core.run('checkpoint', key, async () => {
      const task = this.core.requireTask(input.taskId);
      if (task.state === 'completed' || task.state === 'abandoned') {
        throw new WaypointError('illegal_transition', `Task ${task.id} is ${task.state}; no more checkpoints can be taken for it.`);
      }
      const stepId = input.stepId !== undefined ? input.stepId : (this.core.queries.steps(task.id).find((s) => s.status === 'in_progress')?.id ?? null);
      const { event, checkpoint, report } = await this.core.captureCheckpoint(task, input.kind ?? 'manual', stepId, input.label ?? null, input.dirty);
      // A scan for what others changed (no step's work) that found nothing is not a checkpoint
      // worth a row: nothing is recorded, and the answer names the checkpoint that still holds.
      if (input.stepId === null && checkpoint.filesChanged === 0 && checkpoint.parentId && !report.notCaptured) {
        return { events: [], result: { taskId: task.id, checkpointId: checkpoint.parentId, filesChanged: 0 } };
      }
      return { events: [event], result: { taskId: task.id, checkpointId: checkpoint.id, filesChanged: checkpoint.filesChanged, ...report } };
    });
  }
}

function nextAdhocId(steps: readonly Step[]): string {
  const ids = new Set(steps.map((s) => s.id));
  let n = steps.length + 1;
  while (ids.has(`s${n}`)) n++;
  return `s${n}`;
}
