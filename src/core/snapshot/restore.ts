/**
 * Restore mechanics: plan what turns the current workspace into a target manifest,
 * then apply the plan with every path validated first, each file written to a temp
 * file beside it and renamed, and nothing deleted that the caller does not hold.
 * Applying is idempotent, so the engine can re-run a plan after a crash.
 */
import fss, { constants as fsc } from 'node:fs';
import path from 'node:path';
import { BlobNotFoundError, sha256Hex, type BlobStore } from './blobStore.js';
import { sameContent, type FileEntry, type Manifest, type ManifestEntry, type SymlinkEntry } from './manifest.js';
import { RESTORE_TEMP_SUFFIX, UnsafePathError, assertSafePathKey, checkRoots, findCaseCollisions, resolveInsideSync, splitKey, type ResolveCache, type SnapshotRoot } from './paths.js';


export interface PlannedWrite {
  path: string;
  entry: FileEntry | SymlinkEntry;
  /** The path is absent from `current`: anything found there on disk is not ours to overwrite. */
  expectAbsent: boolean;
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
    plan.writes.push({ path: key, entry: want, expectAbsent: !have });
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

/** Whether what is on disk at `abs` is exactly `entry` (content and, for files, mode). */
function diskMatches(abs: string, st: fss.Stats, entry: ManifestEntry): boolean {
  if (entry.type === 'symlink') return st.isSymbolicLink() && fss.readlinkSync(abs) === entry.target;
  if (entry.type !== 'file' || !st.isFile() || st.size !== entry.size) return false;
  if ((st.mode & 0o111 ? 0o755 : 0o644) !== entry.mode) return false;
  return sha256Hex(fss.readFileSync(abs)) === entry.hash;
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

/**
 * Validates the whole plan, then applies it. Throws — having written nothing — on
 * any unsafe path (see paths.ts), a symlink or file entry that another entry would
 * be written beneath, a case-fold collision on a case-insensitive file system, or a
 * missing blob. Writes never overwrite something the plan did not expect.
 *
 * File I/O here is synchronous on purpose: a rollback is a short, serialized burst
 * of small metadata-heavy operations where thread-pool round trips cost more than
 * the syscalls (100 files: ~25 ms sync vs ~250 ms async on a busy 2-core machine).
 */
export async function applyRestore(plan: RestorePlan, roots: SnapshotRoot[], blobs: BlobStore, opts: ApplyOptions = {}): Promise<ApplyResult> {
  // --- Phase 1: validate everything; no writes. ---
  checkRoots(roots);
  const caseInsensitive = opts.caseInsensitive ?? (await detectCaseInsensitive(roots[0]!.dir));
  const abs = checkRestorePaths(plan, roots, caseInsensitive);
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

  const result: ApplyResult = { written: [], removed: [], dirsRemoved: [], conflicts: [] };
  const held = new HeldForFreeing();
  try {
    return await applyValidated(plan, roots, blobs, abs, preloaded, result, held);
  } finally {
    held.release();
  }
}

async function applyValidated(plan: RestorePlan, roots: SnapshotRoot[], blobs: BlobStore, abs: Map<string, string>, preloaded: Map<string, Buffer>, result: ApplyResult, held: HeldForFreeing): Promise<ApplyResult> {

  // --- Phase 2: removals (only what still has the recorded content). ---
  const emptied = new Set<string>();
  for (const r of plan.removes) {
    const file = abs.get(r.path)!;
    const st = lstatOrNull(file);
    if (!st) {
      emptied.add(path.dirname(file)); // removed by an earlier, interrupted run
      continue;
    }
    const ok = r.target !== undefined ? st.isSymbolicLink() && fss.readlinkSync(file) === r.target : st.isFile() && r.hash !== undefined && sha256Hex(fss.readFileSync(file)) === r.hash;
    if (!ok) {
      result.conflicts.push({ path: r.path, reason: 'changed on disk since it was scanned; kept' });
      continue;
    }
    held.hold(file, st);
    fss.rmSync(file, { force: true });
    result.removed.push(r.path);
    emptied.add(path.dirname(file));
  }
  const rootDirs = roots.map((r) => fss.realpathSync(r.dir));
  const insideSomeRoot = (d: string) => rootDirs.some((r) => d.startsWith(r + path.sep));
  for (const dir of [...emptied].sort((a, b) => b.length - a.length)) {
    for (let d = dir; insideSomeRoot(d); d = path.dirname(d)) {
      try {
        fss.rmdirSync(d);
        result.dirsRemoved.push(d);
      } catch {
        break; // not empty (untracked files stay) or already gone
      }
    }
  }

  // --- Phase 3: files, then symlinks last, so no link exists while files are written. ---
  // Each file is written to a temp beside it and renamed into place. A crash at any
  // point leaves each path with its old content, its new content, or (Linux, see
  // UNLINK_BEFORE_RENAME) nothing but the temp with the new content beside it; the
  // engine's recovery re-applies the plan, which writes such a path again.
  const ordered = [...plan.writes.filter((w) => w.entry.type === 'file'), ...plan.writes.filter((w) => w.entry.type === 'symlink')];
  // Resolved again (fresh memo) right before writing: parents may have changed since phase 1.
  const writeCache: ResolveCache = new Map();
  const madeDirs = new Set<string>();
  const umask = currentUmask();
  for (const w of ordered) {
    const { root, rel } = splitKey(roots, w.path);
    const file = resolveInsideSync(root.dir, rel, writeCache);
    const st = lstatOrNull(file);
    if (st) {
      if (diskMatches(file, st, w.entry)) {
        result.written.push(w.path); // already done (re-run after a crash)
        continue;
      }
      if (w.expectAbsent) {
        result.conflicts.push({ path: w.path, reason: 'an untracked or ignored file is in the way; kept' });
        continue;
      }
      if (st.isDirectory()) {
        result.conflicts.push({ path: w.path, reason: 'a directory is in the way; kept' });
        continue;
      }
    }
    const dir = path.dirname(file);
    // Something at the path (being replaced) means its directory exists: no mkdir.
    if (st) madeDirs.add(dir);
    else if (!madeDirs.has(dir)) {
      try {
        fss.mkdirSync(dir, { recursive: true });
        madeDirs.add(dir);
      } catch (err) {
        result.conflicts.push({ path: w.path, reason: `cannot create its directory (${(err as NodeJS.ErrnoException).code}); kept` });
        continue;
      }
    }
    const tmp = `${file}${RESTORE_TEMP_SUFFIX}`;
    if (w.entry.type === 'file') {
      const bytes = preloaded.get(w.entry.hash) ?? blobs.getSync(w.entry.hash);
      // O_EXCL (which never follows a symlink) creates a fresh temp; anything already
      // at the temp name (a crashed run's temp, a planted link) is removed first.
      // Only then, not on every write: the metadata calls are what a restore costs.
      const flags = fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | (fsc.O_NOFOLLOW ?? 0);
      let fd: number;
      try {
        fd = fss.openSync(tmp, flags, w.entry.mode);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        fss.rmSync(tmp, { force: true });
        fd = fss.openSync(tmp, flags, w.entry.mode);
      }
      try {
        fss.writeFileSync(fd, bytes);
        if ((w.entry.mode & umask) !== 0) fss.fchmodSync(fd, w.entry.mode); // the umask stripped bits at open
      } finally {
        fss.closeSync(fd);
      }
      if (st) {
        held.hold(file, st);
        if (UNLINK_BEFORE_RENAME) unlinkIfThere(file);
      }
      fss.renameSync(tmp, file);
    } else {
      fss.rmSync(tmp, { force: true });
      fss.symlinkSync(w.entry.target, tmp);
      fss.renameSync(tmp, file);
    }
    result.written.push(w.path);
  }
  return result;
}

/**
 * Removes the temp files an interrupted `applyRestore(plan)` may have left beside
 * its targets. For the engine's crash recovery when it decides to revert rather
 * than finish a rollback (finishing re-applies the plan, which cleans them itself).
 * Paths are validated as in `applyRestore`; unsafe ones are skipped, not followed.
 */
export async function sweepRestoreTemps(plan: RestorePlan, roots: SnapshotRoot[]): Promise<number> {
  checkRoots(roots);
  const cache: ResolveCache = new Map();
  let n = 0;
  for (const w of plan.writes) {
    let file: string;
    try {
      const { root, rel } = splitKey(roots, w.path);
      file = resolveInsideSync(root.dir, rel, cache);
    } catch {
      continue;
    }
    const tmp = `${file}${RESTORE_TEMP_SUFFIX}`;
    if (lstatOrNull(tmp)) {
      fss.rmSync(tmp, { force: true });
      n++;
    }
  }
  return n;
}
