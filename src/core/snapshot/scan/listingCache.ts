/**
 * The listing cache a workspace keeps between scans: directory listings (reused while
 * the directory's inode, mtime and ctime hold), ignore-rule levels, and the plans a
 * full rescan on the stat workers made of each directory's entries.
 */
import type { Dirent } from 'node:fs';
import { IgnoreRules, type LevelMemo } from '../ignoreRules.js';
import type { Manifest, ManifestEntry } from '../manifest.js';
import { PREV_CACHEABLE, PREV_FIELDS, StatPool } from '../statPool.js';

/**
 * One directory's files sent to a stat worker as one batch: parallel arrays, not an
 * object per file (a rescan's garbage is mostly per-entry objects).
 */
export interface FileBatch {
  /** Names joined by NUL (what the worker is sent), and as a list. */
  names: string;
  nameList: string[];
  /** Per file: its key and previous entry. */
  keys: string[];
  prevs: (ManifestEntry | undefined)[];
  /** PREV_FIELDS numbers per file (see StatPool.check). */
  nums: Float64Array;
}

/**
 * What a full rescan on the stat workers did with a directory's entries, kept with
 * its listing: which are files to check (names, keys, the previous entries and their
 * stat-cache numbers) and which are subdirectories. While the listing, the rules and
 * the previous manifest are the same, the next rescan sends these to a worker as they
 * are instead of examining each entry again. Only directories whose entries all went
 * this way have one (no new, unreadable or unsafe entry).
 */
export interface DirPlan extends FileBatch {
  /** What the entries were filtered by, and under which key prefix. */
  rules: IgnoreRules;
  prefix: string;
  /**
   * The manifests `prevs` and `nums` describe: the last scan's, and the one before it
   * when that scan changed none of these files (a scan whose result is not recorded,
   * such as a diff against the workspace, leaves the plan good for the next checkpoint).
   * Null while a scan updates them.
   */
  prevOf: Manifest | null;
  alsoOf: Manifest | null;
  /** Subdirectories to walk, root-relative. */
  subdirs: string[];
}

/** What the walk reads of a directory entry: a Dirent from a listing, or a DiskDirent from the scan cache. */
export type DirEntry = Pick<Dirent, 'name' | 'isFile' | 'isDirectory' | 'isSymbolicLink'>;

/** Entry kinds as the scan cache stores them (a Dirent's type; 0: anything else, or unknown to the file system). */
export const DIRENT_OTHER = 0;
export const DIRENT_FILE = 1;
export const DIRENT_DIR = 2;
export const DIRENT_SYMLINK = 3;

export function direntKind(d: DirEntry): number {
  return d.isFile() ? DIRENT_FILE : d.isDirectory() ? DIRENT_DIR : d.isSymbolicLink() ? DIRENT_SYMLINK : DIRENT_OTHER;
}

/** A directory entry read back from the scan cache: its name and kind, as the listing that was persisted gave them. */
export class DiskDirent implements DirEntry {
  constructor(
    readonly name: string,
    private readonly kind: number,
  ) {}
  isFile(): boolean {
    return this.kind === DIRENT_FILE;
  }
  isDirectory(): boolean {
    return this.kind === DIRENT_DIR;
  }
  isSymbolicLink(): boolean {
    return this.kind === DIRENT_SYMLINK;
  }
}

export interface ListedDir {
  ino: number;
  mtimeMs: number;
  ctimeMs: number;
  dirents: DirEntry[];
  rels?: string[];
  plan?: DirPlan;
}

/** The stat-cache numbers StatPool compares a file's lstat with (zeros: always examine). */
export function prevNumbers(e: ManifestEntry | undefined, into: Float64Array, at: number): void {
  if (e !== undefined && e.type === 'file' && !e.racy) {
    into[at] = PREV_CACHEABLE;
    into[at + 1] = e.size;
    into[at + 2] = e.mtimeMs;
    into[at + 3] = e.ino;
    into[at + 4] = e.mode === 0o755 ? 1 : 0;
  } else into.fill(0, at, at + PREV_FIELDS);
}

/**
 * Directory listings kept between scans by whoever scans the same workspace again
 * (the engine keeps one per workspace). A directory whose inode, mtime and ctime are
 * unchanged since it was listed has the same entries (creating, removing or
 * renaming an entry updates both times), so a full rescan lstats it instead of
 * opening and listing it: of a 13.6k-file rescan's ~1.7k directories, that saves an
 * open, a listing and a close each. Files are still lstat'ed one by one (content
 * changes do not touch the directory). A listing whose directory changed within the
 * racy window of its scan is not kept.
 */
export class ListingCache {
  /** `${root dir}\0${relDir}` → the listing and the directory's stat taken before it. */
  readonly dirs = new Map<string, ListedDir>();
  /** Ignore-rule levels by ignore file (see LevelMemo): unchanged rules compare equal from scan to scan. */
  readonly levels: LevelMemo = new Map();
  private base: { key: string; rules: IgnoreRules } | null = null;
  private pool: StatPool | null = null;

  /**
   * @param statWorkersFrom a full rescan lstats its files on worker threads (see
   *   statPool.ts) when the previous manifest has at least this many entries;
   *   smaller workspaces are quicker done on the calling thread.
   */
  constructor(readonly statWorkersFrom = 4000) {}

  /** The root rules for `excludes`, the same object while the list is the same. */
  rootRules(excludes: readonly string[] | undefined): IgnoreRules {
    const key = JSON.stringify(excludes ?? []);
    if (this.base?.key !== key) this.base = { key, rules: IgnoreRules.root(excludes) };
    return this.base.rules;
  }

  /**
   * After a dirty-hint scan from `previous` to `next`: plans of directories it touched
   * are dropped, the others now describe `next` (its entries for their keys are the
   * very same objects).
   */
  carryPlans(previous: Manifest, next: Manifest, touchedDirs: ReadonlySet<string> | null): void {
    for (const [memo, d] of this.dirs) {
      const plan = d.plan;
      if (!plan || (plan.prevOf !== previous && plan.alsoOf !== previous)) continue;
      if (touchedDirs === null || touchedDirs.has(memo)) d.plan = undefined;
      else [plan.prevOf, plan.alsoOf] = [next, previous];
    }
  }

  /**
   * Listings read back from the scan cache (a fresh process): taken only while this
   * cache holds none of its own, which are at least as recent. Each is still checked
   * against its directory's lstat before the walk uses it.
   */
  seed(listings: ReadonlyMap<string, ListedDir>): void {
    if (this.dirs.size > 0) return;
    for (const [memo, d] of listings) this.dirs.set(memo, d);
  }

  /** The workers this workspace's rescans lstat on, started on first use. */
  statPool(): StatPool {
    this.pool ??= new StatPool();
    return this.pool;
  }

  /** Ends the stat workers (they also end by themselves after a minute idle). */
  async close(): Promise<void> {
    await this.pool?.close();
  }
}
