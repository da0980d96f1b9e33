/**
 * What the concerns split out of engine.ts (rollbacks.ts, reviewApply.ts) need of the
 * engine: its log, its projection and the reader over it, its one serialized runner, and the few
 * helpers every writing operation shares (checkpoint capture, task events, the
 * read-only and full-disk guard). The engine builds one of these over itself; the
 * concerns hold no state of their own.
 */
import type { Logger } from '../log';
import type { CheckpointKind, CheckpointMeta, EventDataOf, EventType, LeaseOwner, Task } from '../model/schema';
import type { EventLog, NewEvent, Projection } from '../store/eventLog';
import type { OnceOptions, Outcome } from './runner';
import type { NotCapturedReport } from './engine';
import type { Queries } from './queries';
import type { WorkspaceSnapshots } from './workspaceSnapshots';

export interface EngineCore {
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
  /** Runs fn after every earlier mutation's critical section (the engine's one runner). */
  exclusive<T>(fn: () => Promise<T>): Promise<T>;
  /**
   * The one runner every writing operation goes through (OperationRunner.once): a
   * repeat of `key` is answered from the ledger; otherwise `body` runs, its events are
   * appended and folded into the projection, and the answer waits for durability.
   */
  once<R>(op: string, key: string, body: () => Promise<Outcome<R>> | Outcome<R>, opts?: OnceOptions<R>): Promise<R>;
  /** Appends a phase of an operation inside `once` (a plan durable before any file changes) and waits until it is durable. */
  record(batch: readonly NewEvent[]): Promise<void>;
  /** Refuses at once on a read-only store; tells a full disk as what needed space where. */
  needingSpace<R>(what: string, fn: () => Promise<R>): Promise<R>;
  /** The workspace snapshots, or a clear error for a metadata-only store. */
  snapshots(): WorkspaceSnapshots;
  requireTask(taskId: string): Task;
  /** Refuses an action on a task that is not active (naming the way forward). */
  requireActive(task: Task, action: string): void;
  /** The owner a call names, or the engine's default one. */
  ownerOf(owner: LeaseOwner | undefined): LeaseOwner;
  now(): number;
  /** `once` behind the read-only and full-disk guard: how an operation with no phases of its own runs. */
  mutate<R>(op: string, key: string, body: () => Promise<Outcome<R>> | Outcome<R>, opts?: OnceOptions<R>): Promise<R>;
  requireCheckpoint(id: string): CheckpointMeta;
  /** The workspace's newest intact checkpoint: the next scan's stat cache. */
  latestCheckpoint(): CheckpointMeta | null;
  /** Captures a checkpoint and returns its (not yet committed) event. */
  captureCheckpoint(task: Task | null, kind: CheckpointKind, stepId: string | null, label: string | null, dirty?: readonly string[]): Promise<{ event: NewEvent; checkpoint: CheckpointMeta; report: NotCapturedReport }>;
  /** An event about a task; its payload is validated against the type's schema at commit. */
  ev<T extends EventType>(type: T, task: Task, by: string | null, data: EventDataOf<T>, key: string): NewEvent;
}
