/**
 * How the scan records one non-directory entry: from its lstat alone when it can
 * (symlinks, specials, too-large files, stat-cache hits), else by reading its content
 * — small files synchronously into one reused buffer, large ones on the thread pool,
 * new files of a bulk scan on worker threads — and storing it in the blob store.
 */
import fss, { type Stats } from 'node:fs';
import type { PutResult } from '../blobStore.js';
import type { ManifestEntry } from '../manifest.js';
import { ByteBudget, Limiter } from './backpressure.js';
import type { DirContext } from './dirContext.js';
import { assertInside } from './dirContext.js';
import { O_FILE, PROC_FD, READ_ATTEMPTS, READ_ERRORS, changingWhileRead, confirmPauseMs, errCode, errInfo, notRegular, readAllAsync, readSyncInto, recentlyChanged, sameVersion, type StatLike } from './fsAccess.js';
import type { ScanRecord } from './scanRecord.js';
import type { ScanWorkers } from './scanWorkers.js';
import { TRANSIENT, retryTransient } from './transientRetry.js';

/** Smaller files are read synchronously during the walk; larger ones on the thread pool. */
const SYNC_READ_BELOW = 64 * 1024;
/** Read-but-not-yet-stored bytes the walk may run ahead by (memory bound). */
const MAX_INFLIGHT_BYTES = 8 * 1024 * 1024;

/** The pause before a recently changed file's second read (see readSmall and confirmPauseMs). */
const settle = (st: StatLike) => new Promise<void>((r) => setTimeout(r, confirmPauseMs(st)));

/** A small file's content and the fstat it is the content of (bytes null: grew past the size limit). */
type SmallRead = { bytes: Buffer | null; at: Stats };

export class FileReads {
  /** Bounds large files open or being read at once. */
  private readonly io: Limiter;
  /** Content read but not yet in the store (being compressed): the walk waits past MAX_INFLIGHT_BYTES. */
  private readonly inflight = new ByteBudget(MAX_INFLIGHT_BYTES);
  /** Where small files are read (see read). */
  private readonly scratch = Buffer.allocUnsafeSlow(SYNC_READ_BELOW);
  /** Where a recently changed small file is read a second time, to compare (see readSmall). */
  private readonly verify = Buffer.allocUnsafeSlow(SYNC_READ_BELOW);

  constructor(
    private readonly rec: ScanRecord,
    readonly workers: ScanWorkers,
  ) {
    this.io = new Limiter(Math.max(1, rec.opts.concurrency ?? 8));
  }

  /** Whether `st` matches `prev` so that the entry is reused without reading (see examineMeta). */
  statCacheHolds(st: StatLike, prev: ManifestEntry | undefined): boolean {
    return this.rec.statVouches(prev, st);
  }

  /**
   * Records one non-directory path without reading it when it can (symlinks,
   * specials, too-large files, stat-cache hits: the whole of a rescan but a few
   * files). Returns false when the content must be read (`read`).
   */
  examineMeta(key: string, abs: string, io: string, st: StatLike, prev = this.rec.opts.previous?.get(key)): boolean {
    const rec = this.rec;
    rec.counts.filesSeen++;
    if (st.isSymbolicLink()) {
      try {
        const target = fss.readlinkSync(io);
        rec.set(key, { type: 'symlink', target, mtimeMs: st.mtimeMs, ino: st.ino });
      } catch (err) {
        rec.notCaptured(key, errInfo(err, io, abs));
      }
      return true;
    }
    if (!st.isFile()) {
      // FIFOs, sockets, devices: opening them could block or have side effects.
      rec.notCaptured(key, { code: 'ENOTREG', message: 'not a regular file, directory or symlink' });
      return true;
    }
    if (st.size > rec.maxFileBytes) {
      rec.recordSkipped(key, st.size, st.mtimeMs);
      return true;
    }
    if (rec.statVouches(prev, st)) {
      const mode: 0o755 | 0o644 = st.mode & 0o111 ? 0o755 : 0o644;
      rec.set(key, prev.mode === mode ? prev : { ...prev, mode });
      return true;
    }
    return false;
  }

  /** Records one non-directory path of `dir` (see examineMeta), reading it if needed. */
  async examine(dir: DirContext, key: string, abs: string, io: string, st: StatLike): Promise<void> {
    if (!this.examineMeta(key, abs, io, st)) await this.read(dir, key, abs, io, st);
  }

  /**
   * Whether this new file of `dir` goes to a worker: only in a bulk scan (see
   * ScanWorkers.readsNewFile), only where the worker can open it through its
   * directory's descriptor (/proc: the same no-symlink guarantee as `openInside`),
   * and never with test hooks (they run on this thread, before each read).
   */
  workersRead(dir: DirContext): boolean {
    if (!PROC_FD || dir.fd < 0 || this.rec.opts.hooks) return false;
    return this.workers.readsNewFile();
  }

  /**
   * Opens a file for reading without following a symlink anywhere on its path: the
   * last component by O_NOFOLLOW, the parents by opening it through its directory's
   * descriptor (`io`, see DirContext). Without /proc, the real path of the file is
   * checked instead. The descriptor must be a regular file.
   */
  private openInside(dir: DirContext, key: string, abs: string, io: string): { fd: number; st: Stats } {
    const fd = fss.openSync(io, O_FILE);
    try {
      const st = fss.fstatSync(fd);
      // Root-relative path, for messages and the real-path check (rare: not worth passing along).
      if (!st.isFile()) throw notRegular(key.slice(dir.prefix.length));
      if (!PROC_FD) assertInside(this.rec.realRoot(dir.root), abs, key.slice(dir.prefix.length));
      return { fd, st };
    } catch (err) {
      fss.closeSync(fd);
      throw err;
    }
  }

  /**
   * Reads and stores one regular file of `dir`. Small files are read before this
   * returns (and, without a pool, stored); the promise is for the walk to wait on when
   * too much content is in flight. `io` reaches the file through its open directory;
   * `listed` is its lstat, or null when the descriptor's fstat decides (a new file).
   */
  async read(dir: DirContext, key: string, abs: string, io: string, listed: StatLike | null): Promise<void> {
    const rec = this.rec;
    let large = listed !== null && listed.size >= SYNC_READ_BELOW;
    if (large) await this.io.acquire();
    let opened: { fd: number; st: Stats };
    try {
      const hook = rec.opts.hooks?.beforeRead?.(abs, key);
      if (hook) await hook;
      opened = await retryTransient(() => this.openInside(dir, key, abs, io), rec.retryBudget);
    } catch (err) {
      if (large) this.io.release();
      this.readFailed(err, key, io, abs);
      return;
    }
    const { fd, st: fst } = opened;
    const st = listed ?? fst;
    if (!listed) {
      // Not lstat'ed first (see Walk.entries): the descriptor's fstat decides.
      if (fst.size > rec.maxFileBytes) {
        fss.closeSync(fd);
        rec.recordSkipped(key, fst.size, fst.mtimeMs);
        return;
      }
      if (fst.size >= SYNC_READ_BELOW) {
        large = true;
        await this.io.acquire();
      }
    }
    if (!large) {
      let read: SmallRead;
      try {
        // Small files go through one reused buffer (no allocation per file): the store
        // copies or consumes them before put returns its promise, so a read into the
        // buffer must reach `store` with no await between. Other reads of this scan
        // run at every await (the targets of a dirty hint, the stat workers' answers
        // while the walk goes on, a worker's fallback read) and refill the buffer.
        // readSmall answers synchronously unless it must wait, and then in memory of its own.
        const r = this.readSmall(fd, fst, key.slice(dir.prefix.length));
        read = r instanceof Promise ? await r : r;
      } catch (err) {
        this.readFailed(err, key, io, abs);
        return;
      } finally {
        fss.closeSync(fd);
      }
      const { bytes, at } = read;
      if (!bytes) {
        rec.recordSkipped(key, at.size, at.mtimeMs); // grew past the limit while it was read
        return;
      }
      rec.work.track(this.store(key, st, at, bytes, bytes.buffer === this.scratch.buffer));
      await this.inflight.room();
      return;
    }
    // Large: read on the thread pool, holding the descriptor opened above.
    rec.work.track(
      (async () => {
        let bytes: Buffer;
        let at = fst;
        try {
          // Checked like readSmall: a version that changed during the read is read again.
          for (let attempt = 1; ; attempt++) {
            bytes = await readAllAsync(fd, at.size);
            const after = fss.fstatSync(fd);
            if (bytes.length === at.size && sameVersion(at, after)) {
              if (!recentlyChanged(after)) break;
              await settle(after);
              const again = await readAllAsync(fd, at.size);
              if (sameVersion(at, fss.fstatSync(fd)) && again.equals(bytes)) break;
            }
            if (attempt === READ_ATTEMPTS) throw changingWhileRead(key.slice(dir.prefix.length));
            at = fss.fstatSync(fd); // the version the next read is checked against
          }
        } catch (err) {
          this.readFailed(err, key, io, abs);
          return;
        } finally {
          fss.closeSync(fd);
          this.io.release();
        }
        await this.store(key, st, at, bytes);
      })(),
    );
  }

  /**
   * Reads a small file whole from `fd` and checks, by a second fstat, that no write
   * came between the fstat it was read by and the end of the read (a torn mix of two
   * versions is never stored); read again if one did, up to READ_ATTEMPTS times. A
   * file changed within the last second is read a second time, a moment later, and
   * both reads must agree (see recentlyChanged). Returns the bytes with the fstat they
   * are the content of (bytes null: the file grew past the size limit meanwhile).
   *
   * The answer is synchronous, in the shared `scratch` buffer, unless the file must be
   * read again after a pause (confirm): then it is a promise, and its bytes are never
   * in `scratch` (other reads use it while this one waits). `shared` false: never read
   * into `scratch` (a read resumed after an await).
   */
  private readSmall(fd: number, fst: Stats, rel: string, firstAttempt = 1, shared = true): SmallRead | Promise<SmallRead> {
    let at = fst;
    for (let attempt = firstAttempt; ; attempt++) {
      const bytes = readSyncInto(fd, at.size, shared && at.size <= this.scratch.length ? this.scratch : Buffer.allocUnsafe(at.size));
      const after = fss.fstatSync(fd);
      if (bytes.length === at.size && sameVersion(at, after)) {
        if (!recentlyChanged(after)) return { bytes, at };
        // Out of the shared buffer before waiting: other reads use it meanwhile.
        return this.confirm(fd, at, bytes.buffer === this.scratch.buffer ? Buffer.from(bytes) : bytes, rel, attempt);
      }
      if (attempt >= READ_ATTEMPTS) throw changingWhileRead(rel);
      at = fss.fstatSync(fd); // the version the next read is checked against
      if (at.size > this.rec.maxFileBytes) return { bytes: null, at };
    }
  }

  /**
   * A recently changed file read as `bytes` (memory of its own): a write may have been
   * under way since before the first fstat, so a second read, a moment later (a writer
   * descheduled mid-copy gets to go on), must agree; else it is read again (readSmall).
   */
  private async confirm(fd: number, at: Stats, bytes: Buffer, rel: string, attempt: number): Promise<SmallRead> {
    await settle(at);
    // Compared before anything else runs: `verify` is shared too.
    const again = readSyncInto(fd, at.size, at.size <= this.verify.length ? this.verify : Buffer.allocUnsafe(at.size));
    const last = fss.fstatSync(fd);
    if (sameVersion(at, last) && again.equals(bytes)) return { bytes, at };
    if (attempt >= READ_ATTEMPTS) throw changingWhileRead(rel);
    const next = fss.fstatSync(fd); // the version the next read is checked against
    if (next.size > this.rec.maxFileBytes) return { bytes: null, at: next };
    return this.readSmall(fd, next, rel, attempt + 1, false);
  }

  /** A failed open or read: recorded as not captured when the workspace can cause it (READ_ERRORS), else thrown (the scan fails). */
  private readFailed(err: unknown, key: string, io: string, abs: string): void {
    if (!READ_ERRORS.has(errCode(err))) throw err;
    this.rec.notCaptured(key, errInfo(err, io, abs));
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
    const workers = this.workers;
    workers.storing(length);
    // Once workers write raw packs (a bulk scan deferring compression), files read here are stored raw too.
    const defer = workers.defer;
    const put = this.rec.opts.blobs.put(bytes, { transient, ...(defer ? { defer } : workers.pool ? { pool: workers.pool } : {}) });
    this.inflight.add(length);
    return put.then(
      (r) => {
        this.inflight.settled(length);
        const entry = this.rec.recordStored(key, r, length, (fst.mode & 0o111) !== 0, fst);
        if (entry && changed()) entry.racy = true;
      },
      (err) => {
        this.inflight.settled(length);
        throw err;
      },
    );
  }

  /**
   * Hands one new file of `dir` to a worker, which opens it through `io` (its
   * directory's descriptor, held until the worker is done), fstats, reads, hashes and
   * encodes it; the result is stored and recorded here, as `read` + `store` would.
   */
  async readOnWorker(dir: DirContext, key: string, abs: string, io: string): Promise<void> {
    const rec = this.rec;
    const workers = this.workers;
    if (!workers.files.take()) await workers.files.acquire();
    rec.counts.filesReadOnWorkers++;
    dir.refs++;
    const done = () => {
      workers.files.release();
      dir.release();
    };
    rec.work.track(
      workers.pool!.readFile(io, rec.maxFileBytes, workers.readOpts).then(
        async (r) => {
          try {
            if (r.kind === 'error') {
              if (!READ_ERRORS.has(r.code)) throw Object.assign(new Error(r.message.split(io).join(abs)), { code: r.code });
              // Out of descriptors on the worker: read here instead, with retries (the directory is still held).
              if (TRANSIENT.has(r.code)) await this.read(dir, key, abs, io, null);
              else rec.notCaptured(key, { code: r.code, message: r.message.split(io).join(abs) });
              return;
            }
            if (r.kind === 'skipped') {
              rec.recordSkipped(key, r.size, r.mtimeMs);
              return;
            }
            let put: PutResult;
            if (r.packed) {
              put = rec.opts.blobs.putPacked(r.hash, workers.pack(r.packed.tmp), { hash: r.hash, offset: r.packed.offset, length: r.packed.length });
            } else {
              put = await rec.opts.blobs.putEncoded(r.hash, r.encoded);
            }
            const entry = rec.recordStored(key, put, r.length, r.exec, r);
            // Shorter than its fstat: it changed while the worker read it.
            if (entry && r.length !== r.size) entry.racy = true;
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
}
