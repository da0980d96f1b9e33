/**
 * Checkpoint capture: what every operation that records the workspace shares (a
 * task's start, a step's ends, a side effect, a rollback's before state, a fork's
 * base). The snapshotter decides what a checkpoint holds; this decides its place in
 * the checkpoint tree and the event that records it, and says what it could not
 * capture.
 */
import type { CheckpointKind, CheckpointMeta, Task } from '../model/schema';
import { WaypointError } from '../model/errors';
import type { Logger } from '../log';
import type { NewEvent } from '../store/eventLog';
import { newId } from './ids';
import type { Queries } from '../store/queries';
import { MAX_NOT_CAPTURED_LISTED, type Snapshotter } from './snapshotter';
import { notCapturedLine, type NotCapturedReport } from './notCaptured';
import type { ChangeFeed } from './changeFeed';


export { notCapturedLine, type NotCapturedReport } from './notCaptured';

export class CheckpointCapture {
  constructor(
    private readonly queries: Queries,
    private readonly snapshotter: Snapshotter,
    private readonly log: Logger,
    private readonly now: () => number,
    private readonly feed?: ChangeFeed,
  ) {}

  /**
   * The workspace's newest checkpoint with a manifest: the next scan's stat cache
   * (only changed files are read) and a new task's delta base.
   */
  latest(): CheckpointMeta | null {
    const id = this.queries.latestIntactCheckpointId();
    return id ? this.queries.checkpoint(id) : null;
  }

  /**
   * A change feed that has just started (a background owner's watcher) vouches from the
   * newest checkpoint on after one full scan that records nothing, so the first
   * checkpoint asked of it scans only what changed, like every later one. Run in the
   * runner, so a call that comes meanwhile waits for it rather than scanning alongside.
   */
  async warmUp(): Promise<boolean> {
    const previous = this.latest();
    const scan = this.snapshotter.changedSince?.bind(this.snapshotter);
    if (!previous?.manifestRef || previous.damaged || !scan || !this.feed?.warmUp) return false;
    return this.feed.warmUp(previous, () => scan(previous));
  }

  /** Captures a checkpoint and returns its (not yet committed) event. */
  async capture(task: Task | null, kind: CheckpointKind, stepId: string | null, label: string | null, dirty?: readonly string[]): Promise<{ event: NewEvent; checkpoint: CheckpointMeta; report: NotCapturedReport }> {
    const previous = this.latest();
    const parent = task?.lastCheckpointId ? this.queries.checkpoint(task.lastCheckpointId) : previous;
    // A damaged parent stays the new checkpoint's parent in the tree, but its manifest
    // (gone, or naming content that is gone) is no base for the new one: that is stored whole.
    const base = parent?.damaged ? { ...parent, manifestRef: null } : parent;
    let cap: Awaited<ReturnType<Snapshotter['capture']>>;
    // Asked without a dirty list: a watcher that has followed the tree since `previous` names what changed.
    const ticket = dirty === undefined && this.feed ? await this.feed.begin(previous) : null;
    try {
      cap = await this.snapshotter.capture({ taskId: task?.id ?? null, kind, parent: base, previous, dirty: dirty ?? ticket?.dirty ?? undefined });
      ticket?.done(cap);
    } catch (e) {
      ticket?.done(null);
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
      createdAt: this.now(),
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
}
