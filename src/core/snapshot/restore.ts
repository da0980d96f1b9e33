/**
 * Restore mechanics: plan what turns the current workspace into a target manifest,
 * then apply the plan with every path validated first, each file written to a temp
 * file beside it and renamed, and nothing deleted that the caller does not hold.
 * Applying is idempotent, so the engine can re-run a plan after a crash.
 */
import fss, { constants as fsc } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { BlobNotFoundError, sha256Hex, type BlobStore } from './blobStore.js';
import { sameContent, type FileEntry, type Manifest, type ManifestEntry, type SymlinkEntry } from './manifest.js';
import {
  MAX_SEGMENT_LENGTH,
  RESTORE_TEMP_SUFFIX,
  RESTORE_TEMP_TAG,
  UnsafePathError,
  assertSafePathKey,
  checkRoots,
  findCaseCollisions,
  restoreAsideName,
  restoreTempName,
  resolveInsideSync,
  splitKey,
  type ResolveCache,
  type SnapshotRoot,
} from './paths.js';
import { WorkspaceDirs, type WsDir } from './workspaceDirs.js';
import { ctimeBefore } from './scan/scanRecord.js';
import { WaypointError } from '../model/errors.js';
import { plural } from '../model/plural';
import { noteProgress } from '../liveness';


export interface PlannedWrite {
  path: string;
  entry: FileEntry | SymlinkEntry;
  /** The path is absent from `current`: anything found there on disk is not ours to overwrite. */
  expectAbsent: boolean;
  /**
   * What the plan expects to replace (the path's entry in `current`): a file or link
   * found there with other content is someone's edit since the scan, kept as a
   * conflict. Absent in plans recorded before it (those replace without the check).
   */
  was?: FileEntry | SymlinkEntry;
}

export interface PlannedRemove {
  path: string;
  /** Content hash (files) — removal happens only if the file on disk still has it. */
  hash?: string;
  /** Link target (symlinks) — same rule. */
  target?: string;
}

/**
 * `not_captured_in_target`: the target checkpoint could not read this path (or a
 * directory above it), so it holds no word on what belongs there: left as it is.
 * `not_captured_in_current`: the workspace now holds content the scan before this
 * rollback could not read, so nothing could undo overwriting or removing it.
 */
export type KeptReason = 'content_not_held' | 'too_large_in_current' | 'too_large_in_target' | 'not_captured_in_target' | 'not_captured_in_current';

export interface RestorePlan {
  writes: PlannedWrite[];
  removes: PlannedRemove[];
  /** Paths that differ but are deliberately left alone, with why. */
  kept: { path: string; reason: KeptReason }[];
  unchanged: number;
  /**
   * Names the temp file of each write: `restoreTempName(tempTag, index in writes)`,
   * beside its target. Set (`newTempTag`) by whoever makes the plan durable, before
   * any temp exists, so a re-run after a crash removes exactly the temps a crashed
   * run left and nothing else. A plan applied without one gets a fresh tag per run.
   */
  tempTag?: string;
  /**
   * A plan recorded before temp tags: a crashed run of it wrote its temps to
   * `<name>.waypoint-tmp`, which a re-run (and `sweepRestoreTemps`) removes.
   */
  legacyTemps?: boolean;
  /**
   * When the scan that made `current` began (ms since the epoch). A file whose stat
   * still matches its `was` entry and whose inode has not changed since then (ctime)
   * is trusted unchanged; any other is re-hashed before it is replaced. Without it,
   * every replaced file is re-hashed.
   */
  scannedAtMs?: number;
}

/** A fresh temp tag for a plan about to be made durable (see `RestorePlan.tempTag`). */
export function newTempTag(): string {
  return randomBytes(8).toString('hex');
}

export interface PlanOptions {
  /** Restore only these path keys (a key also selects everything below it). */
  paths?: string[];
  /**
   * Whether some checkpoint holds a blob. A file that the target lacks is removed
   * only if its content is held, so a removal can always be undone. Default: nothing
   * is held, nothing is removed.
   */
  isHeld?: (hash: string) => boolean;
}

function selected(key: string, paths: readonly string[] | undefined): boolean {
  if (!paths) return true;
  return paths.some((p) => p === '' || key === p || key.startsWith(`${p}/`));
}

/** Keys of the directories `m` could not list (uncaptured entries with `dir`), or null when there are none. */
function dirGaps(m: Manifest): Set<string> | null {
  let gaps: Set<string> | null = null;
  m.forEach((e, key) => {
    if (e.type === 'uncaptured' && e.dir) (gaps ??= new Set()).add(key);
  });
  return gaps;
}

/** Whether a directory above `key` is in `gaps`. */
function underGap(gaps: Set<string> | null, key: string): boolean {
  if (gaps === null) return false;
  for (let i = key.indexOf('/'); i > 0; i = key.indexOf('/', i + 1)) if (gaps.has(key.slice(0, i))) return true;
  return false;
}

/**
 * Pure: what `applyRestore` must do to turn `current` into `target` (restricted to
 * `paths`). What either side could not capture (see UncapturedEntry) is never
 * written, overwritten or removed: the target holds no word on it, or nothing holds
 * what is there now.
 */
export function planRestore(current: Manifest, target: Manifest, opts: PlanOptions = {}): RestorePlan {
  const paths = opts.paths?.map((p) => p.replace(/\/+$/, ''));
  const isHeld = opts.isHeld ?? (() => false);
  const plan: RestorePlan = { writes: [], removes: [], kept: [], unchanged: 0 };
  const currentGaps = dirGaps(current);
  let targetGaps: Set<string> | null = null;
  // forEach, not for…of over entries: run once per rollback, this is mostly interpreted,
  // and there the entry arrays and iterator results cost ~220 bytes per manifest entry
  // (6 MB of garbage for 13.6k files, which brought on a young-generation GC mid-rollback
  // about every other time in the benchmark).
  let inBoth = 0;
  target.forEach((want, key) => {
    const have = current.get(key);
    if (have) inBoth++;
    if (want.type === 'uncaptured' && want.dir) (targetGaps ??= new Set()).add(key);
    if (!selected(key, paths)) return;
    if (have && sameContent(have, want)) {
      plan.unchanged++;
      return;
    }
    if (want.type === 'uncaptured') {
      // Absent now: nothing to leave alone (what is below a directory gap is met in the pass over `current`).
      if (have) plan.kept.push({ path: key, reason: 'not_captured_in_target' });
      return;
    }
    if (have?.type === 'uncaptured' || underGap(currentGaps, key)) {
      plan.kept.push({ path: key, reason: 'not_captured_in_current' });
      return;
    }
    // Too-large files have no stored content: never overwrite one, never write one.
    if (want.type === 'skipped') {
      plan.kept.push({ path: key, reason: 'too_large_in_target' });
      return;
    }
    if (have?.type === 'skipped') {
      plan.kept.push({ path: key, reason: 'too_large_in_current' });
      return;
    }
    plan.writes.push(have?.type === 'file' || have?.type === 'symlink' ? { path: key, entry: want, expectAbsent: false, was: have } : { path: key, entry: want, expectAbsent: !have });
  });
  // Every key of `current` is in `target` (the usual rollback: files changed, none
  // added): nothing to remove, and no second pass over the whole manifest.
  if (inBoth < current.size) {
    current.forEach((have, key) => {
      if (target.has(key) || !selected(key, paths)) return;
      if (underGap(targetGaps, key)) plan.kept.push({ path: key, reason: 'not_captured_in_target' });
      else if (have.type === 'uncaptured') plan.kept.push({ path: key, reason: 'not_captured_in_current' });
      else if (have.type === 'skipped') plan.kept.push({ path: key, reason: 'too_large_in_current' });
      else if (have.type === 'symlink') plan.removes.push({ path: key, target: have.target });
      else if (isHeld(have.hash)) plan.removes.push({ path: key, hash: have.hash });
      else plan.kept.push({ path: key, reason: 'content_not_held' });
    });
  }
  const byPath = (a: { path: string }, b: { path: string }) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);
  plan.writes.sort(byPath);
  plan.removes.sort(byPath);
  plan.kept.sort(byPath);
  return plan;
}

export interface ApplyOptions {
  /** Refuse case-fold collisions. Default: detected from the first root's file system. */
  caseInsensitive?: boolean;
}

export interface ApplyResult {
  written: string[];
  removed: string[];
  dirsRemoved: string[];
  /** Paths left alone because the disk did not match the plan (an untracked file in the way, an edit since the scan). */
  conflicts: { path: string; reason: string }[];
}

/** Detects a case-insensitive file system without writing: stat the root under a case-swapped name. */
export async function detectCaseInsensitive(dir: string): Promise<boolean> {
  const base = path.basename(dir);
  const swapped = [...base].map((c) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase())).join('');
  if (swapped === base) return process.platform === 'darwin' || process.platform === 'win32';
  // Two stats: sync, a thread-pool round trip would cost more than both.
  try {
    const a = fss.statSync(dir);
    const b = fss.statSync(path.join(path.dirname(dir), swapped), { throwIfNoEntry: false });
    return !!b && a.ino === b.ino && a.dev === b.dev;
  } catch {
    return false;
  }
}

/**
 * Linux: a replaced file's old name is unlinked just before the temp is renamed into
 * place. ext4 (auto_da_alloc) starts writeback of the renamed file's data when a
 * rename replaces an existing file, inside the rename: 100 files took 17–24 ms
 * renamed over their old versions and 8–10 ms unlinked first (measured on the
 * benchmark VM, files held as below). The price is a moment in which the path is
 * absent, as with `git checkout`, which unlinks and recreates; file watchers (VS
 * Code's included) fold a delete followed by a create into a change.
 */
const UNLINK_BEFORE_RENAME = process.platform === 'linux';

function unlinkIfThere(file: string): void {
  try {
    fss.unlinkSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

/** Best effort, for cleanup on a path that is already failing or skipping: the error that matters is elsewhere. */
function unlinkQuietly(file: string): boolean {
  try {
    fss.unlinkSync(file);
    return true;
  } catch {
    return false;
  }
}

/** The process umask (Linux: read, not set and restored, so no other thread sees it change); else all bits, so every file gets its fchmod. */
function currentUmask(): number {
  if (process.platform !== 'linux') return 0o777;
  try {
    const m = /^Umask:\s*([0-7]+)$/m.exec(fss.readFileSync('/proc/self/status', 'latin1'));
    return m ? parseInt(m[1]!, 8) : 0o777;
  } catch {
    return 0o777;
  }
}

/**
 * Replaced and removed files whose blocks are freed after the restore returns: each is
 * opened just before its last name goes, so dropping that name does not free it; the
 * descriptors are closed on the thread pool once every file is in place. Freeing a
 * file's blocks is most of what replacing it costs where the file system discards
 * freed blocks synchronously (ext4 mounted with `discard`: 0.2–0.5 ms a file). Capped,
 * so a large restore never holds more descriptors than this; POSIX only (Windows
 * cannot rename over an open file).
 */
const MAX_HELD_FOR_FREEING = 256;
const HOLD_FOR_FREEING = process.platform !== 'win32';
const O_HOLD = fsc.O_RDONLY | (fsc.O_NOFOLLOW ?? 0) | (fsc.O_NONBLOCK ?? 0);

/** Descriptors of files being replaced or removed, closed (freeing them) after the restore. */
class HeldForFreeing {
  private readonly fds: number[] = [];
  /** Opens `file` if it is a regular file and the cap allows; failures only mean it is freed at once. */
  hold(file: string, st: fss.Stats): void {
    if (!HOLD_FOR_FREEING || !st.isFile() || st.size === 0 || this.fds.length >= MAX_HELD_FOR_FREEING) return;
    try {
      this.fds.push(fss.openSync(file, O_HOLD));
    } catch {
      // Gone or unreadable: nothing to defer.
    }
  }
  /** Closes the descriptors on the thread pool without waiting: the restore's files are already in place. */
  release(): void {
    for (const fd of this.fds.splice(0)) fss.close(fd, () => undefined);
  }
}

const CHANGED_SINCE_SCAN = 'changed on disk since it was scanned; kept';

/** Blob bytes a restore may hold in memory to validate and write in one read. */
const PRELOAD_BUDGET_BYTES = 64 * 1024 * 1024;

function lstatOrNull(p: string): fss.Stats | null {
  try {
    return fss.lstatSync(p, { throwIfNoEntry: false }) ?? null;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOTDIR') return null;
    throw err;
  }
}

const O_READ_NOFOLLOW = fsc.O_RDONLY | (fsc.O_NOFOLLOW ?? 0) | (fsc.O_NONBLOCK ?? 0);

/** SHA-256 of the regular file at `p`, read without following a link (null if it is not one now). */
function hashNoFollow(p: string): string | null {
  let fd: number;
  try {
    fd = fss.openSync(p, O_READ_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP' || code === 'ENOENT' || code === 'ENXIO' || code === 'EMLINK') return null;
    throw err;
  }
  try {
    if (!fss.fstatSync(fd).isFile()) return null;
    return sha256Hex(fss.readFileSync(fd));
  } finally {
    fss.closeSync(fd);
  }
}

function readlinkOrNull(p: string): string | null {
  try {
    return fss.readlinkSync(p);
  } catch {
    return null;
  }
}

/** Two looks at one path: the same inode, unchanged in between (reading it changes none of these). */
function sameStat(a: fss.Stats | null, b: fss.Stats | null): boolean {
  if (a === null || b === null) return a === b;
  return a.ino === b.ino && a.dev === b.dev && a.size === b.size && a.mtimeMs === b.mtimeMs && a.ctimeMs === b.ctimeMs && a.mode === b.mode;
}

/**
 * Whether the file or link at `p` is still what the plan expected to replace. A file
 * whose size, mtime and inode match and whose inode has not changed since the scan
 * began (ctime, as the scanner trusts a stat) is taken as unchanged without reading
 * it; on any doubt it is re-hashed, through a descriptor that does not follow a link.
 */
function stillAsPlanned(p: string, st: fss.Stats, was: FileEntry | SymlinkEntry, scannedAtMs: number | undefined): boolean {
  if (was.type === 'symlink') return st.isSymbolicLink() && readlinkOrNull(p) === was.target;
  if (!st.isFile() || st.size !== was.size || (st.mode & 0o111 ? 0o755 : 0o644) !== was.mode) return false;
  if (!was.racy && st.mtimeMs === was.mtimeMs && st.ino === was.ino && typeof scannedAtMs === 'number' && ctimeBefore(st.ctimeMs, scannedAtMs)) return true;
  return hashNoFollow(p) === was.hash;
}

/**
 * Test seam: called with a path key as the restore is about to check it (`check`);
 * for a write, once its temp is written and it is about to look again (`swap`); after
 * the last look, just before the path is taken (`replace`); and once the old file is
 * aside, before the new one goes in (`placed`). Tests edit files from here to race a
 * person's save; never set in production.
 */
export const restoreSeams: { beforeReplace?: (key: string, phase: RestorePhase) => void } = {};
export type RestorePhase = 'check' | 'swap' | 'replace' | 'placed';

/**
 * Where link(2) makes a second name for a file without following a symlink and a
 * rename moves an open file: the replace-and-remove steps go through an aside name
 * (`moveAside`). Elsewhere (Windows) the temp is renamed over the path as before.
 */
const ASIDE = process.platform === 'linux' || process.platform === 'darwin';

/**
 * Takes the file at `file` (last seen as `st`) off its path by moving it to `aside`,
 * one atomic step, then checks that what was taken is what was seen: a save that
 * landed between the last look and the move is in the moved file, and goes back.
 * Returns the moved file's stat when it was as seen (the caller then drops it), null
 * when the path was left as the person has it (gone, or their save put back).
 */
function moveAside(file: string, aside: string, st: fss.Stats): fss.Stats | null {
  try {
    fss.renameSync(file, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null; // removed meanwhile: theirs
    throw err;
  }
  const moved = lstatOrNull(aside);
  // The move itself sets the inode's ctime, so only the rest is compared: a write since
  // the last look changes the size or the mtime (setting the mtime back as well, in
  // that instant, is beyond what an editor does).
  if (moved && moved.ino === st.ino && moved.dev === st.dev && moved.size === st.size && moved.mtimeMs === st.mtimeMs && moved.mode === st.mode) return moved;
  putBack(aside, file);
  return null;
}

/**
 * Gives a moved file its path back without replacing anything there: a save that
 * landed on the free path meanwhile is newer than the moved one, and stays.
 */
function putBack(aside: string, file: string): void {
  try {
    fss.linkSync(aside, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  unlinkIfThere(aside);
}

/** Whether what is on disk at `p` is exactly `entry` (content and, for files, mode). */
function diskMatches(p: string, st: fss.Stats, entry: ManifestEntry): boolean {
  if (entry.type === 'symlink') return st.isSymbolicLink() && fss.readlinkSync(p) === entry.target;
  if (entry.type !== 'file' || !st.isFile() || st.size !== entry.size) return false;
  if ((st.mode & 0o111 ? 0o755 : 0o644) !== entry.mode) return false;
  return hashNoFollow(p) === entry.hash;
}

/**
 * Phase 1 of applyRestore on its own: every path of the plan checked (safe key, no
 * duplicate, nothing beneath a planned file or symlink, no case collision where
 * case folds, resolved inside its root through no symlinked parent), with no write.
 * Callers validate before they record anything; applyRestore checks again, since
 * the workspace may change in between. Returns each path's absolute target.
 */
export function checkRestorePaths(plan: RestorePlan, roots: SnapshotRoot[], caseInsensitive: boolean): Map<string, string> {
  checkRoots(roots);
  const all = [...plan.writes.map((w) => w.path), ...plan.removes.map((r) => r.path)];
  const seen = new Set<string>();
  for (const p of all) {
    assertSafePathKey(p);
    if (seen.has(p)) throw new UnsafePathError(p, 'appears more than once in the restore plan');
    seen.add(p);
  }
  if (plan.tempTag !== undefined && (typeof plan.tempTag !== 'string' || !RESTORE_TEMP_TAG.test(plan.tempTag))) {
    throw new UnsafePathError(String(plan.tempTag), 'is not a restore temp tag (8 to 32 lowercase hex digits)');
  }
  const fold = (p: string) => (caseInsensitive ? p.normalize('NFC').toLowerCase() : p);
  // Nothing may be written beneath a path the plan writes as a file or symlink:
  // that is how a manifest would plant `a -> /etc` and then write `a/passwd`.
  const leaves = new Set(plan.writes.map((w) => fold(w.path)));
  for (const w of plan.writes) {
    const segs = fold(w.path).split('/');
    for (let i = 1; i < segs.length; i++) {
      const anc = segs.slice(0, i).join('/');
      if (leaves.has(anc)) throw new UnsafePathError(w.path, `would be written beneath ${anc}, which the plan writes as a file or symlink`);
    }
  }
  if (caseInsensitive) {
    const collisions = findCaseCollisions(plan.writes.map((w) => w.path));
    if (collisions.length > 0) {
      throw new UnsafePathError(collisions[0]!.join(', '), 'paths collide on this case-insensitive file system');
    }
  }
  const abs = new Map<string, string>();
  const validateCache: ResolveCache = new Map();
  for (const p of all) {
    const { root, rel } = splitKey(roots, p);
    abs.set(p, resolveInsideSync(root.dir, rel, validateCache));
  }
  return abs;
}

/** Where a path key's entry lives: its directory as the restore reached it, and its name there. */
interface Located {
  dir: WsDir;
  name: string;
}

/** The directory holding `key` (created where missing if `create`), or null where it does not exist. */
function locate(dirs: WorkspaceDirs, roots: readonly SnapshotRoot[], key: string, create: boolean): Located | null {
  const { root, rel } = roots.length === 1 ? { root: roots[0]!, rel: key } : splitKey(roots, key);
  const slash = rel.lastIndexOf('/');
  const dir = dirs.dir(roots.length === 1 ? 0 : roots.indexOf(root), slash < 0 ? '' : rel.slice(0, slash), create);
  return dir ? { dir, name: slash < 0 ? rel : rel.slice(slash + 1) } : null;
}

/** The `<name>.waypoint-tmp` a legacy plan's crashed run may have left, where such a name fits at all. */
function legacyTempOf(name: string): string | null {
  const t = `${name}${RESTORE_TEMP_SUFFIX}`;
  return t.length <= MAX_SEGMENT_LENGTH && Buffer.byteLength(t) <= MAX_SEGMENT_LENGTH ? t : null;
}

/**
 * Validates the whole plan, then applies it. Throws — having written nothing — on
 * any unsafe path (see paths.ts), a symlink or file entry that another entry would
 * be written beneath, a case-fold collision on a case-insensitive file system, or a
 * missing blob. Writes never overwrite something the plan did not expect.
 *
 * Every write, rename, chmod and removal goes through the directory descriptors of
 * a `WorkspaceDirs` (see workspaceDirs.ts): a directory swapped for a symlink while
 * this runs cannot send a write outside the workspace (on Linux; elsewhere each
 * directory is checked by path). A symlinked parent that leads outside throws
 * mid-way, loudly; the plan stays re-runnable.
 *
 * File I/O here is synchronous on purpose: a rollback is a short, serialized burst
 * of small metadata-heavy operations where thread-pool round trips cost more than
 * the syscalls (100 files: ~25 ms sync vs ~250 ms async on a busy 2-core machine).
 */
export async function applyRestore(plan: RestorePlan, roots: SnapshotRoot[], blobs: BlobStore, opts: ApplyOptions = {}): Promise<ApplyResult> {
  // --- Phase 1: validate everything; no writes. ---
  checkRoots(roots);
  const caseInsensitive = opts.caseInsensitive ?? (await detectCaseInsensitive(roots[0]!.dir));
  checkRestorePaths(plan, roots, caseInsensitive);
  // Every blob must be there before anything is written. Small restores read them
  // now (phase 3 then does no second lookup); past a memory budget, only check.
  const preloaded = new Map<string, Buffer>();
  let budget = PRELOAD_BUDGET_BYTES;
  // One open per pack for the whole preload, not one per blob.
  const reader = blobs.batchReader();
  try {
    for (const w of plan.writes) {
      if (w.entry.type !== 'file') continue;
      if (budget >= w.entry.size && !preloaded.has(w.entry.hash)) {
        preloaded.set(w.entry.hash, reader.get(w.entry.hash, w.entry.size)); // throws BlobNotFoundError
        budget -= w.entry.size;
      } else if (!preloaded.has(w.entry.hash) && !blobs.hasSync(w.entry.hash)) {
        throw new BlobNotFoundError(w.entry.hash);
      }
    }
  } finally {
    reader.close();
  }

  const run: RestoreRun = {
    plan,
    roots,
    blobs,
    preloaded,
    tag: plan.tempTag ?? newTempTag(),
    legacy: plan.legacyTemps === true,
    dirs: new WorkspaceDirs(roots),
    held: new HeldForFreeing(),
    result: { written: [], removed: [], dirsRemoved: [], conflicts: [] },
  };
  try {
    removeFiles(run);
    writeFiles(run);
    return run.result;
  } catch (err) {
    const r = run.result;
    if (err instanceof UnsafePathError && r.written.length + r.removed.length + r.dirsRemoved.length > 0) throw new RestoreStoppedError(err, r);
    throw err;
  } finally {
    run.dirs.close();
    run.held.release();
  }
}

/**
 * A restore that found an unsafe path (a directory swapped for a symlink leading
 * outside, say) after it had already changed some paths: it stopped there, having
 * written nothing outside the workspace. The plan is unchanged and can be applied
 * again, or undone from the checkpoint taken before it.
 */
export class RestoreStoppedError extends WaypointError {
  constructor(
    readonly unsafe: UnsafePathError,
    readonly done: Readonly<ApplyResult>,
  ) {
    super(
      'unsafe_path',
      `${unsafe.message}; the restore stopped there, with ${plural(done.written.length, 'path')} written and ${done.removed.length} removed before it (nothing outside the workspace was touched)`,
      { rule: unsafe.rule, written: done.written.length, removed: done.removed.length },
    );
    this.name = 'RestoreStoppedError';
  }
}

/** One application of a plan: what every phase shares. */
interface RestoreRun {
  plan: RestorePlan;
  roots: SnapshotRoot[];
  blobs: BlobStore;
  preloaded: Map<string, Buffer>;
  /** This run's temp tag (the plan's, or a fresh one). */
  tag: string;
  /** Also remove `<name>.waypoint-tmp` temps (a plan recorded before temp tags). */
  legacy: boolean;
  dirs: WorkspaceDirs;
  held: HeldForFreeing;
  result: ApplyResult;
}

/** Phase 2: removals (only what still has the recorded content), then the directories they emptied. */
function removeFiles(run: RestoreRun): void {
  const { plan, roots, dirs, held, result } = run;
  const emptied = new Map<string, WsDir>();
  for (let i = 0; i < plan.removes.length; i++) {
    const r = plan.removes[i]!;
    noteProgress();
    const at = locate(dirs, roots, r.path, false);
    if (!at) continue; // its directory is gone: removed by an earlier, interrupted run
    const file = `${at.dir.io}/${at.name}`;
    const aside = `${at.dir.io}/${restoreAsideName(run.tag, 'r', i)}`;
    if (ASIDE) settleRemovedAside(aside, file);
    restoreSeams.beforeReplace?.(r.path, 'check');
    const st = lstatOrNull(file);
    if (!st) {
      emptied.set(`${at.dir.root}\0${at.dir.rel}`, at.dir); // removed by an earlier, interrupted run
      continue;
    }
    const ok = r.target !== undefined ? st.isSymbolicLink() && readlinkOrNull(file) === r.target : st.isFile() && r.hash !== undefined && hashNoFollow(file) === r.hash;
    // Looked at again once hashed: an edit while it was read is not removed.
    if (!ok || !sameStat(lstatOrNull(file), st)) {
      result.conflicts.push({ path: r.path, reason: CHANGED_SINCE_SCAN });
      continue;
    }
    if (ASIDE) {
      restoreSeams.beforeReplace?.(r.path, 'replace');
      const moved = moveAside(file, aside, st);
      if (!moved) {
        if (lstatOrNull(file)) result.conflicts.push({ path: r.path, reason: CHANGED_SINCE_SCAN });
        continue;
      }
      held.hold(aside, moved);
      unlinkIfThere(aside);
    } else {
      held.hold(file, st);
      unlinkIfThere(file);
    }
    result.removed.push(r.path);
    emptied.set(`${at.dir.root}\0${at.dir.rel}`, at.dir);
  }
  // Deepest first, each up to its root: rmdir only succeeds on an empty directory
  // (untracked files stay), and acts on the name in its (held) parent, never through a link.
  for (const d of [...emptied.values()].sort((a, b) => b.rel.length - a.rel.length)) {
    for (let rel = d.rel; rel !== ''; ) {
      const slash = rel.lastIndexOf('/');
      const parentRel = slash < 0 ? '' : rel.slice(0, slash);
      let parent: WsDir | null;
      try {
        parent = dirs.dir(d.root, parentRel, false);
        if (!parent) break;
        fss.rmdirSync(`${parent.io}/${rel.slice(slash + 1)}`);
      } catch {
        break; // not empty, already gone, or no longer a plain directory
      }
      dirs.forget(d.root, rel);
      result.dirsRemoved.push(path.join(roots[d.root]!.dir, rel));
      rel = parentRel;
    }
  }
}

/**
 * Phase 3: files, then symlinks last, so no link exists while files are written.
 * Each is written to its temp (`restoreTempName`) in its directory. On Linux and
 * macOS a file it replaces is moved aside (`restoreAsideName`) and checked there, and
 * the temp takes the free path by link(2); elsewhere the temp is renamed into place.
 * A crash at any point leaves each path with its old content, its new content, or
 * nothing, with the temp and the moved file beside it; the engine's recovery
 * re-applies the plan, which settles a moved file first (`settleWrittenAside`),
 * writes such a path again and removes the temps of writes it finds done or in
 * conflict.
 */
function writeFiles(run: RestoreRun): void {
  const { plan, roots, dirs, held, result, tag } = run;
  const order: number[] = [];
  for (let i = 0; i < plan.writes.length; i++) if (plan.writes[i]!.entry.type === 'file') order.push(i);
  for (let i = 0; i < plan.writes.length; i++) if (plan.writes[i]!.entry.type === 'symlink') order.push(i);
  const umask = currentUmask();
  for (const i of order) {
    noteProgress(); // the writes are one synchronous stretch: each file written is progress for the lease (liveness.ts)
    const w = plan.writes[i]!;
    const tmpName = restoreTempName(tag, i);
    let at = locate(dirs, roots, w.path, false);
    const existing = at ? `${at.dir.io}/${at.name}` : null;
    const asideName = restoreAsideName(tag, 'w', i);
    if (existing && ASIDE) settleWrittenAside(`${at!.dir.io}/${asideName}`, existing, w);
    if (existing) restoreSeams.beforeReplace?.(w.path, 'check');
    const st = existing ? lstatOrNull(existing) : null;
    if (st) {
      let skip: string | null = null;
      if (diskMatches(existing!, st, w.entry)) {
        result.written.push(w.path); // already done (re-run after a crash)
        skip = '';
      } else if (w.expectAbsent) skip = 'an untracked or ignored file is in the way; kept';
      else if (st.isDirectory()) skip = 'a directory is in the way; kept';
      // A person's edit since the scan is theirs: the undo point does not hold it.
      else if (w.was && !stillAsPlanned(existing!, st, w.was, plan.scannedAtMs)) skip = CHANGED_SINCE_SCAN;
      if (skip !== null) {
        if (skip) result.conflicts.push({ path: w.path, reason: skip });
        dropTemps(run, at!, tmpName); // a crashed run's temp for this write, if any
        continue;
      }
    }
    if (!at) {
      try {
        at = locate(dirs, roots, w.path, true)!;
      } catch (err) {
        if (err instanceof UnsafePathError) throw err;
        result.conflicts.push({ path: w.path, reason: `cannot create its directory (${(err as NodeJS.ErrnoException).code}); kept` });
        continue;
      }
    }
    if (run.legacy) dropTemps(run, at, null);
    const file = `${at.dir.io}/${at.name}`;
    const tmp = `${at.dir.io}/${tmpName}`;
    let made = false; // the temp exists: whatever fails from here on removes it
    try {
      if (w.entry.type === 'file') {
        const bytes = run.preloaded.get(w.entry.hash) ?? run.blobs.getSync(w.entry.hash);
        // O_EXCL (which never follows a symlink) creates a fresh temp; anything already
        // at the temp name (a crashed run's temp) is removed first. Only then, not on
        // every write: the metadata calls are what a restore costs.
        const flags = fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | (fsc.O_NOFOLLOW ?? 0);
        let fd: number;
        try {
          fd = fss.openSync(tmp, flags, w.entry.mode);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
          unlinkIfThere(tmp); // a directory there throws: refused loudly, nothing replaced
          fd = fss.openSync(tmp, flags, w.entry.mode);
        }
        made = true;
        try {
          fss.writeFileSync(fd, bytes);
          if ((w.entry.mode & umask) !== 0) fss.fchmodSync(fd, w.entry.mode); // the umask stripped bits at open
        } finally {
          fss.closeSync(fd);
        }
      } else {
        unlinkIfThere(tmp);
        fss.symlinkSync(w.entry.target, tmp);
        made = true;
      }
      // Looked at again just before it is replaced: a save while the temp was written
      // (or a file that appeared where there was none) is kept, not overwritten.
      restoreSeams.beforeReplace?.(w.path, 'swap');
      if (!sameStat(lstatOrNull(file), st)) {
        unlinkQuietly(tmp);
        result.conflicts.push({ path: w.path, reason: CHANGED_SINCE_SCAN });
        continue;
      }
      if (st && w.entry.type === 'file' && ASIDE) {
        // The old file goes aside and the new one takes the free path by link(2), which
        // never replaces: a save at any instant of this is either in the moved file
        // (put back) or on the path (left there), never overwritten.
        const aside = `${at.dir.io}/${asideName}`;
        restoreSeams.beforeReplace?.(w.path, 'replace');
        const moved = moveAside(file, aside, st);
        if (!moved) {
          unlinkQuietly(tmp);
          result.conflicts.push({ path: w.path, reason: CHANGED_SINCE_SCAN });
          continue;
        }
        restoreSeams.beforeReplace?.(w.path, 'placed');
        try {
          fss.linkSync(tmp, file);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
            putBack(aside, file);
            throw err;
          }
          // Saved on the free path: the person's. What was moved is what the undo point holds.
          unlinkQuietly(tmp);
          unlinkIfThere(aside);
          result.conflicts.push({ path: w.path, reason: CHANGED_SINCE_SCAN });
          continue;
        }
        unlinkIfThere(tmp);
        // An editor that opened the file before the move and wrote after it wrote into
        // the moved file: that save wins over the restored content.
        if (!sameStat(lstatOrNull(aside), moved)) {
          fss.renameSync(aside, file);
          result.conflicts.push({ path: w.path, reason: CHANGED_SINCE_SCAN });
          continue;
        }
        held.hold(aside, moved);
        unlinkIfThere(aside);
        result.written.push(w.path);
        continue;
      }
      if (!st && w.entry.type === 'file' && ASIDE) {
        // A free path is taken by link(2): a file that appeared on it since the look stays.
        try {
          fss.linkSync(tmp, file);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
          unlinkQuietly(tmp);
          result.conflicts.push({ path: w.path, reason: CHANGED_SINCE_SCAN });
          continue;
        }
        unlinkIfThere(tmp);
        result.written.push(w.path);
        continue;
      }
      if (st && w.entry.type === 'file') {
        held.hold(file, st);
        if (UNLINK_BEFORE_RENAME) unlinkIfThere(file);
      }
      fss.renameSync(tmp, file);
    } catch (err) {
      if (made) unlinkQuietly(tmp);
      throw err;
    }
    result.written.push(w.path);
  }
}

/**
 * A run that crashed with a file aside (write `w`): the path gets it back if it is
 * free; where the new content is already in place, a moved file the undo point holds
 * (as planned) is dropped and a person's save goes back over the restored content;
 * anything else on the path is newer than the moved file and stays.
 */
function settleWrittenAside(aside: string, file: string, w: PlannedWrite): void {
  const moved = lstatOrNull(aside);
  if (!moved) return;
  const there = lstatOrNull(file);
  if (!there) return putBack(aside, file);
  if (w.was && stillAsPlanned(aside, moved, w.was, undefined)) return unlinkIfThere(aside);
  if (diskMatches(file, there, w.entry)) fss.renameSync(aside, file);
  else unlinkIfThere(aside);
}

/** The same for a removal's moved file: back on a free path (the removal then looks at it again), else dropped as older. */
function settleRemovedAside(aside: string, file: string): void {
  if (!lstatOrNull(aside)) return;
  putBack(aside, file);
}

/** Removes this write's temp (`tmpName`, if given) and, for a legacy plan, its `<name>.waypoint-tmp`; returns how many were there. */
function dropTemps(run: Pick<RestoreRun, 'legacy'>, at: Located, tmpName: string | null): number {
  let n = 0;
  if (tmpName !== null && unlinkQuietly(`${at.dir.io}/${tmpName}`)) n++;
  const legacy = run.legacy ? legacyTempOf(at.name) : null;
  if (legacy !== null) {
    const p = `${at.dir.io}/${legacy}`;
    // Only a file or link: a directory of that name is the person's.
    const st = lstatOrNull(p);
    if (st && !st.isDirectory() && unlinkQuietly(p)) n++;
  }
  return n;
}

/**
 * Removes the temp files an interrupted `applyRestore(plan)` may have left beside
 * its targets: exactly the names the plan's temp tag gives its writes (and, for a
 * plan recorded before temp tags, `<name>.waypoint-tmp`). For the engine's crash
 * recovery when re-applying a plan failed (re-applying removes them itself). Paths
 * are reached as in `applyRestore`; unsafe ones are skipped, not followed. A plan
 * with neither a tag nor the legacy mark names no temps: nothing is removed.
 */
export async function sweepRestoreTemps(plan: RestorePlan, roots: SnapshotRoot[]): Promise<number> {
  checkRoots(roots);
  const tag = plan.tempTag !== undefined && typeof plan.tempTag === 'string' && RESTORE_TEMP_TAG.test(plan.tempTag) ? plan.tempTag : null;
  const legacy = plan.legacyTemps === true;
  if (tag === null && !legacy) return 0;
  const dirs = new WorkspaceDirs(roots);
  let n = 0;
  try {
    for (let i = 0; i < plan.writes.length; i++) {
      let at: Located | null;
      try {
        assertSafePathKey(plan.writes[i]!.path);
        at = locate(dirs, roots, plan.writes[i]!.path, false);
      } catch {
        continue;
      }
      if (!at) continue;
      n += dropTemps({ legacy }, at, tag === null ? null : restoreTempName(tag, i));
      if (tag !== null && ASIDE) settleWrittenAside(`${at.dir.io}/${restoreAsideName(tag, 'w', i)}`, `${at.dir.io}/${at.name}`, plan.writes[i]!);
    }
    for (let i = 0; tag !== null && ASIDE && i < plan.removes.length; i++) {
      let at: Located | null;
      try {
        assertSafePathKey(plan.removes[i]!.path);
        at = locate(dirs, roots, plan.removes[i]!.path, false);
      } catch {
        continue;
      }
      if (at) settleRemovedAside(`${at.dir.io}/${restoreAsideName(tag, 'r', i)}`, `${at.dir.io}/${at.name}`);
    }
  } finally {
    dirs.close();
  }
  return n;
}
