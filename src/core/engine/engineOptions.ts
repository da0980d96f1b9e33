/** How an engine is opened (Engine.open), and what it tells its listeners. */
import type { Logger } from '../log';
import type { LeaseOwner, Task, WaypointEvent } from '../model/schema';
import type { SnapshotRoot } from '../snapshot';
import type { StoreBackend } from '../store/eventLog';
import type { StoreOptions } from '../store/eventStore';
import type { DriftInfo } from './resumeContext';
import type { RetryPolicyInput } from './retryPolicy';
import type { Snapshotter } from './snapshotter';
import type { ChangeFeed } from './changeFeed';

export interface EngineOptions {
  /** The workspace root; the store lives in `<workspace>/.waypoint` unless storeDir says otherwise. */
  workspace: string;
  storeDir?: string;
  log?: Logger;
  /** Who drives tasks started through this engine when a call names no owner. */
  owner?: LeaseOwner;
  defaultLeaseTtlMs?: number;
  /** What a checkpoint holds, when not the workspace snapshots (a test's or a metadata-only store's own). */
  snapshotter?: Snapshotter;
  /** Workspace snapshot settings; `false` records checkpoints as metadata only. */
  snapshots?: false | { roots?: SnapshotRoot[]; excludes?: string[]; maxFileBytes?: number; fullEvery?: number; releaseWorkersAfterScan?: boolean };
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
  /** A file watcher's account of what changed (a long-lived owner's): checkpoints asked for without a dirty list scan only that. */
  changeFeed?: ChangeFeed;
  /** Run the lease sweep on a timer (long-lived owners: the extension, `waypoint serve`). */
  sweepIntervalMs?: number;
  /** The retry policy of tasks started without one of their own (the `waypoint.retry.*` settings). */
  retry?: RetryPolicyInput;
}

export interface ChangeEvent {
  events: readonly WaypointEvent[];
  taskIds: readonly string[];
}
