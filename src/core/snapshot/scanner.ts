/**
 * Workspace scanner: walks the roots honouring ignore rules, records files,
 * symlinks (never followed) and too-large files, stores new content in the blob
 * store, and reuses hashes from a previous manifest when the stat cache
 * (size, mtime, inode) says a file is unchanged. With a dirty-path hint only those
 * paths are re-examined, so the cost is O(changes).
 *
 * This module runs one scan (a full walk or an incremental one) over the pieces in
 * ./scan: the directory context each directory is walked with (dirContext), the walk
 * (walk), how files are recorded and read (fileReads), the listing cache kept between
 * scans (listingCache), rescans on the stat workers (statRescan), the compression and
 * read workers (scanWorkers), not-captured reporting (scanRecord), retries of
 * transient errors (transientRetry) and the dirty-hint targets (dirtyHint).
 */
import fss, { type Stats } from 'node:fs';
import path from 'node:path';
import { IgnoreRules } from './ignoreRules.js';
import { compareEntries, summarize, type FileChange, type Manifest, type ManifestEntry } from './manifest.js';
import { checkRoots, keyPrefixFor, pathKeyProblem } from './paths.js';
import { AncestorRules } from './scan/ancestorRules.js';
import { DirContext } from './scan/dirContext.js';
import { buildDirPrefixes, dirtyTargets, touchedDirs } from './scan/dirtyHint.js';
import { FileReads } from './scan/fileReads.js';
import { PROC_FD, errInfo } from './scan/fsAccess.js';
import { ScanRecord } from './scan/scanRecord.js';
import type { ScanOptions, ScanResult } from './scan/scanTypes.js';
import { ScanWorkers } from './scan/scanWorkers.js';
import { StatRescan } from './scan/statRescan.js';
import { retryTransient } from './scan/transientRetry.js';
import { Walk } from './scan/walk.js';

export { ListingCache } from './scan/listingCache.js';
export { DEFAULT_MAX_FILE_BYTES } from './scan/scanRecord.js';
export type { ScanHooks, ScanOptions, ScanProblem, ScanResult } from './scan/scanTypes.js';

class Scan {
  readonly rec: ScanRecord;
  readonly workers: ScanWorkers;
  private readonly files: FileReads;
  private readonly walk: Walk;
  private readonly baseRules: IgnoreRules;

  constructor(private readonly opts: ScanOptions) {
    this.rec = new ScanRecord(opts);
    this.workers = new ScanWorkers(opts.blobs, opts.deferCompression ?? false);
    this.files = new FileReads(this.rec, this.workers);
    this.walk = new Walk(this.rec, this.files);
    this.baseRules = opts.listings ? opts.listings.rootRules(opts.excludes) : IgnoreRules.root(opts.excludes);
  }

  private copyOf(previous: Manifest): Manifest {
    return this.opts.spare ? this.opts.spare.take(previous) : new Map(previous);
  }

  /** Walks every root. Returns the keys that may have changed after a rescan on the stat workers, else null (the manifest was built afresh). */
  async full(): Promise<Set<string> | null> {
    const { roots, listings, previous } = this.opts;
    const rec = this.rec;
    if (listings) this.walk.listed = new Set();
    // Test hooks run per entry on this thread, in walk order: no stat workers with them.
    if (listings && PROC_FD && previous && !this.opts.hooks && previous.size >= listings.statWorkersFrom) {
      rec.rescan = new StatRescan(listings.statPool());
      // Copying the Map whole is several times faster than re-inserting 10k+ entries one by one (and a spare one is already made).
      rec.manifest = this.copyOf(previous);
    }
    for (const root of roots) await this.walk.dir(new DirContext(root, keyPrefixFor(roots, root), '', this.baseRules));
    await rec.work.drain();
    const rescan = rec.rescan;
    // A large workspace walked without the stat workers (a first checkpoint): start them now, so its next rescan finds them ready.
    if (listings && PROC_FD && !rescan && !this.opts.hooks && rec.manifest.size >= listings.statWorkersFrom) listings.statPool().warm();
    if (rescan && previous) {
      // Some previous entries were not met: deleted, now ignored, or under a directory gone.
      rescan.dropUnmet(previous, rec.manifest);
      rescan.settlePlans(rec.manifest, previous);
    }
    // Directories gone (or now ignored) since: their listings would only take memory.
    const listed = this.walk.listed;
    if (listed) for (const k of listings!.dirs.keys()) if (!listed.has(k)) listings!.dirs.delete(k);
    return rescan ? rescan.touched : null;
  }

  /**
   * Re-examines only the dirty paths; everything else is copied from `previous`.
   * Returns the keys that may have changed (for the change summary).
   */
  async incremental(previous: Manifest, dirty: readonly string[]): Promise<Set<string>> {
    const { roots } = this.opts;
    const rec = this.rec;
    // Nothing dirty: nothing to examine, and the manifest is `previous` itself (no copy of 10k+ entries).
    if (dirty.length === 0) {
      rec.manifest = previous;
      return new Set();
    }
    // Copying the Map whole is several times faster than re-inserting 10k+ entries one by one (and a spare one is already made).
    rec.manifest = this.copyOf(previous);
    const touched = new Set<string>();
    // Every key this scan records may have changed (a directory target's walk records what is under it now).
    rec.recorded = touched;
    let dirPrefixes: Set<string> | null = null;
    const removeSubtree = (key: string) => {
      // A file or symlink key cannot also be a directory in the same manifest.
      if (key !== '' && previous.has(key)) return;
      dirPrefixes ??= buildDirPrefixes(previous);
      if (key !== '' && !dirPrefixes.has(key)) return;
      const p = key === '' ? '' : `${key}/`;
      for (const k of previous.keys()) {
        if (k.startsWith(p) && rec.manifest.delete(k)) touched.add(k);
      }
    };
    const ancestors = new AncestorRules(this.baseRules);

    await Promise.all(
      dirtyTargets(roots, previous, dirty).map(async ({ root, rel }) => {
        const prefix = keyPrefixFor(roots, root);
        const key = rel === '' ? prefix.replace(/\/$/, '') : prefix + rel;
        const relDir = rel.includes('/') ? rel.slice(0, rel.lastIndexOf('/')) : '';
        // Awaited as before the split (the targets interleave at the same points).
        const rules = rel === '' ? this.baseRules : await ancestors.for(root, relDir);
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
          if (rec.manifest.delete(key)) touched.add(key);
          removeSubtree(key);
        }
        if (!st || ignored) return;
        if (isDir) {
          await this.walk.dir(new DirContext(root, prefix, rel, rel === '' ? this.baseRules : rules!));
          await rec.work.drain();
        } else {
          const problem = pathKeyProblem(key);
          if (problem) {
            rec.leftOut(key, 'EUNSAFEPATH', `cannot be recorded safely: ${problem}`);
            return;
          }
          touched.add(key);
          const name = rel.slice(rel.lastIndexOf('/') + 1);
          // The file's directory, opened from the root (rules only matter to a walk).
          const dir = new DirContext(root, prefix, relDir, this.baseRules);
          try {
            await retryTransient(() => dir.open(), rec.retryBudget);
          } catch (err) {
            rec.notCaptured(key, errInfo(err));
            return;
          }
          try {
            await this.files.examine(dir, key, abs, dir.fd >= 0 ? `${dir.io}/${name}` : abs, st);
          } finally {
            dir.close();
          }
        }
      }),
    );
    // Directory plans (see DirPlan) of directories with no touched entry hold for this scan's manifest too.
    this.opts.listings?.carryPlans(previous, rec.manifest, touchedDirs(roots, touched));
    return touched;
  }
}

/** The changes from `previous` to `manifest`: only `touched` keys are compared when the scan knows them. */
function changesSince(previous: Manifest | undefined, manifest: Manifest, touched: Set<string> | null): FileChange[] {
  const out: FileChange[] = [];
  const prev = previous ?? new Map<string, ManifestEntry>();
  if (touched) {
    for (const k of touched) {
      const c = compareEntries(k, prev.get(k), manifest.get(k));
      if (c) out.push(c);
    }
  } else {
    for (const [k, e] of manifest) {
      const before = prev.get(k);
      if (before === e) continue; // reused entry, unchanged
      const c = compareEntries(k, before, e);
      if (c) out.push(c);
    }
    for (const [k, e] of prev) if (!manifest.has(k)) out.push({ path: k, status: 'deleted', before: e });
  }
  return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
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
  const rec = s.rec;
  let touched: Set<string> | null = null;
  try {
    if (opts.dirty && opts.previous) touched = await s.incremental(opts.previous, opts.dirty);
    else touched = await s.full();
    await rec.work.drain();
    await s.workers.sealPacks();
  } catch (err) {
    await rec.work.drain().catch(() => undefined); // nothing still in flight to a worker
    await s.workers.abandon();
    throw err;
  } finally {
    await s.workers.close();
  }
  if (opts.flush !== false) await opts.blobs.flush();
  // Map order is not meaningful (the walk interleaves); encodings sort their keys.
  return {
    manifest: rec.manifest,
    touched,
    changed: summarize(changesSince(opts.previous, rec.manifest, touched)),
    skipped: rec.skipped,
    unreadable: rec.unreadable,
    stats: { ...rec.counts, ms: performance.now() - t0 },
    startedAtMs: rec.startMs,
  };
}
