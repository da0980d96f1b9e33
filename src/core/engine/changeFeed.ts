import type { CheckpointMeta } from '../model/schema';
import type { Capture } from './snapshotter';

/**
 * Where a long-lived owner's file watcher tells the engine what changed, so that a
 * checkpoint asked for without a dirty list (a hook's, the CLI's, a step's end) scans
 * only those paths instead of the whole tree. The feed vouches for a list only when it
 * has watched since the scan `previous` was made from: otherwise it answers null and
 * the checkpoint scans everything, exactly as without a feed.
 */
export interface ChangeFeed {
  /**
   * The paths changed since `previous` was captured, or null (scan everything). The
   * capture then calls `done` once: with its result when it succeeded, with null when
   * it failed (the feed keeps those paths for the next one). Asynchronous: a feed first
   * catches up with the file system (what was written before the call is in the list).
   */
  begin(previous: CheckpointMeta | null): Promise<ChangeFeedTicket>;
  /**
   * Makes a feed that has just started vouch from `previous` on, without a checkpoint:
   * `changedSince` scans the whole tree once (the feed already watching) and names what
   * differs from `previous`; the feed keeps those paths with what it sees meanwhile, so
   * the next checkpoint after `previous` scans only them. False when the feed cannot
   * (not watching, a capture under way, the scan failed): checkpoints then scan as before.
   */
  warmUp?(previous: CheckpointMeta, changedSince: () => Promise<readonly string[]>): Promise<boolean>;
}

export interface ChangeFeedTicket {
  dirty: readonly string[] | null;
  done(result: Capture | null): void;
}
