/**
 * What the concerns split out of engine.ts (rollbacks.ts, reviewApply.ts) need of the
 * engine: its log, its projection and the reader over it, its one serialized runner, and the few
 * helpers every writing operation shares (checkpoint capture, task events, the
 * read-only and full-disk guard). The engine builds one of these over itself; the
 * concerns hold no state of their own.
 */
import type { Logger } from '../log';
import type { CheckpointKind, CheckpointMeta, EventDataOf, EventType, Task } from '../model/schema';
import type { AppendResult, EventLog, NewEvent, Projection } from '../store/eventLog';
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
  /** Null for a store that records checkpoints as metadata only. */
  readonly workspaceSnapshots: WorkspaceSnapshots | null;
  /** Runs fn after every earlier mutation's critical section (the engine's one runner). */
  exclusive<T>(fn: () => Promise<T>): Promise<T>;
  /**
   * Appends a batch to the log and folds it into the projection, inside the runner,
   * so the next call validates against it; `durable` settles when the log has it.
   */
  commit(batch: readonly NewEvent[]): Promise<AppendResult>;
  /** commit, then wait until the batch is durable: for a batch nothing answers before. */
  record(batch: readonly NewEvent[]): Promise<void>;
  /** Refuses at once on a read-only store; tells a full disk as what needed space where. */
  needingSpace<R>(what: string, fn: () => Promise<R>): Promise<R>;
  /** The workspace snapshots, or a clear error for a metadata-only store. */
  snapshots(): WorkspaceSnapshots;
  requireTask(taskId: string): Task;
  requireCheckpoint(id: string): CheckpointMeta;
  /** The workspace's newest intact checkpoint: the next scan's stat cache. */
  latestCheckpoint(): CheckpointMeta | null;
  /** Captures a checkpoint and returns its (not yet committed) event. */
  captureCheckpoint(task: Task | null, kind: CheckpointKind, stepId: string | null, label: string | null): Promise<{ event: NewEvent; checkpoint: CheckpointMeta; report: NotCapturedReport }>;
  /** An event about a task; its payload is validated against the type's schema at commit. */
  ev<T extends EventType>(type: T, task: Task, by: string | null, data: EventDataOf<T>, key: string): NewEvent;
}
