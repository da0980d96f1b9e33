/**
 * Path safety for manifest path keys.
 *
 * A path key is what a manifest maps to an entry: a relative POSIX path such as
 * `src/a.ts` (or `rootName/src/a.ts` in a multi-root workspace, see `keyForRoot`).
 * Manifests are read back from disk, so every key is treated as hostile until it
 * has passed `assertSafePathKey`, and every write goes through `resolveInside`.
 */
import fss from 'node:fs';
import path from 'node:path';
import { WaypointError } from '../model/errors.js';

/** A WaypointError ('unsafe_path'), so every surface shows it as a refusal, never as an internal failure. */
export class UnsafePathError extends WaypointError {
  constructor(
    readonly path: string,
    readonly rule: string,
  ) {
    super('unsafe_path', `unsafe path ${JSON.stringify(path.length > 200 ? `${path.slice(0, 200)}…` : path)}: ${rule}`, { rule });
    this.name = 'UnsafePathError';
  }
}

export const MAX_PATH_LENGTH = 4096;
export const MAX_SEGMENT_LENGTH = 255;

/** Directories Waypoint never records, descends into, or writes to. */
export const RESERVED_DIRS: ReadonlySet<string> = new Set(['.git', '.waypoint']);

/**
 * Suffix of the temp files restores wrote beside their targets before temp names were
 * recorded in the plan (`<name>.waypoint-tmp`). Only a plan recorded then (see
 * `RestorePlan.legacyTemps`) looks for temps by this name; the scanner records such
 * files like any other, since a person's file may well be called that.
 */
export const RESTORE_TEMP_SUFFIX = '.waypoint-tmp';

/**
 * The temp file a restore writes plan write number `index` to, in the target's own
 * directory: short and bounded (under 40 bytes) whatever the target's name, so a
 * 255-byte name still has a temp, and unique to the plan (its `tag` is random and
 * durable with the plan before any temp exists), so a re-run after a crash knows
 * exactly which names are its own.
 */
export function restoreTempName(tag: string, index: number): string {
  return `.wp-${tag}-${index.toString(36)}.tmp`;
}

/**
 * The name a restore moves a file it replaces (`w`, plan write `index`) or removes
 * (`r`, plan removal `index`) to for a moment, in the same directory: moving it aside
 * is one atomic step, so what is checked afterwards is exactly what was taken from the
 * path, and a save that lands after the move finds the path free instead of being
 * overwritten. Named by the plan's tag, so a re-run after a crash finds its own.
 */
export function restoreAsideName(tag: string, kind: 'w' | 'r', index: number): string {
  return `.wp-${tag}-${kind}${index.toString(36)}.was`;
}

/** A plan's temp tag: lowercase hex, so a temp name is always one safe segment. */
export const RESTORE_TEMP_TAG = /^[0-9a-f]{8,32}$/;

/**
 * Whether `name` has the shape of a restore's temp (`restoreTempName`) or of a legacy
 * one. For tests and diagnostics that look for leftovers: Waypoint itself never skips
 * or removes a file by its name's shape, only the temps its durable plan names.
 */
export function looksLikeRestoreTemp(name: string): boolean {
  return /^\.wp-[0-9a-f]{8,32}-[0-9a-z]+\.(tmp|was)$/.test(name) || name.endsWith(RESTORE_TEMP_SUFFIX);
}

// C0 controls, DEL and C1 controls. NUL is checked separately for a clearer message.
const CONTROL_CHARS = /[\u0001-\u001f\u007f-\u009f]/;

/**
 * Printable ASCII without `\`, `:` or control characters: such a key is NFC, has no
 * NUL, no drive prefix and no Windows separator, so only its segments need checking
 * (a full manifest validates 13k+ keys; the Unicode checks were most of that).
 */
const PLAIN_KEY = /^[A-Za-z0-9_@+=,~#$%&()[\]{}'!^. /-]+$/;

/** Returns the rule a path key breaks, or null when it is safe. */
export function pathKeyProblem(key: string): string | null {
  if (typeof key !== 'string') return 'not a string';
  if (key.length === 0) return 'empty path';
  if (key.length > MAX_PATH_LENGTH) return `longer than ${MAX_PATH_LENGTH} characters`;
  if (PLAIN_KEY.test(key)) return segmentsProblem(key, true);
  if (key.includes('\0')) return 'contains a NUL character';
  if (CONTROL_CHARS.test(key)) return 'contains a control character';
  if (key.includes('\\')) return 'contains a backslash (Windows separator)';
  if (key.startsWith('/')) return 'absolute path';
  // `C:foo` and `C:/foo` are drive-relative / absolute on Windows.
  if (/^[A-Za-z]:/.test(key)) return 'Windows drive path';
  // ASCII is always NFC: normalize (ICU) only the rest (a restore checks every path twice).
  const ascii = ASCII.test(key);
  if (!ascii && key.normalize('NFC') !== key) return 'not Unicode NFC-normalized';
  return segmentsProblem(key, ascii);
}

function segmentsProblem(key: string, ascii: boolean): string | null {
  if (key.startsWith('/')) return 'absolute path';
  const segments = key.split('/');
  for (const seg of segments) {
    if (seg === '') return 'empty segment (leading, trailing or doubled "/")';
    if (seg === '..') return 'contains a ".." segment';
    if (seg === '.') return 'contains a "." segment';
    if (seg.length > MAX_SEGMENT_LENGTH) return `segment longer than ${MAX_SEGMENT_LENGTH} characters`;
  }
  for (const seg of segments) {
    // Lower-casing ASCII keeps the length: only segments as long as a reserved name can be one.
    if (ascii && !RESERVED_LENGTHS.has(seg.length)) continue;
    // Case-folded so `.GIT` on a case-insensitive file system is caught too.
    const folded = seg.toLowerCase();
    if (RESERVED_DIRS.has(folded)) return `inside or naming a reserved directory (${folded})`;
  }
  return null;
}

const ASCII = /^[\u0000-\u007f]*$/;
const RESERVED_LENGTHS: ReadonlySet<number> = new Set([...RESERVED_DIRS].map((d) => d.length));

const PLAIN_SEGMENT = /^[A-Za-z0-9_@+=,~#$%&()[\]{}'!^ -]+$|^[A-Za-z0-9_@+=,~#$%&()[\]{}'!^ -][A-Za-z0-9_@+=,~#$%&()[\]{}'!^. -]*$/;

/**
 * The rule `key` breaks, where `key` is an already safe key plus '/' + `name`
 * (or just `name`) (the scanner's hot path: full `pathKeyProblem` per file was ~10 % of a rescan).
 * Falls back to the full check for anything but plain ASCII names.
 */
export function childKeyProblem(key: string, name: string): string | null {
  if (name.length <= MAX_SEGMENT_LENGTH && key.length <= MAX_PATH_LENGTH && name !== '.' && name !== '..' && PLAIN_SEGMENT.test(name) && !RESERVED_DIRS.has(name.toLowerCase())) {
    return null;
  }
  return pathKeyProblem(key);
}

export function isSafePathKey(key: string): boolean {
  return pathKeyProblem(key) === null;
}

export function assertSafePathKey(key: string): void {
  const problem = pathKeyProblem(key);
  if (problem !== null) throw new UnsafePathError(key, problem);
}

/** Whether `candidate` is `root` or below it (both absolute, real paths). */
export function isInside(root: string, candidate: string): boolean {
  // A prefix match with no '..' after it is inside (callers pass realpath / path.join
  // results). Anything else (a drive root, a case difference on Windows, a name with
  // '..' in it) takes the full check.
  if (candidate.length > root.length + 1 && candidate.startsWith(root) && candidate[root.length] === path.sep && !root.endsWith(path.sep) && candidate.indexOf('..', root.length) === -1) {
    return true;
  }
  const rel = path.relative(root, candidate);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel) && rel.split(path.sep)[0] !== '..');
}

/** Memo of resolved parent directories, shared by the resolutions of one restore phase. */
export type ResolveCache = Map<string, { abs: string; exists: boolean }>;

function resolveParent(realRoot: string, segs: readonly string[], n: number, rel: string, cache: ResolveCache): { abs: string; exists: boolean } {
  if (n === 0) return { abs: realRoot, exists: true };
  const memoKey = `${realRoot}\0${segs.slice(0, n).join('/')}`;
  const hit = cache.get(memoKey);
  if (hit) return hit;
  const parent = resolveParent(realRoot, segs, n - 1, rel, cache);
  const next = path.join(parent.abs, segs[n - 1]!);
  let result: { abs: string; exists: boolean };
  const st = parent.exists ? fss.lstatSync(next, { throwIfNoEntry: false }) : undefined;
  if (!st) {
    result = { abs: next, exists: false };
  } else if (st.isSymbolicLink()) {
    const where = segs.slice(0, n).join('/');
    let real: string;
    try {
      real = fss.realpathSync(next);
    } catch {
      throw new UnsafePathError(rel, `parent ${where} is a dangling symlink`);
    }
    if (!isInside(realRoot, real)) throw new UnsafePathError(rel, `parent ${where} is a symlink leading outside the workspace`);
    result = { abs: real, exists: true };
  } else {
    result = { abs: next, exists: true };
  }
  cache.set(memoKey, result);
  return result;
}

/**
 * Resolves a path key under `root` for writing. Each existing PARENT directory is
 * resolved with realpath, and the result must stay inside realpath(root); a parent
 * that is a symlink pointing outside is refused. The last component is not
 * followed: restore replaces it (rename over a symlink replaces the link itself).
 * Parents that do not exist yet are fine (restore creates them as real dirs).
 * Synchronous: a handful of metadata syscalls, memoized per directory via `cache`.
 */
export function resolveInsideSync(root: string, rel: string, cache: ResolveCache = new Map()): string {
  assertSafePathKey(rel);
  const rootKey = `\0root\0${root}`;
  let realRoot = cache.get(rootKey)?.abs;
  if (realRoot === undefined) {
    realRoot = fss.realpathSync.native(root);
    cache.set(rootKey, { abs: realRoot, exists: true });
  }
  const segs = rel.split('/');
  const parent = resolveParent(realRoot, segs, segs.length - 1, rel, cache);
  const result = path.join(parent.abs, segs[segs.length - 1]!);
  if (!isInside(realRoot, result) || result === realRoot) throw new UnsafePathError(rel, 'resolves outside the workspace');
  return result;
}

export async function resolveInside(root: string, rel: string): Promise<string> {
  return resolveInsideSync(root, rel);
}

/**
 * Groups of paths that name the same file on a case-insensitive file system
 * (macOS, Windows defaults). Only groups with more than one member are returned.
 * Parent directories count too: `A/x` and `a/y` collide on the directory `A`/`a`.
 */
export function findCaseCollisions(paths: Iterable<string>): string[][] {
  const byFolded = new Map<string, Set<string>>();
  const add = (p: string) => {
    const folded = p.normalize('NFC').toLowerCase();
    let set = byFolded.get(folded);
    if (!set) byFolded.set(folded, (set = new Set()));
    set.add(p);
  };
  for (const p of paths) {
    const segs = p.split('/');
    for (let i = 1; i <= segs.length; i++) add(segs.slice(0, i).join('/'));
  }
  return [...byFolded.values()].filter((s) => s.size > 1).map((s) => [...s].sort());
}

/** A workspace folder as the snapshot layer sees it. */
export interface SnapshotRoot {
  /** Stable folder name; used as the key prefix in multi-root workspaces. */
  name: string;
  /** Absolute directory. */
  dir: string;
}

/**
 * Multi-root key scheme: with one root, keys are plain relative paths; with more
 * than one, every key is `rootName/relative`. Root names must therefore be unique
 * safe single segments. Adding a second folder changes every key — the engine
 * should take a fresh full checkpoint in that case (diff sees all as moved).
 */
export function checkRoots(roots: readonly SnapshotRoot[]): void {
  if (roots.length === 0) throw new Error('at least one workspace root is required');
  const seen = new Set<string>();
  for (const r of roots) {
    if (!path.isAbsolute(r.dir)) throw new Error(`workspace root ${JSON.stringify(r.dir)} is not absolute`);
    if (roots.length > 1) {
      if (r.name.includes('/') || !isSafePathKey(r.name)) {
        throw new UnsafePathError(r.name, 'root name must be a single safe path segment');
      }
      const folded = r.name.toLowerCase();
      if (seen.has(folded)) throw new Error(`duplicate workspace root name ${JSON.stringify(r.name)}`);
      seen.add(folded);
    }
  }
}

export function keyPrefixFor(roots: readonly SnapshotRoot[], root: SnapshotRoot): string {
  return roots.length > 1 ? `${root.name}/` : '';
}

/** Splits a path key into its root and the path relative to that root. */
export function splitKey(roots: readonly SnapshotRoot[], key: string): { root: SnapshotRoot; rel: string } {
  if (roots.length === 1) return { root: roots[0]!, rel: key };
  const slash = key.indexOf('/');
  const name = slash < 0 ? key : key.slice(0, slash);
  const root = roots.find((r) => r.name === name);
  if (!root || slash < 0) throw new UnsafePathError(key, 'does not start with a known workspace root name');
  return { root, rel: key.slice(slash + 1) };
}

/** Converts an absolute path (or an already-relative key) to a path key, or null if outside every root. */
export function toKey(roots: readonly SnapshotRoot[], p: string): string | null {
  if (!path.isAbsolute(p)) return p.replace(/\/+$/, '');
  for (const root of roots) {
    const rel = path.relative(root.dir, p);
    if (rel.startsWith('..') || path.isAbsolute(rel)) continue;
    // '' means "the whole workspace" (single root) and `name` the whole root.
    if (rel === '') return roots.length > 1 ? root.name : '';
    return keyPrefixFor(roots, root) + rel.split(path.sep).join('/');
  }
  return null;
}
