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
  /** Paths known to have changed since the parent (a hint; absent means full rescan). */
  dirty?: readonly string[];
}

export interface Capture {
  manifestRef: string | null;
  files: number;
  filesChanged: number;
  bytes: number;
}

export interface Snapshotter {
  capture(req: CaptureRequest): Promise<Capture>;
}

/** Records checkpoints as metadata only; used where no workspace is attached. */
export const metadataOnlySnapshotter: Snapshotter = {
  async capture() {
    return { manifestRef: null, files: 0, filesChanged: 0, bytes: 0 };
  },
};
