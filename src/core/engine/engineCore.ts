/**
 * What every concern of the engine (tasks, steps, fork, rollbacks, review apply,
 * side effects, leases, commands, history) works over: the store (its log, the
 * projection and the reader over it), the one runner, checkpoint capture, and the
 * refusals every writing operation shares. Built once by the engine, before any
 * concern; the concerns hold no state of their own.
 *
 * One way to run an operation: `run` (a write, idempotent by key, behind the
 * read-only and full-disk guard). A write recorded in phases (a rollback's plan
 * durable before any file changes) records each earlier phase with `record` inside
 * its `run`; a read that must not see a half-done write (a scan) goes through
 * `exclusive`.
 */
import { WaypointError, errorMessage } from '../model/errors';
import type { CheckpointKind, CheckpointMeta, EventDataOf, EventType, LeaseOwner, Task } from '../model/schema';
import { ACTIVE_TASK_STATES } from '../model/stateMachine';
import { notFound } from '../model/errors';
import type { Logger } from '../log';
import type { EventLog, NewEvent, Projection } from '../store/eventLog';
import type { CheckpointCapture, NotCapturedReport } from './checkpointCapture';
import { isNoSpace } from './noSpace';
import type { Queries } from '../store/queries';
import type { RetryPolicyInput } from './retryPolicy';
import type { OnceOptions, OperationRunner, Outcome } from './runner';
import type { WorkspaceSnapshots } from './workspaceSnapshots';

export interface RunOptions<R> extends OnceOptions<R> {
  /**
   * What the operation needs space for, as a full disk names it ("No space left for
   * a rollback"); the operation's name by default. `false` runs it without the
   * guard: a call answered from the ledger even on a store opened read-only (a side
   * effect's repeat), or one that writes nothing (a preview).
   */
  space?: string | false;
}

export interface EngineCoreParts {
  eventLog: EventLog;
  projection: Projection;
  queries: Queries;
  runner: OperationRunner;
  checkpoints: CheckpointCapture;
  log: Logger;
  workspace: string;
  storeDir: string;
  workspaceSnapshots: WorkspaceSnapshots | null;
  clock: () => number;
  defaultOwner: LeaseOwner;
  defaultLeaseTtlMs: number;
  /** The retry policy of tasks started without one of their own. */
  retry: RetryPolicyInput | undefined;
}

export class EngineCore {
  /** The durable log (embedded journal or PostgreSQL); reads of history go here. */
  readonly eventLog: EventLog;
  /** The projection the log feeds; `queries` reads it. */
  readonly projection: Projection;
  readonly queries: Queries;
  readonly log: Logger;
  /** The workspace root (named in full-disk errors). */
  readonly workspace: string;
  /** The store directory (its own-writes list: see ownWrites.ts). */
  readonly storeDir: string;
  /** Null for a store that records checkpoints as metadata only. */
  readonly workspaceSnapshots: WorkspaceSnapshots | null;
  readonly defaultOwner: LeaseOwner;
  readonly defaultLeaseTtlMs: number;
  readonly retry: RetryPolicyInput | undefined;
  readonly checkpoints: CheckpointCapture;
  private readonly runner: OperationRunner;
  private readonly clock: () => number;

  constructor(parts: EngineCoreParts) {
    this.eventLog = parts.eventLog;
    this.projection = parts.projection;
    this.queries = parts.queries;
    this.log = parts.log;
    this.workspace = parts.workspace;
    this.storeDir = parts.storeDir;
    this.workspaceSnapshots = parts.workspaceSnapshots;
    this.defaultOwner = parts.defaultOwner;
    this.defaultLeaseTtlMs = parts.defaultLeaseTtlMs;
    this.retry = parts.retry;
    this.checkpoints = parts.checkpoints;
    this.runner = parts.runner;
    this.clock = parts.clock;
  }

  now(): number {
    return this.clock();
  }

  /**
   * The one way an operation runs (OperationRunner.once): a repeat of `key` is
   * answered from the ledger; otherwise `body` runs, its events are appended and
   * folded into the projection, and the answer waits for durability. Refused at
   * once on a store opened read-only; a full disk met on the way is told as what
   * needed space where (not a bare ENOSPC).
   */
  run<R>(op: string, key: string, body: () => Promise<Outcome<R>> | Outcome<R>, opts: RunOptions<R> = {}): Promise<R> {
    const { space, ...once } = opts;
    const go = (): Promise<R> => this.runner.once(op, key, body, once);
    return space === false ? go() : this.needingSpace(space ?? op, go);
  }

  /** Appends a phase of an operation inside `run` (a plan durable before any file changes) and waits until it is durable. */
  record(batch: readonly NewEvent[]): Promise<void> {
    return this.runner.record(batch);
  }

  /** Runs fn after every earlier operation's critical section: a read that must not see a half-done write. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    return this.runner.exclusive(fn);
  }

  /** Settles when every operation queued so far has left its critical section. */
  idle(): Promise<void> {
    return this.runner.idle();
  }

  /** The guard of `run`, for an operation whose writes are not one `run` (a rebuild). */
  async needingSpace<R>(what: string, fn: () => Promise<R>): Promise<R> {
    const readOnly = this.eventLog.readOnlyReason;
    if (readOnly !== null) throw new WaypointError('io', readOnly);
    try {
      return await fn();
    } catch (e) {
      if (!isNoSpace(e)) throw e;
      throw new WaypointError('io', `No space left for ${what}: ${errorMessage(e)}. Waypoint writes its store in ${this.storeDir} and restored files in ${this.workspace}; free space on that disk and try again.`, { what });
    }
  }

  /** The workspace snapshots, or a clear error for a metadata-only store. */
  snapshots(): WorkspaceSnapshots {
    if (!this.workspaceSnapshots) throw new WaypointError('invalid_input', 'This store records checkpoints without workspace snapshots.');
    return this.workspaceSnapshots;
  }

  requireTask(taskId: string): Task {
    return this.queries.task(taskId);
  }

  requireCheckpoint(id: string): CheckpointMeta {
    const c = this.queries.checkpoint(id);
    if (!c) throw notFound('checkpoint', id);
    return c;
  }

  /** Refuses an action on a task that is not active (naming the way forward). */
  requireActive(task: Task, action: string): void {
    if (!ACTIVE_TASK_STATES.includes(task.state)) {
      throw new WaypointError(
        'illegal_transition',
        `Task ${task.id} is ${task.state}; cannot ${action}. ${task.state === 'interrupted' || task.state === 'suspended' ? 'Resume it first.' : ''}`.trim(),
        { taskId: task.id, state: task.state, action },
      );
    }
  }

  /** The owner a call names, or the engine's default one. */
  ownerOf(owner: LeaseOwner | undefined): LeaseOwner {
    return owner ?? this.defaultOwner;
  }

  /** The workspace's newest intact checkpoint: the next scan's stat cache. */
  latestCheckpoint(): CheckpointMeta | null {
    return this.checkpoints.latest();
  }

  /** Captures a checkpoint and returns its (not yet committed) event. */
  captureCheckpoint(task: Task | null, kind: CheckpointKind, stepId: string | null, label: string | null, dirty?: readonly string[]): Promise<{ event: NewEvent; checkpoint: CheckpointMeta; report: NotCapturedReport }> {
    return this.checkpoints.capture(task, kind, stepId, label, dirty);
  }

  /** An event about a task; its payload is validated against the type's schema at commit. */
  ev<T extends EventType>(type: T, task: Task, by: string | null, data: EventDataOf<T>, key: string): NewEvent {
    return { type, taskId: task.id, corr: task.correlationId, by, data, key } as NewEvent;
  }
}
