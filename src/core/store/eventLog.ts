import type { WaypointError } from '../model/errors';
import type { EventDataOf, EventType, Task, TaskState, WaypointEvent } from '../model/schema';
import type { Db } from './db';
import type { BlobStore } from '../snapshot/blobStore';

/**
 * The store seam: what the engine needs of a backend, so the embedded
 * sql.js store and a shared PostgreSQL database can stand behind the same engine.
 *
 * Two halves, a snapshot and the deltas since it:
 *
 * - An EventLog is the durable truth: an append-only, per-workspace sequence of
 *   events, appended only by the writer holding the workspace's current fencing
 *   epoch, readable from any seq, observable by subscribers. Embedded: the journal
 *   segments in `.waypoint/` (plus the exported database generations). PostgreSQL:
 *   an events table keyed by (workspace, seq), with the idempotency key unique per
 *   workspace and the epoch held in the workspace's row.
 * - The projections (tasks, steps, checkpoints, leases, ledger) are derived from the
 *   log by the one projection code (`projections.ts`) into the writer's in-memory
 *   sql.js database, so the engine validates every operation synchronously against
 *   them inside its one serialized runner. A ProjectionReader is the asynchronous
 *   read side for everyone else — surfaces, the CLI, and readers on other machines
 *   (`tasks --all`), which cannot share that memory.
 *
 * This file declares the contract only; implementations live beside it
 * (`eventStore.ts` for embedded, `postgres/` for the team store).
 */

/** Where a workspace's log lives: one store per workspace folder, on one machine. */
export interface WorkspaceIdentity {
  /** Stable id kept in `.waypoint/` (survives renames and moves of the folder). */
  id: string;
  /** The machine's name (`WAYPOINT_MACHINE` overrides the host name). */
  machine: string;
  /** The folder's absolute path on that machine (for display; not an identity). */
  path: string;
}

export interface ReadFilter {
  taskId?: string;
  /** Events with seq > afterSeq. */
  afterSeq?: number;
  limit?: number;
}

export interface Disposable {
  dispose(): void;
}

export interface AppendResult {
  /** The events as sequenced (seq and ts assigned by the log). */
  events: WaypointEvent[];
  /**
   * Settles when the events are durable (fsync'd journal record; committed
   * PostgreSQL transaction). A caller must not report success before it resolves.
   * The embedded log resolves `append` at once and pipelines durability (group
   * commit); a remote log may resolve `append` only after the commit, with
   * `durable` already settled.
   */
  durable: Promise<void>;
}

export interface EventLog {
  readonly backend: 'embedded' | 'postgresql';
  readonly workspace: WorkspaceIdentity;
  /** The highest seq this writer has appended or read (its projection's position). */
  readonly lastSeq: number;
  /**
   * Why this log refuses every append (opened read-only, e.g. on a full disk), or
   * null. The engine refuses a writing operation at once with this reason.
   */
  readonly readOnlyReason: string | null;
  /** What opening the log had to repair or set aside, for surfaces to tell the person. */
  readonly warnings: readonly string[];
  /**
   * This writer's fencing epoch: above every epoch that wrote before it took the
   * workspace. An append by a writer whose epoch has been superseded is refused
   * (`lost_ownership`) and nothing of it becomes part of the history.
   */
  readonly epoch: number;
  /**
   * The epoch of this process's owner lock in `.waypoint/`, which the MCP discovery
   * file is paired with, when it differs from the log's fencing epoch (the team store
   * fences in the database; the lock still decides the local owner). Absent: `epoch`.
   */
  readonly ownerEpoch?: number;
  /**
   * Appends one batch atomically and in order, under this writer's epoch; events
   * whose idempotency key the workspace already holds are the caller's to detect
   * first (the engine answers a repeated call from the ledger), and a duplicate
   * that slips through (a retry after a dropped connection) is refused by the log
   * rather than recorded twice.
   */
  append(batch: readonly NewEventLike[]): Promise<AppendResult>;
  /**
   * Settles once every event up to `seq` is durable: a repeated call answered from
   * the ledger waits for the original's durability before it answers.
   */
  waitDurable(seq: number): Promise<void>;
  /** Events in seq order. */
  read(filter?: ReadFilter): Promise<WaypointEvent[]>;
  /** Events as they become durable: this writer's own, and (for a shared log) other writers'. */
  subscribe(listener: (events: readonly WaypointEvent[]) => void): Disposable;
  /** Fired once if another writer took the workspace (this writer is then read-only). */
  onDidLoseOwnership(listener: (e: WaypointError) => void): Disposable;
  /**
   * Throws `lost_ownership` once this writer is known to have been superseded, so a
   * process that wakes from a stall finds out before it answers from an outdated
   * view. Synchronous: it checks what the writer can see at once (the embedded lock
   * file; a remote log's last fencing answer), and `append` remains the real fence.
   */
  assertOwned(): void;
  /**
   * For a log that keeps its own copy of the projection (the team store's tables): the
   * tables where that copy differs from the writer's projection, once every event
   * folded so far is durable. `verify` reports them with the projection's own check.
   */
  verifyStoreProjection?(): Promise<ProjectionCheck['differences']>;
  /** Exports, flushes and releases what this writer holds (the engine closes the projection after it). */
  close(): Promise<void>;
}

/**
 * The writer's projection: the in-memory sql.js database the one projection code
 * (`projections.ts`) folds events into, fed by whichever EventLog the engine has
 * (`SqlProjection` in projection.ts). The engine appends a batch to the log, then
 * applies the sequenced events here before its runner lets the next call validate.
 */
export interface Projection {
  /** The highest seq folded in. */
  readonly lastSeq: number;
  /** The database the engine's `Queries` reads, synchronously. */
  readonly db: Db;
  /** Applies events in seq order atomically; those at or below lastSeq are skipped, a gap is refused. */
  apply(events: readonly WaypointEvent[]): void;
  /** Rebuilds every table from the events alone, in place. */
  rebuild(events: readonly WaypointEvent[]): void;
  /** Folds the events into a scratch database and names the tables that differ from these. */
  verify(events: readonly WaypointEvent[]): Promise<ProjectionCheck>;
  /** Frees it; closing twice does nothing (the embedded log closes it with itself). */
  close(): void;
}

export interface ProjectionCheck {
  ok: boolean;
  events: number;
  differences: { table: string; live: number; rebuilt: number; firstDiff: string | null }[];
}

/** What an engine runs on: one log and the projection it feeds (the embedded store opens both from `.waypoint/`). */
export interface StoreBackend {
  log: EventLog;
  projection: Projection;
  /** The read side; without one the engine answers from the projection (EmbeddedProjectionReader). */
  reader?: ProjectionReader;
  /**
   * A shared store's copy of checkpoints' objects (postgres/objectUpload.ts): the engine
   * starts it with its local blob store once open, and closes it before the log.
   */
  startObjectUpload?: (blobs: BlobStore) => ObjectUploader;
}

/** What the engine holds of a running object upload. */
export interface ObjectUploader {
  /** Resolves once every checkpoint recorded so far is uploaded. */
  idle(): Promise<void>;
  /** Waits up to `drainMs` for what is owed, then stops; the rest is uploaded by the next run. */
  close(drainMs?: number): Promise<void>;
}

/**
 * One event to append, before the log gives it a seq and a timestamp. `data` is
 * validated against the type's schema when it is sequenced; `op` and `result` ride on
 * the first event of an idempotent call (the ledger answers a repeat from them).
 */
export interface NewEvent<T extends EventType = EventType> {
  type: T;
  taskId: string | null;
  corr: string | null;
  key: string;
  by: string | null;
  data: EventDataOf<T>;
  op?: string;
  result?: unknown;
}

/** The shape appended, as the contract first named it (kept for the PostgreSQL log). */
export type NewEventLike = NewEvent;

/** One row of a listing across workspaces (`waypoint tasks --all`). */
export interface TaskListing {
  workspace: WorkspaceIdentity;
  task: Pick<Task, 'id' | 'title' | 'goal' | 'agent' | 'state' | 'attempt' | 'createdAt' | 'updatedAt'>;
}

export interface TaskListFilter {
  /** Every workspace in the store (a shared store), or only this one. */
  allWorkspaces?: boolean;
  states?: readonly TaskState[];
  limit?: number;
}

/**
 * The asynchronous read side. Embedded: answered from the owner's sql.js
 * projections. PostgreSQL: from summary tables kept in the same transaction as the
 * events, plus, for one task's detail, its workspace's events replayed.
 */
export interface ProjectionReader {
  listTasks(filter?: TaskListFilter): Promise<TaskListing[]>;
  getTask(taskId: string): Promise<Task | null>;
  /** Events of one task, in order (for the timeline, events view and review elsewhere). */
  taskEvents(taskId: string): Promise<WaypointEvent[]>;
}
