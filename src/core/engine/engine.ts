import * as path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import { WaypointError, errorMessage, notFound } from '../model/errors';
import { validatePlan } from '../model/plan';
import type { CheckpointKind, CheckpointMeta, EventDataOf, EventType, LeaseOwner, SideEffect, Step, Task, TaskState, WaypointEvent } from '../model/schema';
import { assertStepTransition, assertTaskTransition, ACTIVE_TASK_STATES, FINAL_TASK_STATES } from '../model/stateMachine';
import { boundedJson, parseInput } from '../model/validate';
import { Logger, silentLogger } from '../log';
import type { EventLog, NewEvent, Projection, ProjectionReader, StoreBackend, ObjectUploader } from '../store/eventLog';
import { EmbeddedProjectionReader } from './projectionReader';
import { OperationRunner, type OnceOptions, type Outcome } from './runner';
import type { StoreOptions } from '../store/eventStore';
import { openEmbeddedBackend } from '../store/embedded';
import { openPostgresBackend } from '../store/postgres/backend';
import { noteFolderIdentity } from '../store/folderIdentity';
import { newId } from './ids';
import {
  AbandonTaskInput,
  CheckpointInput,
  CompleteStepInput,
  CompleteTaskInput,
  ExtendPlanInput,
  FailStepInput,
  GrantAttemptsInput,
  RequestReviewInput,
  ResumeTaskInput,
  RetentionInput,
  RollbackInput,
  DiffInput,
  SkipStepInput,
  StartStepInput,
  StartTaskInput,
  SuspendTaskInput,
  TaskRef,
  ForkTaskInput,
  type BeginCommandInput,
  type EndCommandInput,
} from './inputs';
import { forkInheritance, type ForkInheritance } from './forkInheritance';
import { computeStats, type Stats, type StatsFilter } from './stats';
import { Queries } from './queries';
import { assertMayStart, backoffFor, exhaustedReason, failureExhausts, heldError, resolvePolicy, startWhenAllowed, type RetryPolicyInput } from './retryPolicy';
import { buildResumeContext, renderMarkdown, type DriftInfo, type ResumeContext } from './resumeContext';
import { MAX_NOT_CAPTURED_LISTED, metadataOnlySnapshotter, type NotCaptured, type Snapshotter } from './snapshotter';
import { WorkspaceSnapshots } from './workspaceSnapshots';
import type { WorkspaceEdit } from './reviewEdits';
import { isNoSpace } from './noSpace';
import { ReviewApplies, type FinishTask, type ReviewApplyResult } from './reviewApply';
import { Rollbacks, type RollbackResult } from './rollbacks';
import { Leases, interruptedEvent } from './leases';
import { SideEffects } from './sideEffects';
import type { EngineCore } from './engineCore';
import { reopenTask, type ReopenResult } from './reopen';
import { recordTurn } from './turns';
import { TerminalCommands, type CommandEnd } from './terminalCommands';
import { WorkspaceHistory } from './history';
import { StorageUpkeep, type GcResult, type StorageReport, type VerifyReport } from './storageUpkeep';
import { diffManifests, type FileChangeWithLines, type Manifest, type SnapshotRoot } from '../snapshot';

// Moved to storageUpkeep.ts with the methods that build them; every surface still imports them from here.
export type { GcResult, StorageReport, VerifyReport } from './storageUpkeep';
export type { RollbackResult } from './rollbacks';
export type { FinishTask, ReviewApplyResult } from './reviewApply';
export { isNoSpace } from './noSpace';

export interface EngineOptions {
  /** The workspace root; the store lives in `<workspace>/.waypoint` unless storeDir says otherwise. */
  workspace: string;
  storeDir?: string;
  log?: Logger;
  /** Who drives tasks started through this engine when a call names no owner. */
  owner?: LeaseOwner;
  defaultLeaseTtlMs?: number;
  snapshotter?: Snapshotter | ((engine: Engine) => Snapshotter);
  /** Workspace snapshot settings; `false` records checkpoints as metadata only. */
  snapshots?: false | { roots?: SnapshotRoot[]; excludes?: string[]; maxFileBytes?: number; fullEvery?: number };
  /** Adds drift to the resume context (the snapshot layer provides it). */
  drift?: (task: Task) => Promise<DriftInfo | null>;
  /** Options of the embedded store (ignored with `backend`). */
  store?: Omit<StoreOptions, 'dir' | 'log' | 'workspace'>;
  /**
   * An already-open log and the projection it feeds (the team store). Without it the
   * engine opens the embedded store in the store directory. The directory holds the
   * blobs and manifests either way.
   */
  backend?: StoreBackend;
  /**
   * A team store URL (postgresql://…): the workspace's events go to that database
   * instead of the embedded journal (blobs and manifests stay in the store directory).
   * Ignored with `backend`. Without either, the embedded store, exactly as before.
   */
  teamStore?: string;
  /** Run the lease sweep on a timer (long-lived owners: the extension, `waypoint serve`). */
  sweepIntervalMs?: number;
  /** The retry policy of tasks started without one of their own (the `waypoint.retry.*` settings). */
  retry?: RetryPolicyInput;
}

export interface ChangeEvent {
  events: readonly WaypointEvent[];
  taskIds: readonly string[];
}

export type SideEffectDecision = 'proceed' | 'already_done' | 'in_doubt';


/** Added to a result whose checkpoint did not capture everything (see NotCaptured); absent otherwise. */
export interface NotCapturedReport {
  /** The first MAX_NOT_CAPTURED_LISTED of them, by path. */
  notCaptured?: NotCaptured[];
  notCapturedCount?: number;
}

/** One line for a log or a terminal: the checkpoint and what it did not capture, the first few by name. */
export function notCapturedLine(checkpointId: string, r: NotCapturedReport): string {
  const list = r.notCaptured ?? [];
  const n = r.notCapturedCount ?? list.length;
  const shown = list.slice(0, 10).map((x) => `${JSON.stringify(x.path)} (${x.reason === 'unreadable' ? x.code : x.reason})`);
  const more = n > shown.length ? ` and ${n - shown.length} more` : '';
  return `warning: checkpoint ${checkpointId} did not capture ${n} path(s): ${shown.join(', ')}${more}. No rollback to it deletes or changes them; make them readable (or raise the size or open-file limit) and take a new checkpoint to capture them.`;
}


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


/** How long a `wait: true` start waits in the engine: under the RPC timeout, so a relayed call still answers. */
const ENGINE_RETRY_WAIT_MS = 60_000;

/**
 * The one API every surface calls. Mutations go through one serialized runner
 * (validate → capture → apply), are idempotent by key, and return only once their
 * events are durable.
 */
export class Engine {
  readonly queries: Queries;
  private readonly listeners = new Set<(e: ChangeEvent) => void>();
  private readonly log: Logger;
  private readonly snapshotter: Snapshotter;
  /** Set when checkpoints hold real workspace manifests (the default). */
  readonly workspaceSnapshots: WorkspaceSnapshots | null = null;
  private sweepTimer: NodeJS.Timeout | undefined;
  /** With a team store: the copy of checkpoints' objects into it, for review from other machines. */
  objectUpload: ObjectUploader | null = null;
  readonly defaultOwner: LeaseOwner;
  /** What open had to repair (an interrupted rollback finished), for surfaces to tell the person. */
  recoveryNotes: string[] = [];
  readonly defaultLeaseTtlMs: number;

  /** The durable log the engine appends to and reads history from (embedded or PostgreSQL). */
  readonly eventLog: EventLog;
  /** The projection the log feeds, which `queries` reads. */
  readonly projection: Projection;
  /** The asynchronous read side (listings and a task's events), for surfaces that must not depend on sql.js. */
  readonly reader: ProjectionReader;
  private readonly clock: () => number;
  private readonly runner: OperationRunner;

  private constructor(
    backend: StoreBackend,
    /** The `.waypoint` directory: blobs, manifests, plans (and the embedded store's files). */
    readonly storeDir: string,
    readonly workspace: string,
    private readonly opts: EngineOptions,
  ) {
    this.eventLog = backend.log;
    this.projection = backend.projection;
    this.clock = opts.store?.clock ?? Date.now;
    this.log = (opts.log ?? silentLogger).child('engine');
    this.queries = Queries.of(this.projection);
    this.reader = backend.reader ?? new EmbeddedProjectionReader(this.queries, this.eventLog);
    this.runner = new OperationRunner(this.eventLog, this.projection, this.queries);
    this.defaultOwner = opts.owner ?? { id: 'cli' };
    this.defaultLeaseTtlMs = opts.defaultLeaseTtlMs ?? 5 * 60_000;
    if (opts.snapshotter) {
      this.snapshotter = typeof opts.snapshotter === 'function' ? opts.snapshotter(this) : opts.snapshotter;
    } else if (opts.snapshots === false) {
      this.snapshotter = metadataOnlySnapshotter;
    } else {
      this.workspaceSnapshots = new WorkspaceSnapshots({
        roots: opts.snapshots?.roots ?? [{ name: path.basename(workspace) || 'workspace', dir: workspace }],
        storeDir,
        excludes: opts.snapshots?.excludes,
        maxFileBytes: opts.snapshots?.maxFileBytes,
        fullEvery: opts.snapshots?.fullEvery,
        log: this.log,
      });
      this.snapshotter = this.workspaceSnapshots;
    }
    this.eventLog.subscribe((events) => {
      const taskIds = [...new Set(events.map((e) => e.taskId).filter((t): t is string => !!t))];
      for (const l of this.listeners) l({ events, taskIds });
    });
  }

  static async open(opts: EngineOptions): Promise<Engine> {
    const workspace = path.resolve(opts.workspace);
    const dir = opts.storeDir ? path.resolve(workspace, opts.storeDir) : path.join(workspace, '.waypoint');
    // Before the lock is looked at: a copied folder drops the original's lock here.
    if (!opts.backend) noteFolderIdentity(dir, opts.log);
    const backend =
      opts.backend ??
      (opts.teamStore
        ? await openPostgresBackend({ url: opts.teamStore, storeDir: dir, workspacePath: workspace, log: opts.log, lock: opts.store?.lock, clock: opts.store?.clock })
        : await openEmbeddedBackend({ ...opts.store, dir, log: opts.log, workspace }, isNoSpace));
    const engine = new Engine(backend, dir, workspace, opts);
    const readOnly = backend.log.readOnlyReason;
    if (readOnly !== null) {
      // No temp sweep, no recovery, no lease sweep: each of them writes. They run on the next writable open.
      engine.recoveryNotes = [readOnly];
      return engine;
    }
    try {
      // A store created just now gets its record.
      if (!opts.backend) noteFolderIdentity(dir, opts.log);
      await engine.workspaceSnapshots?.blobs.sweepTemp();
      // Raw content a bulk checkpoint left before it could be compressed (a crash, a killed process).
      if (engine.workspaceSnapshots?.blobs.uncompactedPacks().length) engine.workspaceSnapshots.compactSoon();
      engine.recoveryNotes = [...(await engine.recoverRollbacks()), ...(await engine.recoverReviewApplies())];
      await engine.sweep();
      // After recovery: the upload reads objects the recovery may have finished writing.
      if (engine.workspaceSnapshots && backend.startObjectUpload) engine.objectUpload = backend.startObjectUpload(engine.workspaceSnapshots.blobs);
    } catch (e) {
      await engine.workspaceSnapshots?.close();
      await backend.log.close();
      backend.projection.close();
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
    return this.clock();
  }

  onDidChange(listener: (e: ChangeEvent) => void): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  async close(): Promise<void> {
    clearInterval(this.sweepTimer);
    await this.runner.idle();
    await this.objectUpload?.close();
    await this.workspaceSnapshots?.close();
    await this.eventLog.close();
    this.projection.close();
    this.listeners.clear();
  }

  // ---------------------------------------------------------------------------
  // The one runner (runner.ts) and the full-disk guard.

  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    return this.runner.exclusive(fn);
  }

  /**
   * One idempotent mutation: `prepare` validates and may capture a checkpoint; it
   * returns the events to append and the result. A call whose key was seen before
   * returns the recorded result and appends nothing (OperationRunner.once).
   */
  private async mutate<R>(op: string, key: string, prepare: () => Promise<Outcome<R>> | Outcome<R>, opts?: OnceOptions<R>): Promise<R> {
    return this.needingSpace(op, () => this.runner.once(op, key, prepare, opts));
  }

  /**
   * Runs a writing operation: refused at once on a store opened read-only, and a full
   * disk met on the way is told as what needed space where (not a bare ENOSPC).
   */
  private async needingSpace<R>(what: string, fn: () => Promise<R>): Promise<R> {
    const readOnly = this.eventLog.readOnlyReason;
    if (readOnly !== null) throw new WaypointError('io', readOnly);
    try {
      return await fn();
    } catch (e) {
      if (!isNoSpace(e)) throw e;
      throw new WaypointError('io', `No space left for ${what}: ${errorMessage(e)}. Waypoint writes its store in ${this.storeDir} and restored files in ${this.workspace}; free space on that disk and try again.`, { what });
    }
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

  /**
   * Steps may be ended by their agent while the task is driven, or by a person
   * settling them by hand in any state but a final one (see StepBy in inputs.ts).
   */
  private requireStepsSettleable(task: Task, by: 'agent' | 'person' | undefined, action: string): void {
    if (by !== 'person') return this.requireActive(task, action);
    if (FINAL_TASK_STATES.includes(task.state)) {
      throw new WaypointError('illegal_transition', `Task ${task.id} is ${task.state}; cannot ${action}: ${task.state} is final.`, { taskId: task.id, state: task.state, action });
    }
  }

  /** An event about a task; its payload is validated against the type's schema at commit. */
  private ev<T extends EventType>(type: T, task: Task, by: string | null, data: EventDataOf<T>, key: string): NewEvent {
    return { type, taskId: task.id, corr: task.correlationId, by, data, key } as NewEvent;
  }

  private async captureCheckpoint(task: Task | null, kind: CheckpointKind, stepId: string | null, label: string | null, dirty?: readonly string[]): Promise<{ event: NewEvent; checkpoint: CheckpointMeta; report: NotCapturedReport }> {
    const previous = this.latestCheckpoint();
    const parent = task?.lastCheckpointId ? this.queries.checkpoint(task.lastCheckpointId) : previous;
    // A damaged parent stays the new checkpoint's parent in the tree, but its manifest
    // (gone, or naming content that is gone) is no base for the new one: that is stored whole.
    const base = parent?.damaged ? { ...parent, manifestRef: null } : parent;
    let cap: Awaited<ReturnType<Snapshotter['capture']>>;
    try {
      cap = await this.snapshotter.capture({ taskId: task?.id ?? null, kind, parent: base, previous, dirty });
    } catch (e) {
      if (e instanceof WaypointError && e.code === 'corrupt' && /manifest .* is corrupt or hostile/.test(e.message)) {
        throw new WaypointError(
          'corrupt',
          `${e.message}. A checkpoint this one builds on has lost objects: run 'waypoint verify' (it only reads) to name the damaged checkpoints and why. Nothing is marked until you decide: 'waypoint verify --repair' restores what this folder still holds and marks the rest unusable for good, so run it only once you know those checkpoints were made in this folder and their content is gone everywhere (not held by a copy of it or another machine).`,
          e.details,
        );
      }
      throw e;
    }
    const nc = cap.notCaptured ?? [];
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
        // What it did not capture is part of its record (the names no manifest can hold are only here).
        ...(nc.length ? { notCaptured: nc.slice(0, MAX_NOT_CAPTURED_LISTED).map(({ path: p, reason, code }) => ({ path: p, reason, code })), notCapturedCount: nc.length } : {}),
      },
    };
    const report: NotCapturedReport = nc.length ? { notCaptured: nc.slice(0, MAX_NOT_CAPTURED_LISTED), notCapturedCount: nc.length } : {};
    if (nc.length) this.log.info(notCapturedLine(id, report), task?.correlationId);
    return { event, checkpoint, report };
  }

  /**
   * The workspace's newest checkpoint with a manifest: the next scan's stat cache
   * (only changed files are read) and a new task's delta base.
   */
  latestCheckpoint(): CheckpointMeta | null {
    const id = this.queries.latestIntactCheckpointId();
    return id ? this.queries.checkpoint(id) : null;
  }

  // ---------------------------------------------------------------------------
  // Tasks.

  async startTask(raw: StartTaskInput): Promise<{ taskId: string; baseCheckpointId: string; state: TaskState; correlationId: string } & NotCapturedReport> {
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
        // The effective policy is recorded, so a replay decides retries as this call did whatever the settings are later.
        data: { goal: input.goal, title, agent: input.agent ?? null, plan, owner, leaseTtlMs, retry: resolvePolicy(this.opts.retry, input.retry) },
      };
      const pseudo = { id: taskId, correlationId: corr, lastCheckpointId: null } as Task;
      const { event, checkpoint, report } = await this.captureCheckpoint(pseudo, 'task_base', null, null);
      const result = { taskId, baseCheckpointId: checkpoint.id, state: 'running' as TaskState, correlationId: corr, ...report };
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
    // After a reopen the same task completes again: the key names that round (unchanged for a task never reopened).
    const reopenedAt = this.queries.findTask(input.taskId)?.reopened?.at;
    const key = input.idempotencyKey ?? `task.complete:${input.taskId}${reopenedAt ? `:${reopenedAt}` : ''}`;
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

  /** Marks a live task interrupted (its driver went away: a terminal closed, an editor quit). */
  async interruptTask(raw: unknown): Promise<{ taskId: string; state: TaskState }> {
    const input = parseInput(AbandonTaskInput, raw, 'task interrupt');
    const pre = this.queries.findTask(input.taskId);
    return this.mutate('task.interrupt', input.idempotencyKey ?? `task.interrupt:${input.taskId}:${pre?.attempt ?? 0}`, () => {
      const task = this.requireTask(input.taskId);
      assertTaskTransition(task.id, task.state, 'interrupted', 'interrupt it');
      return {
        events: [interruptedEvent(this.core, task, input.reason ?? 'interrupted')],
        result: { taskId: task.id, state: 'interrupted' as TaskState },
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
    // Resuming would only meet the same refusal at the step: the person's decision comes first.
    if (current.hold?.cause === 'retries_exhausted') throw heldError({ ...current, hold: current.hold }, 'resume');
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
    const ctx = await this.resumeContext(input.taskId);
    // The context is read after the resume, when the task runs: it says what the task was before it.
    const resumed = { ...ctx, resumedFrom: current.state };
    return { ...resumed, markdown: renderMarkdown(resumed) };
  }

  /** Renews the caller's lease on a task (see Leases.heartbeat). */
  heartbeat(raw: unknown): Promise<{ taskId: string; expiresAt: number | null }> {
    return this.leases.heartbeat(raw);
  }

  /** Interrupts running tasks whose lease expired or whose owner process is gone (see Leases.sweep). */
  sweep(): Promise<string[]> {
    return this.leases.sweep();
  }

  // ---------------------------------------------------------------------------
  // Steps.

  async startStep(raw: unknown): Promise<{ taskId: string; stepId: string; checkpointId: string; attempt: number; maxAttempts: number } & NotCapturedReport> {
    const input = parseInput(StartStepInput, raw, 'step start');
    if (input.wait) {
      const once = { ...input, wait: undefined };
      return startWhenAllowed(() => this.startStep(once), () => this.now, (ms) => new Promise((r) => setTimeout(r, ms)), ENGINE_RETRY_WAIT_MS);
    }
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
      if (task.hold) throw heldError({ ...task, hold: task.hold }, 'start a step');
      this.requireActive(task, 'start a step');
      const steps = this.queries.steps(task.id);
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
        assertMayStart(task, step, this.now);
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
      const { event, checkpoint, report } = await this.captureCheckpoint(task, 'step_start', stepId!, null, input.dirty);
      return {
        events: [this.ev('step.started', task, owner.id, { stepId: stepId!, title, attempt, taskAttempt: task.attempt, inputs, adhoc, dependsOn: input.dependsOn ?? [] }, ''), event],
        result: { taskId: task.id, stepId: stepId!, checkpointId: checkpoint.id, attempt, maxAttempts: step?.maxAttempts ?? task.retry.maxAttempts, ...report },
      };
    });
  }

  async completeStep(raw: unknown): Promise<{ taskId: string; stepId: string; checkpointId: string; filesChanged: number } & NotCapturedReport> {
    const input = parseInput(CompleteStepInput, raw, 'step complete');
    const outputs = boundedJson(input.outputs, 'step outputs');
    const owner = this.ownerOf(input.owner);
    const pre = this.queries.step(input.taskId, input.stepId);
    const key = input.idempotencyKey ?? `step.complete:${input.taskId}:${input.stepId}:${pre?.attempts ?? 0}`;
    return this.mutate('step.complete', key, async () => {
      const task = this.requireTask(input.taskId);
      this.requireStepsSettleable(task, input.by, 'complete a step');
      const step = this.queries.step(task.id, input.stepId);
      if (!step) throw notFound(`step of task ${task.id}`, input.stepId);
      assertStepTransition(task.id, step.id, step.status, 'completed', 'complete it');
      const { event, checkpoint, report } = await this.captureCheckpoint(task, 'step_end', step.id, null, input.dirty);
      return {
        events: [this.ev('step.completed', task, input.by === 'person' ? null : owner.id, { stepId: step.id, outputs, summary: input.summary ?? null }, ''), event],
        result: { taskId: task.id, stepId: step.id, checkpointId: checkpoint.id, filesChanged: checkpoint.filesChanged, ...report },
      };
    });
  }

  /**
   * A recoverable failure keeps the step retryable (attempt count + backoff hint);
   * an unrecoverable one fails the task, keeping the error context.
   */
  async failStep(raw: unknown): Promise<{
    taskId: string;
    stepId: string;
    state: TaskState;
    /** The next attempt and when it may start; null when there is none without a person. */
    retry: { attempt: number; maxAttempts: number; backoffMs: number; retryAt: number } | null;
    hold: Task['hold'];
  }> {
    const input = parseInput(FailStepInput, raw, 'step fail');
    const owner = this.ownerOf(input.owner);
    const pre = this.queries.step(input.taskId, input.stepId);
    const key = input.idempotencyKey ?? `step.fail:${input.taskId}:${input.stepId}:${pre?.attempts ?? 0}`;
    return this.mutate('step.fail', key, () => {
      const task = this.requireTask(input.taskId);
      const person = input.by === 'person';
      this.requireStepsSettleable(task, input.by, 'fail a step');
      const step = this.queries.step(task.id, input.stepId);
      if (!step) throw notFound(`step of task ${task.id}`, input.stepId);
      assertStepTransition(task.id, step.id, step.status, 'failed', 'fail it');
      // The last allowed attempt failing hands the task to a person: no backoff to wait out.
      // A person failing it by hand is that person already: no hold, and no backoff for the agent.
      const exhausted = input.recoverable && !person && failureExhausts(step);
      const backoffMs = input.recoverable && !exhausted && !person ? backoffFor(task.retry, task.id, step.id, step.attempts) : null;
      const cls = input.recoverable ? 'recoverable' : 'unrecoverable';
      const events = [this.ev('step.failed', task, person ? null : owner.id, { stepId: step.id, error: input.error, recoverable: input.recoverable, class: cls, attempt: step.attempts, backoffMs }, '')];
      let hold: Task['hold'] = null;
      if (!input.recoverable) {
        assertTaskTransition(task.id, task.state, 'failed', 'fail it');
        events.push(this.ev('task.failed', task, null, { reason: `step ${step.id} failed: ${input.error}`, stepId: step.id, class: 'unrecoverable' }, `${key}#task`));
      } else if (exhausted) {
        assertTaskTransition(task.id, task.state, 'suspended', 'hold it for a person');
        const reason = exhaustedReason(step, input.error);
        // `by` names the driver that used the last attempt: a grant hands the task back to it.
        events.push(this.ev('task.held', task, owner.id, { cause: 'retries_exhausted', stepId: step.id, reason }, `${key}#held`));
        hold = { cause: 'retries_exhausted', stepId: step.id, reason, since: this.now };
        this.log.warn(`task ${task.id} waits for a person: ${reason}`, task.correlationId);
      }
      const state: TaskState = !input.recoverable ? 'failed' : exhausted ? 'suspended' : task.state;
      const now = this.now;
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

  async skipStep(raw: unknown): Promise<{ taskId: string; stepId: string }> {
    const input = parseInput(SkipStepInput, raw, 'step skip');
    return this.mutate('step.skip', input.idempotencyKey ?? `step.skip:${input.taskId}:${input.stepId}`, async () => {
      const task = this.requireTask(input.taskId);
      // Skipping the step that used its attempts is one of the person's answers to the hold.
      const answersHold = task.hold?.cause === 'retries_exhausted' && task.hold.stepId === input.stepId;
      if (!answersHold) this.requireStepsSettleable(task, input.by, 'skip a step');
      const step = this.queries.step(task.id, input.stepId);
      if (!step) throw notFound(`step of task ${task.id}`, input.stepId);
      assertStepTransition(task.id, step.id, step.status, 'skipped', 'skip it');
      const owner = this.ownerOf(input.owner);
      const events = [this.ev('step.skipped', task, input.by === 'person' ? null : owner.id, { stepId: step.id, reason: input.reason ?? null }, '')];
      if (answersHold) events.push(await this.release(task, owner));
      return { events, result: { taskId: task.id, stepId: step.id } };
    });
  }

  /**
   * A person lets a step try `attempts` more times (default 1) and waives its backoff.
   * A task held because that step used its attempts goes back to running, under the
   * caller, so the next start of the step runs.
   */
  async grantAttempts(raw: unknown): Promise<{ taskId: string; stepId: string; attempts: number; maxAttempts: number; state: TaskState }> {
    const input = parseInput(GrantAttemptsInput, raw, 'step grant');
    const pre = this.queries.step(input.taskId, input.stepId);
    const key = input.idempotencyKey ?? `step.grant:${input.taskId}:${input.stepId}:${pre?.attempts ?? 0}:${pre?.maxAttempts ?? 0}`;
    return this.mutate('step.grant', key, async () => {
      const task = this.requireTask(input.taskId);
      const step = this.queries.step(task.id, input.stepId);
      if (!step) throw notFound(`step of task ${task.id}`, input.stepId);
      const answersHold = task.hold?.cause === 'retries_exhausted' && task.hold.stepId === step.id;
      if (!answersHold) this.requireActive(task, `grant step ${step.id} more attempts`);
      if (step.status === 'completed' || step.status === 'skipped') {
        throw new WaypointError('illegal_transition', `Step ${step.id} of task ${task.id} is ${step.status}; it needs no more attempts.`, { taskId: task.id, stepId: step.id, status: step.status });
      }
      const attempts = input.attempts ?? 1;
      // Counted from what the step used, so a grant after the limit gives exactly `attempts` more runs.
      const maxAttempts = Math.max(step.maxAttempts, step.attempts) + attempts;
      const owner = this.ownerOf(input.owner);
      const events = [this.ev('step.attempts_granted', task, owner.id, { stepId: step.id, attempts, maxAttempts, reason: input.reason ?? null }, '')];
      if (answersHold) events.push(await this.release(task, owner));
      this.log.info(`step ${step.id} of task ${task.id} granted ${attempts} more attempt(s) (${maxAttempts} in all)`, task.correlationId);
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
    const held = (await this.eventLog.read({ taskId: task.id })).filter((e) => e.type === 'task.held').pop();
    const owner: LeaseOwner = held?.by ? { id: held.by } : answeredBy;
    return this.ev('task.resumed', task, owner.id, { owner, leaseTtlMs: this.defaultLeaseTtlMs, attempt: task.attempt + 1 }, '');
  }

  // ---------------------------------------------------------------------------
  // Checkpoints.

  async checkpoint(raw: unknown): Promise<{ taskId: string; checkpointId: string; filesChanged: number } & NotCapturedReport> {
    const input = parseInput(CheckpointInput, raw, 'checkpoint');
    const key = input.idempotencyKey ?? `checkpoint:${randomUUID()}`;
    return this.mutate('checkpoint', key, async () => {
      const task = this.requireTask(input.taskId);
      if (task.state === 'completed' || task.state === 'abandoned') {
        throw new WaypointError('illegal_transition', `Task ${task.id} is ${task.state}; no more checkpoints can be taken for it.`);
      }
      const stepId = input.stepId !== undefined ? input.stepId : (this.queries.steps(task.id).find((s) => s.status === 'in_progress')?.id ?? null);
      const { event, checkpoint, report } = await this.captureCheckpoint(task, input.kind ?? 'manual', stepId, input.label ?? null, input.dirty);
      // A scan for what others changed (no step's work) that found nothing is not a checkpoint
      // worth a row: nothing is recorded, and the answer names the checkpoint that still holds.
      if (input.stepId === null && checkpoint.filesChanged === 0 && checkpoint.parentId && !report.notCaptured) {
        return { events: [], result: { taskId: task.id, checkpointId: checkpoint.parentId, filesChanged: 0 } };
      }
      return { events: [event], result: { taskId: task.id, checkpointId: checkpoint.id, filesChanged: checkpoint.filesChanged, ...report } };
    });
  }

  // ---------------------------------------------------------------------------
  // Side effects: write-ahead intents under idempotency keys (see sideEffects.ts).

  /** `proceed` once the intent is durable; `already_done` or `in_doubt` from the ledger (see SideEffects.begin). */
  beginSideEffect(raw: unknown): Promise<{ taskId: string; key: string; decision: SideEffectDecision; result?: unknown; checkpointId?: string; attempt: number } & NotCapturedReport> {
    return this.sideEffects.begin(raw);
  }

  /** Records a side effect's outcome (see SideEffects.end). */
  endSideEffect(raw: unknown): Promise<{ taskId: string; key: string; state: SideEffect['status'] }> {
    return this.sideEffects.end(raw);
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

  async events(filter: { taskId?: string; afterSeq?: number; limit?: number } = {}): Promise<WaypointEvent[]> {
    if (filter.taskId) this.queries.task(filter.taskId);
    return this.eventLog.read(filter);
  }

  async resumeContext(taskId: string): Promise<ResumeContext> {
    const task = this.queries.task(taskId);
    const drift = this.opts.drift ? await this.opts.drift(task) : await this.drift(taskId).catch(() => null);
    const last = task.lastCheckpointId ? this.queries.checkpoint(task.lastCheckpointId) : null;
    // A fork's inheritance is read from the original's events, which outlive its deletion.
    const fork = task.forkedFrom ? forkInheritance(await this.eventLog.read({ taskId: task.forkedFrom.taskId }), task.forkedFrom.checkpointId) : null;
    return buildResumeContext(task, this.queries.steps(taskId), this.queries.sideEffects(taskId), last, drift, fork, this.queries.turns(taskId));
  }

  // ---------------------------------------------------------------------------
  // Workspace: diff, drift, rollback, storage, retention.

  private snapshots(): WorkspaceSnapshots {
    if (!this.workspaceSnapshots) throw new WaypointError('invalid_input', 'This store records checkpoints without workspace snapshots.');
    return this.workspaceSnapshots;
  }

  private requireCheckpoint(id: string): CheckpointMeta {
    const c = this.queries.checkpoint(id);
    if (!c) throw notFound('checkpoint', id);
    return c;
  }

  /** Changed paths between two checkpoints, or from a checkpoint to the workspace now, with line counts. */
  async diff(raw: unknown): Promise<{ from: string; to: string; changes: FileChangeWithLines[] }> {
    const input = parseInput(DiffInput, raw, 'diff');
    const ws = this.snapshots();
    const from = this.requireCheckpoint(input.from);
    const a = await ws.load(from);
    const b = input.to ? await ws.load(this.requireCheckpoint(input.to)) : await this.exclusive(() => ws.scanNow(this.latestCheckpoint()));
    return { from: from.id, to: input.to ?? 'workspace', changes: await ws.diff(a, b) };
  }

  /**
   * The workspace now, as a manifest, recording nothing. Incremental from the
   * latest checkpoint (unchanged size and mtime reuse its hashes), and serialized
   * with checkpoints and rollbacks like every scan. Callers that need both a diff
   * and `changesByOwner` scan once with this and pass the result on.
   */
  async scanWorkspace(): Promise<Manifest> {
    const ws = this.snapshots();
    return this.exclusive(() => ws.scanNow(this.latestCheckpoint()));
  }

  /** Files changed since the task's last checkpoint (by the person, or by an unfinished step). */
  async drift(taskId: string): Promise<DriftInfo> {
    const task = this.queries.task(taskId);
    const ws = this.snapshots();
    const head = task.lastCheckpointId ? this.queries.checkpoint(task.lastCheckpointId) : null;
    if (!head?.manifestRef || head.damaged) return { since: null, files: [] };
    const now = await this.exclusive(() => ws.scanNow(this.latestCheckpoint()));
    const changes = diffManifests(await ws.load(head), now);
    return { since: head.id, files: changes.map((c) => ({ path: c.path, status: c.status })) };
  }

  /**
   * Rolls the workspace back to a checkpoint (see Rollbacks.rollback): `preview` lists
   * what would change and writes nothing; `agent-only` reverts only the agent's changes.
   */
  rollback(raw: RollbackInput): Promise<RollbackResult> {
    return this.rollbacks.rollback(raw);
  }

  /** Records a hook-recorded agent's turn digest (see turns.ts). */
  recordTurn(raw: unknown): Promise<{ taskId: string; turn: number; recorded: boolean }> {
    return recordTurn(this.core, raw);
  }

  /** Undoes the task's last rollback by rolling back to the checkpoint taken just before it. */
  undoRollback(raw: unknown): Promise<RollbackResult> {
    return this.rollbacks.undoRollback(raw);
  }

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
  async forkTask(raw: ForkTaskInput): Promise<ForkResult> {
    const input = parseInput(ForkTaskInput, raw, 'task fork');
    if (input.plan) validatePlan(input.plan);
    return input.preview ? this.forkNow(input) : this.needingSpace('a fork', () => this.forkNow(input));
  }

  /** The checkpoint to fork from, its task and what a fork inherits, or a refusal saying why not. */
  private async forkSource(checkpointId: string): Promise<{ target: CheckpointMeta; original: Task; inheritance: ForkInheritance }> {
    const target = this.queries.checkpoint(checkpointId);
    if (!target) {
      const gone = this.queries.deletedCheckpointTask(checkpointId);
      if (gone) throw new WaypointError('not_found', `Checkpoint ${checkpointId} belonged to task ${gone}, which was deleted; nothing of it is left to fork from.`, { checkpointId, taskId: gone });
      throw notFound('checkpoint', checkpointId);
    }
    if (target.damaged) {
      throw new WaypointError('corrupt', `Checkpoint ${target.id} is damaged (${target.damaged}); a fork cannot start from it. Fork from an earlier checkpoint, or run 'waypoint verify' to see what was lost.`, { checkpointId: target.id });
    }
    if (!target.taskId) throw new WaypointError('invalid_input', `Checkpoint ${target.id} belongs to no task (it is workspace history); a fork starts from a task's checkpoint. Roll back to it instead.`, { checkpointId: target.id });
    if (!target.manifestRef) throw new WaypointError('invalid_input', `Checkpoint ${target.id} records no files (a metadata-only checkpoint); there is no workspace state to fork from.`, { checkpointId: target.id });
    const original = this.queries.findTask(target.taskId);
    if (!original) throw new WaypointError('not_found', `Checkpoint ${target.id} belonged to task ${target.taskId}, which was deleted; nothing of it is left to fork from.`, { checkpointId: target.id });
    const inheritance = forkInheritance(await this.eventLog.read({ taskId: original.id }), target.id);
    if (!inheritance) throw new WaypointError('corrupt', `The history of task ${original.id} no longer holds checkpoint ${target.id}'s record; a fork cannot say what it inherits.`, { checkpointId: target.id });
    return { target, original, inheritance };
  }

  private async forkNow(input: z.output<typeof ForkTaskInput>): Promise<ForkResult> {
    const ws = this.snapshots();
    const key = input.idempotencyKey ?? `task.fork:${randomUUID()}`;
    const owner = this.ownerOf(input.owner);
    // A repeat after a crash before the end finds the task the first call made (keyed on its own), not a second fork.
    const begun = (): { result: ForkResult; seq: number } | null => {
      const b = this.queries.idempotent(`${key}#task`);
      return b ? { result: b.result as ForkResult, seq: b.seq } : null;
    };
    return this.runner.once<ForkResult>('task.fork', key, async () => {
      const { target, original, inheritance } = await this.forkSource(input.checkpointId);
      // Loading the manifest checks it: a checkpoint whose objects are gone is refused here, before anything is recorded.
      const targetManifest = await ws.load(target);
      const scannedAtMs = Date.now(); // before the scan: what changed after it is re-checked before it is replaced
      const current = await ws.scanNow(this.latestCheckpoint());
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
        data: { goal, title, agent: input.agent ?? original.agent, plan: steps, owner, leaseTtlMs: input.leaseTtlMs ?? this.defaultLeaseTtlMs, forkedFrom },
      };
      // 1. The task, the before state and the plan are durable before any file changes (as a rollback's are).
      const { event: preEvent, checkpoint: pre } = await this.captureCheckpoint(task, 'pre_rollback', null, `before forking from ${target.id}`);
      const planRef = await ws.savePlan(plan);
      const rollbackId = newId('r');
      await this.runner.record([
        started,
        { ...preEvent, key: `${key}#pre` },
        this.ev('rollback.started', task, null, { rollbackId, targetCheckpointId: target.id, preRollbackCheckpointId: pre.id, paths: null, mode: 'all', planRef }, `${key}#start`),
      ]);
      // 2. Apply; a stop part-way is recorded as a failed rollback of the fork, which its Undo reverses.
      let applied: Awaited<ReturnType<typeof ws.apply>>;
      try {
        applied = await ws.apply(plan);
      } catch (e) {
        await ws.sweepTemps(plan).catch((err: unknown) => this.log.warn(`[fork] could not remove its temp files: ${errorMessage(err)}`, corr));
        const note = `The fork from ${target.id} stopped part-way (${errorMessage(e)}); the workspace is partly restored. Everything it held before is in checkpoint ${pre.id}: undo the fork's rollback (waypoint rollback --task ${taskId} --undo) to return to it.`;
        await this.runner.record([this.ev('rollback.done', task, null, { rollbackId, outcome: 'failed', filesWritten: 0, filesRemoved: 0, recovered: false, abandonedSteps: [], conflicts: [], note }, `${key}#failed`)]).catch(() => undefined);
        throw new WaypointError('io', note, { taskId, preRollbackCheckpointId: pre.id });
      }
      // 3. The outcome, then the fork's base: the workspace as the checkpoint left it, branching from it.
      const done = this.ev('rollback.done', task, null, { rollbackId, outcome: 'applied', filesWritten: applied.written.length, filesRemoved: applied.removed.length, recovered: false, abandonedSteps: [], conflicts: applied.conflicts.map((c) => c.path), note: `fork of ${original.id} from ${target.id}` }, `${key}#done`);
      const { event: baseEvent, checkpoint: baseCp, report } = await this.captureCheckpoint({ ...task, lastCheckpointId: target.id }, 'task_base', null, `forked from ${target.label ?? target.id}`);
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
      this.log.info(`task ${taskId} forked from task ${original.id} at ${target.id}: ${result.filesWritten} written, ${result.filesRemoved} removed`, corr);
      return { result, events: [done, { ...baseEvent, key: `${key}#base` }] };
    }, { repeat: begun });
  }

  /** The paths changed since checkpoint `fromId`, split by who changed them (see Rollbacks.changesByOwner). */
  changesByOwner(taskId: string, fromId: string, current?: Manifest): Promise<{ agent: Set<string>; person: Set<string> }> {
    return this.rollbacks.changesByOwner(taskId, fromId, current);
  }

  /** Finishes rollbacks that a crash interrupted (see Rollbacks.recoverRollbacks); a sentence per rollback. */
  recoverRollbacks(): Promise<string[]> {
    return this.rollbacks.recoverRollbacks();
  }

  /** Undoing the review commit that completed a task reopens it for review (see reopen.ts). */
  reopenTask(raw: unknown): Promise<ReopenResult> {
    return reopenTask(this.core, raw);
  }

  /** Applies a review whole or not at all (see ReviewApplies.applyReviewEdits). */
  applyReviewEdits<C extends { sha: string | null }>(
    input: { taskId: string; edits: readonly WorkspaceEdit[]; idempotencyKey?: string; finish?: FinishTask },
    commit: () => Promise<C>,
  ): Promise<ReviewApplyResult<C>> {
    return this.reviewApplies.applyReviewEdits(input, commit);
  }

  /** Review applies a crash cut short after their plan was durable (see ReviewApplies). */
  unfinishedReviewApplies(): { key: string; taskId: string; data: EventDataOf<'review.apply_started'> }[] {
    return this.reviewApplies.unfinishedReviewApplies();
  }

  /** Finishes review applies a crash interrupted (see ReviewApplies.recoverReviewApplies). */
  recoverReviewApplies(): Promise<string[]> {
    return this.reviewApplies.recoverReviewApplies();
  }

  private get reviewApplies(): ReviewApplies {
    this.reviewAppliesCache ??= new ReviewApplies(this.core);
    return this.reviewAppliesCache;
  }
  private reviewAppliesCache: ReviewApplies | undefined;

  // Rollback and review apply: see rollbacks.ts and reviewApply.ts, over this core.

  /** What the split-out concerns need of the engine; built on first use, like upkeep. */
  private get core(): EngineCore {
    this.coreCache ??= {
      eventLog: this.eventLog,
      projection: this.projection,
      queries: this.queries,
      log: this.log,
      workspace: this.workspace,
      storeDir: this.storeDir,
      workspaceSnapshots: this.workspaceSnapshots,
      exclusive: (fn) => this.exclusive(fn),
      once: (op, key, body, opts) => this.runner.once(op, key, body, opts),
      record: (batch) => this.runner.record(batch),
      needingSpace: (what, fn) => this.needingSpace(what, fn),
      snapshots: () => this.snapshots(),
      requireTask: (taskId) => this.requireTask(taskId),
      requireActive: (task, action) => this.requireActive(task, action),
      ownerOf: (owner) => this.ownerOf(owner),
      now: () => this.now,
      mutate: (op, key, body, opts) => this.mutate(op, key, body, opts),
      requireCheckpoint: (id) => this.requireCheckpoint(id),
      latestCheckpoint: () => this.latestCheckpoint(),
      captureCheckpoint: (task, kind, stepId, label, dirty) => this.captureCheckpoint(task, kind, stepId, label, dirty),
      ev: (type, task, by, data, key) => this.ev(type, task, by, data, key),
    };
    return this.coreCache;
  }
  private coreCache: EngineCore | undefined;

  private get leases(): Leases {
    this.leasesCache ??= new Leases(this.core);
    return this.leasesCache;
  }
  private leasesCache: Leases | undefined;

  private get sideEffects(): SideEffects {
    this.sideEffectsCache ??= new SideEffects(this.core);
    return this.sideEffectsCache;
  }
  private sideEffectsCache: SideEffects | undefined;

  private get rollbacks(): Rollbacks {
    this.rollbacksCache ??= new Rollbacks(this.core);
    return this.rollbacksCache;
  }
  private rollbacksCache: Rollbacks | undefined;

  private get terminalCommands(): TerminalCommands {
    this.terminalCommandsCache ??= new TerminalCommands(this.core);
    return this.terminalCommandsCache;
  }
  private terminalCommandsCache: TerminalCommands | undefined;

  /** A terminal command starts under a running task: its `command_start` checkpoint and record (see terminalCommands.ts). */
  beginCommand(raw: BeginCommandInput): ReturnType<TerminalCommands['begin']> {
    return this.terminalCommands.begin(raw);
  }

  /** The command ended: its `command_end` checkpoint, exit code and the files it changed, created or deleted. */
  endCommand(raw: EndCommandInput): Promise<CommandEnd> {
    return this.terminalCommands.end(raw);
  }

  /** The day's workspace history (see history.ts). */
  get history(): WorkspaceHistory {
    this.historyCache ??= new WorkspaceHistory(this.core, async () => {
      const r = await this.gc({});
      return { blobsDeleted: r.blobsDeleted, bytesFreed: r.bytesFreed };
    });
    return this.historyCache;
  }
  private historyCache: WorkspaceHistory | undefined;

  // Storage report, retention and garbage collection, verify and repair: see storageUpkeep.ts.

  /** Built on first use, so the constructor (and what it sets up) stays as it is. */
  private get upkeep(): StorageUpkeep {
    this.upkeepCache ??= new StorageUpkeep({
      eventLog: this.eventLog,
      projection: this.projection,
      queries: this.queries,
      log: this.log,
      once: (op, key, body, opts) => this.runner.once(op, key, body, opts),
      workspaceSnapshots: this.workspaceSnapshots,
      now: () => this.now,
      exclusive: (fn) => this.exclusive(fn),
      snapshots: () => this.snapshots(),
      reviewApplyPlanRefs: () => this.unfinishedReviewApplies().map((r) => r.data.planRef),
    });
    return this.upkeepCache;
  }
  private upkeepCache: StorageUpkeep | undefined;

  /** Bytes per task (unique to it, and shared with others) and in total, deduplicated. */
  storage(): Promise<StorageReport> {
    return this.upkeep.storage();
  }

  /** Metrics (see stats.ts); with `taskId`, of that task only (an unknown one is refused). */
  async stats(filter: StatsFilter = {}): Promise<Stats> {
    if (filter.taskId) this.queries.task(filter.taskId);
    return computeStats(
      {
        tasks: this.queries.tasks(),
        steps: filter.taskId ? this.queries.steps(filter.taskId) : this.queries.allSteps(),
        checkpoints: this.queries.checkpoints(filter.taskId),
        sideEffects: filter.taskId ? this.queries.sideEffects(filter.taskId) : this.queries.allSideEffects(),
        // The events hold what the projections overwrite (each attempt, each interruption); older ones are read from the segments.
        events: await this.eventLog.read(filter.taskId ? { taskId: filter.taskId } : {}),
        storeBytes: this.workspaceSnapshots ? this.workspaceSnapshots.diskBytes() : null,
        now: this.now,
      },
      filter,
    );
  }

  /** Applies the retention policy and collects garbage (see StorageUpkeep.gc). */
  gc(raw: RetentionInput = {}): Promise<GcResult> {
    return this.upkeep.gc(raw);
  }

  /** Proves the store whole, repairing what it can with `repair` (see StorageUpkeep.verify). */
  verify(raw: unknown = {}): Promise<VerifyReport> {
    return this.upkeep.verify(raw);
  }

  async rebuild(): Promise<void> {
    await this.needingSpace('a rebuild', () => this.exclusive(async () => this.projection.rebuild(await this.eventLog.read())));
  }
}

function nextAdhocId(steps: readonly Step[]): string {
  const ids = new Set(steps.map((s) => s.id));
  let n = steps.length + 1;
  while (ids.has(`s${n}`)) n++;
  return `s${n}`;
}

