/**
 * What the concerns split out of engine.ts (rollbacks.ts, reviewApply.ts) need of the
 * engine: its store and projection reader, its one serialized runner, and the few
 * helpers every writing operation shares (checkpoint capture, task events, the
 * read-only and full-disk guard). The engine builds one of these over itself; the
 * concerns hold no state of their own.
 */
import type { Logger } from '../log';
import type { CheckpointKind, CheckpointMeta, EventDataOf, EventType, Task } from '../model/schema';
import type { EventStore, NewEvent } from '../store/eventStore';
import type { NotCapturedReport } from './engine';
import type { Queries } from './queries';
import type { WorkspaceSnapshots } from './workspaceSnapshots';

export interface EngineCore {
  readonly store: EventStore;
  readonly queries: Queries;
  readonly log: Logger;
  /** The workspace root (named in full-disk errors). */
  readonly workspace: string;
  /** Null for a store that records checkpoints as metadata only. */
  readonly workspaceSnapshots: WorkspaceSnapshots | null;
  /** Runs fn after every earlier mutation's critical section (the engine's one runner). */
  exclusive<T>(fn: () => Promise<T>): Promise<T>;
  /** Refuses at once on a read-only store; tells a full disk as what needed space where. */
  needingSpace<R>(what: string, fn: () => Promise<R>): Promise<R>;
  /** The workspace snapshots, or a clear error for a metadata-only store. */
  snapshots(): WorkspaceSnapshots;
  requireTask(taskId: string): Task;
  requireCheckpoint(id: string): CheckpointMeta;
  /** The workspace's newest intact checkpoint: the next scan's stat cache. */
  latestCheckpoint(): CheckpointMeta | null;
  /** Captures a checkpoint and returns its (not yet committed) event. */
  captureCheckpoint(task: Task | null, kind: CheckpointKind, stepId: string | null, label: string | null, dirty?: readonly string[]): Promise<{ event: NewEvent; checkpoint: CheckpointMeta; report: NotCapturedReport }>;
  /** One idempotent mutation: a repeat of the key returns the recorded result and appends nothing. */
  mutate<R>(op: string, key: string, prepare: () => Promise<{ events: NewEvent[]; result: R }> | { events: NewEvent[]; result: R }): Promise<R>;
  /** The engine's clock (the store's). */
  now(): number;
  /** An event about a task; its payload is validated against the type's schema at commit. */
  ev<T extends EventType>(type: T, task: Task, by: string | null, data: EventDataOf<T>, key: string): NewEvent;
}
