import * as fs from 'node:fs';
import * as path from 'node:path';
import { crc32 } from 'node:zlib';
import { WaypointError } from '../model/errors';
import { fsyncDir } from './fsutil';
import { APPEND_NOFOLLOW, STORE_FILE_MODE } from './storeDir';

/**
 * The event journal: append-only segment files of checksummed records.
 *
 * Record framing (little endian):
 *   u32 magic 'WPJ1' | u32 payload length | u32 CRC-32 of payload | payload (UTF-8 JSON)
 *
 * A segment is named by the first sequence number it may hold
 * (`journal-000000000042.wal`) and starts with a header record naming the store,
 * so a segment from another store is never replayed into this one.
 *
 * A record is acknowledged only after its bytes are written and fdatasync'd, so a
 * record that fails its length or checksum at the end of the newest segment was
 * never acknowledged (a torn write) and is dropped on open. Damage followed by
 * valid records is not a torn tail: that is corruption of acknowledged data, and
 * open refuses it loudly rather than silently discarding what follows.
 *
 * The live segment is preallocated: the writer fills the file with zeros ahead of
 * its records (see JournalWriter), so an append overwrites bytes the file already
 * has and its fdatasync flushes only data, not the file's size too. A segment may
 * therefore end in zeros after its last record (when its writer was killed); those
 * are free space, not a torn write. A closed segment is trimmed to its records. Zeros
 * can never hide a record that was acknowledged: a record is never all zeros (it
 * starts with the magic), and a reader checks that each segment holds every event up
 * to the next segment's base.
 */
export const RECORD_MAGIC = 0x31_4a_50_57; // 'WPJ1' read as little endian
const HEADER_BYTES = 12;
/** Far above any real record (payloads are bounded upstream); a larger length is damage. */
export const MAX_RECORD_BYTES = 64 * 1024 * 1024;

export interface SegmentHeader {
  kind: 'header';
  storeId: string;
  baseSeq: number;
  v: number;
  /**
   * CRC-32 of the database generation exported just before this segment began (it
   * holds events 1..baseSeq-1). SQLite opens a file with a damaged page and fails only
   * when a query reads that page, so open checks the whole file against this instead
   * (~15 ms for 50 MB, where PRAGMA quick_check takes ~550 ms). Absent in segments
   * that did not start at an export (a new store, a journal-only rebuild).
   */
  dbCrc?: number;
  /**
   * The journal epoch of the owner that wrote this header (see EventStore: one more
   * than any epoch in the journal when it took the store). A live segment whose
   * epoch is lower than one before it was written by a replaced owner after the
   * takeover: it is not part of the history (see listChain). Absent in older segments.
   */
  epoch?: number;
}

export interface JournalBatch {
  kind: 'batch';
  /** The highest seq in the batch (written first, so open can skip covered batches unparsed). */
  last?: number;
  events: unknown[];
  /** Checked but not parsed: its events were not wanted (see decodeSegment). */
  skipped?: boolean;
}

export function encodeRecord(payload: unknown): Buffer {
  // The JSON is encoded straight into the record (one buffer, no copy of the body).
  const json = JSON.stringify(payload);
  const len = Buffer.byteLength(json, 'utf8');
  const buf = Buffer.allocUnsafe(HEADER_BYTES + len);
  buf.write(json, HEADER_BYTES, 'utf8');
  buf.writeUInt32LE(RECORD_MAGIC, 0);
  buf.writeUInt32LE(len, 4);
  buf.writeUInt32LE(crc32(buf.subarray(HEADER_BYTES)), 8);
  return buf;
}

export interface DecodedSegment {
  file: string;
  baseSeq: number;
  header: SegmentHeader | null;
  batches: JournalBatch[];
  /** Bytes of valid records; anything after was a torn tail or preallocated zeros. */
  validBytes: number;
  /** Bytes after the valid records up to the last non-zero byte: a write cut short. */
  tornBytes: number;
  /** Zeros at the end, after any torn bytes: space the writer preallocated and never used. */
  spareBytes: number;
}

const ZERO_BLOCK = Buffer.alloc(4096);

/** The index just past the last non-zero byte at or after `from` (`from` when all of it is zero). */
export function endOfData(buf: Buffer, from: number): number {
  let end = buf.length;
  // Whole zero blocks from the end, compared natively; then byte by byte in the last block holding data.
  while (end - from >= ZERO_BLOCK.length && buf.subarray(end - ZERO_BLOCK.length, end).equals(ZERO_BLOCK)) end -= ZERO_BLOCK.length;
  while (end > from && buf[end - 1] === 0) end--;
  return end;
}

/** A batch record whose events all have seq ≤ this is checked but not parsed (the database already has it). */
const BATCH_LAST_RE = /^\{"kind":"batch","last":(\d+),/;

/**
 * Decodes one record at `offset`; null when the bytes there are not a whole valid
 * record. With `skipUpTo`, a batch whose last seq is covered is verified (CRC) but
 * returned as `skipped` without parsing its JSON — opening a store then costs only
 * the events the database lacks.
 */
function decodeAt(buf: Buffer, offset: number, skipUpTo = 0, mustContain?: Buffer): { payload: unknown; next: number } | null {
  if (offset + HEADER_BYTES > buf.length) return null;
  if (buf.readUInt32LE(offset) !== RECORD_MAGIC) return null;
  const len = buf.readUInt32LE(offset + 4);
  if (len > MAX_RECORD_BYTES || offset + HEADER_BYTES + len > buf.length) return null;
  const body = buf.subarray(offset + HEADER_BYTES, offset + HEADER_BYTES + len);
  if (crc32(body) !== buf.readUInt32LE(offset + 8)) return null;
  const next = offset + HEADER_BYTES + len;
  if (skipUpTo > 0 || mustContain) {
    const m = BATCH_LAST_RE.exec(body.toString('latin1', 0, Math.min(64, body.length)));
    if (m && Number(m[1]) <= skipUpTo) return { payload: { kind: 'batch', last: Number(m[1]), events: [], skipped: true }, next };
    // A batch that does not even contain the bytes looked for holds no event wanted: checked, not parsed.
    if (m && mustContain && body.indexOf(mustContain) < 0) return { payload: { kind: 'batch', last: Number(m[1]), events: [], skipped: true }, next };
  }
  try {
    return { payload: JSON.parse(body.toString('utf8')), next };
  } catch {
    return null;
  }
}

/** Reads just a segment's header record (its store and base seq) without reading the rest. */
export function readSegmentHeader(file: string): SegmentHeader | null {
  const fd = fs.openSync(file, 'r');
  try {
    const head = Buffer.alloc(HEADER_BYTES);
    if (fs.readSync(fd, head, 0, HEADER_BYTES, 0) < HEADER_BYTES || head.readUInt32LE(0) !== RECORD_MAGIC) return null;
    const len = head.readUInt32LE(4);
    if (len > 64 * 1024) return null;
    const buf = Buffer.alloc(HEADER_BYTES + len);
    if (fs.readSync(fd, buf, 0, buf.length, 0) < buf.length) return null;
    const rec = decodeAt(buf, 0);
    const p = rec?.payload as SegmentHeader | undefined;
    return p && p.kind === 'header' ? p : null;
  } finally {
    fs.closeSync(fd);
  }
}

/** True when a whole valid record starts anywhere in buf after `from`. */
function hasValidRecordAfter(buf: Buffer, from: number): boolean {
  const magic = Buffer.alloc(4);
  magic.writeUInt32LE(RECORD_MAGIC, 0);
  let at = buf.indexOf(magic, from + 1);
  while (at !== -1) {
    if (decodeAt(buf, at)) return true;
    at = buf.indexOf(magic, at + 1);
  }
  return false;
}

/**
 * With `mustContain`, batch records whose bytes lack it come back empty (`skipped`,
 * with their `last`), unparsed: a reader after one task's events parses only the
 * batches that mention it.
 */
export function decodeSegment(file: string, buf: Buffer, isLast: boolean, skipUpTo = 0, mustContain?: Buffer): DecodedSegment {
  const baseSeq = segmentBase(path.basename(file));
  const batches: JournalBatch[] = [];
  let header: SegmentHeader | null = null;
  let offset = 0;
  while (offset < buf.length) {
    const rec = decodeAt(buf, offset, skipUpTo, mustContain);
    if (!rec) break;
    const p = rec.payload as { kind?: unknown };
    if (p && p.kind === 'header' && offset === 0) header = p as SegmentHeader;
    else if (p && p.kind === 'batch' && Array.isArray((p as JournalBatch).events)) batches.push(p as JournalBatch);
    else break; // a valid checksum over a shape we do not know is damage too
    offset = rec.next;
  }
  // Zeros after the last record are the writer's preallocated space, not a torn write. A
  // closed segment is trimmed when it is closed, but one its writer left untrimmed (killed
  // between the two) holds the same records: whether it holds all it should is the next
  // segment's base to say, which its readers check (a gap is refused).
  const dataEnd = endOfData(buf, offset);
  const tornBytes = dataEnd - offset;
  if (tornBytes > 0) {
    // Only the live segment's tail may be torn (a write cut by a crash, never acknowledged).
    const validFollow = hasValidRecordAfter(buf.subarray(0, dataEnd), offset);
    if (validFollow || !isLast) {
      throw new WaypointError(
        'corrupt',
        validFollow
          ? `Journal segment ${path.basename(file)} is damaged at byte ${offset} and valid records follow the damage, ` +
              `so acknowledged events would be lost by dropping it. Move the file aside to open the store from the database alone.`
          : `Journal segment ${path.basename(file)} is cut off at byte ${offset}, although a later segment follows it: ` +
              `its acknowledged events after that byte are gone. Move the file aside to open the store from the database alone.`,
        { file, offset },
      );
    }
  }
  return { file, baseSeq, header, batches, validBytes: offset, tornBytes, spareBytes: buf.length - dataEnd };
}

const SEGMENT_RE = /^journal-(\d{12})\.wal$/;

export function segmentName(baseSeq: number): string {
  return `journal-${String(baseSeq).padStart(12, '0')}.wal`;
}

export function segmentBase(name: string): number {
  const m = SEGMENT_RE.exec(name);
  if (!m) throw new Error(`not a journal segment: ${name}`);
  return Number(m[1]);
}

export function listSegments(dir: string): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  return names
    .filter((n) => SEGMENT_RE.test(n))
    .sort((a, b) => segmentBase(a) - segmentBase(b))
    .map((n) => path.join(dir, n));
}

/**
 * The live segments that are part of the history, in seq order, and those that are
 * not (`fenced`): a segment declaring a lower epoch than a segment before it was
 * created by an owner that had already been replaced (it woke from a stall and
 * rotated its journal). Archived segments are all history (only a current owner
 * archives). Reads only each live segment's header.
 */
export function listChain(storeDir: string): { segments: string[]; fenced: string[]; maxEpoch: number; headers: Map<string, SegmentHeader> } {
  const live = listSegments(storeDir);
  const segments = listSegments(path.join(storeDir, ARCHIVE_DIR));
  const fenced: string[] = [];
  const headers = new Map<string, SegmentHeader>();
  let maxEpoch = 0;
  for (const file of live) {
    let h: SegmentHeader | null = null;
    try {
      h = readSegmentHeader(file);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      continue; // archived by a concurrent export: read from the archive instead
    }
    if (h) headers.set(file, h);
    const epoch = h?.epoch;
    if (epoch !== undefined && epoch < maxEpoch) {
      fenced.push(file);
      continue;
    }
    if (epoch !== undefined) maxEpoch = epoch;
    segments.push(file);
  }
  segments.sort((a, b) => segmentBase(path.basename(a)) - segmentBase(path.basename(b)));
  return { segments, fenced, maxEpoch, headers };
}

/** Where a replaced owner's segments are moved, for inspection; never read as history. */
export const FENCED_DIR = 'fenced';

/**
 * Where segments go once no database generation needs them for replay: the
 * store's history. The database keeps only projections (and the events since its
 * last export), so its size — and the memory sql.js holds it in — follows the
 * projections, not the length of the history; the events themselves stay here,
 * checksummed record by record, readable by `EventStore.events()`.
 */
export const ARCHIVE_DIR = 'archive';

/** Every segment of the store, archived and live, in seq order. */
export function listAllSegments(storeDir: string): string[] {
  return [...listSegments(path.join(storeDir, ARCHIVE_DIR)), ...listSegments(storeDir)].sort((a, b) => segmentBase(path.basename(a)) - segmentBase(path.basename(b)));
}

/** Flush strategy (measured by `npm run bench`): synchronous write+fdatasync vs libuv's async pair. */
const JOURNAL_SYNC_IO = process.env.WAYPOINT_JOURNAL_IO !== 'async';

/**
 * Preallocation: how far ahead of its records the writer fills a segment with zeros.
 * It grows with the segment (a segment of a short CLI call stays small) up to the
 * largest step. Real zeros, written and synced once: an fallocate'd range is
 * "unwritten" to the file system, and the first write into it is a metadata change
 * that fdatasync must flush again, which is the cost preallocation is there to save.
 */
const PREALLOC_MIN_BYTES = 64 * 1024;
const PREALLOC_MAX_BYTES = 1024 * 1024;
const PREALLOC_ALIGN = 4096;
let zeros: Buffer | null = null;
function zeroBytes(n: number): Buffer {
  if (!zeros || zeros.length < n) zeros = Buffer.alloc(Math.max(n, PREALLOC_MAX_BYTES + PREALLOC_ALIGN));
  return zeros.subarray(0, n);
}

/** No room for the zeros ahead: the append goes on without them, as it would without preallocation. */
const isNoSpace = (e: unknown): boolean => ['ENOSPC', 'EDQUOT', 'EFBIG'].includes((e as NodeJS.ErrnoException).code ?? '');

/** Opening an existing segment: write-only, positioned writes (no O_APPEND), never through a link. */
const WRITE_NOFOLLOW = APPEND_NOFOLLOW & ~fs.constants.O_APPEND;

/** A file as the file system knows it, whatever name it has. */
export interface FileIdentity {
  dev: number;
  ino: number;
}

interface Waiter {
  resolve: () => void;
  reject: (e: Error) => void;
}

/**
 * Appends records to the current segment with group commit: while one write +
 * fdatasync is in flight, new records queue up and go out together in the next
 * one, so N concurrent callers share one flush. A caller's promise resolves only
 * once its bytes are durable.
 *
 * Records are written at their offset into zeros the writer put in the file ahead of
 * them (preallocation, see PREALLOC_*): the file does not grow with each append, so
 * the fdatasync that makes a record durable does not also have to commit a new file
 * size to the file system's journal (a second device flush on ext4). The zeros ahead
 * are written, and made durable, in the same flush as the record that first needs
 * them. A crash leaves the zeros after the last record; open reads them as free space
 * and the writer reopening the segment cuts them off. Closing trims them, so a closed
 * segment holds records only.
 *
 * If a write or sync fails the writer is poisoned: what was applied in memory can
 * no longer be proven durable, so every later append is refused until reopen.
 */
export class JournalWriter {
  private fh: fs.promises.FileHandle | null = null;
  private queue: Buffer[] = [];
  private waiters: Waiter[] = [];
  private flushing: Promise<void> | null = null;
  private idleWaiters: (() => void)[] = [];
  private failure: Error | null = null;
  /** Bytes of records handed to the writer (written or queued). */
  private bytes = 0;
  /** Where the next write goes: the end of the records written so far. */
  private pos = 0;
  /** The file's size: records, then zeros up to here. */
  private allocated = 0;
  /** The file this writer opened (device and inode), whatever name it has since. */
  private ident: FileIdentity | null = null;

  private constructor(
    private file: string,
    private readonly onFlush?: (records: number, ms: number) => void,
    private readonly fence?: () => void,
  ) {}

  /**
   * Opens a segment for appending: an existing one (after its valid bytes) when
   * `existingBytes` is given, else a new one, created exclusively (EEXIST when the
   * name is taken) with a header record. `fence` runs after every flush is durable
   * and before any of its callers is answered; if it throws (this process no longer
   * owns the store), the writer is poisoned with its error and nobody is answered.
   */
  static async open(
    file: string,
    header: SegmentHeader,
    existingBytes: number | null,
    onFlush?: (records: number, ms: number) => void,
    fence?: () => void,
  ): Promise<JournalWriter> {
    const w = new JournalWriter(file, onFlush, fence);
    await w.openFile(header, existingBytes);
    return w;
  }

  /**
   * Starts the header-only segment this owner wrote (`expected`: its device, inode and
   * size) again under a new header, in place. Checked and written through one
   * descriptor, never by name: a replaced owner that wakes between its ownership check
   * and this call finds the name holding its successor's copy (another inode) and
   * changes nothing; one that woke after opening it writes only its own file, which the
   * successor's copy has already replaced. (Removing the segment by name and creating it
   * again, as before, could remove the successor's segment with the events in it.)
   */
  static async restart(
    file: string,
    expected: FileIdentity & { size: number },
    header: SegmentHeader,
    onFlush?: (records: number, ms: number) => void,
    fence?: () => void,
  ): Promise<JournalWriter> {
    const w = new JournalWriter(file, onFlush, fence);
    const fh = await fs.promises.open(file, WRITE_NOFOLLOW, STORE_FILE_MODE);
    try {
      const st = await fh.stat();
      if (st.dev !== expected.dev || st.ino !== expected.ino || st.size !== expected.size) {
        throw new WaypointError('io', `Journal segment ${path.basename(file)} is no longer the one this owner wrote; refusing to rewrite it.`, { file });
      }
      // The new header over the old one, then the file cut to it: a crash between leaves
      // the new header and a torn tail, which open drops (never an empty segment).
      const h = encodeRecord(header);
      await w.writeAsync(fh, h, 0);
      if (h.length < st.size) await fh.truncate(h.length);
      await fh.datasync();
      w.fh = fh;
      w.ident = { dev: st.dev, ino: st.ino };
      w.bytes = w.pos = w.allocated = h.length;
      return w;
    } catch (e) {
      await fh.close();
      throw e;
    }
  }

  /** The device and inode of the file this writer opened. */
  get identity(): FileIdentity | null {
    return this.ident;
  }

  private async openFile(header: SegmentHeader, existingBytes: number | null): Promise<void> {
    const isNew = existingBytes === null;
    if (existingBytes !== null) {
      // Never through a link planted where a segment goes (O_NOFOLLOW); then drop a torn tail
      // (or the zeros a killed writer preallocated) before writing after the last record, and
      // make that durable: a later flush must not find them back after a crash.
      this.fh = await fs.promises.open(this.file, WRITE_NOFOLLOW, STORE_FILE_MODE);
      if ((await this.fh.stat()).size !== existingBytes) {
        await this.fh.truncate(existingBytes);
        await this.fh.datasync();
      }
    } else {
      // O_EXCL never follows a link either; private (0600) like every store file.
      this.fh = await fs.promises.open(this.file, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, STORE_FILE_MODE);
    }
    const st = await this.fh.stat();
    this.ident = { dev: st.dev, ino: st.ino };
    this.bytes = existingBytes ?? 0;
    this.pos = this.bytes;
    this.allocated = this.bytes;
    if (isNew || existingBytes === 0) {
      const h = encodeRecord(header);
      await this.fh.write(h, 0, h.length, 0);
      await this.fh.datasync();
      this.bytes += h.length;
      this.pos = this.allocated = this.bytes;
      await fsyncDir(path.dirname(this.file));
    }
  }

  get path(): string {
    return this.file;
  }
  /** Bytes of records in the segment (the zeros preallocated after them not counted). */
  get sizeBytes(): number {
    return this.bytes;
  }
  get isIdle(): boolean {
    return this.flushing === null && this.queue.length === 0;
  }
  get poisoned(): Error | null {
    return this.failure;
  }

  /** Refuses every later append with this error (ownership was lost). */
  poison(e: Error): void {
    this.failure ??= e;
  }

  append(record: Buffer): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    this.queue.push(record);
    this.bytes += record.length;
    const p = new Promise<void>((resolve, reject) => this.waiters.push({ resolve, reject }));
    if (!this.flushing) this.flushing = this.flushLoop();
    return p;
  }

  /** Resolves when nothing is queued or in flight. */
  idle(): Promise<void> {
    if (this.isIdle) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  /**
   * How many zeros to write after `end` (the end of the records about to be written):
   * none while the file already reaches past it, else enough for the next stretch of
   * appends, ending on a block boundary.
   */
  private zerosAfter(end: number): number {
    if (end <= this.allocated) return 0;
    const step = Math.min(PREALLOC_MAX_BYTES, Math.max(PREALLOC_MIN_BYTES, end));
    return Math.ceil((end + step) / PREALLOC_ALIGN) * PREALLOC_ALIGN - end;
  }

  private writeSync(fd: number, buf: Buffer, at: number): void {
    let written = 0;
    while (written < buf.length) written += fs.writeSync(fd, buf, written, buf.length - written, at + written);
  }

  private async writeAsync(fh: fs.promises.FileHandle, buf: Buffer, at: number): Promise<void> {
    let written = 0;
    while (written < buf.length) written += (await fh.write(buf, written, buf.length - written, at + written)).bytesWritten;
  }

  private async flushLoop(): Promise<void> {
    try {
      // With synchronous I/O, let the current turn's appends join this flush first.
      if (JOURNAL_SYNC_IO) await new Promise((r) => setImmediate(r));
      while (this.queue.length) {
        const batch = this.queue;
        const waiters = this.waiters;
        this.queue = [];
        this.waiters = [];
        const t0 = performance.now();
        try {
          if (!this.fh) throw new Error('journal is closed');
          const buf = batch.length === 1 ? batch[0] : Buffer.concat(batch);
          const end = this.pos + buf.length;
          const ahead = this.zerosAfter(end);
          if (JOURNAL_SYNC_IO) {
            // Write + fdatasync without thread-pool hops: lower latency for a lone caller.
            const fd = this.fh.fd;
            if (ahead) {
              try {
                this.writeSync(fd, zeroBytes(ahead), end);
                this.allocated = end + ahead;
              } catch (e) {
                if (!isNoSpace(e)) throw e;
                this.allocated = Math.max(end, fs.fstatSync(fd).size);
              }
            }
            this.writeSync(fd, buf, this.pos);
            fs.fdatasyncSync(fd);
          } else {
            if (ahead) {
              try {
                await this.writeAsync(this.fh, zeroBytes(ahead), end);
                this.allocated = end + ahead;
              } catch (e) {
                if (!isNoSpace(e)) throw e;
                this.allocated = Math.max(end, (await this.fh.stat()).size);
              }
            }
            await this.writeAsync(this.fh, buf, this.pos);
            await this.fh.datasync();
          }
          this.pos = end;
          this.allocated = Math.max(this.allocated, end);
          this.fence?.();
        } catch (e) {
          this.failure =
            e instanceof WaypointError && e.code === 'lost_ownership' ? e : new WaypointError('io', `Journal write failed; the store must be reopened: ${(e as Error).message}`);
          for (const w of [...waiters, ...this.waiters]) w.reject(this.failure);
          this.waiters = [];
          this.queue = [];
          return;
        }
        this.onFlush?.(batch.length, performance.now() - t0);
        for (const w of waiters) w.resolve();
      }
    } finally {
      this.flushing = null;
      const idle = this.idleWaiters;
      this.idleWaiters = [];
      for (const r of idle) r();
    }
  }

  /**
   * Waits for the records in flight, then trims the preallocated zeros (durably, so a
   * closed segment, which a later one follows, holds records only) and closes. With
   * `trim: false` the zeros stay, as a killed process leaves them. A poisoned writer
   * trims nothing: the segment may already be another owner's to rewrite.
   */
  async close(o: { trim?: boolean } = {}): Promise<void> {
    await this.idle();
    const fh = this.fh;
    this.fh = null;
    if (!fh) return;
    try {
      if (o.trim !== false && !this.failure && this.allocated > this.pos) {
        await fh.truncate(this.pos);
        await fh.datasync();
        this.allocated = this.pos;
      }
    } finally {
      await fh.close();
    }
  }
}
