/** What a scan is asked (ScanOptions) and what it answers (ScanResult). */
import type { BlobStore } from '../blobStore.js';
import type { ChangeSummary, Manifest } from '../manifest.js';
import type { SnapshotRoot } from '../paths.js';
import type { ListingCache } from './listingCache.js';
import type { SpareCopy } from './spareCopy.js';

export interface ScanOptions {
  roots: SnapshotRoot[];
  /** Listings to reuse and refresh (see ListingCache); Linux only, where directories are read through /proc. */
  listings?: ListingCache;
  /** Where a copy of `previous` made ahead of time is taken from (see SpareCopy); without it the scan copies `previous` itself. */
  spare?: SpareCopy;
  /** Gitignore-style patterns relative to each root; they cannot be negated by a .gitignore. */
  excludes?: string[];
  maxFileBytes?: number;
  previous?: Manifest;
  /**
   * When the scan that vouched for `previous` began (ms since the epoch). A file whose
   * inode changed after it (ctime, which no one can set back) is read again even when
   * its size, mtime and inode match: a file replaced under its name, its mtime put
   * back, can be handed the same inode. Unset: ctime is not compared.
   */
  previousVerifiedAtMs?: number;
  /** Path keys or absolute paths known to have changed since `previous` (needs `previous`). */
  dirty?: string[];
  blobs: BlobStore;
  /** Files read and hashed at once (default 8). */
  concurrency?: number;
  /**
   * Flush the blob store before returning (default true). Pass false only when the
   * manifest goes straight to `ManifestStore.save`, whose flush then covers the new
   * blobs and the manifest in one durability barrier.
   */
  flush?: boolean;
  /**
   * New files a bulk scan reads on worker threads are stored raw (HEADER_PENDING),
   * not compressed, so the checkpoint is durable sooner; `BlobStore.compact` must
   * compress them afterwards (WorkspaceSnapshots does, in the background). Only with
   * a deferred-mode store (raw content lives in packs); otherwise ignored. Default false.
   */
  deferCompression?: boolean;
  /** Test seams for workspaces that change under the scanner; never set in production. */
  hooks?: ScanHooks;
}

export interface ScanHooks {
  /** Called just before a directory is listed. */
  beforeList?(abs: string, relDir: string): void | Promise<void>;
  /** Called just before a file is opened to read its content (after its lstat, when it has one). */
  beforeRead?(abs: string, key: string): void | Promise<void>;
}

export interface ScanProblem {
  path: string;
  code: string;
  message: string;
}

/** `filesReadOnWorkers`: new files a bulk scan handed to worker threads (read, hashed and compressed there). */
export interface ScanCounts {
  filesSeen: number;
  filesHashed: number;
  bytesHashed: number;
  bytesStoredNew: number;
  filesReadOnWorkers: number;
  dirsListed: number;
  dirsFromCache: number;
  dirsPlanned: number;
}

export interface ScanResult {
  /**
   * Read-only: with a dirty hint that names nothing it is `previous` itself, and
   * ManifestStore.save may keep it (`adopt`).
   */
  manifest: Manifest;
  /**
   * After a dirty-hint scan, or a full rescan on stat workers, every key whose entry
   * may differ from `previous` (all others are `previous`'s own entries); null when
   * the walk built the manifest afresh.
   */
  touched: ReadonlySet<string> | null;
  changed: ChangeSummary;
  skipped: { path: string; size: number; reason: 'too_large' }[];
  unreadable: ScanProblem[];
  stats: ScanCounts & { ms: number };
  /** When this scan began: what its manifest's stat entries vouch for (see ScanOptions.previousVerifiedAtMs). */
  startedAtMs: number;
}
