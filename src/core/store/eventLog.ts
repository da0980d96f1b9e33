import type { WaypointError } from '../model/errors';
import type { Task, TaskState, WaypointEvent } from '../model/schema';

/**
 * The store seam (issue 16): what the engine needs of a backend, so the embedded
 * sql.js store and a shared PostgreSQL database can stand behind the same engine.
 *
 * Two halves, as in seed 004's "snapshot + deltas":
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
   * This writer's fencing epoch: above every epoch that wrote before it took the
   * workspace. An append by a writer whose epoch has been superseded is refused
   * (`lost_ownership`) and nothing of it becomes part of the history.
   */
  readonly epoch: number;
  /**
   * Appends one batch atomically and in order, under this writer's epoch; events
   * whose idempotency key the workspace already holds are the caller's to detect
   * first (the engine answers a repeated call from the ledger), and a duplicate
   * that slips through (a retry after a dropped connection) is refused by the log
   * rather than recorded twice.
   */
  append(batch: readonly NewEventLike[]): Promise<AppendResult>;
  /** Events in seq order. */
  read(filter?: ReadFilter): Promise<WaypointEvent[]>;
  /** Events as they become durable: this writer's own, and (for a shared log) other writers'. */
  subscribe(listener: (events: readonly WaypointEvent[]) => void): Disposable;
  /** Fired once if another writer took the workspace (this writer is then read-only). */
  onDidLoseOwnership(listener: (e: WaypointError) => void): Disposable;
  close(): Promise<void>;
}

/** The shape appended (the engine's NewEvent); declared structurally so this file imports no implementation. */
export interface NewEventLike {
  type: WaypointEvent['type'];
  taskId: string | null;
  corr: string | null;
  key: string;
  by: string | null;
  data: unknown;
  op?: string;
  result?: unknown;
}

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
