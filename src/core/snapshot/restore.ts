/**
 * Restore mechanics: plan what turns the current workspace into a target manifest,
 * then apply the plan with every path validated first, each file written to a temp
 * file beside it and renamed, and nothing deleted that the caller does not hold.
 * Applying is idempotent, so the engine can re-run a plan after a crash.
 */
import { constants as fsc } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { BlobNotFoundError, sha256Hex, type BlobStore } from './blobStore.js';
import { sameContent, type FileEntry, type Manifest, type ManifestEntry, type SymlinkEntry } from './manifest.js';
import { RESTORE_TEMP_SUFFIX, UnsafePathError, assertSafePathKey, checkRoots, findCaseCollisions, resolveInside, splitKey, type SnapshotRoot } from './paths.js';


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

export type KeptReason = 'content_not_held' | 'too_large_in_current' | 'too_large_in_target';

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

/** Pure: what `applyRestore` must do to turn `current` into `target` (restricted to `paths`). */
export function planRestore(current: Manifest, target: Manifest, opts: PlanOptions = {}): RestorePlan {
  const paths = opts.paths?.map((p) => p.replace(/\/+$/, ''));
  const isHeld = opts.isHeld ?? (() => false);
  const plan: RestorePlan = { writes: [], removes: [], kept: [], unchanged: 0 };
  for (const [key, want] of target) {
    if (!selected(key, paths)) continue;
    const have = current.get(key);
    if (have && sameContent(have, want)) {
      plan.unchanged++;
      continue;
    }
    // Too-large files have no stored content: never overwrite one, never write one.
    if (want.type === 'skipped') {
      plan.kept.push({ path: key, reason: 'too_large_in_target' });
      continue;
    }
    if (have?.type === 'skipped') {
      plan.kept.push({ path: key, reason: 'too_large_in_current' });
      continue;
    }
    plan.writes.push({ path: key, entry: want, expectAbsent: !have });
  }
  for (const [key, have] of current) {
    if (target.has(key) || !selected(key, paths)) continue;
    if (have.type === 'skipped') plan.kept.push({ path: key, reason: 'too_large_in_current' });
    else if (have.type === 'symlink') plan.removes.push({ path: key, target: have.target });
    else if (isHeld(have.hash)) plan.removes.push({ path: key, hash: have.hash });
    else plan.kept.push({ path: key, reason: 'content_not_held' });
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
  try {
    const [a, b] = await Promise.all([fs.stat(dir), fs.stat(path.join(path.dirname(dir), swapped))]);
    return a.ino === b.ino && a.dev === b.dev;
  } catch {
    return false;
  }
}

async function lstatOrNull(p: string) {
  try {
    return await fs.lstat(p);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    throw err;
  }
}

/** Whether what is on disk at `abs` is exactly `entry` (content and, for files, mode). */
async function diskMatches(abs: string, entry: ManifestEntry): Promise<boolean> {
  const st = await lstatOrNull(abs);
  if (!st) return false;
  if (entry.type === 'symlink') return st.isSymbolicLink() && (await fs.readlink(abs)) === entry.target;
  if (entry.type !== 'file' || !st.isFile() || st.size !== entry.size) return false;
  if ((st.mode & 0o111 ? 0o755 : 0o644) !== entry.mode) return false;
  return sha256Hex(await fs.readFile(abs)) === entry.hash;
}

/**
 * Validates the whole plan, then applies it. Throws — having written nothing — on
 * any unsafe path (see paths.ts), a symlink or file entry that another entry would
 * be written beneath, a case-fold collision on a case-insensitive file system, or a
 * missing blob. Writes never overwrite something the plan did not expect.
 */
export async function applyRestore(plan: RestorePlan, roots: SnapshotRoot[], blobs: BlobStore, opts: ApplyOptions = {}): Promise<ApplyResult> {
  checkRoots(roots);
  // --- Phase 1: validate everything; no writes. ---
  const all = [...plan.writes.map((w) => w.path), ...plan.removes.map((r) => r.path)];
  const seen = new Set<string>();
  for (const p of all) {
    assertSafePathKey(p);
    if (seen.has(p)) throw new UnsafePathError(p, 'appears more than once in the restore plan');
    seen.add(p);
  }
  const caseInsensitive = opts.caseInsensitive ?? (await detectCaseInsensitive(roots[0]!.dir));
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
  for (const p of all) {
    const { root, rel } = splitKey(roots, p);
    abs.set(p, await resolveInside(root.dir, rel));
  }
  const missing: string[] = [];
  for (const w of plan.writes) {
    if (w.entry.type === 'file' && !(await blobs.has(w.entry.hash))) missing.push(w.entry.hash);
  }
  if (missing.length > 0) throw new BlobNotFoundError(missing[0]!);

  const result: ApplyResult = { written: [], removed: [], dirsRemoved: [], conflicts: [] };

  // --- Phase 2: removals (only what still has the recorded content). ---
  const emptied = new Set<string>();
  for (const r of plan.removes) {
    const file = abs.get(r.path)!;
    const st = await lstatOrNull(file);
    if (!st) {
      emptied.add(path.dirname(file)); // removed by an earlier, interrupted run
      continue;
    }
    const ok = r.target !== undefined ? st.isSymbolicLink() && (await fs.readlink(file)) === r.target : st.isFile() && r.hash !== undefined && sha256Hex(await fs.readFile(file)) === r.hash;
    if (!ok) {
      result.conflicts.push({ path: r.path, reason: 'changed on disk since it was scanned; kept' });
      continue;
    }
    await fs.rm(file, { force: true });
    result.removed.push(r.path);
    emptied.add(path.dirname(file));
  }
  const rootDirs = new Set(await Promise.all(roots.map((r) => fs.realpath(r.dir))));
  for (const dir of [...emptied].sort((a, b) => b.length - a.length)) {
    let d = dir;
    while (!rootDirs.has(d) && [...rootDirs].some((r) => d.startsWith(r + path.sep))) {
      try {
        await fs.rmdir(d);
        result.dirsRemoved.push(d);
      } catch {
        break; // not empty (untracked files stay) or already gone
      }
      d = path.dirname(d);
    }
  }

  // --- Phase 3: files, then symlinks last, so no link exists while files are written. ---
  const ordered = [...plan.writes.filter((w) => w.entry.type === 'file'), ...plan.writes.filter((w) => w.entry.type === 'symlink')];
  for (const w of ordered) {
    const { root, rel } = splitKey(roots, w.path);
    // Resolve again right before writing: parents may have changed since phase 1.
    const file = await resolveInside(root.dir, rel);
    const st = await lstatOrNull(file);
    if (st) {
      if (await diskMatches(file, w.entry)) {
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
    try {
      await fs.mkdir(path.dirname(file), { recursive: true });
    } catch (err) {
      result.conflicts.push({ path: w.path, reason: `cannot create its directory (${(err as NodeJS.ErrnoException).code}); kept` });
      continue;
    }
    const tmp = `${file}${RESTORE_TEMP_SUFFIX}`;
    if (w.entry.type === 'file') {
      const bytes = await blobs.get(w.entry.hash);
      // O_NOFOLLOW: a symlink planted at the temp name must not redirect the write.
      const fh = await fs.open(tmp, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_TRUNC | (fsc.O_NOFOLLOW ?? 0), w.entry.mode);
      try {
        await fh.writeFile(bytes);
        await fh.chmod(w.entry.mode); // the umask may have stripped bits at open
      } finally {
        await fh.close();
      }
    } else {
      await fs.rm(tmp, { force: true });
      await fs.symlink(w.entry.target, tmp);
    }
    await fs.rename(tmp, file);
    result.written.push(w.path);
  }
  return result;
}
