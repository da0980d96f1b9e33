/**
 * What one scan has recorded so far: the manifest it builds, what it skipped or could
 * not capture (not-captured reporting: a path that could not be read is reported and
 * recorded as not captured, never as absent), its counters, and the racy-clean rule.
 */
import fss from 'node:fs';
import type { PutResult } from '../blobStore.js';
import type { FileEntry, Manifest, ManifestEntry, UncapturedEntry } from '../manifest.js';
import type { SnapshotRoot } from '../paths.js';
import { WorkTracker } from './backpressure.js';
import { GONE, type StatLike } from './fsAccess.js';
import type { StatRescan } from './statRescan.js';
import { TRANSIENT_BUDGET_MS, type RetryBudget } from './transientRetry.js';
import type { ScanCounts, ScanOptions, ScanProblem, ScanResult } from './scanTypes.js';

export const DEFAULT_MAX_FILE_BYTES = 5 * 1024 * 1024;

/**
 * Whether an inode change at `ctimeMs` was safely before `beforeMs` (always, when
 * `beforeMs` is unset). Kernel timestamps are coarse (a change just after `beforeMs`
 * can read a few ms earlier), and a whole-second ctime suggests a 1 s / 2 s file
 * system: the same margins as the racy-clean rule. The stat workers run the same test
 * (statPool.ts WORKER_SOURCE).
 */
export function ctimeBefore(ctimeMs: number, beforeMs: number | undefined): boolean {
  return beforeMs === undefined || ctimeMs + (ctimeMs % 1000 === 0 ? 2000 : 50) < beforeMs;
}

export class ScanRecord {
  manifest: Manifest = new Map();
  /** When set, every key recorded into the manifest is added here (an incremental scan's touched keys). */
  recorded: Set<string> | null = null;
  readonly skipped: ScanResult['skipped'] = [];
  readonly unreadable: ScanProblem[] = [];
  readonly counts: ScanCounts = { filesSeen: 0, filesHashed: 0, bytesHashed: 0, bytesStoredNew: 0, filesReadOnWorkers: 0, dirsListed: 0, dirsFromCache: 0, dirsPlanned: 0 };
  readonly maxFileBytes: number;
  /** Set for a full rescan of a large workspace on the stat workers (see ListingCache.statWorkersFrom). */
  rescan: StatRescan | null = null;
  /** Work still running when the walk moves on (compression, large reads, stat batches); drained at the end. */
  readonly work = new WorkTracker();
  /** Waiting left for transient errors (see retryTransient). */
  readonly retryBudget: RetryBudget = { ms: TRANSIENT_BUDGET_MS };
  readonly startMs = Date.now();
  /** realpath of each root: what every listed directory and read file must resolve under (checked without /proc). */
  private readonly realRoots = new Map<string, string>();

  constructor(readonly opts: ScanOptions) {
    for (const r of opts.roots) this.realRoots.set(r.dir, fss.realpathSync.native(r.dir));
    this.maxFileBytes = opts.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
  }

  /** Records `key` in the manifest this scan builds. */
  set(key: string, entry: ManifestEntry): void {
    this.manifest.set(key, entry);
    this.recorded?.add(key);
  }

  realRoot(root: SnapshotRoot): string {
    return this.realRoots.get(root.dir)!;
  }

  /**
   * An entry whose mtime is this close to the scan start cannot be trusted by the
   * next scan: a write right after we read it could keep the same mtime (git's
   * "racy clean"). Kernel timestamps are coarse (jiffies), hence tens of ms even on
   * nanosecond file systems; a whole-second mtime suggests a 1 s / 2 s file system.
   */
  isRacy(mtimeMs: number): boolean {
    const window = mtimeMs % 1000 === 0 ? 2000 : 50;
    return mtimeMs >= this.startMs - window;
  }

  /**
   * Whether `prev` (an entry of the previous manifest) still describes the file `st`
   * without reading it: same size, mtime and inode, and an inode unchanged (ctime)
   * since the scan that vouched for `prev` began (see ScanOptions.previousVerifiedAtMs).
   */
  statVouches(prev: ManifestEntry | undefined, st: StatLike): prev is FileEntry {
    return prev !== undefined && prev.type === 'file' && !prev.racy && prev.size === st.size && prev.mtimeMs === st.mtimeMs && prev.ino === st.ino && ctimeBefore(st.ctimeMs, this.opts.previousVerifiedAtMs);
  }

  /**
   * A path the scan met and could not read: reported, and recorded as not captured
   * (never as absent: no rollback deletes or changes it), unless it is gone. `dir`: a
   * directory that could not be listed, standing for everything below it.
   */
  notCaptured(key: string, info: { code: string; message: string }, dir = false): void {
    this.unreadable.push({ path: key, ...info });
    if (GONE.has(info.code)) return;
    const code = /^E[A-Z0-9_]{1,31}$/.test(info.code) ? info.code : 'EUNKNOWN';
    const entry: UncapturedEntry = dir ? { type: 'uncaptured', code, dir: true } : { type: 'uncaptured', code };
    this.set(key, entry);
    const rescan = this.rescan;
    if (!rescan) return;
    rescan.touched.add(key);
    // A directory's entry is met only here (files are counted when listed), and must not be dropped as unmet.
    if (dir && this.opts.previous?.has(key)) rescan.seenPrev.push(key);
  }

  /** A path reported and left out of the manifest (a reserved name in another letter case, a name that cannot be recorded safely). */
  leftOut(key: string, code: string, message: string): void {
    this.unreadable.push({ path: key, code, message });
  }

  /** Records a file over the size limit: its size and mtime, no content. */
  recordSkipped(key: string, size: number, mtimeMs: number): void {
    this.set(key, { type: 'skipped', size, mtimeMs, reason: 'too_large' });
    this.skipped.push({ path: key, size, reason: 'too_large' });
  }

  /**
   * Records a file whose content is now in the store (read here or on a worker). The
   * stat fields (`from`) are those of the descriptor read, so the stat cache describes
   * the content stored; a too-recent mtime marks it racy (rehashed next time). Returns
   * the entry (for the caller to mark racy if it changed while read), or undefined when
   * it grew past the size limit while it was read and is recorded as skipped.
   */
  recordStored(key: string, put: PutResult, length: number, exec: boolean, from: { mtimeMs: number; ino: number }): FileEntry | undefined {
    const c = this.counts;
    c.filesHashed++;
    c.bytesHashed += length;
    if (put.isNew) c.bytesStoredNew += put.storedBytes;
    const { mtimeMs, ino } = from;
    if (length > this.maxFileBytes) {
      this.recordSkipped(key, length, mtimeMs); // grew past the limit while it was read
      return undefined;
    }
    const entry: FileEntry = { type: 'file', hash: put.hash, size: length, mode: exec ? 0o755 : 0o644, mtimeMs, ino };
    if (this.isRacy(mtimeMs)) entry.racy = true;
    this.set(key, entry);
    return entry;
  }
}
