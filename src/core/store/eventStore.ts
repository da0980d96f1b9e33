import * as fs from 'node:fs';
import { sequenceBatch } from './sequence';
import * as os from 'node:os';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';
import { crc32 } from 'node:zlib';
import type { Database, SqlJsStatic } from 'sql.js';
import { WaypointError, errorMessage } from '../model/errors';
import { SCHEMA_VERSION, parseEvent, type WaypointEvent, type EventType } from '../model/schema';
import { Logger, silentLogger } from '../log';
import { Db } from './db';
import { fsyncDir, sweepTempFiles, tempPathFor, writeFileAtomic } from './fsutil';
import { ARCHIVE_DIR, FENCED_DIR, RECORD_MAGIC, JournalWriter, decodeSegment, encodeRecord, endOfData, listChain, listSegments, readSegmentHeader, segmentBase, segmentName, type DecodedSegment, type SegmentHeader } from './journal';
import { DB_VERSION, dbVersion, migrate } from './migrations';
import { OwnerLock, noteEpoch, type AcquireOptions } from './ownerLock';
import { insertEvent, project } from './projections';
import type { AppendResult, Disposable, EventLog, NewEvent, ReadFilter, WorkspaceIdentity } from './eventLog';
export type { NewEvent } from './eventLog';
import { SqlProjection, rebuildInPlace } from './projection';
import { loadSqlJs } from './sqlite';
import { STORE_FILE_MODE, ensurePrivateStoreDir } from './storeDir';
import { upcast } from './upcast';
import { plural } from '../model/plural';

/**
 * The embedded EventLog: one per workspace, in `.waypoint/` — the journal segments,
 * the exported database generations, and owner-epoch fencing. The projection it
 * feeds (`SqlProjection`, the in-memory sql.js database) is its snapshot: an export
 * writes that database whole, so the log applies each batch to it at the instant it
 * sequences the batch, and a generation on disk always matches the journal.
 *
 *   waypoint.db           sql.js database: projections (the newest generation)
 *   waypoint.db.prev      the previous generation, a fallback if the newest will not open
 *   journal-N.wal         journal segments holding every event since the previous generation
 *   archive/journal-N.wal older segments: the rest of the history
 *   owner.lock            which process owns the store, and its fencing epoch
 *   fenced/               segments a replaced owner wrote after it was replaced (never read)
 *
 * A commit applies its events to the in-memory database synchronously (so the
 * next caller validates against them) and resolves once the journal record is
 * fdatasync'd; only then is the caller answered. The database is exported
 * atomically when the journal passes a threshold and on close. Segments are kept
 * back to the previous generation, so falling back to `waypoint.db.prev` loses
 * nothing; older ones move to `archive/`.
 *
 * The events table holds only the events since the last export: an export drops
 * the rest, which are durable in the segments (a snapshot and its deltas: the
 * database is the snapshot, the journal the deltas). So the database, which sql.js
 * keeps whole in memory and reads whole on open, grows with the projections and
 * not with the history, and opening reads only the projections and the journal
 * tail. `events()` reads older events from the segments.
 */
export interface StoreOptions {
  /** The `.waypoint` directory. */
  dir: string;
  log?: Logger;
  lock?: AcquireOptions;
  /** Export the database when the current journal segment passes this many bytes. */
  exportThresholdBytes?: number;
  clock?: () => number;
  /**
   * Opens without writing anything (no lock file, no temp sweep, no journal writer, no
   * export on close), for reading on a full disk; the reason is what every write is
   * refused with. Nothing here is ever fenced: it never writes.
   */
  readOnly?: string;
  /** The workspace folder this store records (its identity's path); defaults to the store directory's parent. */
  workspace?: string;
}

/** A read-only store owns nothing: it takes no lock, so it releases none. */
const NO_LOCK = { release: () => undefined, setEndpoint: () => undefined, assertHeld: () => undefined, onLost: () => ({ dispose: () => undefined }), ownerId: 'read-only', epoch: 0, lost: null, tookOver: false } as unknown as OwnerLock;

export interface OpenReport {
  warnings: string[];
  replayed: number;
  droppedTornBytes: number;
  source: 'new' | 'db' | 'prev' | 'journal';
  migratedFrom: number | null;
  ms: number;
}

/** How many of the projection's transactions one SQLite transaction folds at most, and for how long (see Db.deferCommits). */
const DEFERRED_COMMITS = { transactions: 256, ms: 50 };

const DB_FILE = 'waypoint.db';
const PREV_FILE = 'waypoint.db.prev';

export class EventStore implements EventLog {
  readonly backend = 'embedded' as const;
  private writer!: JournalWriter;
  private rotating: Promise<void> | null = null;
  private exporting: Promise<void> | null = null;
  private pendingDurable = new Map<number, Promise<void>>();
  private durableSeq = 0;
  private seq = 0;
  private closed = false;
  /** lastSeq of the database generation on disk (the next export demotes it to prev). */
  private diskGenerationSeq = 0;
  /** The database on disk is of an older schema (migrated in memory on open): write it back on close. */
  private migratedInMemory = false;
  private listeners = new Set<(events: readonly WaypointEvent[]) => void>();
  private lostListeners = new Set<(e: WaypointError) => void>();
  /**
   * This owner's journal epoch: above every epoch in the journal when it opened (and
   * at least the lock's). Written into the headers of the segments it creates and
   * into its database exports, so a replaced owner's later segments and exports
   * (lower epochs) are recognised and never read as history.
   */
  private journalEpochValue = 0;
  /** Counters for tests and the benchmark: how many fdatasyncs carried how many records. */
  readonly stats = { flushes: 0, records: 0, exports: 0 };
  readonly clock: () => number;
  private readonly exportThreshold: number;
  private readonly log: Logger;

  readonly workspace: WorkspaceIdentity;

  private constructor(
    readonly dir: string,
    /** The projection this log feeds and exports as its generations. */
    readonly projection: SqlProjection,
    readonly storeId: string,
    readonly lock: OwnerLock,
    readonly report: OpenReport,
    opts: StoreOptions,
  ) {
    this.clock = opts.clock ?? Date.now;
    this.exportThreshold = opts.exportThresholdBytes ?? 8 * 1024 * 1024;
    this.log = (opts.log ?? silentLogger).child('store');
    // The store id lives in `.waypoint/` (the database's meta and every segment header), so it survives moves of the folder.
    this.workspace = { id: storeId, machine: process.env.WAYPOINT_MACHINE || os.hostname(), path: opts.workspace ?? path.dirname(dir) };
  }

  /** The projection's database (embedded callers and tests read it directly; the engine goes through Queries). */
  get db(): Db {
    return this.projection.db;
  }

  /**
   * The ownership fencing epoch: the owner lock's, which a takeover raises and which a
   * discovery file is paired with. (`journalEpoch`, at or above it, marks the segments.)
   */
  get epoch(): number {
    return this.lock.epoch;
  }

  get warnings(): readonly string[] {
    return this.report.warnings;
  }

  private readonly onFlush = (records: number): void => {
    this.stats.flushes++;
    this.stats.records += records;
  };

  get lastSeq(): number {
    return this.seq;
  }

  static async open(opts: StoreOptions): Promise<EventStore> {
    const t0 = performance.now();
    const log = (opts.log ?? silentLogger).child('store');
    const dir = opts.dir;
    const readOnly = opts.readOnly !== undefined;
    if (!readOnly) ensureStoreDir(dir);
    const lock = readOnly ? NO_LOCK : await OwnerLock.acquire(dir, opts.lock);
    let lostSub: { dispose(): void } | undefined;
    try {
      const swept = readOnly ? [] : [...sweepTempFiles(dir), ...sweepTempFiles(path.join(dir, ARCHIVE_DIR))];
      if (swept.length) log.info(`removed ${plural(swept.length, 'temp file')} left by an interrupted write`);
      const SQL = await loadSqlJs();
      const warnings: string[] = [];
      // Segments a replaced owner made after it was replaced are not history: set them aside.
      const chain = listChain(dir);
      // Read-only (a full disk) moves nothing: the set-aside happens on the next writable open.
      if (chain.fenced.length && !readOnly) {
        const aside = path.join(dir, FENCED_DIR);
        fs.mkdirSync(aside, { recursive: true, mode: 0o700 });
        for (const f of chain.fenced) fs.renameSync(f, path.join(aside, `${path.basename(f)}.${Date.now()}`));
        warnings.push(`set aside ${plural(chain.fenced.length, 'journal segment')} written by a replaced owner after it lost the store (never acknowledged) in ${FENCED_DIR}/`);
      }
      const loaded = await loadGenerations(SQL, dir, warnings, log);
      const { db, storeId, source, generationSeq } = loaded;
      const mig = migrate(db);
      let seq = dbLastSeq(db);
      if (mig.rebuild) rebuildInPlace(db, [...readSegmentEvents(dir, 0, tableFromSeq(db, seq) - 1), ...tableEvents(db, 0)]);
      // Rebuilt from a journal whose early segments are gone: start where it starts (warned above).
      if (source === 'journal' && loaded.journalEvents.length) seq = Math.max(seq, loaded.journalEvents[0].seq - 1);
      let replayed = 0;
      // One transaction for the whole replay: it is all or nothing, and far faster.
      db.transaction(() => {
        for (const e of loaded.journalEvents) {
          if (e.seq <= seq) continue;
          if (e.seq !== seq + 1) {
            throw new WaypointError('corrupt', `Journal is missing events ${seq + 1}..${e.seq - 1}; refusing to open with a gap.`, { from: seq + 1, to: e.seq - 1 });
          }
          insertEvent(db, e);
          project(db, e);
          seq = e.seq;
          replayed++;
        }
      });
      db.run('INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)', ['storeId', storeId]);
      const report: OpenReport = {
        warnings,
        replayed,
        droppedTornBytes: loaded.tornBytes,
        source,
        migratedFrom: mig.from !== mig.to && mig.from > 0 ? mig.from : null,
        ms: 0,
      };
      const store = new EventStore(dir, new SqlProjection(db, seq), storeId, lock, report, opts);
      // The journal makes each commit durable; the in-memory database need not write its pages
      // into its in-memory file on every one (export and compact settle it first).
      db.deferCommits(DEFERRED_COMMITS);
      store.journalEpochValue = Math.max(lock.epoch, chain.maxEpoch + 1);
      if (store.journalEpochValue > lock.epoch && !readOnly) noteEpoch(dir, store.journalEpochValue);
      store.seq = seq;
      store.durableSeq = seq;
      store.diskGenerationSeq = generationSeq;
      store.migratedInMemory = mig.from !== mig.to;
      // Append after the last valid record of the newest segment (its torn tail is truncated),
      // or start a segment right after the database when there is none. After a takeover the
      // replaced owner may still hold the newest segment open and wake to append to it: that
      // segment is first replaced by a copy of its valid bytes under this owner's epoch, so
      // whatever the old owner writes later goes to an orphaned file nobody reads.
      const last = loaded.segments[loaded.segments.length - 1];
      if (readOnly) {
        store.readOnlyReason = opts.readOnly!;
        log.warn(opts.readOnly!);
        return store;
      }
      const fence = (): void => lock.assertHeld();
      if (last && lock.tookOver) {
        const size = await rewriteSegment(last.file, last.validBytes, { kind: 'header', storeId, baseSeq: last.baseSeq, v: SCHEMA_VERSION, epoch: store.journalEpochValue });
        store.writer = await JournalWriter.open(last.file, { kind: 'header', storeId, baseSeq: last.baseSeq, v: SCHEMA_VERSION }, size, store.onFlush, fence);
        log.info(`took the store over from a stale owner: journal epoch ${store.journalEpochValue}, newest segment rewritten`);
      } else {
        const header: SegmentHeader = { kind: 'header', storeId, baseSeq: last ? last.baseSeq : seq + 1, v: SCHEMA_VERSION, epoch: store.journalEpochValue };
        store.writer = last
          ? await JournalWriter.open(last.file, header, last.validBytes, store.onFlush, fence)
          : await store.openNewSegment(path.join(dir, segmentName(seq + 1)), header);
      }
      lostSub = lock.onLost(() => store.loseOwnership());
      if (loaded.tornBytes) log.warn(`dropped a torn journal tail of ${plural(loaded.tornBytes, 'byte')} (never acknowledged)`);
      for (const w of warnings) log.warn(w);
      report.ms = performance.now() - t0;
      log.info(`opened ${dir} from ${source}: ${seq} events, ${replayed} replayed from the journal in ${report.ms.toFixed(1)} ms`);
      return store;
    } catch (e) {
      lostSub?.dispose();
      lock.release();
      throw e;
    }
  }

  /**
   * Creates a new segment exclusively. A file already at that name can only be a
   * replaced owner's (it rotated its journal after the takeover; its epoch is lower):
   * it is set aside and the name taken. Anything else is refused.
   */
  private async openNewSegment(file: string, header: SegmentHeader): Promise<JournalWriter> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await JournalWriter.open(file, header, null, this.onFlush, () => this.lock.assertHeld());
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw e;
        const theirs = readSegmentHeader(file);
        if (theirs && theirs.epoch !== undefined && theirs.epoch < this.journalEpochValue) {
          const aside = path.join(this.dir, FENCED_DIR);
          await fs.promises.mkdir(aside, { recursive: true, mode: 0o700 });
          await fs.promises.rename(file, path.join(aside, `${path.basename(file)}.${Date.now()}`));
          this.log.warn(`set aside ${path.basename(file)}, written by a replaced owner (epoch ${theirs.epoch})`);
          continue;
        }
        throw new WaypointError('io', `Journal segment ${path.basename(file)} already exists and is not a replaced owner's; refusing to overwrite it.`, { file });
      }
    }
  }

  /**
   * Ownership was lost (this process was stalled past its lease and another took the
   * store): refuse every later write, and tell whoever listens (the owner endpoint
   * tells its clients; a VS Code window switches to relaying).
   */
  private loseOwnership(): void {
    let err: WaypointError;
    try {
      this.lock.assertHeld();
      return;
    } catch (e) {
      err = e as WaypointError;
    }
    this.writer?.poison(err);
    this.log.error(err.message);
    for (const l of this.lostListeners) {
      try {
        l(err);
      } catch (e) {
        this.log.error(`ownership listener failed: ${errorMessage(e)}`);
      }
    }
  }

  /** Called once if this process loses the store to another owner (see loseOwnership). */
  onDidLoseOwnership(listener: (e: WaypointError) => void): { dispose(): void } {
    this.lostListeners.add(listener);
    return { dispose: () => this.lostListeners.delete(listener) };
  }

  /** Subscribe to committed events (called once they are durable). */
  onDidCommit(listener: (events: readonly WaypointEvent[]) => void): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  /**
   * Applies events atomically and appends them as one journal record. Returns the
   * sequenced events at once and a promise that settles when they are durable;
   * callers must not report success before it resolves.
   */
  commit(batch: readonly NewEvent[]): { events: WaypointEvent[]; durable: Promise<void> } {
    this.assertWritable();
    if (batch.length === 0) return { events: [], durable: Promise.resolve() };
    const ts = this.clock();
    const events = sequenceBatch(batch, this.seq, ts);
    this.projection.apply(events);
    this.seq += events.length;
    const last = this.seq;
    const record = encodeRecord({ kind: 'batch', last, events });
    const append = this.rotating ? this.rotating.then(() => this.writer.append(record)) : this.writer.append(record);
    const durable = append.then(() => {
      this.durableSeq = Math.max(this.durableSeq, last);
      this.pendingDurable.delete(last);
      for (const l of this.listeners) {
        try {
          l(events);
        } catch (e) {
          this.log.error(`change listener failed: ${errorMessage(e)}`);
        }
      }
      this.maybeExport();
    });
    this.pendingDurable.set(last, durable);
    // A failed append has poisoned the writer; the caller sees the rejection via `durable`.
    durable.catch(() => undefined);
    return { events, durable };
  }

  /** Resolves once the event with this seq is durable (for answering a repeated call). */
  async waitDurable(seq: number): Promise<void> {
    if (seq <= this.durableSeq) return;
    const pending = [...this.pendingDurable.entries()].filter(([s]) => s >= seq).sort((a, b) => a[0] - b[0])[0];
    if (pending) await pending[1];
  }

  /**
   * Events in seq order: those since the last export from memory, older ones from
   * the journal's segments (archived or live), read and checked record by record.
   */
  events(filter: { taskId?: string; afterSeq?: number; limit?: number } = {}): WaypointEvent[] {
    const after = filter.afterSeq ?? 0;
    const limit = filter.limit !== undefined && filter.limit >= 0 ? filter.limit : Infinity;
    const memFrom = tableFromSeq(this.db, this.seq);
    const out: WaypointEvent[] = after + 1 < memFrom ? readSegmentEvents(this.dir, after, memFrom - 1, filter.taskId, limit, this.storeId) : [];
    if (out.length >= limit) return out;
    const rows = this.db.all<Record<string, unknown>>(
      `SELECT * FROM events WHERE seq > ? ${filter.taskId ? 'AND task_id = ?' : ''} ORDER BY seq LIMIT ?`,
      filter.taskId ? [after, filter.taskId, limit === Infinity ? -1 : limit - out.length] : [after, limit === Infinity ? -1 : limit - out.length],
    );
    for (const r of rows) out.push(rowToEvent(r));
    return out;
  }

  private maybeExport(): void {
    if (this.closed || this.exporting || this.writer.sizeBytes < this.exportThreshold) return;
    this.exportNow().catch((e) => this.log.error(`export failed (the journal still holds every event): ${errorMessage(e)}`));
  }

  /**
   * Exports the database atomically and starts a new journal segment. Segments
   * that only the previous-previous generation needed are removed.
   */
  exportNow(): Promise<void> {
    this.exporting ??= this.doExport().finally(() => {
      this.exporting = null;
    });
    return this.exporting;
  }

  private async doExport(): Promise<void> {
    this.assertWritable();
    this.lock.assertHeld();
    const t0 = performance.now();
    await this.archiveUncoveredRows();
    // Events durable by now are readable from their segment, so the table can let them go.
    const durableUpTo = this.seq;
    await this.waitDurable(durableUpTo);
    // Synchronous from here to the rotation: the bytes hold exactly events 1..seq,
    // every one of which has already been handed to the old segment's writer, and
    // every later event goes to the new segment (commit chains on `rotating`).
    // Closing the old writer waits for its records to be durable, and the database
    // file is written only after that, so it never holds an unacknowledgeable event.
    const seq = this.seq;
    // The table drops what its segment already holds durably; the few events committed
    // since (up to seq) stay in it, and in this export, which is written only once the
    // rotation below has made them durable too.
    this.db.run('DELETE FROM events WHERE seq <= ?', [durableUpTo]);
    this.db.run('INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)', ['exportedSeq', String(seq)]);
    this.db.run('INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)', ['prevGenerationSeq', String(this.diskGenerationSeq)]);
    this.db.run('INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)', ['exportEpoch', String(this.journalEpochValue)]);
    this.db.compact(2 * reserveBytesFor(this.db, this.exportThreshold));
    // Room for the journal tail a crash can leave (up to the export threshold) and
    // for new events, so neither the replay nor the next appends grow the file.
    this.db.reserveFreePages(reserveBytesFor(this.db, this.exportThreshold));
    const bytes = this.db.export();
    const old = this.writer;
    this.rotating = (async () => {
      const ownFile = old.identity;
      await old.close();
      if (old.poisoned) throw old.poisoned;
      const next = path.join(this.dir, segmentName(seq + 1));
      const header: SegmentHeader = { kind: 'header', storeId: this.storeId, baseSeq: seq + 1, v: SCHEMA_VERSION, dbCrc: crc32(bytes), epoch: this.journalEpochValue };
      this.lock.assertHeld();
      if (next === old.path && ownFile) {
        // Exporting again with no event since the last rotation: the segment holds only a
        // header naming the previous export's checksum. It is started again under one for
        // these bytes in place, through a descriptor checked to be this owner's file: this
        // process may be stopped anywhere after the check above, and its successor then
        // puts its own copy of the segment, with its events, under this name.
        try {
          this.writer = await JournalWriter.restart(next, { ...ownFile, size: old.sizeBytes }, header, this.onFlush, () => this.lock.assertHeld());
        } catch (e) {
          this.lock.assertHeld();
          throw e;
        }
      } else {
        this.writer = await this.openNewSegment(next, header);
      }
    })();
    try {
      await this.rotating;
    } finally {
      this.rotating = null;
    }
    const dbFile = path.join(this.dir, DB_FILE);
    const tmp = path.join(this.dir, `${DB_FILE}.wp-tmp-export`);
    // A fixed name: opened without following a link planted there (the store's open refuses links too).
    const fh = await fs.promises.open(tmp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC | (fs.constants.O_NOFOLLOW ?? 0), STORE_FILE_MODE);
    try {
      await fh.writeFile(bytes);
      await fh.sync();
    } finally {
      await fh.close();
    }
    // A replaced owner must not put its generation in place; the check and the renames are one synchronous run.
    try {
      this.lock.assertHeld();
    } catch (e) {
      await fs.promises.rm(tmp, { force: true });
      throw e;
    }
    if (fs.existsSync(dbFile)) fs.renameSync(dbFile, path.join(this.dir, PREV_FILE));
    fs.renameSync(tmp, dbFile);
    await fsyncDir(this.dir);
    const prevSeq = this.diskGenerationSeq;
    this.diskGenerationSeq = seq;
    this.migratedInMemory = false;
    // Keep every segment holding events after the previous generation (now waypoint.db.prev)
    // beside the database; older ones, which no generation replays, go to the archive.
    const segs = listChain(this.dir).segments.filter((f) => path.dirname(f) === this.dir);
    const archive = path.join(this.dir, ARCHIVE_DIR);
    let archived = 0;
    for (let i = 0; i + 1 < segs.length; i++) {
      const nextBase = segmentBase(path.basename(segs[i + 1]));
      if (nextBase - 1 <= prevSeq) {
        this.lock.assertHeld();
        await fs.promises.mkdir(archive, { recursive: true, mode: 0o700 });
        if (!(await appendToNewestArchive(archive, segs[i], () => this.lock.assertHeld()))) await fs.promises.rename(segs[i], path.join(archive, path.basename(segs[i])));
        archived++;
      }
    }
    if (archived) {
      await fsyncDir(archive);
      await fsyncDir(this.dir);
    }
    this.stats.exports++;
    this.log.info(`exported ${bytes.length} bytes at seq ${seq} in ${(performance.now() - t0).toFixed(1)} ms; archived ${plural(archived, 'old segment')}`);
  }

  /**
   * Events in the table that no segment holds — a database written before segments
   * were kept (they were deleted once exported) — are written to an archive segment,
   * durably, before an export drops them from the table.
   */
  private async archiveUncoveredRows(): Promise<void> {
    const segs = listChain(this.dir).segments;
    const firstBase = segs.length ? segmentBase(path.basename(segs[0])) : this.seq + 1;
    const rows = tableEvents(this.db, 0, firstBase - 1);
    if (!rows.length) return;
    const parts: Buffer[] = [encodeRecord({ kind: 'header', storeId: this.storeId, baseSeq: rows[0].seq, v: SCHEMA_VERSION } satisfies SegmentHeader)];
    for (let i = 0; i < rows.length; i += 500) {
      const events = rows.slice(i, i + 500);
      parts.push(encodeRecord({ kind: 'batch', last: events[events.length - 1].seq, events }));
    }
    const archive = path.join(this.dir, ARCHIVE_DIR);
    await fs.promises.mkdir(archive, { recursive: true, mode: 0o700 });
    await writeFileAtomic(path.join(archive, segmentName(rows[0].seq)), Buffer.concat(parts), 0o600);
    this.log.info(`archived ${plural(rows.length, 'event')} the journal no longer held (${rows[0].seq}..${rows[rows.length - 1].seq})`);
  }

  /** Rebuilds every projection from the events alone, in place. */
  rebuild(): void {
    this.assertWritable();
    this.projection.rebuild(this.events());
  }

  /**
   * Rebuilds the projections from the events into a scratch database and compares
   * them with the live tables. Returns the tables that differ.
   */
  verify(): Promise<{ ok: boolean; events: number; differences: { table: string; live: number; rebuilt: number; firstDiff: string | null }[] }> {
    return this.projection.verify(this.events());
  }

  // ---------------------------------------------------------------------------
  // The EventLog contract (eventLog.ts), over the synchronous embedded calls above.

  /** Sequences, projects and journals the batch at once (see commit); `durable` settles with the fdatasync. */
  append(batch: readonly NewEvent[]): Promise<AppendResult> {
    try {
      return Promise.resolve(this.commit(batch));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  read(filter?: ReadFilter): Promise<WaypointEvent[]> {
    try {
      return Promise.resolve(this.events(filter));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  subscribe(listener: (events: readonly WaypointEvent[]) => void): Disposable {
    return this.onDidCommit(listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    if (this.readOnlyReason !== null) {
      this.closed = true;
      this.projection.close();
      this.listeners.clear();
      return;
    }
    try {
      if (!this.writer.poisoned && this.lock.lost === null) {
        await this.exporting;
        await this.writer.idle();
        // Export on close only when the journal holds something the database file lacks,
        // or the file is of an older schema (else every open would migrate and rebuild again).
        if (this.seq > this.diskGenerationSeq || this.migratedInMemory) await this.exportNow();
      }
    } finally {
      this.closed = true;
      // The preallocated zeros are trimmed, unless another owner has the store now (its segment to rewrite).
      await this.writer.close({ trim: this.lock.lost === null }).catch(() => undefined);
      this.projection.close();
      this.lock.release();
      this.listeners.clear();
      this.lostListeners.clear();
    }
  }

  /**
   * Drops the store as a crash would: no export, no final flush wait. For tests
   * that need a store left exactly as a killed process leaves it.
   */
  async simulateCrash(): Promise<void> {
    this.closed = true;
    // A killed writer leaves its segment's preallocated zeros behind: so does this.
    await this.writer.close({ trim: false }).catch(() => undefined);
    this.projection.close();
    this.lock.release();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Why this store was opened read-only (see StoreOptions.readOnly), or null. */
  readOnlyReason: string | null = null;

  private assertWritable(): void {
    if (this.closed) throw new WaypointError('io', 'The store is closed.');
    if (this.readOnlyReason !== null) throw new WaypointError('io', this.readOnlyReason);
    if (this.writer?.poisoned) throw this.writer.poisoned;
    if (this.lock.lost !== null) this.lock.assertHeld();
  }

  /**
   * Throws `lost_ownership` once another process has taken the store over. Reads the
   * lock (a few microseconds), so a process that just woke from a stall finds out
   * before it answers anything from its outdated view.
   */
  assertOwned(): void {
    if (this.closed) return;
    this.lock.assertHeld();
  }

  /** Why this process no longer owns the store, or null while it does. */
  get lostOwnership(): string | null {
    return this.lock.lost;
  }

  /** The journal epoch this owner writes under (see `epoch`). */
  get journalEpoch(): number {
    return this.journalEpochValue;
  }
}

export function rowToEvent(r: Record<string, unknown>): WaypointEvent {
  return {
    seq: Number(r.seq),
    ts: Number(r.ts),
    type: r.type as EventType,
    v: Number(r.v),
    taskId: (r.task_id as string | null) ?? null,
    corr: (r.corr as string | null) ?? null,
    key: String(r.key),
    by: (r.by as string | null) ?? null,
    data: JSON.parse(String(r.data)),
    ...(r.op ? { op: String(r.op), result: r.result == null ? null : JSON.parse(String(r.result)) } : {}),
  } as WaypointEvent;
}

/**
 * Free space to keep in an exported database: what a full journal segment replays
 * into (measured: ~0.85 database bytes per journal byte), but no more than an
 * eighth of the database, since every reserved byte is read on each open too.
 */
function reserveBytesFor(db: Db, exportThreshold: number): number {
  const pages = Number(db.get<{ page_count: number }>('PRAGMA page_count')?.page_count ?? 0);
  const pageSize = Number(db.get<{ page_size: number }>('PRAGMA page_size')?.page_size ?? 4096);
  return Math.min(exportThreshold, Math.max(256 * 1024, (pages * pageSize) / 8));
}

function ensureStoreDir(dir: string): void {
  // Private to the user (it holds the MCP bearer token, the task record and copies of
  // workspace files), and never followed through a symbolic link (see storeDir.ts).
  ensurePrivateStoreDir(dir);
  const gi = path.join(dir, '.gitignore');
  // Nothing in the store is ever committed by accident.
  try {
    fs.writeFileSync(gi, '*\n', { flag: 'wx', mode: STORE_FILE_MODE });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
}

/** Archive segments grow to about this size by taking in the small segments after them. */
const ARCHIVE_SEGMENT_BYTES = 1024 * 1024;

/**
 * Folds a small segment into the newest archive segment when both are small — a
 * store driven by one CLI call after another exports (and so rotates) on every call,
 * and the archive would otherwise gain a file per call. The merged file replaces the
 * archive segment atomically (temp, fsync, rename) before the live segment is
 * removed; a crash between leaves both, and readers take a record held twice once.
 * Returns false when the segment should be moved as it is.
 *
 * A replaced owner must not put back an older version of the archive segment over one
 * its successor has merged more segments into: the ownership check (`fence`) and the
 * check that the archive segment is still the file read (held open, so its inode cannot
 * be reused) come after every slow step, in one synchronous run with the rename. (A stop
 * that lands between those few system calls is not excluded; see docs/reliability.md.)
 */
async function appendToNewestArchive(archive: string, seg: string, fence: () => void): Promise<boolean> {
  const newest = listSegments(archive).pop();
  if (!newest) return false;
  const held = await fs.promises.open(newest, fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0));
  try {
    const seen = await held.stat({ bigint: true });
    const [a, b] = await Promise.all([held.readFile(), fs.promises.readFile(seg)]);
    if (a.length + b.length > ARCHIVE_SEGMENT_BYTES) return false;
    // Drop the segment's own header record (the merged file keeps the archive segment's).
    if (b.length < 12 || b.readUInt32LE(0) !== RECORD_MAGIC) return false;
    const headerEnd = 12 + b.readUInt32LE(4);
    if (headerEnd > b.length) return false;
    // Neither file's preallocated zeros (if its writer was killed before trimming them) go into the middle of the merged one.
    const merged = Buffer.concat([a.subarray(0, endOfData(a, 0)), b.subarray(headerEnd, Math.max(headerEnd, endOfData(b, headerEnd)))]);
    const tmp = tempPathFor(newest);
    const fh = await fs.promises.open(tmp, 'wx', 0o600);
    try {
      await fh.writeFile(merged);
      await fh.sync();
    } catch (e) {
      await fh.close().catch(() => undefined);
      await fs.promises.rm(tmp, { force: true });
      throw e;
    }
    await fh.close();
    try {
      fence();
      const now = fs.statSync(newest, { bigint: true, throwIfNoEntry: false });
      const same = now !== undefined && now.dev === seen.dev && now.ino === seen.ino && now.size === seen.size && now.mtimeNs === seen.mtimeNs && now.ctimeNs === seen.ctimeNs;
      if (!same) {
        fs.rmSync(tmp, { force: true });
        return false;
      }
      fs.renameSync(tmp, newest);
    } catch (e) {
      fs.rmSync(tmp, { force: true });
      throw e;
    }
  } finally {
    await held.close();
  }
  await fsyncDir(archive);
  await fs.promises.rm(seg);
  return true;
}

/** The last event a database holds or has exported (its table keeps only the events since its export). */
function dbLastSeq(db: Db): number {
  const inTable = Number(db.get<{ m: number | null }>('SELECT MAX(seq) AS m FROM events')?.m ?? 0);
  const exported = Number(db.get<{ v: string }>("SELECT v FROM meta WHERE k = 'exportedSeq'")?.v ?? 0);
  return Math.max(inTable, exported);
}

/** The first seq the table holds (lastSeq + 1 when it holds none). */
function tableFromSeq(db: Db, lastSeq: number): number {
  const m = db.get<{ m: number | null }>('SELECT MIN(seq) AS m FROM events')?.m;
  return m == null ? lastSeq + 1 : Number(m);
}

function tableEvents(db: Db, afterSeq: number, upTo = Number.MAX_SAFE_INTEGER): WaypointEvent[] {
  return db.all<Record<string, unknown>>('SELECT * FROM events WHERE seq > ? AND seq <= ? ORDER BY seq', [afterSeq, upTo]).map(rowToEvent);
}

/**
 * Events afterSeq < seq ≤ upTo from the store's segments, archived or live, each
 * record's checksum verified and each event upcast and validated as on replay. A
 * segment archived while this runs (a rename by a concurrent export) is read from
 * its new place.
 */
function readSegmentEvents(dir: string, afterSeq: number, upTo: number, taskId?: string, limit = Infinity, storeId?: string): WaypointEvent[] {
  const segs = listChain(dir).segments;
  const out: WaypointEvent[] = [];
  let expect = afterSeq + 1;
  // Task ids are unique random strings: a batch whose bytes never name the task is skipped unparsed.
  const needle = taskId ? Buffer.from(JSON.stringify(taskId), 'utf8') : undefined;
  for (let i = 0; i < segs.length && out.length < limit; i++) {
    const base = segmentBase(path.basename(segs[i]));
    const end = i + 1 < segs.length ? segmentBase(path.basename(segs[i + 1])) - 1 : Infinity;
    if (end <= afterSeq) continue;
    if (base > upTo) break;
    let file = segs[i];
    let buf: Buffer;
    try {
      buf = fs.readFileSync(file);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      file = path.join(dir, ARCHIVE_DIR, path.basename(file));
      buf = fs.readFileSync(file);
    }
    let seg: DecodedSegment;
    try {
      seg = decodeSegment(file, buf, i === segs.length - 1, afterSeq, needle);
    } catch (err) {
      // Damage in a closed segment is damage to acknowledged history: say which, and that the state is intact.
      throw new WaypointError(
        'corrupt',
        `The store's history is damaged: ${errorMessage(err).replace(/ Move the file aside.*$/, '')} Its events from ${base} on cannot be read; ` +
          `the current tasks, steps and checkpoints (the database) are intact.`,
        { file },
      );
    }
    if (storeId && seg.header && seg.header.storeId !== storeId) {
      throw new WaypointError('corrupt', `Journal segment ${path.basename(file)} belongs to another store (${seg.header.storeId}).`, { file });
    }
    // In seq order, as replay takes them (a record written twice counts once).
    const inRange: WaypointEvent[] = [];
    for (const b of seg.batches) {
      for (const raw of b.events) {
        const rawSeq = Number((raw as { seq?: unknown })?.seq);
        if (!(rawSeq > afterSeq) || rawSeq > upTo) continue;
        try {
          inRange.push(parseEvent(upcast(raw)));
        } catch (err) {
          throw new WaypointError('corrupt', `Journal segment ${path.basename(file)} holds an invalid event: ${errorMessage(err)}`);
        }
      }
    }
    inRange.sort((a, b) => a.seq - b.seq);
    if (needle) {
      // A per-task read: every record's CRC was checked, but batches not naming the task
      // were not parsed, so contiguity is a full read's (verify's) to prove. Advance past
      // everything this segment holds, parsed or not.
      let highest = expect - 1;
      for (const b of seg.batches) if (b.skipped && b.last !== undefined && b.last > highest) highest = Math.min(b.last, upTo);
      for (const e of inRange) {
        if (e.seq < expect) continue; // a record written twice
        expect = e.seq + 1;
        if (e.taskId === taskId) out.push(e);
        if (out.length >= limit) return out;
      }
      expect = Math.max(expect, highest + 1);
      continue;
    }
    for (const e of inRange) {
      if (e.seq < expect) continue; // a record written twice: the first copy counts, as on replay
      if (e.seq !== expect) {
        throw new WaypointError('corrupt', `The journal's segments are missing events ${expect}..${e.seq - 1}.`, { from: expect, to: e.seq - 1 });
      }
      expect = e.seq + 1;
      out.push(e);
      if (out.length >= limit) return out;
    }
    // A closed segment that stops short (cut off, emptied) is damage to acknowledged history, as a bad record is.
    const through = Math.min(end, upTo);
    if (i < segs.length - 1 && expect <= through) {
      throw new WaypointError(
        'corrupt',
        `The store's history is damaged: journal segment ${path.basename(file)} ends at event ${expect - 1} but should hold events up to ${end}. Its events from ${expect} on cannot be read; ` +
          `the current tasks, steps and checkpoints (the database) are intact.`,
        { file, from: expect, to: through },
      );
    }
  }
  if (expect <= upTo && out.length < limit) {
    throw new WaypointError('corrupt', `The journal's segments end at event ${expect - 1}; events ${expect}..${upTo} are not in the store.`, { from: expect, to: upTo });
  }
  return out;
}

interface Loaded {
  db: Db;
  storeId: string;
  source: OpenReport['source'];
  generationSeq: number;
  journalEvents: WaypointEvent[];
  segments: { file: string; baseSeq: number; validBytes: number }[];
  tornBytes: number;
}

/**
 * Reads the journal, then picks the newest database generation that opens and
 * matches it; a database that matches neither is moved aside (never deleted) and
 * the store is rebuilt from the journal.
 */
async function loadGenerations(SQL: SqlJsStatic, dir: string, warnings: string[], log: Logger): Promise<Loaded> {
  const dbFile = path.join(dir, DB_FILE);
  const prevFile = path.join(dir, PREV_FILE);
  // The database read (tens of MB, bound by memory and disk) runs on the thread pool
  // while this thread decodes the journal's newest segment, which after a normal
  // export holds exactly the events the database lacks: the two overlap on 2 cores.
  const dbBytes = fs.promises.readFile(dbFile).catch((e: NodeJS.ErrnoException) => (e.code === 'ENOENT' ? null : e));
  // Archived segments too: a fallback generation or a rebuild may need older events than the live ones hold.
  // Only the chain: segments a replaced owner wrote after the takeover are not history.
  const chain = listChain(dir);
  const segFiles = chain.segments;
  let journalStoreId: string | null = null;
  /** Segment headers by base seq: the one at lastSeq+1 holds the checksum of the generation ending at lastSeq. */
  const headers = new Map<number, SegmentHeader>();
  // Headers first (a few bytes each): enough to match a database generation to the journal.
  // Only the live segments' (archived ones are checked when read): the archive may hold
  // many small segments — one per CLI call that owned the store — and open must not read them all.
  const live = segFiles.filter((f) => path.dirname(f) === dir);
  for (const file of live.length ? live : segFiles.slice(0, 1)) {
    const h = chain.headers.get(file) ?? readSegmentHeader(file);
    if (!h) continue;
    headers.set(segmentBase(path.basename(file)), h);
    if (journalStoreId && h.storeId !== journalStoreId) {
      throw new WaypointError('corrupt', `Journal segment ${path.basename(file)} belongs to another store (${h.storeId}).`);
    }
    journalStoreId = h.storeId;
  }
  const firstJournalSeq = segFiles.length ? segmentBase(path.basename(segFiles[0])) : 1;

  /**
   * The newest segment decoded and parsed whole, ahead of knowing which of its events
   * the database has. Dropped (and decoded again the careful way) on any doubt.
   */
  let speculative: { file: string; seg: DecodedSegment; events: WaypointEvent[] } | null = null;
  const newestSeg = segFiles[segFiles.length - 1];
  if (newestSeg) {
    try {
      const seg = decodeSegment(newestSeg, fs.readFileSync(newestSeg), true);
      const events = seg.batches.flatMap((b) => b.events.map((raw) => parseEvent(upcast(raw))));
      speculative = { file: newestSeg, seg, events };
    } catch {
      speculative = null;
    }
  }

  /** Reads the segments that may hold events after `lastSeq`; the rest the database already has. */
  const readJournal = (lastSeq: number): Pick<Loaded, 'journalEvents' | 'segments' | 'tornBytes'> => {
    const segments: Loaded['segments'] = [];
    const journalEvents: WaypointEvent[] = [];
    let tornBytes = 0;
    segFiles.forEach((file, i) => {
      const isLast = i === segFiles.length - 1;
      const nextBase = isLast ? Infinity : segmentBase(path.basename(segFiles[i + 1]));
      if (!isLast && nextBase - 1 <= lastSeq) {
        // Covered by the database; only the newest segment's size matters (the writer appends to it).
        return;
      }
      if (isLast && speculative?.file === file) {
        tornBytes += speculative.seg.tornBytes;
        segments.push({ file, baseSeq: speculative.seg.baseSeq, validBytes: speculative.seg.validBytes });
        for (const e of speculative.events) if (e.seq > lastSeq) journalEvents.push(e);
        return;
      }
      const seg = decodeSegment(file, fs.readFileSync(file), isLast, lastSeq);
      tornBytes += seg.tornBytes;
      segments.push({ file, baseSeq: seg.baseSeq, validBytes: seg.validBytes });
      if (!isLast) {
        // A closed segment holds every event up to the next one's base: one that stops short
        // (cut at a record's end, or its last records zeroed) lost acknowledged events, even
        // when no later event shows the gap (the next segment may hold none yet).
        let end = seg.baseSeq - 1;
        for (const b of seg.batches) {
          end = Math.max(end, b.last ?? 0);
          for (const raw of b.events) end = Math.max(end, Number((raw as { seq?: unknown })?.seq) || 0);
        }
        if (end < nextBase - 1 && nextBase - 1 > lastSeq) {
          throw new WaypointError(
            'corrupt',
            `Journal segment ${path.basename(file)} ends at event ${end} but the next segment begins at ${nextBase}: events ${Math.max(end, lastSeq) + 1}..${nextBase - 1} are gone. ` +
              `Move the file aside to open the store from the database alone.`,
            { file, from: Math.max(end, lastSeq) + 1, to: nextBase - 1 },
          );
        }
      }
      for (const b of seg.batches) {
        for (const raw of b.events) {
          if ((raw as { seq?: unknown })?.seq !== undefined && Number((raw as { seq: unknown }).seq) <= lastSeq) continue;
          try {
            journalEvents.push(parseEvent(upcast(raw)));
          } catch (e) {
            throw new WaypointError('corrupt', `Journal segment ${path.basename(file)} holds an invalid event: ${errorMessage(e)}`);
          }
        }
      }
    });
    journalEvents.sort((a, b) => a.seq - b.seq);
    return { journalEvents, segments, tornBytes };
  };

  const tryLoad = (file: string, read?: Buffer): { db: Db; storeId: string | null; lastSeq: number } | { error: string } | null => {
    if (!read && !fs.existsSync(file)) return null;
    let raw: Database | undefined;
    try {
      const bytes = read ?? fs.readFileSync(file);
      checkSqliteHeader(bytes);
      raw = new SQL.Database(bytes);
      const db = new Db(raw);
      const version = dbVersion(db);
      if (version > DB_VERSION) {
        db.close();
        throw new WaypointError('corrupt', `${path.basename(file)} was written by a newer Waypoint (database version ${version}; this one knows ${DB_VERSION}). Update Waypoint.`);
      }
      const storeId = db.get<{ v: string }>("SELECT v FROM meta WHERE k = 'storeId'")?.v ?? null;
      const lastSeq = dbLastSeq(db);
      // A generation exported by an owner that had been replaced: it holds events after the
      // takeover that are not history (a later epoch's segment starts at or before its end).
      const exportEpoch = db.get<{ v: string }>("SELECT v FROM meta WHERE k = 'exportEpoch'")?.v;
      if (exportEpoch !== undefined) {
        for (const h of headers.values()) {
          if (h.epoch !== undefined && h.epoch > Number(exportEpoch) && h.baseSeq <= lastSeq) {
            db.close();
            return { error: `${path.basename(file)} was exported by a replaced owner (epoch ${exportEpoch}) after epoch ${h.epoch} took the store over` };
          }
        }
      }
      const expectedCrc = headers.get(lastSeq + 1)?.dbCrc;
      if (expectedCrc !== undefined && crc32(bytes) !== expectedCrc) {
        db.close();
        return { error: `${path.basename(file)} fails its checksum (the journal recorded CRC-32 ${expectedCrc.toString(16)} when it was exported)` };
      }
      if (journalStoreId && storeId && storeId !== journalStoreId) {
        db.close();
        return { error: `${path.basename(file)} belongs to store ${storeId}, the journal to ${journalStoreId}` };
      }
      if (lastSeq + 1 < firstJournalSeq) {
        db.close();
        return { error: `${path.basename(file)} ends at event ${lastSeq} but the journal starts at ${firstJournalSeq}` };
      }
      return { db, storeId, lastSeq };
    } catch (e) {
      if (e instanceof WaypointError && e.message.includes('newer Waypoint')) throw e;
      try {
        raw?.close();
      } catch {
        // ignore
      }
      return { error: `${path.basename(file)} will not open: ${errorMessage(e)}` };
    }
  };

  const newestBytes = await dbBytes;
  // A read error other than absence: the synchronous path reports it as a database that will not open.
  const newest = newestBytes instanceof Error ? tryLoad(dbFile) : newestBytes ? tryLoad(dbFile, newestBytes) : null;
  if (newest && 'db' in newest) {
    return { db: newest.db, storeId: newest.storeId ?? journalStoreId ?? randomUUID(), source: 'db', generationSeq: newest.lastSeq, ...readJournal(newest.lastSeq) };
  }
  const prev = tryLoad(prevFile);
  if (prev && 'db' in prev) {
    if (newest) warnings.push(`${newest.error}; fell back to the previous generation (waypoint.db.prev) and replayed the journal after it.`);
    return { db: prev.db, storeId: prev.storeId ?? journalStoreId ?? randomUUID(), source: 'prev', generationSeq: prev.lastSeq, ...readJournal(prev.lastSeq) };
  }
  const db = new Db(new SQL.Database());
  if (!newest && !prev) {
    // A new store, or one that crashed before its first export: the journal is everything.
    if (segFiles.length === 0) return { db, storeId: randomUUID(), source: 'new', generationSeq: 0, ...readJournal(0) };
    if (firstJournalSeq <= 1) return { db, storeId: journalStoreId ?? randomUUID(), source: 'journal', generationSeq: 0, ...readJournal(0) };
  }
  // Neither generation is usable: keep them for inspection and rebuild from the journal.
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  for (const [f, r] of [
    [dbFile, newest],
    [prevFile, prev],
  ] as const) {
    if (r && 'error' in r) {
      const aside = `${f}.broken-${stamp}`;
      fs.renameSync(f, aside);
      warnings.push(`${r.error}; moved it aside to ${path.basename(aside)}.`);
    }
  }
  if (firstJournalSeq > 1) {
    warnings.push(
      `Rebuilt the store from the journal alone: events 1..${firstJournalSeq - 1} were only in the moved-aside database files and are not in the rebuilt store.`,
    );
  } else {
    warnings.push('Rebuilt the store from the journal alone; no event was lost.');
  }
  log.warn(warnings[warnings.length - 1]);
  return { db, storeId: journalStoreId ?? randomUUID(), source: 'journal', generationSeq: 0, ...readJournal(0) };
}

/** True when a segment holds its header record and nothing else. */
/**
 * A cheap structural check before sql.js sees the bytes: the SQLite magic, and the
 * page count in the header must match the file's length, which catches a truncated
 * export that SQLite itself would only notice when it reads a missing page.
 */
function checkSqliteHeader(bytes: Buffer): void {
  if (bytes.length < 100 || bytes.toString('latin1', 0, 16) !== 'SQLite format 3\u0000') throw new Error('not an SQLite database');
  const rawPageSize = bytes.readUInt16BE(16);
  const pageSize = rawPageSize === 1 ? 65536 : rawPageSize;
  const pages = bytes.readUInt32BE(28);
  if (pages > 0 && pages * pageSize !== bytes.length) {
    throw new Error(`truncated or padded: header says ${pages} pages of ${pageSize} bytes, file has ${bytes.length} bytes`);
  }
}

/**
 * Replaces a segment with a copy of its first `validBytes` under a header of the
 * given epoch (temp, fsync, rename over, fsync the directory). A replaced owner
 * that still holds the old file open appends to an orphaned inode from then on.
 * Returns the new file's size.
 */
async function rewriteSegment(file: string, validBytes: number, fresh: SegmentHeader): Promise<number> {
  const buf = (await fs.promises.readFile(file)).subarray(0, validBytes);
  // A segment whose header was never completed (its creator was killed or stopped right
  // after creating it) has no valid bytes: it becomes a header of the new epoch alone.
  const header = validBytes > 0 ? readSegmentHeader(file) : null;
  let records = buf;
  if (header && buf.length >= 12 && buf.readUInt32LE(0) === RECORD_MAGIC) records = buf.subarray(12 + buf.readUInt32LE(4));
  const bytes = Buffer.concat([encodeRecord({ ...(header ?? fresh), epoch: fresh.epoch } satisfies SegmentHeader), records]);
  await writeFileAtomic(file, bytes, 0o600);
  return bytes.length;
}
