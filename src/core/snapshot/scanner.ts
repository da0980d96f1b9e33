/**
 * Workspace scanner: walks the roots honouring ignore rules, records files,
 * symlinks (never followed) and too-large files, stores new content in the blob
 * store, and reuses hashes from a previous manifest when the stat cache
 * (size, mtime, inode) says a file is unchanged. With a dirty-path hint only those
 * paths are re-examined, so the cost is O(changes).
 */
import fss, { type Dirent, type Stats } from 'node:fs';
import path from 'node:path';
import type { BlobStore, PutResult } from './blobStore.js';
import { CompressPool } from './compressPool.js';
import { IgnoreRules, levelsForDir, type LevelMemo } from './ignoreRules.js';
import type { WorkerPack } from './packFile.js';
import { KIND_DIR, KIND_FILE, KIND_SYMLINK, PREV_CACHEABLE, PREV_FIELDS, STAT_FIELDS, StatPool, type StatCheck } from './statPool.js';
import { compareEntries, summarize, type ChangeSummary, type FileChange, type FileEntry, type Manifest, type ManifestEntry, type UncapturedEntry } from './manifest.js';
import { RESERVED_DIRS, checkRoots, childKeyProblem, keyPrefixFor, pathKeyProblem, splitKey, toKey, type SnapshotRoot } from './paths.js';

export const DEFAULT_MAX_FILE_BYTES = 5 * 1024 * 1024;
/** Smaller files are read synchronously during the walk; larger ones on the thread pool. */
const SYNC_READ_BELOW = 64 * 1024;
/** New content past this much in one scan goes to a worker pool for compression. */
const POOL_AFTER_BYTES = 4 * 1024 * 1024;
/** Read-but-not-yet-stored bytes the walk may run ahead by (memory bound). */
const MAX_INFLIGHT_BYTES = 8 * 1024 * 1024;
/**
 * New files (no previous entry) one scan reads on the main thread before it hands
 * the rest to worker threads that open, read, hash and compress them (a first
 * checkpoint). A few hundred files are quicker read here than a pool is started.
 */
const WORKER_READS_AFTER_FILES = 256;
/** Files handed to workers and not yet back: bounds descriptors held and results queued. */
const MAX_WORKER_FILES = 2048;
/** Directories whose files may be out with the stat workers at once (each may hold its descriptor). */
const MAX_STAT_BATCHES = 64;

/**
 * Linux: an open directory is reachable as /proc/self/fd/N, so a directory opened
 * once can be listed, and its entries opened, by that name: the kernel resolves it to
 * the very directory opened, whatever happens to the path since (openat without
 * openat). Elsewhere the walk falls back to checking real paths.
 */
const PROC_FD = process.platform === 'linux' && fss.existsSync('/proc/self/fd') ? '/proc/self/fd' : null;
const O_DIR = fss.constants.O_RDONLY | (fss.constants.O_DIRECTORY ?? 0) | (fss.constants.O_NOFOLLOW ?? 0);
const O_FILE = fss.constants.O_RDONLY | (fss.constants.O_NOFOLLOW ?? 0);

/** A directory being walked: `io` is the name to reach it (and its entries) by. */
interface OpenDir {
  io: string;
  fd: number;
  /** Listed from the listing cache and not opened yet: opened (from the root, see `ensureOpen`) when first needed. */
  lazy?: { root: SnapshotRoot; relDir: string; abs: string };
  /** Holders of `fd`: the walk, plus each of its files a worker is still reading through it. */
  refs?: number;
}

function closeDir(d: OpenDir | null): void {
  if (d && d.fd >= 0) fss.closeSync(d.fd);
}

/** Drops one hold on a directory's descriptor; the last one closes it. */
function releaseDir(d: OpenDir): void {
  if (d.refs !== undefined && --d.refs > 0) return;
  closeDir(d);
}

/**
 * What a full rescan on the stat workers did with a directory's entries, kept with
 * its listing: which are files to check (names, keys, the previous entries and their
 * stat-cache numbers) and which are subdirectories. While the listing, the rules and
 * the previous manifest are the same, the next rescan sends these to a worker as they
 * are instead of examining each entry again. Only directories whose entries all went
 * this way have one (no new, unreadable or unsafe entry).
 */
interface DirPlan {
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
  /** Files, in listing order: names joined by NUL, and per file its key and previous entry. */
  names: string;
  nameList: string[];
  keys: string[];
  prevs: (ManifestEntry | undefined)[];
  /** PREV_FIELDS numbers per file (see StatPool.check). */
  nums: Float64Array;
  /** Subdirectories to walk, root-relative. */
  subdirs: string[];
}

interface ListedDir {
  ino: number;
  mtimeMs: number;
  ctimeMs: number;
  dirents: Dirent[];
  rels?: string[];
  plan?: DirPlan;
}

/** The stat-cache numbers StatPool compares a file's lstat with (zeros: always examine). */
function prevNumbers(e: ManifestEntry | undefined, into: Float64Array, at: number): void {
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

/** What the walk needs of an lstat: a fs.Stats, or the same fields from a stat worker. */
type StatLike = Pick<Stats, 'size' | 'mtimeMs' | 'ino' | 'mode' | 'isFile' | 'isDirectory' | 'isSymbolicLink'>;

/** A stat worker's answer for one path, shaped as the walk reads a Stats. */
class PooledStat implements StatLike {
  constructor(
    private readonly kind: number,
    readonly size: number,
    readonly mtimeMs: number,
    readonly ino: number,
    readonly mode: number,
  ) {}
  isFile(): boolean {
    return this.kind === KIND_FILE;
  }
  isDirectory(): boolean {
    return this.kind === KIND_DIR;
  }
  isSymbolicLink(): boolean {
    return this.kind === KIND_SYMLINK;
  }
}

export interface ScanOptions {
  roots: SnapshotRoot[];
  /** Listings to reuse and refresh (see ListingCache); Linux only, where directories are read through /proc. */
  listings?: ListingCache;
  /** Gitignore-style patterns relative to each root; they cannot be negated by a .gitignore. */
  excludes?: string[];
  maxFileBytes?: number;
  previous?: Manifest;
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
  /** `filesReadOnWorkers`: new files a bulk scan handed to worker threads (read, hashed and compressed there). */
  stats: { filesSeen: number; filesHashed: number; bytesHashed: number; bytesStoredNew: number; filesReadOnWorkers: number; dirsListed: number; dirsFromCache: number; dirsPlanned: number; ms: number };
}

function isReserved(name: string): boolean {
  // Every reserved name starts with a dot: most names are decided without lowercasing.
  return name.charCodeAt(0) === 46 && RESERVED_DIRS.has(name.toLowerCase());
}

/** A tiny semaphore: bounds open files and memory held by in-flight reads. */
class Limiter {
  private active = 0;
  private readonly queue: (() => void)[] = [];
  constructor(private readonly limit: number) {}
  /** Resolves once a slot is held; pair with `release`. */
  async acquire(): Promise<void> {
    if (this.active >= this.limit) await new Promise<void>((r) => this.queue.push(r));
    this.active++;
  }
  release(): void {
    this.active--;
    this.queue.shift()?.();
  }
}

function errInfo(err: unknown, io?: string, abs?: string): { code: string; message: string } {
  const e = err as NodeJS.ErrnoException;
  let message = e.message ?? String(err);
  // Errors name the /proc path the call used; people want the file's own path.
  if (io && abs && io !== abs) message = message.split(io).join(abs);
  return { code: e.code ?? 'EUNKNOWN', message };
}

const READ_ERRORS = new Set(['EACCES', 'EPERM', 'ENOENT', 'EISDIR', 'ENOTDIR', 'EBUSY', 'ELOOP', 'ESYMLINK', 'ENOTREG', 'EMFILE', 'ENFILE', 'EAGAIN']);
/** Gone since it was listed: absent is the truth, so nothing is recorded for it. */
const GONE = new Set(['ENOENT', 'ENOTDIR']);
/** Out of descriptors (this process's or the system's) or asked to try again: worth waiting a little and retrying. */
const TRANSIENT = new Set(['EMFILE', 'ENFILE', 'EAGAIN']);
/** Waits before each retry of a transient failure (ms): about 1.3 s in all, while other work closes what it holds. */
const TRANSIENT_BACKOFF_MS = [5, 10, 20, 40, 80, 160, 320, 640];

/**
 * Runs `fn`, retrying while it fails with a transient error (a low descriptor limit:
 * the walk's own large reads and stat batches release theirs meanwhile). The last
 * failure is thrown: the caller records the path as not captured, never as absent.
 */
async function retryTransient<T>(fn: () => T, budget: { ms: number }): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return fn();
    } catch (err) {
      const wait = TRANSIENT_BACKOFF_MS[i];
      if (wait === undefined || budget.ms < wait || !TRANSIENT.has((err as NodeJS.ErrnoException).code ?? '')) throw err;
      budget.ms -= wait;
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}

/** What one scan may spend waiting on transient errors in all: past it, what still fails is recorded at once (a limit that stays low would cost 1.3 s a path). */
const TRANSIENT_BUDGET_MS = 5000;

/** Names that are reserved only when folded (`.GIT`, `.Waypoint`): skipped like the real ones, but reported. */
function isReservedVariant(name: string): boolean {
  return !RESERVED_DIRS.has(name);
}

/** Reads up to `size` bytes (fewer if the file shrank) into `scratch`, which must hold them; returns the view read. */
function readSyncInto(fd: number, size: number, scratch: Buffer): Buffer {
  let got = 0;
  while (got < size) {
    const n = fss.readSync(fd, scratch, got, size - got, got);
    if (n === 0) break;
    got += n;
  }
  return scratch.subarray(0, got);
}

function readAsync(fd: number, buf: Buffer, at: number): Promise<number> {
  return new Promise((resolve, reject) => fss.read(fd, buf, at, buf.length - at, at, (err, n) => (err ? reject(err) : resolve(n))));
}

/** Reads a file to its end (it may have grown since its fstat), on the thread pool. */
async function readAllAsync(fd: number, sizeHint: number): Promise<Buffer> {
  let buf = Buffer.allocUnsafeSlow(Math.max(sizeHint, 1));
  let got = 0;
  for (;;) {
    const n = await readAsync(fd, buf, got);
    if (n === 0) break;
    got += n;
    if (got === buf.length) {
      // Full: one small probe read tells whether the file grew, without copying.
      const probe = Buffer.allocUnsafe(64 * 1024);
      const more = await new Promise<number>((resolve, reject) => fss.read(fd, probe, 0, probe.length, got, (err, k) => (err ? reject(err) : resolve(k))));
      if (more === 0) break;
      const bigger = Buffer.allocUnsafeSlow(buf.length * 2 + more);
      buf.copy(bigger, 0, 0, got);
      probe.copy(bigger, got, 0, more);
      buf = bigger;
      got += more;
    }
  }
  return got === buf.length ? buf : buf.subarray(0, got);
}

function notRegular(rel: string): Error {
  return Object.assign(new Error(`${rel} is no longer a regular file`), { code: 'ENOTREG' });
}

class Scan {
  manifest: Manifest = new Map();
  readonly skipped: ScanResult['skipped'] = [];
  readonly unreadable: ScanProblem[] = [];
  filesSeen = 0;
  filesHashed = 0;
  bytesHashed = 0;
  bytesStoredNew = 0;
  private readonly startMs = Date.now();
  private sinceYield = 0;
  private readonly rulesMemo = new Map<string, IgnoreRules | null>();
  /** Bounds large files open or being read at once. */
  private readonly io: Limiter;
  private readonly maxFileBytes: number;
  private readonly baseRules: IgnoreRules;
  /** Content read but not yet in the store (being compressed): the walk waits past MAX_INFLIGHT_BYTES. */
  private inflightBytes = 0;
  private readonly inflightWaiters: (() => void)[] = [];
  /** Bytes of new content seen; past POOL_AFTER_BYTES the compression pool starts. */
  private bytesToStore = 0;
  pool: CompressPool | null = null;
  /** Set by scan(): whether this scan may start a compression pool (bulk scans). */
  mayPool = true;
  /** Set for a full rescan of a large workspace (see ListingCache.statWorkersFrom). */
  statPool: StatPool | null = null;
  /**
   * With stat workers: the manifest starts as a copy of the previous one; keys of the
   * previous manifest met by the walk (any missing at the end are deleted), and every
   * key whose entry may differ from the previous one (the scan's `touched`).
   */
  seenPrev: string[] | null = null;
  fullTouched: Set<string> | null = null;
  /** Directories holding a descriptor whose files are out with the stat workers (bounds descriptors held). */
  private statBatchesOut = 0;
  private readonly statWaiters: (() => void)[] = [];
  /** Listing-cache keys a full walk met (the rest are pruned after it); null when there is no cache. */
  listed: Set<string> | null = null;
  /** Directory plans this rescan used or made (they describe its manifest once it is done), and files of theirs whose entry changed. */
  private readonly plans: DirPlan[] = [];
  private readonly planChanges: { plan: DirPlan; i: number }[] = [];
  dirsPlanned = 0;
  /** New files met so far (see WORKER_READS_AFTER_FILES). */
  private newFiles = 0;
  /** Files a worker is reading (see MAX_WORKER_FILES). */
  private workerFiles = 0;
  filesReadOnWorkers = 0;
  /**
   * With `deferCompression` on a deferred store: the pack directory the workers write
   * new files' content to (it never comes back to this thread), and the packs they
   * have reported, by temp file.
   */
  private workerPackDir: string | null = null;
  private readonly workerPacks = new Map<string, WorkerPack>();
  private workerReadOpts: { packDir?: string } = {};
  dirsListed = 0;
  dirsFromCache = 0;
  /**
   * Work started during the walk and not finished (reads, stores): counted, not kept —
   * holding 13k settled promises to the end made each one survive every young-generation
   * GC of a bulk scan. The first failure is kept for `drain` to throw.
   */
  private tracked = 0;
  private trackFailure: { err: unknown } | null = null;
  private readonly drainWaiters: (() => void)[] = [];
  /** Where small files are read (see examine). */
  private readonly scratch = Buffer.allocUnsafeSlow(SYNC_READ_BELOW);

  /** Waiting left for transient errors (see retryTransient). */
  private readonly retryBudget = { ms: TRANSIENT_BUDGET_MS };

  /** realpath of each root: what every listed directory and read file must resolve under. */
  private readonly realRoots = new Map<string, string>();

  constructor(private readonly opts: ScanOptions) {
    for (const r of opts.roots) this.realRoots.set(r.dir, fss.realpathSync.native(r.dir));
    this.io = new Limiter(Math.max(1, opts.concurrency ?? 8));
    this.maxFileBytes = opts.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
    this.baseRules = opts.listings ? opts.listings.rootRules(opts.excludes) : IgnoreRules.root(opts.excludes);
  }

  /**
   * An entry whose mtime is this close to the scan start cannot be trusted by the
   * next scan: a write right after we read it could keep the same mtime (git's
   * "racy clean"). Kernel timestamps are coarse (jiffies), hence tens of ms even on
   * nanosecond file systems; a whole-second mtime suggests a 1 s / 2 s file system.
   */
  private isRacy(mtimeMs: number): boolean {
    const window = mtimeMs % 1000 === 0 ? 2000 : 50;
    return mtimeMs >= this.startMs - window;
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
    this.manifest.set(key, entry);
    this.fullTouched?.add(key);
    // A directory's entry is met only here (files are counted when listed), and must not be dropped as unmet.
    if (dir && this.seenPrev && this.opts.previous?.has(key)) this.seenPrev.push(key);
  }

  /** Rules in force for entries of directory `relDir` of `root`, loading every ancestor's files. */
  async rulesFor(root: SnapshotRoot, relDir: string): Promise<IgnoreRules | null> {
    return this.rulesForSync(root, relDir);
  }

  /** Memoized per directory, each built on its parent's: dirty files in sibling directories share their ancestors' lookups. */
  private rulesForSync(root: SnapshotRoot, relDir: string): IgnoreRules | null {
    const memoKey = `${root.dir}\0${relDir}`;
    const memo = this.rulesMemo.get(memoKey);
    if (memo !== undefined) return memo;
    let rules: IgnoreRules | null;
    if (relDir === '') {
      rules = this.baseRules;
      for (const level of levelsForDir(root.dir, '', null, null)) rules = rules.with(level);
    } else {
      const cut = relDir.lastIndexOf('/');
      rules = this.rulesForSync(root, cut < 0 ? '' : relDir.slice(0, cut));
      // An ignored or reserved ancestor hides everything below it.
      if (rules !== null && (isReserved(relDir.slice(cut + 1)) || rules.ignores(relDir, true))) rules = null;
      if (rules !== null) for (const level of levelsForDir(path.join(root.dir, ...relDir.split('/')), relDir, null, null)) rules = rules.with(level);
    }
    this.rulesMemo.set(memoKey, rules);
    return rules;
  }

  /** A directory that turned into a symlink (or something else) after it was listed from its parent. */
  private swapped(abs: string, rel: string, err: unknown): Error {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOTDIR' && code !== 'ELOOP') return err as Error;
    let target: string | null = null;
    try {
      if (fss.lstatSync(abs).isSymbolicLink()) target = fss.readlinkSync(abs);
    } catch {
      return err as Error;
    }
    if (target === null) return err as Error;
    return Object.assign(new Error(`${rel} changed into a symlink during the scan (it leads to ${target}); not followed`), { code: 'ESYMLINK' });
  }

  /**
   * Opens directory `relDir` of `root` without following a symlink anywhere below the
   * root: relative to its already-open parent, or segment by segment from the root.
   * Without /proc, returns its path (checked by real path after listing instead).
   */
  private openDir(root: SnapshotRoot, relDir: string, abs: string, parent: OpenDir | null): OpenDir {
    if (!PROC_FD) return { io: abs, fd: -1 };
    const segs = relDir === '' ? [] : relDir.split('/');
    let fd: number;
    let from = 0;
    if (parent && parent.fd >= 0 && segs.length > 0) {
      from = segs.length - 1;
      fd = parent.fd;
    } else {
      // The root itself may be reached through symlinks (the person's own path to it).
      fd = fss.openSync(root.dir, fss.constants.O_RDONLY | (fss.constants.O_DIRECTORY ?? 0));
    }
    for (let i = from; i < segs.length; i++) {
      let next: number;
      try {
        next = fss.openSync(`${PROC_FD}/${fd}/${segs[i]}`, O_DIR);
      } catch (err) {
        if (fd !== parent?.fd) fss.closeSync(fd);
        throw this.swapped(path.join(root.dir, ...segs.slice(0, i + 1)), segs.slice(0, i + 1).join('/'), err);
      }
      if (fd !== parent?.fd) fss.closeSync(fd);
      fd = next;
    }
    return { io: `${PROC_FD}/${fd}`, fd };
  }

  /**
   * Work still running when the walk moves on (compression, large reads); awaited
   * whole at the end. Marked handled now so a failure before then is not an
   * unhandled rejection; Promise.all still sees it.
   */
  private track(p: Promise<void>): void {
    this.tracked++;
    p.then(
      () => this.untrack(),
      (err: unknown) => {
        this.trackFailure ??= { err };
        this.untrack();
      },
    );
  }

  private untrack(): void {
    if (--this.tracked === 0) for (const w of this.drainWaiters.splice(0)) w();
  }

  /** Waits while too much read content is still on its way into the store. */
  private async roomToRead(): Promise<void> {
    while (this.inflightBytes > MAX_INFLIGHT_BYTES) await new Promise<void>((r) => this.inflightWaiters.push(r));
  }

  private settled(bytes: number): void {
    this.inflightBytes -= bytes;
    if (this.inflightBytes <= MAX_INFLIGHT_BYTES) for (const w of this.inflightWaiters.splice(0)) w();
  }

  /**
   * Directory listing, lstat and small-file reads are synchronous on purpose: they
   * are syscalls of a few microseconds, while each async call costs a thread-pool
   * round trip that dominated scans (first checkpoint of 13.6k files: async
   * open + fstat + close alone took ~1.3 s of main-thread time). The walk yields to
   * the event loop every few hundred entries so a host process stays responsive;
   * large files are read on the thread pool and compression runs on worker threads.
   *
   * Each directory is opened once (O_NOFOLLOW, relative to its parent) and listed
   * and read through that descriptor, so a directory swapped for a symlink after
   * its parent was listed is never followed: nothing outside the root is listed or
   * read, at the cost of one open and close per directory (no realpath per
   * directory or file).
   */
  async walkDir(root: SnapshotRoot, prefix: string, relDir: string, parentRules: IgnoreRules, parent: OpenDir | null = null): Promise<void> {
    const abs = relDir === '' ? root.dir : path.join(root.dir, ...relDir.split('/'));
    let dir: OpenDir | null = null;
    let dirents: Dirent[];
    /** This directory's listing-cache record, if it has one now. */
    let listed: ListedDir | undefined;
    /** With a cached listing, its entries' root-relative paths: the same strings each scan (no garbage; their hashes stay cached). */
    let rels: string[] | undefined;
    try {
      await this.opts.hooks?.beforeList?.(abs, relDir);
      const listings = PROC_FD ? this.opts.listings : undefined;
      const memo = listings ? `${root.dir}\0${relDir}` : '';
      this.listed?.add(memo);
      const hit = listings?.dirs.get(memo);
      // By path: a directory swapped for a symlink lstats as a link (a miss, then
      // refused by the open below). Entries are only listed from the cache; whatever
      // is read is read through descriptors opened from the root (ensureOpen).
      const now = hit ? fss.lstatSync(abs, { throwIfNoEntry: false }) : undefined;
      if (hit && now?.isDirectory() && now.ino === hit.ino && now.mtimeMs === hit.mtimeMs && now.ctimeMs === hit.ctimeMs) {
        dir = { io: '', fd: -1, lazy: { root, relDir, abs } };
        dirents = hit.dirents;
        const relBase = relDir === '' ? '' : `${relDir}/`;
        rels = hit.rels ??= dirents.map((d) => relBase + d.name);
        listed = hit;
        this.dirsFromCache++;
      } else {
        dir = await retryTransient(() => this.openDir(root, relDir, abs, parent), this.retryBudget);
        // Stat before listing: an entry added after the listing moves the mtime past what is cached.
        const st = listings ? fss.fstatSync(dir.fd) : null;
        const io = dir.io;
        dirents = await retryTransient(() => fss.readdirSync(io, { withFileTypes: true }), this.retryBudget);
        this.dirsListed++;
        if (listings && st) {
          if (this.isRacy(st.mtimeMs) || this.isRacy(st.ctimeMs)) listings.dirs.delete(memo);
          else listings.dirs.set(memo, (listed = { ino: st.ino, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, dirents }));
        }
      }
      // Without /proc: what was listed must still be this very directory inside the root.
      if (!PROC_FD && relDir !== '') this.assertInside(root, abs, relDir);
    } catch (err) {
      closeDir(dir);
      const info = errInfo(err, dir?.io, abs);
      // A root that cannot be listed is no checkpoint at all, not an empty one.
      if (relDir === '') throw Object.assign(new Error(`cannot list the workspace folder ${abs}: ${info.message}`), { code: info.code });
      this.notCaptured(prefix + relDir, info, true);
      return;
    }
    dir.refs = 1;
    try {
      await this.walkEntries(root, prefix, relDir, abs, dir, dirents, parentRules, rels, listed);
    } finally {
      releaseDir(dir);
    }
  }

  private async walkEntries(root: SnapshotRoot, prefix: string, relDir: string, abs: string, dir: OpenDir, dirents: Dirent[], parentRules: IgnoreRules, rels?: string[], listed?: ListedDir): Promise<void> {
    let hasGitignore = false;
    let hasDotGit = false;
    for (const d of dirents) {
      if (d.name === '.gitignore') hasGitignore = true;
      else if (d.name === '.git') hasDotGit = true;
    }
    let rules = parentRules;
    if (hasGitignore || hasDotGit) for (const level of levelsForDir(abs, relDir, hasGitignore, hasDotGit, this.opts.listings?.levels)) rules = rules.with(level);
    const relBase = relDir === '' ? '' : `${relDir}/`;
    const absBase = abs + path.sep;
    const plan = listed?.plan;
    if (plan !== undefined) {
      const previous = this.opts.previous;
      if (this.statPool && previous !== undefined && (plan.prevOf === previous || plan.alsoOf === previous) && plan.prefix === prefix && plan.rules.sameAs(rules)) {
        await this.walkPlanned(root, prefix, relBase, absBase, dir, rules, plan);
        return;
      }
      listed!.plan = undefined;
    }
    /** Whether every entry went to the stat workers or is a subdirectory: then a plan can be kept. */
    let plannable = listed !== undefined;
    /** Where an entry is opened: through this directory's descriptor, opened now if it came from the listing cache. */
    const ioOf = (name: string) => `${this.ensureOpen(dir).io}/${name}`;
    // With stat workers: files are collected and lstat'ed as one batch, subdirectories walked meanwhile.
    // Parallel arrays, not an object per entry: a rescan's garbage is mostly per-entry objects.
    const deferred: string[] | null = this.statPool ? [] : null;
    const deferredKeys: string[] = [];
    const deferredPrev: (ManifestEntry | undefined)[] = [];
    const subdirs: string[] | null = deferred ? [] : null;
    for (let di = 0; di < dirents.length; di++) {
      const d = dirents[di]!;
      const name = d.name;
      const reserved = isReserved(name);
      if (reserved && !isReservedVariant(name)) continue;
      const rel = rels ? rels[di]! : relBase + name;
      const isDir = d.isDirectory();
      if (rules.ignores(rel, isDir)) continue;
      if (reserved) {
        // `.GIT`, `.Waypoint`: never entered or recorded (on a case-insensitive file system they are the real ones), but not in silence.
        plannable = false;
        this.unreadable.push({ path: prefix + rel, code: 'ERESERVED', message: `not captured: the name is reserved (${name.toLowerCase()}) in any letter case` });
        continue;
      }
      const key = prefix + rel;
      const problem = childKeyProblem(key, name);
      if (problem) {
        plannable = false;
        this.unreadable.push({ path: key, code: 'EUNSAFEPATH', message: `cannot be recorded safely: ${problem}` });
        continue;
      }
      if (++this.sinceYield >= 256) {
        this.sinceYield = 0;
        await new Promise<void>((r) => setImmediate(r));
      }
      if (isDir) {
        if (subdirs) {
          // A file of the previous manifest that is a directory now: its entry goes.
          if (this.seenPrev && this.manifest.delete(key)) {
            this.fullTouched!.add(key);
            plannable = false;
          }
          subdirs.push(rel);
        } else await this.walkDir(root, prefix, rel, rules, dir);
        continue;
      }
      // Plain concatenation: path.join's normalisation showed up in rescan profiles.
      const file = absBase + name;
      // A regular file the stat cache cannot vouch for is read anyway: no lstat, its
      // descriptor's fstat serves (a first checkpoint: 4 syscalls per file, not 5).
      const prev = this.opts.previous?.get(key);
      if (prev !== undefined) this.seenPrev?.push(key);
      if (prev === undefined && d.isFile()) {
        plannable = false;
        this.filesSeen++;
        this.fullTouched?.add(key);
        let io: string;
        try {
          io = await retryTransient(() => ioOf(name), this.retryBudget);
        } catch (err) {
          this.notCaptured(key, errInfo(err));
          continue;
        }
        if (this.workersRead(dir)) await this.readOnWorker(root, key, rel, file, io, dir);
        else await this.read(root, key, rel, file, io, null);
        continue;
      }
      if (deferred) {
        deferred.push(name);
        deferredKeys.push(key);
        deferredPrev.push(prev);
        continue;
      }
      // lstat by the plain path (cheaper than through /proc): it only decides whether
      // the stat cache holds; content is read through the directory's descriptor.
      let st: Stats | undefined;
      try {
        st = fss.lstatSync(file);
      } catch (err) {
        this.filesSeen++;
        this.notCaptured(key, errInfo(err));
        continue;
      }
      await this.listedEntry(root, prefix, rules, dir, ioOf, name, rel, key, file, prev, st);
    }
    if (!deferred) return;
    const nums = new Float64Array(deferred.length * PREV_FIELDS);
    for (let i = 0; i < deferred.length; i++) prevNumbers(deferredPrev[i], nums, i * PREV_FIELDS);
    const names = deferred.join('\0');
    let made: DirPlan | null = null;
    if (plannable) {
      made = { rules, prefix, prevOf: null, alsoOf: null, names, nameList: deferred, keys: deferredKeys, prevs: deferredPrev, nums, subdirs: subdirs! };
      listed!.plan = made;
      this.plans.push(made);
    }
    if (deferred.length > 0) await this.checkFiles(root, prefix, relBase, absBase, dir, rules, deferred, deferredKeys, deferredPrev, names, nums, made);
    for (const sub of subdirs!) await this.walkDir(root, prefix, sub, rules, dir);
  }

  /** A directory whose plan holds (see DirPlan): its files go to a worker as planned, its subdirectories are walked. */
  private async walkPlanned(root: SnapshotRoot, prefix: string, relBase: string, absBase: string, dir: OpenDir, rules: IgnoreRules, plan: DirPlan): Promise<void> {
    this.dirsPlanned++;
    this.plans.push(plan);
    const { keys, prevs } = plan;
    const seen = this.seenPrev!;
    for (let i = 0; i < keys.length; i++) if (prevs[i] !== undefined) seen.push(keys[i]!);
    this.sinceYield += keys.length + plan.subdirs.length;
    if (this.sinceYield >= 256) {
      this.sinceYield = 0;
      await new Promise<void>((r) => setImmediate(r));
    }
    if (keys.length > 0) await this.checkFiles(root, prefix, relBase, absBase, dir, rules, plan.nameList, keys, prevs, plan.names, plan.nums, plan);
    for (const sub of plan.subdirs) await this.walkDir(root, prefix, sub, rules, dir);
  }

  /**
   * A directory's files are checked against the stat cache on a worker while the walk
   * goes on (its subdirectories, then what follows). Unchanged files are already in
   * the manifest (a copy of the previous one); the ones that differ come back and are
   * examined (and read) here when the answer arrives.
   */
  private async checkFiles(root: SnapshotRoot, prefix: string, relBase: string, absBase: string, dir: OpenDir, rules: IgnoreRules, nameList: string[], keys: string[], prevs: (ManifestEntry | undefined)[], names: string, nums: Float64Array, plan: DirPlan | null): Promise<void> {
    // Bounded only where a descriptor is held: a directory listed from the cache holds none until it is needed.
    const holds = dir.fd >= 0;
    if (holds) while (this.statBatchesOut >= MAX_STAT_BATCHES) await new Promise<void>((r) => this.statWaiters.push(r));
    if (holds) this.statBatchesOut++;
    dir.refs!++; // the directory's descriptor may be needed to read a changed file
    const ioOf = (name: string) => `${this.ensureOpen(dir).io}/${name}`;
    const examine = async ({ idx, values, errors }: StatCheck) => {
      this.filesSeen += nameList.length - idx.length - errors.size;
      for (const [i, failed] of errors) {
        const key = keys[i]!;
        this.filesSeen++;
        if (this.manifest.delete(key)) this.fullTouched!.add(key);
        this.notCaptured(key, { code: failed.code, message: failed.message });
        this.planChanged(plan, i);
      }
      for (let j = 0; j < idx.length; j++) {
        const i = idx[j]!;
        const name = nameList[i]!;
        const key = keys[i]!;
        const at = j * STAT_FIELDS;
        // Re-derived from scratch: listedEntry records it again unless it is gone or unreadable now.
        this.manifest.delete(key);
        this.fullTouched!.add(key);
        this.planChanged(plan, i);
        const st = new PooledStat(values[at]!, values[at + 1]!, values[at + 2]!, values[at + 3]!, values[at + 4]!);
        await this.listedEntry(root, prefix, rules, dir, ioOf, name, relBase + name, key, absBase + name, prevs[i], st);
      }
    };
    this.track(
      this.statPool!.check(absBase, names, nameList.length, nums, this.maxFileBytes)
        .then(examine)
        .finally(() => {
          releaseDir(dir);
          if (!holds) return;
          this.statBatchesOut--;
          this.statWaiters.shift()?.();
        }),
    );
  }

  /** A planned file's entry may change: the plan is out of date until the rescan ends (see settlePlans). */
  private planChanged(plan: DirPlan | null, i: number): void {
    if (plan === null) return;
    plan.prevOf = plan.alsoOf = null;
    this.planChanges.push({ plan, i });
  }

  /** After a rescan: each plan it used or made now describes its manifest (files that changed get their new entry). */
  private settlePlans(): void {
    for (const { plan, i } of this.planChanges) {
      const e = this.manifest.get(plan.keys[i]!);
      plan.prevs[i] = e;
      prevNumbers(e, plan.nums, i * PREV_FIELDS);
    }
    const previous = this.opts.previous ?? null;
    for (const plan of this.plans) {
      // Unchanged by this scan (still tagged): good for its previous manifest and for its result.
      plan.alsoOf = plan.prevOf !== null ? previous : null;
      plan.prevOf = this.manifest;
    }
  }

  /** One listed non-new entry, given its lstat: a directory that replaced it is walked, anything else examined (and read if changed). */
  private async listedEntry(root: SnapshotRoot, prefix: string, rules: IgnoreRules, dir: OpenDir, ioOf: (name: string) => string, name: string, rel: string, key: string, file: string, prev: ManifestEntry | undefined, st: StatLike): Promise<void> {
    // A directory that replaced the entry between readdir and lstat.
    if (st.isDirectory()) {
      await this.walkDir(root, prefix, rel, rules, dir);
      return;
    }
    let io = '';
    try {
      // Only a symlink (readlink) or a file the stat cache cannot vouch for (read) needs the descriptor.
      if (st.isSymbolicLink() || (st.isFile() && st.size <= this.maxFileBytes && !this.statCacheHolds(st, prev))) io = await retryTransient(() => ioOf(name), this.retryBudget);
    } catch (err) {
      this.filesSeen++;
      this.notCaptured(key, errInfo(err));
      return;
    }
    if (!this.examineMeta(key, file, io, st, prev)) await this.read(root, key, rel, file, io, st);
  }

  /** Whether `st` matches `prev` so that the entry is reused without reading (see examineMeta). */
  private statCacheHolds(st: StatLike, prev: ManifestEntry | undefined): boolean {
    return prev !== undefined && prev.type === 'file' && !prev.racy && prev.size === st.size && prev.mtimeMs === st.mtimeMs && prev.ino === st.ino;
  }

  /**
   * The descriptor of a directory listed from the cache, opened on first need from
   * the root, one segment at a time without following a symlink (as openDir does).
   */
  private ensureOpen(dir: OpenDir): OpenDir {
    if (dir.fd >= 0 || !dir.lazy) return dir;
    const { root, relDir, abs } = dir.lazy;
    const opened = this.openDir(root, relDir, abs, null); // throws ESYMLINK for a directory swapped for a link
    dir.fd = opened.fd;
    dir.io = opened.io;
    dir.lazy = undefined;
    return dir;
  }

  /**
   * Whether this new file goes to a worker: only in a bulk scan (past
   * WORKER_READS_AFTER_FILES new files), only where the worker can open it through
   * its directory's descriptor (/proc: the same no-symlink guarantee as `openInside`),
   * and never with test hooks (they run on this thread, before each read).
   */
  private workersRead(dir: OpenDir): boolean {
    if (!this.mayPool || !PROC_FD || dir.fd < 0 || this.opts.hooks) return false;
    if (this.pool) return true;
    if (++this.newFiles <= WORKER_READS_AFTER_FILES) return false;
    this.pool = new CompressPool();
    if (this.opts.deferCompression && this.opts.blobs.deferred) this.workerPackDir = this.opts.blobs.packDirForWorkers();
    if (this.workerPackDir) this.workerReadOpts = { packDir: this.workerPackDir };
    return true;
  }

  /**
   * Hands one new file to a worker, which opens it through `io` (its directory's
   * descriptor, held until the worker is done), fstats, reads, hashes and encodes it;
   * the result is stored and recorded here, as `read` + `store` would.
   */
  private async readOnWorker(root: SnapshotRoot, key: string, rel: string, abs: string, io: string, dir: OpenDir): Promise<void> {
    while (this.workerFiles >= MAX_WORKER_FILES) await new Promise<void>((r) => this.inflightWaiters.push(r));
    this.workerFiles++;
    this.filesReadOnWorkers++;
    dir.refs!++;
    const done = () => {
      this.workerFiles--;
      releaseDir(dir);
      if (this.workerFiles < MAX_WORKER_FILES) for (const w of this.inflightWaiters.splice(0)) w();
    };
    this.track(
      this.pool!.readFile(io, this.maxFileBytes, this.workerReadOpts).then(
        async (r) => {
          try {
            if (r.kind === 'error') {
              if (!READ_ERRORS.has(r.code)) throw Object.assign(new Error(r.message.split(io).join(abs)), { code: r.code });
              // Out of descriptors on the worker: read here instead, with retries (the directory is still held).
              if (TRANSIENT.has(r.code)) await this.read(root, key, rel, abs, io, null);
              else this.notCaptured(key, { code: r.code, message: r.message.split(io).join(abs) });
              return;
            }
            if (r.kind === 'skipped') {
              this.recordSkipped(key, r.size, r.mtimeMs);
              return;
            }
            let put: PutResult;
            if (r.packed) {
              let pack = this.workerPacks.get(r.packed.tmp);
              if (!pack) this.workerPacks.set(r.packed.tmp, (pack = this.opts.blobs.adoptWorkerPack(r.packed.tmp)));
              put = this.opts.blobs.putPacked(r.hash, pack, { hash: r.hash, offset: r.packed.offset, length: r.packed.length });
            } else {
              put = await this.opts.blobs.putEncoded(r.hash, r.encoded);
            }
            // Shorter than its fstat: it changed while the worker read it.
            this.recordStored(key, put, r.length, r.exec, r.mtimeMs, r.ino, r.length !== r.size);
          } finally {
            done();
          }
        },
        (err: unknown) => {
          done();
          throw err;
        },
      ),
    );
  }

  /** Throws (code ESYMLINK) unless `abs` — `rel` under `root` — resolves to exactly that place under the real root. */
  private assertInside(root: SnapshotRoot, abs: string, rel: string, real = fss.realpathSync.native(abs)): void {
    const expected = path.join(this.realRoots.get(root.dir)!, ...rel.split('/'));
    if (real !== expected) {
      throw Object.assign(new Error(`${rel} changed into a symlink during the scan (it leads to ${real}); not followed`), { code: 'ESYMLINK' });
    }
  }

  /**
   * Opens a file for reading without following a symlink anywhere on its path: the
   * last component by O_NOFOLLOW, the parents by opening it through its directory's
   * descriptor (`io`, see walkDir). Without /proc, the real path of the file is
   * checked instead. The descriptor must be a regular file.
   */
  private openInside(root: SnapshotRoot, abs: string, rel: string, io: string): { fd: number; st: Stats } {
    const fd = fss.openSync(io, O_FILE);
    try {
      const st = fss.fstatSync(fd);
      if (!st.isFile()) throw notRegular(rel);
      if (!PROC_FD) this.assertInside(root, abs, rel);
      return { fd, st };
    } catch (err) {
      fss.closeSync(fd);
      throw err;
    }
  }

  /**
   * Records one non-directory path without reading it when it can (symlinks,
   * specials, too-large files, stat-cache hits: the whole of a rescan but a few
   * files). Returns false when the content must be read (`read`).
   */
  examineMeta(key: string, abs: string, io: string, st: StatLike, prev = this.opts.previous?.get(key)): boolean {
    this.filesSeen++;
    if (st.isSymbolicLink()) {
      try {
        const target = fss.readlinkSync(io);
        this.manifest.set(key, { type: 'symlink', target, mtimeMs: st.mtimeMs, ino: st.ino });
      } catch (err) {
        this.notCaptured(key, errInfo(err, io, abs));
      }
      return true;
    }
    if (!st.isFile()) {
      // FIFOs, sockets, devices: opening them could block or have side effects.
      this.notCaptured(key, { code: 'ENOTREG', message: 'not a regular file, directory or symlink' });
      return true;
    }
    if (st.size > this.maxFileBytes) {
      this.recordSkipped(key, st.size, st.mtimeMs);
      return true;
    }
    if (prev && prev.type === 'file' && !prev.racy && prev.size === st.size && prev.mtimeMs === st.mtimeMs && prev.ino === st.ino) {
      const mode: 0o755 | 0o644 = st.mode & 0o111 ? 0o755 : 0o644;
      this.manifest.set(key, prev.mode === mode ? prev : { ...prev, mode });
      return true;
    }
    return false;
  }

  /** Records one non-directory path (see examineMeta), reading it if needed. */
  async examine(root: SnapshotRoot, key: string, rel: string, abs: string, io: string, st: StatLike): Promise<void> {
    if (!this.examineMeta(key, abs, io, st)) await this.read(root, key, rel, abs, io, st);
  }

  /**
   * Reads and stores one regular file. Small files are read before this returns
   * (and, without a pool, stored); the promise is for the walk to wait on when too
   * much content is in flight. `io` reaches the file through its open directory.
   */
  async read(root: SnapshotRoot, key: string, rel: string, abs: string, io: string, listed: StatLike | null): Promise<void> {
    let large = listed !== null && listed.size >= SYNC_READ_BELOW;
    if (large) await this.io.acquire();
    let opened: { fd: number; st: Stats };
    try {
      const hook = this.opts.hooks?.beforeRead?.(abs, key);
      if (hook) await hook;
      opened = await retryTransient(() => this.openInside(root, abs, rel, io), this.retryBudget);
    } catch (err) {
      if (large) this.io.release();
      if (!READ_ERRORS.has((err as NodeJS.ErrnoException).code ?? '')) throw err;
      this.notCaptured(key, errInfo(err, io, abs));
      return;
    }
    const { fd, st: fst } = opened;
    const st = listed ?? fst;
    if (!listed) {
      // Not lstat'ed first (see walkEntries): the descriptor's fstat decides.
      if (fst.size > this.maxFileBytes) {
        fss.closeSync(fd);
        this.recordSkipped(key, fst.size, fst.mtimeMs);
        return;
      }
      if (fst.size >= SYNC_READ_BELOW) {
        large = true;
        await this.io.acquire();
      }
    }
    if (!large) {
      let bytes: Buffer;
      try {
        // Small files go through one reused buffer: the store copies or consumes them
        // before put returns its promise (no allocation per file).
        bytes = readSyncInto(fd, fst.size, fst.size <= this.scratch.length ? this.scratch : Buffer.allocUnsafe(fst.size));
      } catch (err) {
        if (!READ_ERRORS.has((err as NodeJS.ErrnoException).code ?? '')) throw err;
        this.notCaptured(key, errInfo(err, io, abs));
        return;
      } finally {
        fss.closeSync(fd);
      }
      this.track(this.store(key, st, fst, bytes, bytes.buffer === this.scratch.buffer));
      await this.roomToRead();
      return;
    }
    // Large: read on the thread pool, holding the descriptor opened above.
    this.track(
      (async () => {
        let bytes: Buffer;
        try {
          bytes = await readAllAsync(fd, fst.size);
        } catch (err) {
          if (!READ_ERRORS.has((err as NodeJS.ErrnoException).code ?? '')) throw err;
          this.notCaptured(key, errInfo(err, io, abs));
          return;
        } finally {
          fss.closeSync(fd);
          this.io.release();
        }
        await this.store(key, st, fst, bytes);
      })(),
    );
  }

  /** Records a file over the size limit: its size and mtime, no content. */
  private recordSkipped(key: string, size: number, mtimeMs: number): void {
    this.manifest.set(key, { type: 'skipped', size, mtimeMs, reason: 'too_large' });
    this.skipped.push({ path: key, size, reason: 'too_large' });
  }

  /**
   * Records a file whose content is now in the store (read here or on a worker). The
   * stat fields are those of the descriptor read, so the stat cache describes the
   * content stored; `changedWhileRead` or a too-recent mtime marks it racy (rehashed
   * next time).
   */
  private recordStored(key: string, put: PutResult, length: number, exec: boolean, mtimeMs: number, ino: number, changedWhileRead: boolean): void {
    this.filesHashed++;
    this.bytesHashed += length;
    if (put.isNew) this.bytesStoredNew += put.storedBytes;
    if (length > this.maxFileBytes) {
      this.recordSkipped(key, length, mtimeMs); // grew past the limit while it was read
      return;
    }
    const entry: FileEntry = { type: 'file', hash: put.hash, size: length, mode: exec ? 0o755 : 0o644, mtimeMs, ino };
    if (changedWhileRead || this.isRacy(mtimeMs)) entry.racy = true;
    this.manifest.set(key, entry);
  }

  /**
   * Stores content read for `key` and records its entry. The entry's stat fields are
   * those of the descriptor read (`fst`), so the stat cache describes the content
   * stored. Returns a promise only while the content is being compressed on the pool.
   */
  private store(key: string, st: StatLike, fst: Stats, bytes: Buffer, transient = false): Promise<void> {
    const length = bytes.length;
    // Changed while we read it, or since its lstat.
    const changed = () => length !== fst.size || fst.size !== st.size || fst.mtimeMs !== st.mtimeMs || fst.ino !== st.ino;
    // Once workers write raw packs (a bulk scan deferring compression), files read here are stored raw too.
    const defer = this.workerPackDir !== null;
    if (this.mayPool && !this.pool && length >= 64) {
      this.bytesToStore += length;
      if (this.bytesToStore > POOL_AFTER_BYTES) this.pool = new CompressPool();
    }
    const put = this.opts.blobs.put(bytes, { transient, ...(defer ? { defer } : this.pool ? { pool: this.pool } : {}) });
    this.inflightBytes += length;
    return put.then(
      (r) => {
        this.settled(length);
        this.recordStored(key, r, length, (fst.mode & 0o111) !== 0, fst.mtimeMs, fst.ino, changed());
      },
      (err) => {
        this.settled(length);
        throw err;
      },
    );
  }

  /** Waits for all tracked work, including work that tracked work starts (a stat batch reading a changed file). */
  /** After the walk: the workers make their packs durable; each becomes ready to be named by the store's flush. */
  async sealWorkerPacks(): Promise<void> {
    if (!this.pool || !this.workerPackDir) return;
    for (const { tmp, size } of await this.pool.sealPacks()) {
      const pack = this.workerPacks.get(tmp);
      if (pack) pack.seal(size);
      else fss.rmSync(tmp, { force: true }); // nothing in it was reported: no blob refers to it
    }
    for (const pack of this.workerPacks.values()) if (!pack.sealed) throw new Error(`[snapshot] a worker did not seal its pack ${path.basename(pack.tmp)}`);
  }

  /** The scan failed: its workers' packs (those reported and `alsoTmps`, any others the workers sealed) are never named. */
  abandonWorkerPacks(alsoTmps: string[] = []): void {
    this.opts.blobs.abandonWorkerPacks(this.workerPacks.values());
    for (const tmp of alsoTmps) if (!this.workerPacks.has(tmp)) fss.rmSync(tmp, { force: true });
    this.workerPacks.clear();
  }

  async drain(): Promise<void> {
    // Everything tracked has settled (work may start more work while it runs).
    while (this.tracked > 0) await new Promise<void>((r) => this.drainWaiters.push(r));
    if (this.trackFailure) throw this.trackFailure.err;
  }

  async full(): Promise<void> {
    const { roots } = this.opts;
    const listings = this.opts.listings;
    if (listings) this.listed = new Set();
    // Test hooks run per entry on this thread, in walk order: no stat workers with them.
    const previous = this.opts.previous;
    if (listings && PROC_FD && previous && !this.opts.hooks && previous.size >= listings.statWorkersFrom) {
      this.statPool = listings.statPool();
      // Copying the Map whole is several times faster than re-inserting 10k+ entries one by one.
      this.manifest = new Map(previous);
      this.seenPrev = [];
      this.fullTouched = new Set();
    }
    for (const root of roots) await this.walkDir(root, keyPrefixFor(roots, root), '', this.baseRules);
    await this.drain();
    // A large workspace walked without the stat workers (a first checkpoint): start them now, so its next rescan finds them ready.
    if (listings && PROC_FD && !this.statPool && !this.opts.hooks && this.manifest.size >= listings.statWorkersFrom) listings.statPool().warm();
    if (previous && this.seenPrev && this.seenPrev.length !== previous.size) {
      // Some previous entries were not met: deleted, now ignored, or under a directory gone.
      const seen = new Set(this.seenPrev);
      for (const k of previous.keys()) if (!seen.has(k) && this.manifest.delete(k)) this.fullTouched!.add(k);
    }
    if (this.statPool) this.settlePlans();
    // Directories gone (or now ignored) since: their listings would only take memory.
    const listed = this.listed;
    if (listed) for (const k of this.opts.listings!.dirs.keys()) if (!listed.has(k)) this.opts.listings!.dirs.delete(k);
  }

  /**
   * Re-examines only the dirty paths; everything else is copied from `previous`.
   * Returns the keys that may have changed (for the change summary).
   */
  async incremental(previous: Manifest, dirty: readonly string[]): Promise<Set<string>> {
    const { roots } = this.opts;
    // Nothing dirty: nothing to examine, and the manifest is `previous` itself (no copy of 10k+ entries).
    if (dirty.length === 0) {
      this.manifest = previous;
      return new Set();
    }
    // Copying the Map whole is several times faster than re-inserting 10k+ entries one by one.
    this.manifest = new Map(previous);
    const touched = new Set<string>();
    let dirPrefixes: Set<string> | null = null;
    const removeSubtree = (key: string) => {
      // A file or symlink key cannot also be a directory in the same manifest.
      if (key !== '' && previous.has(key)) return;
      dirPrefixes ??= buildDirPrefixes(previous);
      if (key !== '' && !dirPrefixes.has(key)) return;
      const p = key === '' ? '' : `${key}/`;
      for (const k of previous.keys()) {
        if (k.startsWith(p) && this.manifest.delete(k)) touched.add(k);
      }
    };

    // Normalize to (root, rel) pairs; widen .gitignore / info/exclude edits to their directory.
    const targets = new Map<string, { root: SnapshotRoot; rel: string }>();
    for (const raw of dirty) {
      const key = toKey(roots, raw);
      if (key === null) continue; // outside every root
      let root: SnapshotRoot;
      let rel: string;
      if (key === '' || (roots.length > 1 && roots.some((r) => r.name === key))) {
        root = key === '' ? roots[0]! : roots.find((r) => r.name === key)!;
        rel = '';
      } else {
        try {
          ({ root, rel } = splitKey(roots, key));
        } catch {
          continue;
        }
      }
      const segs = rel === '' ? [] : rel.split('/').filter((s) => s !== '' && s !== '.');
      if (segs.includes('..')) continue;
      const reservedAt = segs.findIndex(isReserved);
      if (reservedAt >= 0) {
        // Only an info/exclude edit matters inside .git: rescan the repo it belongs to.
        if (segs.slice(reservedAt).join('/').toLowerCase() === '.git/info/exclude') segs.length = reservedAt;
        else continue;
      } else if (segs[segs.length - 1] === '.gitignore') {
        segs.pop();
      }
      const prefix = keyPrefixFor(roots, root);
      // Below a directory the previous scan could not list: that whole directory is looked at again.
      for (let i = 1; i < segs.length; i++) {
        const above = previous.get(prefix + segs.slice(0, i).join('/'));
        if (above?.type === 'uncaptured' && above.dir) {
          segs.length = i;
          break;
        }
      }
      const r = segs.join('/');
      targets.set(r === '' ? prefix.replace(/\/$/, '') : prefix + r, { root, rel: r });
    }
    // A target inside another target's subtree is covered by that one.
    const kept: { root: SnapshotRoot; rel: string }[] = [];
    for (const [k, t] of targets) {
      const segs = k === '' ? [] : k.split('/');
      let covered = targets.has('') && k !== '';
      for (let i = 1; i < segs.length && !covered; i++) covered = targets.has(segs.slice(0, i).join('/'));
      if (!covered) kept.push(t);
    }

    await Promise.all(
      kept.map(async ({ root, rel }) => {
        const prefix = keyPrefixFor(roots, root);
        const key = rel === '' ? prefix.replace(/\/$/, '') : prefix + rel;
        const relDir = rel.includes('/') ? rel.slice(0, rel.lastIndexOf('/')) : '';
        const rules = rel === '' ? this.baseRules : await this.rulesFor(root, relDir);
        const abs = path.join(root.dir, ...(rel === '' ? [] : rel.split('/')));
        let st: Stats | null = null;
        try {
          st = fss.lstatSync(abs);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT' && (err as NodeJS.ErrnoException).code !== 'ENOTDIR') throw err;
        }
        const isDir = st?.isDirectory() ?? false;
        const ignored = rel !== '' && (rules === null || rules.ignores(rel, isDir));
        if (rel === '') {
          removeSubtree(key);
        } else {
          if (this.manifest.delete(key)) touched.add(key);
          removeSubtree(key);
        }
        if (!st || ignored) return;
        if (isDir) {
          const before = new Set(this.manifest.keys());
          await this.walkDir(root, prefix, rel, rel === '' ? this.baseRules : rules!);
          await this.drain();
          for (const k of this.manifest.keys()) if (!before.has(k)) touched.add(k);
        } else {
          const problem = pathKeyProblem(key);
          if (problem) {
            this.unreadable.push({ path: key, code: 'EUNSAFEPATH', message: `cannot be recorded safely: ${problem}` });
            return;
          }
          touched.add(key);
          const name = rel.slice(rel.lastIndexOf('/') + 1);
          const absDir = path.dirname(abs);
          let dir: OpenDir;
          try {
            dir = await retryTransient(() => this.openDir(root, relDir, absDir, null), this.retryBudget);
          } catch (err) {
            this.notCaptured(key, errInfo(err));
            return;
          }
          try {
            await this.examine(root, key, rel, abs, dir.fd >= 0 ? `${dir.io}/${name}` : abs, st);
          } finally {
            closeDir(dir);
          }
        }
      }),
    );
    const listings = this.opts.listings;
    if (listings) {
      // Directory plans (see DirPlan) of directories with no touched entry hold for this scan's manifest too.
      let dirs: Set<string> | null = new Set<string>();
      try {
        for (const k of touched) {
          const { root, rel } = splitKey(roots, k);
          dirs.add(`${root.dir}\0${rel.includes('/') ? rel.slice(0, rel.lastIndexOf('/')) : ''}`);
        }
      } catch {
        dirs = null; // a key no root holds: carry nothing
      }
      listings.carryPlans(previous, this.manifest, dirs);
    }
    return touched;
  }

  changes(previous: Manifest | undefined, touched: Set<string> | null): FileChange[] {
    const out: FileChange[] = [];
    const prev = previous ?? new Map<string, ManifestEntry>();
    if (touched) {
      for (const k of touched) {
        const c = compareEntries(k, prev.get(k), this.manifest.get(k));
        if (c) out.push(c);
      }
    } else {
      for (const [k, e] of this.manifest) {
        const before = prev.get(k);
        if (before === e) continue; // reused entry, unchanged
        const c = compareEntries(k, before, e);
        if (c) out.push(c);
      }
      for (const [k, e] of prev) if (!this.manifest.has(k)) out.push({ path: k, status: 'deleted', before: e });
    }
    return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }
}

function buildDirPrefixes(m: Manifest): Set<string> {
  const dirs = new Set<string>();
  for (const k of m.keys()) {
    let i = k.lastIndexOf('/');
    while (i > 0) {
      const d = k.slice(0, i);
      if (dirs.has(d)) break;
      dirs.add(d);
      i = d.lastIndexOf('/');
    }
  }
  return dirs;
}

/**
 * Scans the workspace. New file content is stored in `blobs` and flushed to disk
 * before this resolves, so the returned manifest may be recorded immediately.
 * Multi-root key scheme: see `checkRoots` in paths.ts.
 */
export async function scan(opts: ScanOptions): Promise<ScanResult> {
  checkRoots(opts.roots);
  if (opts.dirty && !opts.previous) throw new Error('a dirty-path hint needs the previous manifest');
  const t0 = performance.now();
  const s = new Scan(opts);
  let touched: Set<string> | null = null;
  try {
    if (opts.dirty && opts.previous) touched = await s.incremental(opts.previous, opts.dirty);
    else {
      await s.full();
      touched = s.fullTouched;
    }
    await s.drain();
    await s.sealWorkerPacks();
  } catch (err) {
    // Workers may still be writing: let them close their packs (threads share the
    // process's descriptors, so ending a thread would not) and stop, then remove them.
    await s.drain().catch(() => undefined); // nothing still in flight to a worker
    const sealed = (await s.pool?.sealPacks().catch(() => undefined)) ?? [];
    await s.pool?.close();
    s.pool = null;
    s.abandonWorkerPacks(sealed.map((p) => p.tmp));
    throw err;
  } finally {
    await s.pool?.close();
  }
  if (opts.flush !== false) await opts.blobs.flush();
  // Map order is not meaningful (the walk interleaves); encodings sort their keys.
  return {
    manifest: s.manifest,
    touched,
    changed: summarize(s.changes(opts.previous, touched)),
    skipped: s.skipped,
    unreadable: s.unreadable,
    stats: { filesSeen: s.filesSeen, filesHashed: s.filesHashed, bytesHashed: s.bytesHashed, bytesStoredNew: s.bytesStoredNew, filesReadOnWorkers: s.filesReadOnWorkers, dirsListed: s.dirsListed, dirsFromCache: s.dirsFromCache, dirsPlanned: s.dirsPlanned, ms: performance.now() - t0 },
  };
}
