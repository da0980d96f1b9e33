/**
 * Workspace scanner: walks the roots honouring ignore rules, records files,
 * symlinks (never followed) and too-large files, stores new content in the blob
 * store, and reuses hashes from a previous manifest when the stat cache
 * (size, mtime, inode) says a file is unchanged. With a dirty-path hint only those
 * paths are re-examined, so the cost is O(changes).
 */
import fss, { type Dirent, type Stats } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { BlobStore } from './blobStore.js';
import { IgnoreRules, levelsForDir } from './ignoreRules.js';
import { compareEntries, summarize, type ChangeSummary, type FileChange, type FileEntry, type Manifest, type ManifestEntry } from './manifest.js';
import { RESERVED_DIRS, RESTORE_TEMP_SUFFIX, checkRoots, childKeyProblem, keyPrefixFor, pathKeyProblem, splitKey, toKey, type SnapshotRoot } from './paths.js';

export const DEFAULT_MAX_FILE_BYTES = 5 * 1024 * 1024;
const SYNC_READ_BELOW = 64 * 1024;

export interface ScanOptions {
  roots: SnapshotRoot[];
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
  /** Test seams for workspaces that change under the scanner; never set in production. */
  hooks?: ScanHooks;
}

export interface ScanHooks {
  /** Called just before a directory is listed. */
  beforeList?(abs: string, relDir: string): void | Promise<void>;
  /** Called between a file's lstat and the read of its content. */
  beforeRead?(abs: string, key: string): void | Promise<void>;
}

export interface ScanProblem {
  path: string;
  code: string;
  message: string;
}

export interface ScanResult {
  manifest: Manifest;
  changed: ChangeSummary;
  skipped: { path: string; size: number; reason: 'too_large' }[];
  unreadable: ScanProblem[];
  stats: { filesSeen: number; filesHashed: number; bytesHashed: number; bytesStoredNew: number; ms: number };
}

function isReserved(name: string): boolean {
  return RESERVED_DIRS.has(name.toLowerCase());
}

/** A tiny semaphore: bounds open files and memory held by in-flight reads. */
class Limiter {
  private active = 0;
  private readonly queue: (() => void)[] = [];
  constructor(private readonly limit: number) {}
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((r) => this.queue.push(r));
    this.active++;
    try {
      return await fn();
    } finally {
      this.active--;
      this.queue.shift()?.();
    }
  }
}

function errInfo(err: unknown): { code: string; message: string } {
  const e = err as NodeJS.ErrnoException;
  return { code: e.code ?? 'EUNKNOWN', message: e.message ?? String(err) };
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
  /** Set for small dirty-hint scans: compress inline rather than via the thread pool. */
  fewFiles = false;
  private readonly rulesMemo = new Map<string, IgnoreRules | null>();
  private readonly io: Limiter;
  private readonly maxFileBytes: number;
  private readonly baseRules: IgnoreRules;

  /** realpath of each root: what every listed directory and read file must resolve under. */
  private readonly realRoots = new Map<string, string>();

  constructor(private readonly opts: ScanOptions) {
    for (const r of opts.roots) this.realRoots.set(r.dir, fss.realpathSync.native(r.dir));
    this.io = new Limiter(Math.max(1, opts.concurrency ?? 8));
    this.maxFileBytes = opts.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
    this.baseRules = IgnoreRules.root(opts.excludes);
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

  /** Rules in force for entries of directory `relDir` of `root`, loading every ancestor's files. */
  async rulesFor(root: SnapshotRoot, relDir: string): Promise<IgnoreRules | null> {
    const memoKey = `${root.dir}\0${relDir}`;
    if (this.rulesMemo.has(memoKey)) return this.rulesMemo.get(memoKey)!;
    const rules = this.computeRulesFor(root, relDir);
    this.rulesMemo.set(memoKey, rules);
    return rules;
  }

  private computeRulesFor(root: SnapshotRoot, relDir: string): IgnoreRules | null {
    let rules = this.baseRules;
    const segs = relDir === '' ? [] : relDir.split('/');
    for (let i = 0; i <= segs.length; i++) {
      const rel = segs.slice(0, i).join('/');
      if (i > 0) {
        // An ignored or reserved ancestor hides everything below it.
        if (isReserved(segs[i - 1]!) || rules.ignores(rel, true)) return null;
      }
      for (const level of levelsForDir(path.join(root.dir, ...segs.slice(0, i)), rel, null, null)) {
        rules = rules.with(level);
      }
    }
    return rules;
  }

  /**
   * Directory listing and lstat are synchronous on purpose: they are metadata-only
   * syscalls of a few microseconds, while each async call costs a thread-pool round
   * trip that dominated full rescans (7,000 files: ~400 ms async vs ~40 ms sync).
   * The walk yields to the event loop every few hundred entries so a host process
   * stays responsive. Reading and hashing content stays async and concurrent.
   */
  async walkDir(root: SnapshotRoot, prefix: string, relDir: string, parentRules: IgnoreRules, pending: Promise<void>[] = []): Promise<Promise<void>[]> {
    const abs = path.join(root.dir, ...(relDir === '' ? [] : relDir.split('/')));
    let dirents: Dirent[];
    try {
      await this.opts.hooks?.beforeList?.(abs, relDir);
      dirents = fss.readdirSync(abs, { withFileTypes: true });
      // A directory swapped for a symlink after its parent was listed would be followed
      // by readdir: what was listed must still be this very directory inside the root.
      if (relDir !== '') this.assertInside(root, abs, relDir);
    } catch (err) {
      this.unreadable.push({ path: prefix + relDir, ...errInfo(err) });
      return pending;
    }
    let hasGitignore = false;
    let hasDotGit = false;
    for (const d of dirents) {
      if (d.name === '.gitignore') hasGitignore = true;
      else if (d.name === '.git') hasDotGit = true;
    }
    let rules = parentRules;
    if (hasGitignore || hasDotGit) for (const level of levelsForDir(abs, relDir, hasGitignore, hasDotGit)) rules = rules.with(level);
    for (const d of dirents) {
      if (isReserved(d.name) || d.name.endsWith(RESTORE_TEMP_SUFFIX)) continue;
      const rel = relDir === '' ? d.name : `${relDir}/${d.name}`;
      const isDir = d.isDirectory();
      if (rules.ignores(rel, isDir)) continue;
      const key = prefix + rel;
      const problem = childKeyProblem(key, d.name);
      if (problem) {
        this.unreadable.push({ path: key, code: 'EUNSAFEPATH', message: `cannot be recorded safely: ${problem}` });
        continue;
      }
      if (++this.sinceYield >= 256) {
        this.sinceYield = 0;
        await new Promise<void>((r) => setImmediate(r));
      }
      if (isDir) {
        await this.walkDir(root, prefix, rel, rules, pending);
        continue;
      }
      // Plain concatenation: path.join's normalisation showed up in rescan profiles.
      const file = abs + path.sep + d.name;
      let st: Stats | undefined;
      try {
        st = fss.lstatSync(file);
      } catch (err) {
        this.filesSeen++;
        this.unreadable.push({ path: key, ...errInfo(err) });
        continue;
      }
      // A directory that replaced the entry between readdir and lstat.
      if (st.isDirectory()) {
        await this.walkDir(root, prefix, rel, rules, pending);
        continue;
      }
      const p = this.examine(root, key, file, st);
      if (p) pending.push(p);
    }
    return pending;
  }

  /** Throws (code ESYMLINK) unless `abs` — `rel` under `root` — resolves to exactly that place under the real root. */
  private assertInside(root: SnapshotRoot, abs: string, rel: string, real = fss.realpathSync.native(abs)): void {
    const expected = path.join(this.realRoots.get(root.dir)!, ...rel.split('/'));
    if (real !== expected) {
      throw Object.assign(new Error(`${rel} changed into a symlink during the scan (it leads to ${real}); not followed`), { code: 'ESYMLINK' });
    }
  }

  /**
   * Reads a file's content without following a symlink anywhere on its path: the
   * last component by O_NOFOLLOW, the parents by checking what the open descriptor
   * really is (a parent directory swapped for a symlink after it was listed would
   * otherwise lead the read outside the workspace).
   */
  private async readInside(root: SnapshotRoot, abs: string, rel: string, size: number): Promise<Buffer> {
    const flags = fss.constants.O_RDONLY | (fss.constants.O_NOFOLLOW ?? 0);
    const fh = await fs.open(abs, flags);
    try {
      if (!(await fh.stat()).isFile()) throw Object.assign(new Error(`${rel} is no longer a regular file`), { code: 'ENOTREG' });
      let real: string | null = null;
      try {
        real = fss.readlinkSync(`/proc/self/fd/${fh.fd}`);
      } catch {
        // no /proc (macOS): checked below by the path as it resolves now
      }
      if (real?.endsWith(' (deleted)')) throw Object.assign(new Error(`${rel} was deleted while it was read`), { code: 'ENOENT' });
      real ??= fss.realpathSync.native(abs);
      this.assertInside(root, abs, rel, real);
      // Small files: one sync read beats the thread-pool round trips.
      return size < SYNC_READ_BELOW ? fss.readFileSync(fh.fd) : await fh.readFile();
    } finally {
      await fh.close();
    }
  }

  /** Records one non-directory path; returns a promise only when content must be read. */
  examine(root: SnapshotRoot, key: string, abs: string, st: Stats): Promise<void> | null {
    this.filesSeen++;
    if (st.isSymbolicLink()) {
      try {
        const target = fss.readlinkSync(abs);
        this.manifest.set(key, { type: 'symlink', target, mtimeMs: st.mtimeMs, ino: st.ino });
      } catch (err) {
        this.unreadable.push({ path: key, ...errInfo(err) });
      }
      return null;
    }
    if (!st.isFile()) {
      // FIFOs, sockets, devices: opening them could block or have side effects.
      this.unreadable.push({ path: key, code: 'ENOTREG', message: 'not a regular file, directory or symlink' });
      return null;
    }
    if (st.size > this.maxFileBytes) {
      this.manifest.set(key, { type: 'skipped', size: st.size, mtimeMs: st.mtimeMs, reason: 'too_large' });
      this.skipped.push({ path: key, size: st.size, reason: 'too_large' });
      return null;
    }
    const mode: 0o755 | 0o644 = st.mode & 0o111 ? 0o755 : 0o644;
    const prev = this.opts.previous?.get(key);
    if (prev && prev.type === 'file' && !prev.racy && prev.size === st.size && prev.mtimeMs === st.mtimeMs && prev.ino === st.ino) {
      this.manifest.set(key, prev.mode === mode ? prev : { ...prev, mode });
      return null;
    }
    return this.io.run(async () => {
      try {
        await this.opts.hooks?.beforeRead?.(abs, key);
        const bytes = await this.readInside(root, abs, key.slice(keyPrefixFor(this.opts.roots, root).length), st.size);
        const put = await this.opts.blobs.put(bytes, { inline: this.fewFiles });
        this.filesHashed++;
        this.bytesHashed += bytes.length;
        if (put.isNew) this.bytesStoredNew += put.storedBytes;
        if (bytes.length > this.maxFileBytes) {
          this.manifest.set(key, { type: 'skipped', size: bytes.length, mtimeMs: st.mtimeMs, reason: 'too_large' });
          this.skipped.push({ path: key, size: bytes.length, reason: 'too_large' });
          return;
        }
        const entry: FileEntry = { type: 'file', hash: put.hash, size: bytes.length, mode, mtimeMs: st.mtimeMs, ino: st.ino };
        // Changed while we read it, or too recent to trust: rehash next time.
        if (bytes.length !== st.size || this.isRacy(st.mtimeMs)) entry.racy = true;
        this.manifest.set(key, entry);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        // Read failures (permissions, vanished, replaced by a dir) are reported; store failures are fatal.
        if (code === 'EACCES' || code === 'EPERM' || code === 'ENOENT' || code === 'EISDIR' || code === 'ENOTDIR' || code === 'EBUSY' || code === 'ELOOP' || code === 'ESYMLINK' || code === 'ENOTREG') {
          this.unreadable.push({ path: key, ...errInfo(err) });
          return;
        }
        throw err;
      }
    });
  }

  async full(): Promise<void> {
    const { roots } = this.opts;
    const pending: Promise<void>[] = [];
    for (const root of roots) await this.walkDir(root, keyPrefixFor(roots, root), '', this.baseRules, pending);
    await Promise.all(pending);
  }

  /**
   * Re-examines only the dirty paths; everything else is copied from `previous`.
   * Returns the keys that may have changed (for the change summary).
   */
  async incremental(previous: Manifest, dirty: readonly string[]): Promise<Set<string>> {
    const { roots } = this.opts;
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
      const r = segs.join('/');
      const prefix = keyPrefixFor(roots, root);
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
          await Promise.all(await this.walkDir(root, prefix, rel, rel === '' ? this.baseRules : rules!));
          for (const k of this.manifest.keys()) if (!before.has(k)) touched.add(k);
        } else {
          const problem = pathKeyProblem(key);
          if (problem) {
            this.unreadable.push({ path: key, code: 'EUNSAFEPATH', message: `cannot be recorded safely: ${problem}` });
            return;
          }
          await this.examine(root, key, abs, st);
          touched.add(key);
        }
      }),
    );
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
  if (opts.dirty && opts.previous) {
    s.fewFiles = opts.dirty.length <= 200;
    touched = await s.incremental(opts.previous, opts.dirty);
  }
  else await s.full();
  if (opts.flush !== false) await opts.blobs.flush();
  // Map order is not meaningful (the walk interleaves); encodings sort their keys.
  return {
    manifest: s.manifest,
    changed: summarize(s.changes(opts.previous, touched)),
    skipped: s.skipped,
    unreadable: s.unreadable,
    stats: { filesSeen: s.filesSeen, filesHashed: s.filesHashed, bytesHashed: s.bytesHashed, bytesStoredNew: s.bytesStoredNew, ms: performance.now() - t0 },
  };
}
