import type { CheckpointKind, CheckpointMeta } from '../model/schema';

/**
 * The seam between the engine and workspace snapshots. The engine decides *when*
 * a checkpoint is taken and records it as an event; a Snapshotter decides *what*
 * it holds. Blobs and the manifest must be durable before `capture` resolves,
 * because the checkpoint event that refers to them follows.
 */
export interface CaptureRequest {
  taskId: string | null;
  kind: CheckpointKind;
  /** The checkpoint this one descends from (the task's head), or null. */
  parent: CheckpointMeta | null;
  /** The workspace's most recent checkpoint with a manifest: the scan's stat cache and the dirty hint's base. */
  previous: CheckpointMeta | null;
  /** Paths known to have changed since `previous` (a hint; absent means full rescan). */
  dirty?: readonly string[];
}

/**
 * A path a checkpoint met and did not capture. `unreadable` and `too_large` paths are
 * in its manifest as such (no rollback to it deletes or changes them); names that
 * cannot be recorded safely (`unsafe_name`: NFD, a backslash, a control character, a
 * drive prefix) or that are reserved in another letter case (`reserved_name`: `.GIT`)
 * are never in any manifest, so no rollback touches them either.
 */
export interface NotCaptured {
  path: string;
  reason: 'unreadable' | 'too_large' | 'unsafe_name' | 'reserved_name';
  /** errno-style: EACCES, EMFILE, ENOTREG, … (ETOOLARGE, EUNSAFEPATH, ERESERVED for the others). */
  code: string;
  message: string;
}

/** At most this many are listed in a result and in the checkpoint's event (the count is always whole). */
export const MAX_NOT_CAPTURED_LISTED = 200;

export interface Capture {
  manifestRef: string | null;
  files: number;
  filesChanged: number;
  bytes: number;
  /** What the scan met and did not capture (empty when it captured everything). */
  notCaptured?: NotCaptured[];
}

export interface Snapshotter {
  capture(req: CaptureRequest): Promise<Capture>;
  /**
   * The path keys whose content differs from `previous`'s, found by a full scan that
   * records nothing (a watcher's warm-up: see CheckpointCapture.warmUp). Absent where no
   * workspace is attached.
   */
  changedSince?(previous: CheckpointMeta): Promise<string[]>;
}

/** Records checkpoints as metadata only; used where no workspace is attached. */
export const metadataOnlySnapshotter: Snapshotter = {
  async capture() {
    return { manifestRef: null, files: 0, filesChanged: 0, bytes: 0 };
  },
};
