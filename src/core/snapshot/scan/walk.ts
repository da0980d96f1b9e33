/**
 * The walk: lists each directory once (or takes its listing from the listing cache),
 * applies its ignore rules, and hands every entry on — subdirectories walked, files
 * recorded (fileReads.ts), or, in a full rescan on the stat workers, sent as one batch
 * per directory (statRescan.ts), following the directory's plan when it still holds.
 *
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
import fss, { type Stats } from 'node:fs';
import { levelsForDir } from '../ignoreRules.js';
import type { ManifestEntry } from '../manifest.js';
import { childKeyProblem } from '../paths.js';
import { PREV_FIELDS, STAT_FIELDS, type StatCheck } from '../statPool.js';
import { DirContext, assertInside } from './dirContext.js';
import type { FileReads } from './fileReads.js';
import { PROC_FD, PooledStat, errInfo, isReserved, isReservedVariant, namesNotUtf8, type StatLike } from './fsAccess.js';
import { prevNumbers, type DirEntry, type DirPlan, type FileBatch } from './listingCache.js';
import type { ScanRecord } from './scanRecord.js';
import type { StatRescan } from './statRescan.js';
import { retryTransient } from './transientRetry.js';

/** Entries handled between yields to the event loop. */
const YIELD_EVERY = 256;

export class Walk {
  /** Listing-cache keys a full walk met (the rest are pruned after it); null when there is no cache or the walk is partial. */
  listed: Set<string> | null = null;
  private sinceYield = 0;

  constructor(
    private readonly rec: ScanRecord,
    private readonly files: FileReads,
  ) {}

  /** Walks `dir` and everything below it; a directory that cannot be listed is recorded as not captured (a root that cannot is an error). */
  async dir(dir: DirContext): Promise<void> {
    const rec = this.rec;
    const { root, relDir, abs } = dir;
    let dirents: DirEntry[];
    try {
      await rec.opts.hooks?.beforeList?.(abs, relDir);
      const listings = PROC_FD ? rec.opts.listings : undefined;
      const memo = listings ? `${root.dir}\0${relDir}` : '';
      this.listed?.add(memo);
      const hit = listings?.dirs.get(memo);
      // By path: a directory swapped for a symlink lstats as a link (a miss, then
      // refused by the open below). Entries are only listed from the cache; whatever
      // is read is read through descriptors opened from the root (ensureOpen).
      const now = hit ? fss.lstatSync(abs, { throwIfNoEntry: false }) : undefined;
      if (hit && now?.isDirectory() && now.ino === hit.ino && now.mtimeMs === hit.mtimeMs && now.ctimeMs === hit.ctimeMs) {
        dir.openLazily();
        dirents = hit.dirents;
        // Its entries' root-relative paths: the same strings each scan (no garbage; their hashes stay cached).
        dir.rels = hit.rels ??= dirents.map((d) => dir.relBase + d.name);
        dir.listed = hit;
        rec.counts.dirsFromCache++;
      } else {
        await retryTransient(() => dir.open(), rec.retryBudget);
        // Stat before listing: an entry added after the listing moves the mtime past what is cached.
        const st = listings ? fss.fstatSync(dir.fd) : null;
        const io = dir.io;
        dirents = await retryTransient(() => fss.readdirSync(io, { withFileTypes: true }), rec.retryBudget);
        rec.counts.dirsListed++;
        if (listings && st) {
          if (rec.isRacy(st.mtimeMs) || rec.isRacy(st.ctimeMs)) listings.dirs.delete(memo);
          else listings.dirs.set(memo, (dir.listed = { ino: st.ino, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, dirents }));
        }
      }
      // Without /proc: what was listed must still be this very directory inside the root.
      if (!PROC_FD && relDir !== '') assertInside(rec.realRoot(root), abs, relDir);
    } catch (err) {
      dir.close();
      const info = errInfo(err, dir.io || undefined, abs);
      // A root that cannot be listed is no checkpoint at all, not an empty one.
      if (relDir === '') throw Object.assign(new Error(`cannot list the workspace folder ${abs}: ${info.message}`), { code: info.code });
      rec.notCaptured(dir.prefix + relDir, info, true);
      return;
    }
    try {
      await this.entries(dir, dirents);
    } finally {
      dir.release();
    }
  }

  /** Yields to the event loop once YIELD_EVERY entries have been handled since the last time. */
  private async pace(entries: number): Promise<void> {
    this.sinceYield += entries;
    if (this.sinceYield < YIELD_EVERY) return;
    this.sinceYield = 0;
    await new Promise<void>((r) => setImmediate(r));
  }

  private async entries(dir: DirContext, dirents: DirEntry[]): Promise<void> {
    const rec = this.rec;
    const { prefix, relDir, relBase, absBase, rels, listed } = dir;
    let hasGitignore = false;
    let hasDotGit = false;
    for (const d of dirents) {
      if (d.name === '.gitignore') hasGitignore = true;
      else if (d.name === '.git') hasDotGit = true;
    }
    let rules = dir.rules;
    if (hasGitignore || hasDotGit) for (const level of levelsForDir(dir.abs, relDir, hasGitignore, hasDotGit, rec.opts.listings?.levels)) rules = rules.with(level);
    dir.rules = rules;
    const rescan = rec.rescan;
    const plan = listed?.plan;
    if (plan !== undefined) {
      const previous = rec.opts.previous;
      if (rescan && previous !== undefined && (plan.prevOf === previous || plan.alsoOf === previous) && plan.prefix === prefix && plan.rules.sameAs(rules)) {
        await this.planned(dir, rescan, plan);
        return;
      }
      listed!.plan = undefined;
    }
    /** Whether every entry went to the stat workers or is a subdirectory: then a plan can be kept. */
    let plannable = listed !== undefined;
    /** Names that are not UTF-8 (see namesNotUtf8), listed as bytes when the first U+FFFD is met. */
    let notUtf8: Map<string, string[]> | undefined;
    // With stat workers: files are collected and lstat'ed as one batch, subdirectories walked meanwhile.
    // Parallel arrays, not an object per entry: a rescan's garbage is mostly per-entry objects.
    const deferred: string[] | null = rescan ? [] : null;
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
      if (name.includes('\uFFFD')) {
        // Possibly not UTF-8: such a name cannot be opened by the string Node gives it, and would vanish as "gone".
        notUtf8 ??= namesNotUtf8(dir.ensureOpen().io);
        const shown = notUtf8.get(name);
        if (shown !== undefined) {
          plannable = false;
          // One decoded name stands for every raw name that decodes to it: each is reported once.
          notUtf8.set(name, []);
          const below = isDir ? '; nothing under it is captured' : '';
          for (const s of shown) rec.leftOut(prefix + relBase + s, 'EUNSAFEPATH', `not captured: its name is not valid UTF-8 (bytes shown as \\xNN)${below}`);
          continue;
        }
      }
      if (reserved) {
        // `.GIT`, `.Waypoint`: never entered or recorded (on a case-insensitive file system they are the real ones), but not in silence.
        plannable = false;
        rec.leftOut(prefix + rel, 'ERESERVED', `not captured: the name is reserved (${name.toLowerCase()}) in any letter case`);
        continue;
      }
      const key = prefix + rel;
      const problem = childKeyProblem(key, name);
      if (problem) {
        plannable = false;
        rec.leftOut(key, 'EUNSAFEPATH', `cannot be recorded safely: ${problem}`);
        continue;
      }
      if (++this.sinceYield >= YIELD_EVERY) await this.pace(0);
      if (isDir) {
        if (subdirs) {
          // A file of the previous manifest that is a directory now: its entry goes.
          if (rec.manifest.delete(key)) {
            rescan!.touched.add(key);
            plannable = false;
          }
          subdirs.push(rel);
        } else await this.dir(DirContext.child(dir, rel));
        continue;
      }
      // Plain concatenation: path.join's normalisation showed up in rescan profiles.
      const file = absBase + name;
      // A regular file the stat cache cannot vouch for is read anyway: no lstat, its
      // descriptor's fstat serves (a first checkpoint: 4 syscalls per file, not 5).
      const prev = rec.opts.previous?.get(key);
      if (prev !== undefined) rescan?.seenPrev.push(key);
      if (prev === undefined && d.isFile()) {
        plannable = false;
        rec.counts.filesSeen++;
        rescan?.touched.add(key);
        let io: string;
        try {
          io = await retryTransient(() => dir.entryIo(name), rec.retryBudget);
        } catch (err) {
          rec.notCaptured(key, errInfo(err));
          continue;
        }
        if (this.files.workersRead(dir)) await this.files.readOnWorker(dir, key, file, io);
        else await this.files.read(dir, key, file, io, null);
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
        rec.counts.filesSeen++;
        rec.notCaptured(key, errInfo(err));
        continue;
      }
      await this.listedEntry(dir, file, key, prev, st);
    }
    if (!deferred) return;
    const nums = new Float64Array(deferred.length * PREV_FIELDS);
    for (let i = 0; i < deferred.length; i++) prevNumbers(deferredPrev[i], nums, i * PREV_FIELDS);
    const names = deferred.join('\0');
    let made: DirPlan | null = null;
    let batch: FileBatch;
    if (plannable) {
      made = { rules, prefix, prevOf: null, alsoOf: null, names, nameList: deferred, keys: deferredKeys, prevs: deferredPrev, nums, subdirs: subdirs! };
      batch = made;
      listed!.plan = made;
      rescan!.usePlan(made);
    } else batch = { names, nameList: deferred, keys: deferredKeys, prevs: deferredPrev, nums };
    if (deferred.length > 0) await this.checkFiles(dir, batch, made);
    for (const sub of subdirs!) await this.dir(DirContext.child(dir, sub));
  }

  /** A directory whose plan holds (see DirPlan): its files go to a worker as planned, its subdirectories are walked. */
  private async planned(dir: DirContext, rescan: StatRescan, plan: DirPlan): Promise<void> {
    this.rec.counts.dirsPlanned++;
    rescan.usePlan(plan);
    const { keys, prevs } = plan;
    const seen = rescan.seenPrev;
    for (let i = 0; i < keys.length; i++) if (prevs[i] !== undefined) seen.push(keys[i]!);
    await this.pace(keys.length + plan.subdirs.length);
    if (keys.length > 0) await this.checkFiles(dir, plan, plan);
    for (const sub of plan.subdirs) await this.dir(DirContext.child(dir, sub));
  }

  /**
   * A directory's files are checked against the stat cache on a worker while the walk
   * goes on (its subdirectories, then what follows). Unchanged files are already in
   * the manifest (a copy of the previous one); the ones that differ come back and are
   * examined (and read) here when the answer arrives. `plan`: the directory's plan the
   * batch belongs to, kept up to date with what changes.
   */
  private async checkFiles(dir: DirContext, batch: FileBatch, plan: DirPlan | null): Promise<void> {
    const rec = this.rec;
    const rescan = rec.rescan!;
    const { nameList, keys, prevs } = batch;
    // Bounded only where a descriptor is held: a directory listed from the cache holds none until it is needed.
    const holds = dir.fd >= 0;
    if (holds && !rescan.batches.take()) await rescan.batches.acquire();
    dir.refs++; // the directory's descriptor may be needed to read a changed file
    const examine = async ({ idx, values, errors }: StatCheck) => {
      rec.counts.filesSeen += nameList.length - idx.length - errors.size;
      for (const [i, failed] of errors) {
        const key = keys[i]!;
        rec.counts.filesSeen++;
        if (rec.manifest.delete(key)) rescan.touched.add(key);
        rec.notCaptured(key, { code: failed.code, message: failed.message });
        rescan.planChanged(plan, i);
      }
      for (let j = 0; j < idx.length; j++) {
        const i = idx[j]!;
        const key = keys[i]!;
        const at = j * STAT_FIELDS;
        // Re-derived from scratch: listedEntry records it again unless it is gone or unreadable now.
        rec.manifest.delete(key);
        rescan.touched.add(key);
        rescan.planChanged(plan, i);
        const st = new PooledStat(values[at]!, values[at + 1]!, values[at + 2]!, values[at + 3]!, values[at + 4]!, values[at + 5]!);
        await this.listedEntry(dir, dir.absBase + nameList[i]!, key, prevs[i], st);
      }
    };
    rec.work.track(
      rescan.pool
        .check(dir.absBase, batch.names, nameList.length, batch.nums, rec.maxFileBytes, rec.opts.previousVerifiedAtMs)
        .then(examine)
        .finally(() => {
          dir.release();
          if (holds) rescan.batches.release();
        }),
    );
  }

  /**
   * One listed non-new entry of `dir` (`file`: its absolute path, as the walk or the
   * stat batch built it), given its lstat: a directory that replaced it is walked,
   * anything else examined (and read if changed). Its bare name is cut from `file`
   * only when it must be opened (a symlink, a file to read): not once per file.
   */
  private async listedEntry(dir: DirContext, file: string, key: string, prev: ManifestEntry | undefined, st: StatLike): Promise<void> {
    const rec = this.rec;
    // A directory that replaced the entry between readdir and lstat.
    if (st.isDirectory()) {
      await this.dir(DirContext.child(dir, dir.relBase + file.slice(dir.absBase.length)));
      return;
    }
    let io = '';
    try {
      // Only a symlink (readlink) or a file the stat cache cannot vouch for (read) needs the descriptor.
      if (st.isSymbolicLink() || (st.isFile() && st.size <= rec.maxFileBytes && !this.files.statCacheHolds(st, prev))) io = await retryTransient(() => dir.entryIo(file.slice(dir.absBase.length)), rec.retryBudget);
    } catch (err) {
      rec.counts.filesSeen++;
      rec.notCaptured(key, errInfo(err));
      return;
    }
    if (!this.files.examineMeta(key, file, io, st, prev)) await this.files.read(dir, key, file, io, st);
  }
}
