import * as os from 'node:os';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';
import { WaypointError, notFound } from '../model/errors';
import { validatePlan } from '../model/plan';
import type { CheckpointKind, CheckpointMeta, EventDataOf, EventType, LeaseOwner, SideEffect, Step, Task, TaskState, WaypointEvent } from '../model/schema';
import { assertStepTransition, assertTaskTransition, ACTIVE_TASK_STATES } from '../model/stateMachine';
import { boundedJson, parseInput } from '../model/validate';
import { Logger, silentLogger } from '../log';
import { EventStore, type NewEvent, type StoreOptions } from '../store/eventStore';
import { isPidAlive } from '../store/fsutil';
import { newId } from './ids';
import {
  AbandonTaskInput,
  BeginSideEffectInput,
  CheckpointInput,
  CompleteStepInput,
  CompleteTaskInput,
  EndSideEffectInput,
  ExtendPlanInput,
  FailStepInput,
  RequestReviewInput,
  ResumeTaskInput,
  SkipStepInput,
  StartStepInput,
  StartTaskInput,
  SuspendTaskInput,
  TaskRef,
} from './inputs';
import { Queries } from './queries';
import { buildResumeContext, type DriftInfo, type ResumeContext } from './resumeContext';
import { metadataOnlySnapshotter, type Snapshotter } from './snapshotter';

export interface EngineOptions {
  /** The workspace root; the store lives in `<workspace>/.waypoint` unless storeDir says otherwise. */
  workspace: string;
  storeDir?: string;
  log?: Logger;
  /** Who drives tasks started through this engine when a call names no owner. */
  owner?: LeaseOwner;
  defaultLeaseTtlMs?: number;
  snapshotter?: Snapshotter | ((engine: Engine) => Snapshotter);
  /** Adds drift to the resume context (the snapshot layer provides it). */
  drift?: (task: Task) => Promise<DriftInfo | null>;
  store?: Omit<StoreOptions, 'dir' | 'log'>;
  /** Run the lease sweep on a timer (long-lived owners: the extension, `waypoint serve`). */
  sweepIntervalMs?: number;
}

export interface ChangeEvent {
  events: readonly WaypointEvent[];
  taskIds: readonly string[];
}

export type SideEffectDecision = 'proceed' | 'already_done' | 'in_doubt';

/** Exponential backoff hint for recoverable step failures: 1 s, 2 s, 4 s … capped at 5 min. */
export function backoffFor(attempt: number): number {
  return Math.min(1000 * 2 ** Math.max(0, attempt - 1), 300_000);
}

/**
 * The one API every surface calls. Mutations go through one serialized runner
 * (validate → capture → apply), are idempotent by key, and return only once their
 * events are durable.
 */
export class Engine {
  readonly queries: Queries;
  private runner: Promise<unknown> = Promise.resolve();
  private readonly listeners = new Set<(e: ChangeEvent) => void>();
  private readonly log: Logger;
  private readonly snapshotter: Snapshotter;
  private sweepTimer: NodeJS.Timeout | undefined;
  readonly defaultOwner: LeaseOwner;
  readonly defaultLeaseTtlMs: number;

  private constructor(
    readonly store: EventStore,
    readonly workspace: string,
    private readonly opts: EngineOptions,
  ) {
    this.log = (opts.log ?? silentLogger).child('engine');
    this.queries = new Queries(() => this.store.db);
    this.defaultOwner = opts.owner ?? { id: 'cli' };
    this.defaultLeaseTtlMs = opts.defaultLeaseTtlMs ?? 5 * 60_000;
    this.snapshotter = typeof opts.snapshotter === 'function' ? opts.snapshotter(this) : (opts.snapshotter ?? metadataOnlySnapshotter);
    store.onDidCommit((events) => {
      const taskIds = [...new Set(events.map((e) => e.taskId).filter((t): t is string => !!t))];
      for (const l of this.listeners) l({ events, taskIds });
    });
  }

  static async open(opts: EngineOptions): Promise<Engine> {
    const workspace = path.resolve(opts.workspace);
    const dir = opts.storeDir ? path.resolve(workspace, opts.storeDir) : path.join(workspace, '.waypoint');
    const store = await EventStore.open({ ...opts.store, dir, log: opts.log });
    const engine = new Engine(store, workspace, opts);
    try {
      await engine.sweep();
    } catch (e) {
      await store.close();
      throw e;
    }
    if (opts.sweepIntervalMs) {
      engine.sweepTimer = setInterval(() => {
        engine.sweep().catch((e) => engine.log.error(`lease sweep failed: ${(e as Error).message}`));
      }, opts.sweepIntervalMs);
      engine.sweepTimer.unref();
    }
    return engine;
  }

  get now(): number {
    return this.store.clock();
  }

  onDidChange(listener: (e: ChangeEvent) => void): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  async close(): Promise<void> {
    clearInterval(this.sweepTimer);
    await this.runner.catch(() => undefined);
    await this.store.close();
    this.listeners.clear();
  }

  // ---------------------------------------------------------------------------
  // The serialized runner and idempotent mutation.

  /** Runs fn after every earlier mutation's critical section; fn's own awaits hold the line. */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.runner.then(fn, fn);
    this.runner = run.catch(() => undefined);
    return run;
  }

  /**
   * One idempotent mutation. `prepare` validates and may capture a checkpoint; it
   * returns the events to append and the result. A call whose key was seen before
   * returns the recorded result and appends nothing.
   */
  private async mutate<R>(op: string, key: string, prepare: () => Promise<{ events: NewEvent[]; result: R }> | { events: NewEvent[]; result: R }): Promise<R> {
    const { result, durable } = await this.exclusive(async () => {
      const seen = this.queries.idempotent(key);
      if (seen) {
        if (seen.op !== op) {
          throw new WaypointError('conflict', `Idempotency key '${key}' was already used for ${seen.op}, not ${op}.`, { key, op: seen.op });
        }
        return { result: seen.result as R, durable: this.store.waitDurable(seen.seq) };
      }
      const { events, result } = await prepare();
      if (events.length === 0) return { result, durable: Promise.resolve() };
      // The first event carries the call's key and result; the rest get keys derived from it.
      const keyed = events.map((e, i) => (i === 0 ? { ...e, key, op, result } : { ...e, key: e.key || `${key}#${i}` }));
      return { result, durable: this.store.commit(keyed).durable };
    });
    await durable;
    return result;
  }

  private ownerOf(owner: LeaseOwner | undefined): LeaseOwner {
    return owner ?? this.defaultOwner;
  }

  private requireTask(taskId: string): Task {
    return this.queries.task(taskId);
  }

  private requireActive(task: Task, action: string): void {
    if (!ACTIVE_TASK_STATES.includes(task.state)) {
      throw new WaypointError(
        'illegal_transition',
        `Task ${task.id} is ${task.state}; cannot ${action}. ${task.state === 'interrupted' || task.state === 'suspended' ? 'Resume it first.' : ''}`.trim(),
        { taskId: task.id, state: task.state, action },
      );
    }
  }

  /** An event about a task; its payload is validated against the type's schema at commit. */
  private ev<T extends EventType>(type: T, task: Task, by: string | null, data: EventDataOf<T>, key: string): NewEvent {
    return { type, taskId: task.id, corr: task.correlationId, by, data, key } as NewEvent;
  }

  private async captureCheckpoint(task: Task | null, kind: CheckpointKind, stepId: string | null, label: string | null, dirty?: readonly string[]): Promise<{ event: NewEvent; checkpoint: CheckpointMeta }> {
    const parent = task?.lastCheckpointId ? this.queries.checkpoint(task.lastCheckpointId) : this.latestCheckpoint();
    const cap = await this.snapshotter.capture({ taskId: task?.id ?? null, kind, parent, dirty });
    const id = newId('c');
    const checkpoint: CheckpointMeta = {
      id,
      taskId: task?.id ?? null,
      stepId,
      kind,
      label,
      parentId: parent?.id ?? null,
      createdAt: this.now,
      manifestRef: cap.manifestRef,
      files: cap.files,
      filesChanged: cap.filesChanged,
      bytes: cap.bytes,
    };
    const event: NewEvent = {
      type: 'checkpoint.created',
      taskId: task?.id ?? null,
      corr: task?.correlationId ?? null,
      by: null,
      key: `checkpoint:${id}`,
      data: {
        checkpointId: id,
        kind,
        stepId,
        label,
        parentId: checkpoint.parentId,
        manifestRef: cap.manifestRef,
        files: cap.files,
        filesChanged: cap.filesChanged,
        bytes: cap.bytes,
      },
    };
    return { event, checkpoint };
  }

  /** The newest checkpoint of any task: a new task's base descends from it so manifests stay small. */
  private latestCheckpoint(): CheckpointMeta | null {
    const r = this.store.db.get('SELECT id FROM checkpoints ORDER BY created_at DESC, rowid DESC LIMIT 1');
    return r ? this.queries.checkpoint(String(r.id)) : null;
  }

  // ---------------------------------------------------------------------------
  // Tasks.

  async startTask(raw: StartTaskInput): Promise<{ taskId: string; baseCheckpointId: string; state: TaskState; correlationId: string }> {
    const input = parseInput(StartTaskInput, raw, 'task start');
    const plan = input.plan ?? [];
    validatePlan(plan);
    const key = input.idempotencyKey ?? `task.start:${randomUUID()}`;
    const owner = this.ownerOf(input.owner);
    return this.mutate('task.start', key, async () => {
      const taskId = newId('t');
      const corr = randomUUID();
      const leaseTtlMs = input.leaseTtlMs ?? this.defaultLeaseTtlMs;
      const title = input.title ?? (input.goal.length > 80 ? `${input.goal.slice(0, 77)}…` : input.goal);
      const started: NewEvent = {
        type: 'task.started',
        taskId,
        corr,
        by: owner.id,
        key,
        data: { goal: input.goal, title, agent: input.agent ?? null, plan, owner, leaseTtlMs },
      };
      const pseudo = { id: taskId, correlationId: corr, lastCheckpointId: null } as Task;
      const { event, checkpoint } = await this.captureCheckpoint(pseudo, 'task_base', null, null);
      const result = { taskId, baseCheckpointId: checkpoint.id, state: 'running' as TaskState, correlationId: corr };
      this.log.info(`task ${taskId} started: ${title}`, corr);
      return { events: [started, event], result };
    });
  }

  async extendPlan(raw: unknown): Promise<{ taskId: string; added: string[] }> {
    const input = parseInput(ExtendPlanInput, raw, 'plan update');
    const key = input.idempotencyKey ?? `plan:${input.taskId}:${input.plan.map((p) => p.id).join(',')}`;
    return this.mutate('task.plan', key, () => {
      const task = this.requireTask(input.taskId);
      this.requireActive(task, 'change its plan');
      validatePlan(input.plan, this.queries.steps(task.id));
      const by = this.ownerOf(input.owner).id;
      return {
        events: [this.ev('task.plan_updated', task, by, { added: input.plan }, key)],
        result: { taskId: task.id, added: input.plan.map((p) => p.id) },
      };
    });
  }

  /** The agent says it is done: the task waits for the person's review. */
  async requestReview(raw: unknown): Promise<{ taskId: string; state: TaskState }> {
    const input = parseInput(RequestReviewInput, raw, 'task complete');
    const key = input.idempotencyKey ?? `task.review:${input.taskId}:${this.queries.findTask(input.taskId)?.attempt ?? 0}`;
    return this.mutate('task.review', key, () => {
      const task = this.requireTask(input.taskId);
      assertTaskTransition(task.id, task.state, 'waiting_review', 'complete it');
      const open = this.queries.steps(task.id).filter((s) => s.status === 'in_progress');
      if (open.length) {
        throw new WaypointError('illegal_transition', `Task ${task.id} still has step(s) in progress: ${open.map((s) => s.id).join(', ')}. Complete or fail them first.`);
      }
      return {
        events: [this.ev('task.review_requested', task, this.ownerOf(input.owner).id, { summary: input.summary ?? null }, key)],
        result: { taskId: task.id, state: 'waiting_review' as TaskState },
      };
    });
  }

  /** The person accepts the task (after review, optionally with the commit that holds it). */
  async completeTask(raw: unknown): Promise<{ taskId: string; state: TaskState }> {
    const input = parseInput(CompleteTaskInput, raw, 'task approve');
    const key = input.idempotencyKey ?? `task.complete:${input.taskId}`;
    return this.mutate('task.complete', key, () => {
      const task = this.requireTask(input.taskId);
      assertTaskTransition(task.id, task.state, 'completed', 'approve it');
      return {
        events: [this.ev('task.completed', task, null, { summary: input.summary ?? null, commit: input.commit ?? null }, key)],
        result: { taskId: task.id, state: 'completed' as TaskState },
      };
    });
  }

  async abandonTask(raw: unknown): Promise<{ taskId: string; state: TaskState }> {
    const input = parseInput(AbandonTaskInput, raw, 'task abandon');
    const key = input.idempotencyKey ?? `task.abandon:${input.taskId}`;
    return this.mutate('task.abandon', key, () => {
      const task = this.requireTask(input.taskId);
      assertTaskTransition(task.id, task.state, 'abandoned', 'abandon it');
      return { events: [this.ev('task.abandoned', task, null, { reason: input.reason ?? null }, key)], result: { taskId: task.id, state: 'abandoned' as TaskState } };
    });
  }

  async suspendTask(raw: unknown): Promise<{ taskId: string; state: TaskState }> {
    const input = parseInput(SuspendTaskInput, raw, 'task suspend');
    return this.mutate('task.suspend', input.idempotencyKey ?? `task.suspend:${input.taskId}:${this.queries.findTask(input.taskId)?.attempt ?? 0}`, () => {
      const task = this.requireTask(input.taskId);
      assertTaskTransition(task.id, task.state, 'suspended', 'suspend it');
      return {
        events: [this.ev('task.suspended', task, null, { reason: input.reason ?? null }, '')],
        result: { taskId: task.id, state: 'suspended' as TaskState },
      };
    });
  }

  /** Deletes a task's projections (its events stay in the log); its checkpoints' unique blobs become garbage. */
  async deleteTask(raw: unknown): Promise<{ taskId: string; deleted: true }> {
    const input = parseInput(TaskRef, raw, 'task delete');
    return this.mutate('task.delete', input.idempotencyKey ?? `task.delete:${input.taskId}`, () => {
      const task = this.requireTask(input.taskId);
      if (task.state === 'running' || task.state === 'waiting_tool' || task.state === 'planning') {
        throw new WaypointError('illegal_transition', `Task ${task.id} is ${task.state}; abandon it before deleting it.`);
      }
      return { events: [this.ev('task.deleted', task, null, {}, '')], result: { taskId: task.id, deleted: true as const } };
    });
  }

  /**
   * Resumes a task under the caller: a new attempt, a fresh lease, and the resume
   * context to continue from. Resuming a task that is already running under the
   * same owner returns the context without a new attempt.
   */
  async resumeTask(raw: unknown): Promise<ResumeContext> {
    const input = parseInput(ResumeTaskInput, raw, 'task resume');
    const owner = this.ownerOf(input.owner);
    const current = this.requireTask(input.taskId);
    const sameOwnerRunning = ACTIVE_TASK_STATES.includes(current.state) && current.lease?.owner === owner.id;
    if (!sameOwnerRunning) {
      const key = input.idempotencyKey ?? `task.resume:${current.id}:${current.attempt + 1}`;
      await this.mutate('task.resume', key, () => {
        const task = this.requireTask(input.taskId);
        if (ACTIVE_TASK_STATES.includes(task.state)) {
          // Taking over a live task from another owner: interrupt it first, so the log says why.
          return {
            events: [
              this.ev('task.interrupted', task, null, { reason: `taken over by ${owner.id}`, class: 'recoverable', stepId: null }, `${key}#takeover`),
              this.ev('task.resumed', task, owner.id, { owner, leaseTtlMs: input.leaseTtlMs ?? this.defaultLeaseTtlMs, attempt: task.attempt + 1 }, `${key}#resume`),
            ],
            result: { taskId: task.id, attempt: task.attempt + 1 },
          };
        }
        assertTaskTransition(task.id, task.state, 'running', 'resume it');
        return {
          events: [this.ev('task.resumed', task, owner.id, { owner, leaseTtlMs: input.leaseTtlMs ?? this.defaultLeaseTtlMs, attempt: task.attempt + 1 }, '')],
          result: { taskId: task.id, attempt: task.attempt + 1 },
        };
      });
    }
    return this.resumeContext(input.taskId);
  }

  async heartbeat(raw: unknown): Promise<{ taskId: string; expiresAt: number | null }> {
    const input = parseInput(TaskRef, raw, 'heartbeat');
    const owner = this.ownerOf(input.owner);
    const { durable } = await this.exclusive(async () => {
      const task = this.requireTask(input.taskId);
      this.requireActive(task, 'renew its lease');
      if (task.lease && task.lease.owner !== owner.id) {
        throw new WaypointError('conflict', `Task ${task.id} is driven by ${task.lease.owner}, not ${owner.id}; resume it to take it over.`);
      }
      return this.store.commit([this.ev('lease.heartbeat', task, owner.id, {}, `heartbeat:${randomUUID()}`)]);
    });
    await durable;
    return { taskId: input.taskId, expiresAt: this.queries.findTask(input.taskId)?.lease?.expiresAt ?? null };
  }

  /**
   * Marks running tasks whose lease expired, or whose owner process is gone, as
   * interrupted. Runs at open and on a timer in long-lived owners.
   */
  async sweep(): Promise<string[]> {
    const now = this.now;
    const host = os.hostname();
    const candidates = this.queries.tasks({ states: ACTIVE_TASK_STATES });
    const interrupted: string[] = [];
    for (const t of candidates) {
      const lease = t.lease;
      let reason: string | null = null;
      if (!lease) reason = 'no lease holder';
      else if (lease.pid && (lease.host === null || lease.host === host) && !isPidAlive(lease.pid)) reason = `owner process ${lease.pid} (${lease.owner}) exited`;
      else if (lease.expiresAt < now)
        reason = `lease of ${lease.owner} expired at ${new Date(lease.expiresAt).toISOString()} (no call for ${Math.round(lease.ttlMs / 1000)} s)`;
      if (!reason) continue;
      const why = reason;
      await this.mutate('task.interrupt', `task.interrupt:${t.id}:${t.attempt}`, () => {
        const task = this.requireTask(t.id);
        if (!ACTIVE_TASK_STATES.includes(task.state)) return { events: [], result: null };
        const effects = this.queries.sideEffects(task.id);
        const inDoubt = effects.some((e) => e.status === 'intent');
        const step = this.queries.steps(task.id).find((s) => s.status === 'in_progress') ?? null;
        return {
          events: [this.ev('task.interrupted', task, null, { reason: why, class: inDoubt ? 'inconsistent_state' : 'recoverable', stepId: step?.id ?? null }, '')],
          result: null,
        };
      });
      interrupted.push(t.id);
      this.log.warn(`task ${t.id} interrupted: ${why}`, t.correlationId);
    }
    return interrupted;
  }

  // ---------------------------------------------------------------------------
  // Steps.

  async startStep(raw: unknown): Promise<{ taskId: string; stepId: string; checkpointId: string; attempt: number }> {
    const input = parseInput(StartStepInput, raw, 'step start');
    const inputs = boundedJson(input.inputs, 'step inputs');
    const owner = this.ownerOf(input.owner);
    // Derive the key from the transition (seed 004): a repeat of the same start is recognised.
    const pre = this.requireTask(input.taskId);
    const preStep = input.stepId ? this.queries.step(pre.id, input.stepId) : null;
    // A step already in progress in this task attempt is a repeat of the same start.
    const repeat = preStep?.status === 'in_progress' && preStep.taskAttempt === pre.attempt;
    const stepAttempt = preStep ? (repeat ? preStep.attempts : preStep.attempts + 1) : 1;
    const key = input.idempotencyKey ?? (input.stepId ? `step.start:${pre.id}:${input.stepId}:${stepAttempt}` : `step.start:${randomUUID()}`);
    return this.mutate('step.start', key, async () => {
      const task = this.requireTask(input.taskId);
      this.requireActive(task, 'start a step');
      const steps = this.queries.steps(task.id);
      let step: Step | undefined = input.stepId ? steps.find((s) => s.id === input.stepId) : undefined;
      let stepId = input.stepId;
      const adhoc = !step;
      if (!step) {
        stepId ??= nextAdhocId(steps);
        for (const d of input.dependsOn ?? []) {
          if (!steps.some((s) => s.id === d)) throw new WaypointError('invalid_input', `Step '${stepId}' depends on unknown step '${d}'.`);
        }
      } else {
        assertStepTransition(task.id, step.id, step.status, 'in_progress', 'start it');
        const blocked = step.dependsOn.filter((d) => {
          const dep = steps.find((s) => s.id === d);
          return !dep || (dep.status !== 'completed' && dep.status !== 'skipped');
        });
        if (blocked.length) {
          throw new WaypointError('illegal_transition', `Step ${step.id} of task ${task.id} depends on ${blocked.join(', ')}, which ${blocked.length > 1 ? 'are' : 'is'} not completed.`, {
            blocked,
          });
        }
      }
      const attempt = step ? step.attempts + 1 : 1;
      const title = input.title ?? step?.title ?? stepId!;
      const { event, checkpoint } = await this.captureCheckpoint(task, 'step_start', stepId!, null, input.dirty);
      return {
        events: [this.ev('step.started', task, owner.id, { stepId: stepId!, title, attempt, taskAttempt: task.attempt, inputs, adhoc, dependsOn: input.dependsOn ?? [] }, ''), event],
        result: { taskId: task.id, stepId: stepId!, checkpointId: checkpoint.id, attempt },
      };
    });
  }

  async completeStep(raw: unknown): Promise<{ taskId: string; stepId: string; checkpointId: string; filesChanged: number }> {
    const input = parseInput(CompleteStepInput, raw, 'step complete');
    const outputs = boundedJson(input.outputs, 'step outputs');
    const owner = this.ownerOf(input.owner);
    const pre = this.queries.step(input.taskId, input.stepId);
    const key = input.idempotencyKey ?? `step.complete:${input.taskId}:${input.stepId}:${pre?.attempts ?? 0}`;
    return this.mutate('step.complete', key, async () => {
      const task = this.requireTask(input.taskId);
      this.requireActive(task, 'complete a step');
      const step = this.queries.step(task.id, input.stepId);
      if (!step) throw notFound(`step of task ${task.id}`, input.stepId);
      assertStepTransition(task.id, step.id, step.status, 'completed', 'complete it');
      const { event, checkpoint } = await this.captureCheckpoint(task, 'step_end', step.id, null, input.dirty);
      return {
        events: [this.ev('step.completed', task, owner.id, { stepId: step.id, outputs, summary: input.summary ?? null }, ''), event],
        result: { taskId: task.id, stepId: step.id, checkpointId: checkpoint.id, filesChanged: checkpoint.filesChanged },
      };
    });
  }

  /**
   * A recoverable failure keeps the step retryable (attempt count + backoff hint);
   * an unrecoverable one fails the task, keeping the error context.
   */
  async failStep(raw: unknown): Promise<{ taskId: string; stepId: string; state: TaskState; retry: { attempt: number; backoffMs: number } | null }> {
    const input = parseInput(FailStepInput, raw, 'step fail');
    const owner = this.ownerOf(input.owner);
    const pre = this.queries.step(input.taskId, input.stepId);
    const key = input.idempotencyKey ?? `step.fail:${input.taskId}:${input.stepId}:${pre?.attempts ?? 0}`;
    return this.mutate('step.fail', key, () => {
      const task = this.requireTask(input.taskId);
      this.requireActive(task, 'fail a step');
      const step = this.queries.step(task.id, input.stepId);
      if (!step) throw notFound(`step of task ${task.id}`, input.stepId);
      assertStepTransition(task.id, step.id, step.status, 'failed', 'fail it');
      const backoffMs = input.recoverable ? backoffFor(step.attempts) : null;
      const cls = input.recoverable ? 'recoverable' : 'unrecoverable';
      const events = [this.ev('step.failed', task, owner.id, { stepId: step.id, error: input.error, recoverable: input.recoverable, class: cls, attempt: step.attempts, backoffMs }, '')];
      if (!input.recoverable) {
        assertTaskTransition(task.id, task.state, 'failed', 'fail it');
        events.push(this.ev('task.failed', task, null, { reason: `step ${step.id} failed: ${input.error}`, stepId: step.id, class: 'unrecoverable' }, `${key}#task`));
      }
      return {
        events,
        result: {
          taskId: task.id,
          stepId: step.id,
          state: (input.recoverable ? task.state : 'failed') as TaskState,
          retry: input.recoverable ? { attempt: step.attempts + 1, backoffMs: backoffMs! } : null,
        },
      };
    });
  }

  async skipStep(raw: unknown): Promise<{ taskId: string; stepId: string }> {
    const input = parseInput(SkipStepInput, raw, 'step skip');
    return this.mutate('step.skip', input.idempotencyKey ?? `step.skip:${input.taskId}:${input.stepId}`, () => {
      const task = this.requireTask(input.taskId);
      this.requireActive(task, 'skip a step');
      const step = this.queries.step(task.id, input.stepId);
      if (!step) throw notFound(`step of task ${task.id}`, input.stepId);
      assertStepTransition(task.id, step.id, step.status, 'skipped', 'skip it');
      return { events: [this.ev('step.skipped', task, this.ownerOf(input.owner).id, { stepId: step.id, reason: input.reason ?? null }, '')], result: { taskId: task.id, stepId: step.id } };
    });
  }

  // ---------------------------------------------------------------------------
  // Checkpoints.

  async checkpoint(raw: unknown): Promise<{ taskId: string; checkpointId: string; filesChanged: number }> {
    const input = parseInput(CheckpointInput, raw, 'checkpoint');
    const key = input.idempotencyKey ?? `checkpoint:${randomUUID()}`;
    return this.mutate('checkpoint', key, async () => {
      const task = this.requireTask(input.taskId);
      if (task.state === 'completed' || task.state === 'abandoned') {
        throw new WaypointError('illegal_transition', `Task ${task.id} is ${task.state}; no more checkpoints can be taken for it.`);
      }
      const stepId = input.stepId ?? this.queries.steps(task.id).find((s) => s.status === 'in_progress')?.id ?? null;
      const { event, checkpoint } = await this.captureCheckpoint(task, input.kind ?? 'manual', stepId, input.label ?? null, input.dirty);
      return { events: [event], result: { taskId: task.id, checkpointId: checkpoint.id, filesChanged: checkpoint.filesChanged } };
    });
  }

  // ---------------------------------------------------------------------------
  // Side effects: write-ahead intents under idempotency keys.

  /**
   * `proceed` only once the intent is durable; `already_done` with the recorded
   * result if the key completed before; `in_doubt` if an intent exists with no
   * outcome (the caller must verify before repeating, then report with end).
   */
  async beginSideEffect(raw: unknown): Promise<{ taskId: string; key: string; decision: SideEffectDecision; result?: unknown; checkpointId?: string; attempt: number }> {
    const input = parseInput(BeginSideEffectInput, raw, 'side effect begin');
    const args = boundedJson(input.args, 'side effect args');
    const owner = this.ownerOf(input.owner);
    // Not keyed by the idempotency table: the ledger itself is the record of this key.
    const { result, durable } = await this.exclusive(async () => {
      const task = this.requireTask(input.taskId);
      const existing = this.queries.sideEffect(task.id, input.key);
      if (existing && existing.status === 'done') {
        return { result: { taskId: task.id, key: input.key, decision: 'already_done' as const, result: existing.result, attempt: existing.attempts }, durable: this.waitForEffect(task.id, input.key) };
      }
      if (existing && (existing.status === 'intent' || existing.status === 'in_doubt')) {
        return { result: { taskId: task.id, key: input.key, decision: 'in_doubt' as const, attempt: existing.attempts }, durable: this.waitForEffect(task.id, input.key) };
      }
      this.requireActive(task, 'begin a side effect');
      if (input.stepId && !this.queries.step(task.id, input.stepId)) throw notFound(`step of task ${task.id}`, input.stepId);
      const stepId = input.stepId ?? this.queries.steps(task.id).find((s) => s.status === 'in_progress')?.id ?? null;
      const attempt = (existing?.attempts ?? 0) + 1;
      const { event, checkpoint } = await this.captureCheckpoint(task, 'before_side_effect', stepId, input.description.slice(0, 200));
      const intent = this.ev(
        'side_effect.intent',
        task,
        owner.id,
        { key: input.key, stepId, kind: input.kind, description: input.description, args, attempt },
        `effect.intent:${task.id}:${input.key}:${attempt}`,
      );
      const committed = this.store.commit([event, intent]);
      return { result: { taskId: task.id, key: input.key, decision: 'proceed' as const, checkpointId: checkpoint.id, attempt }, durable: committed.durable };
    });
    await durable;
    return result;
  }

  /** Waits until the events that created the ledger row we answered from are durable. */
  private waitForEffect(taskId: string, key: string): Promise<void> {
    const r = this.store.db.get<{ m: number }>("SELECT MAX(seq) AS m FROM events WHERE task_id = ? AND type LIKE 'side_effect.%' AND json_extract(data, '$.key') = ?", [taskId, key]);
    return this.store.waitDurable(Number(r?.m ?? 0));
  }

  async endSideEffect(raw: unknown): Promise<{ taskId: string; key: string; state: SideEffect['status'] }> {
    const input = parseInput(EndSideEffectInput, raw, 'side effect end');
    const result = boundedJson(input.result, 'side effect result');
    const by = input.by ?? 'agent';
    const owner = this.ownerOf(input.owner);
    const pre = this.queries.sideEffect(input.taskId, input.key);
    const key = input.idempotencyKey ?? `effect.end:${input.taskId}:${input.key}:${pre?.attempts ?? 0}`;
    return this.mutate('effect.end', key, () => {
      const task = this.requireTask(input.taskId);
      const effect = this.queries.sideEffect(task.id, input.key);
      if (!effect) throw new WaypointError('not_found', `Task ${task.id} has no side effect '${input.key}'; begin it first.`);
      if (effect.status === 'done' || effect.status === 'failed') {
        throw new WaypointError('illegal_transition', `Side effect '${input.key}' of task ${task.id} is already ${effect.status}.`);
      }
      const status = input.ok ? ('done' as const) : ('failed' as const);
      const event = input.ok
        ? this.ev('side_effect.done', task, by === 'agent' ? owner.id : null, { key: input.key, result, by }, '')
        : this.ev('side_effect.failed', task, by === 'agent' ? owner.id : null, { key: input.key, error: input.error!, by }, '');
      return { events: [event], result: { taskId: task.id, key: input.key, state: status } };
    });
  }

  // ---------------------------------------------------------------------------
  // Queries.

  task(taskId: string): Task {
    return this.queries.task(taskId);
  }

  tasks(filter?: { states?: readonly TaskState[]; limit?: number }): Task[] {
    return this.queries.tasks(filter);
  }

  /** One task with everything under it. */
  taskDetail(taskId: string): { task: Task; steps: Step[]; checkpoints: CheckpointMeta[]; sideEffects: SideEffect[] } {
    const task = this.queries.task(taskId);
    return { task, steps: this.queries.steps(taskId), checkpoints: this.queries.checkpoints(taskId), sideEffects: this.queries.sideEffects(taskId) };
  }

  events(filter: { taskId?: string; afterSeq?: number; limit?: number } = {}): WaypointEvent[] {
    if (filter.taskId) this.queries.task(filter.taskId);
    return this.store.events(filter);
  }

  async resumeContext(taskId: string): Promise<ResumeContext> {
    const task = this.queries.task(taskId);
    const drift = this.opts.drift ? await this.opts.drift(task) : null;
    const last = task.lastCheckpointId ? this.queries.checkpoint(task.lastCheckpointId) : null;
    return buildResumeContext(task, this.queries.steps(taskId), this.queries.sideEffects(taskId), last, drift);
  }

  verify(): ReturnType<EventStore['verify']> {
    return this.store.verify();
  }

  async rebuild(): Promise<void> {
    await this.exclusive(async () => this.store.rebuild());
  }
}

function nextAdhocId(steps: readonly Step[]): string {
  const ids = new Set(steps.map((s) => s.id));
  let n = steps.length + 1;
  while (ids.has(`s${n}`)) n++;
  return `s${n}`;
}
