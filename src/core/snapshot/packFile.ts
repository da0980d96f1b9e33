/**
 * Pack files: many blob objects in one file, so a checkpoint that stores N new
 * blobs creates one file and pays one fdatasync + one directory fsync instead of N
 * file creations, N fsyncs, N renames and a directory fsync per fan-out directory.
 * Still content-addressed: the index maps each SHA-256 to its object's bytes, which
 * are encoded exactly as a loose object (1-byte header + raw or deflated body).
 *
 * Layout (little endian):
 *   'WPK1' | objects… | index: count × (32-byte hash, u32 offset, u32 length) |
 *   trailer: u32 count | u32 index offset | u32 CRC-32 of the index | 'WPKX'
 *
 * A pack is written under a temp name, fdatasync'd with its index, and only then
 * renamed to `pack-<id>.pack` (and the directory fsync'd), so a named pack is always
 * whole; a crash before the rename leaves a temp that is swept on the next open.
 */
import fss from 'node:fs';
import path from 'node:path';
import { crc32 } from 'node:zlib';

export const PACK_MAGIC = 0x314b_5057; // 'WPK1'
const TRAILER_MAGIC = 0x584b_5057; // 'WPKX'
const ENTRY_BYTES = 40;
const TRAILER_BYTES = 16;
const WRITE_BUFFER_BYTES = 1024 * 1024;
/**
 * A pack flushes what it has written every this many bytes, on the thread pool, while
 * objects are still being appended: the disk writes then overlap the scan, and the
 * barrier in `finish` waits only for the tail (a raw first checkpoint is ~80 MB).
 */
export const EARLY_SYNC_BYTES = 8 * 1024 * 1024;
/** Offsets are u32: a pack is closed before it reaches this size and a new one started. */
export const MAX_PACK_BYTES = 0xf000_0000;
/** A named pack: `pack-<id>.pack`, or `pack-<id>-u.pack` while it holds objects awaiting compaction (HEADER_PENDING). */
export const PACK_RE = /^pack-[0-9a-f]{16}(-u)?\.pack$/;
export const isUncompactedPack = (name: string): boolean => name.endsWith('-u.pack');
export const PACK_TEMP_PREFIX = 'tmp-';

export interface PackEntry {
  hash: string;
  offset: number;
  length: number;
}

/** A pack not yet named, whose objects are readable and which `finish` makes durable and names. */
export interface PendingPack {
  readonly tmp: string;
  /** Holds objects awaiting compaction: named `-u`. */
  readonly uncompacted: boolean;
  read(entry: PackEntry): Buffer;
  finish(final: string, keep: (e: PackEntry) => boolean): PackEntry[];
  close(): void;
}

/** The index and trailer that end a pack whose objects fill [4, size). */
function indexAndTrailer(live: PackEntry[], size: number): Buffer {
  const out = Buffer.alloc(live.length * ENTRY_BYTES + TRAILER_BYTES);
  live.forEach((e, i) => {
    const at = i * ENTRY_BYTES;
    out.write(e.hash, at, 32, 'hex');
    out.writeUInt32LE(e.offset, at + 32);
    out.writeUInt32LE(e.length, at + 36);
  });
  const t = live.length * ENTRY_BYTES;
  out.writeUInt32LE(live.length, t);
  out.writeUInt32LE(size, t + 4);
  out.writeUInt32LE(crc32(out.subarray(0, t)), t + 8);
  out.writeUInt32LE(TRAILER_MAGIC, t + 12);
  return out;
}

/**
 * A pack being written: objects are appended synchronously into a write buffer that
 * goes to the file a megabyte at a time (a bulk checkpoint appends ~14k objects:
 * two write calls each cost more than the copies); `finish` makes it durable.
 */
export class PackWriter implements PendingPack {
  readonly entries: PackEntry[] = [];
  /** Holds an object awaiting compaction: named `-u` so `BlobStore.compact` finds it. Set by the store. */
  uncompacted = false;
  private size = 4;
  /** Bytes appended but not yet written: the file holds [0, size - buffered). */
  private buf = Buffer.allocUnsafeSlow(WRITE_BUFFER_BYTES);
  private buffered = 0;
  /** File bytes at the last early flush started; one flush in flight at a time. */
  private syncedUpTo = 0;
  private syncing = false;

  private constructor(
    readonly tmp: string,
    private fd: number,
  ) {}

  static create(dir: string, tmpName: string): PackWriter {
    const tmp = path.join(dir, tmpName);
    // 0600: a pack holds copies of workspace files, some readable by their owner only. + : pending objects are read back before the flush.
    const fd = fss.openSync(tmp, 'wx+', 0o600);
    const head = Buffer.alloc(4);
    head.writeUInt32LE(PACK_MAGIC, 0);
    writeAll(fd, head);
    return new PackWriter(tmp, fd);
  }

  get bytes(): number {
    return this.size;
  }

  /** Appends one encoded object (header byte + body); returns where it lives. */
  append(hash: string, header: number, body: Uint8Array): PackEntry {
    const entry = { hash, offset: this.size, length: body.length + 1 };
    if (this.buffered + entry.length > this.buf.length) this.writeBuffered();
    if (entry.length > this.buf.length) {
      writeAll(this.fd, Buffer.of(header));
      writeAll(this.fd, body);
    } else {
      this.buf[this.buffered] = header;
      this.buf.set(body, this.buffered + 1);
      this.buffered += entry.length;
    }
    this.size += entry.length;
    this.entries.push(entry);
    return entry;
  }

  private writeBuffered(): void {
    if (this.buffered === 0) return;
    writeAll(this.fd, this.buf.subarray(0, this.buffered));
    this.buffered = 0;
    const written = this.size;
    if (!this.syncing && written - this.syncedUpTo >= EARLY_SYNC_BYTES) {
      // Only an early start on the writeback: `finish` still fdatasyncs everything.
      this.syncing = true;
      this.syncedUpTo = written;
      const fd = this.fd;
      fss.fdatasync(fd, () => {
        this.syncing = false;
        if (this.fd === -1 && this.closeAfterSync) fss.close(fd, () => undefined);
      });
    }
  }

  /** Set when `close` ran while an early flush still used the descriptor: the flush's callback closes it. */
  private closeAfterSync = false;

  /** Reads back an object written to this (unfinished) pack. */
  read(entry: PackEntry): Buffer {
    const start = this.size - this.buffered;
    if (entry.offset >= start) return Buffer.from(this.buf.subarray(entry.offset - start, entry.offset - start + entry.length));
    return preadExact(this.fd, entry.offset, entry.length);
  }

  /**
   * Writes the index of `keep` (entries dropped since, e.g. deleted, are left out),
   * fdatasyncs, closes and renames the pack to `final`. The caller fsyncs the directory.
   */
  finish(final: string, keep: (e: PackEntry) => boolean): PackEntry[] {
    this.writeBuffered();
    const live = this.entries.filter(keep);
    writeAll(this.fd, indexAndTrailer(live, this.size));
    fss.fdatasyncSync(this.fd);
    this.close();
    fss.renameSync(this.tmp, final);
    return live;
  }

  /** Closes without naming the pack (its temp is swept later). */
  close(): void {
    // A descriptor an early flush is using is closed by that flush (closing it under a
    // running fdatasync could let the number be reused for another file meanwhile).
    if (this.fd >= 0 && this.syncing) this.closeAfterSync = true;
    else if (this.fd >= 0) fss.closeSync(this.fd);
    this.fd = -1;
    this.buffered = 0;
  }
}

/**
 * A pack whose objects a compression-pool worker writes (a bulk first checkpoint:
 * the content never crosses to the main thread). The worker appends objects to the
 * temp file, writes each batch out before answering, and at the end of the scan
 * fdatasyncs and closes it (`seal`). The main thread records the entries the
 * worker reports, reads pending objects back from the file, and `finish` appends
 * the index (the objects are already durable: one more small fdatasync) and names it.
 * Always `-u`: its objects are stored raw until compaction.
 */
export class WorkerPack implements PendingPack {
  readonly entries: PackEntry[] = [];
  readonly uncompacted = true;
  /** Bytes of objects in the file once sealed; -1 while the worker still writes. */
  private size = -1;
  private fd = -1;

  constructor(readonly tmp: string) {}

  get sealed(): boolean {
    return this.size >= 0;
  }

  /** The worker has written, fdatasync'd and closed the file: it holds `size` bytes of objects. */
  seal(size: number): void {
    this.size = size;
  }

  add(entry: PackEntry): void {
    this.entries.push(entry);
  }

  read(entry: PackEntry): Buffer {
    if (this.fd < 0) this.fd = fss.openSync(this.tmp, 'r');
    return preadExact(this.fd, entry.offset, entry.length);
  }

  finish(final: string, keep: (e: PackEntry) => boolean): PackEntry[] {
    if (!this.sealed) throw new Error(`[snapshot] pack ${path.basename(this.tmp)} is still being written by a worker`);
    this.close();
    const fd = fss.openSync(this.tmp, 'r+');
    let live: PackEntry[];
    try {
      if (fss.fstatSync(fd).size !== this.size) throw new Error(`[snapshot] pack ${path.basename(this.tmp)} does not hold what its worker wrote`);
      live = this.entries.filter(keep);
      const tail = indexAndTrailer(live, this.size);
      let done = 0;
      while (done < tail.length) done += fss.writeSync(fd, tail, done, tail.length - done, this.size + done);
      fss.fdatasyncSync(fd);
    } finally {
      fss.closeSync(fd);
    }
    fss.renameSync(this.tmp, final);
    return live;
  }

  close(): void {
    if (this.fd >= 0) fss.closeSync(this.fd);
    this.fd = -1;
  }
}

/** A named pack's index as it is on disk (count × 40 bytes), checked whole (trailer, bounds, CRC); throws when the pack is not whole. */
export function readRawPackIndex(file: string): { index: Buffer; indexOffset: number } {
  const fd = fss.openSync(file, 'r');
  try {
    const size = fss.fstatSync(fd).size;
    if (size < 4 + TRAILER_BYTES) throw new Error('too short to be a pack');
    const trailer = preadExact(fd, size - TRAILER_BYTES, TRAILER_BYTES);
    if (trailer.readUInt32LE(12) !== TRAILER_MAGIC) throw new Error('no pack trailer');
    const count = trailer.readUInt32LE(0);
    const indexOffset = trailer.readUInt32LE(4);
    if (indexOffset + count * ENTRY_BYTES + TRAILER_BYTES !== size) throw new Error('index does not fit the file');
    const index = preadExact(fd, indexOffset, count * ENTRY_BYTES);
    if (crc32(index) !== trailer.readUInt32LE(8)) throw new Error('index checksum mismatch');
    return { index, indexOffset };
  } finally {
    fss.closeSync(fd);
  }
}

/**
 * The entry for `hash` (32 raw bytes) in a raw index (readRawPackIndex), or null: a
 * search of the bytes, with no object per entry (a fresh process storing ten new
 * blobs need not decode an index of 50,000). Entries are 40-byte aligned; a match
 * elsewhere is part of an offset or another hash and is skipped.
 */
export function findInRawIndex(raw: { index: Buffer; indexOffset: number }, hash: Buffer): PackEntry | null {
  const { index, indexOffset } = raw;
  for (let at = index.indexOf(hash); at >= 0; at = index.indexOf(hash, at + 1)) {
    if (at % ENTRY_BYTES !== 0) continue;
    const e = { hash: hash.toString('hex'), offset: index.readUInt32LE(at + 32), length: index.readUInt32LE(at + 36) };
    if (e.offset < 4 || e.length < 1 || e.offset + e.length > indexOffset) throw new Error(`index entry ${at / ENTRY_BYTES} points outside the objects`);
    return e;
  }
  return null;
}

/** Reads a named pack's index; throws when the pack is not whole. */
export function readPackIndex(file: string): PackEntry[] {
  const { index, indexOffset } = readRawPackIndex(file);
  const out: PackEntry[] = [];
  for (let at = 0; at < index.length; at += ENTRY_BYTES) {
    const e = { hash: index.toString('hex', at, at + 32), offset: index.readUInt32LE(at + 32), length: index.readUInt32LE(at + 36) };
    if (e.offset < 4 || e.length < 1 || e.offset + e.length > indexOffset) throw new Error(`index entry ${at / ENTRY_BYTES} points outside the objects`);
    out.push(e);
  }
  return out;
}

/**
 * Reads one object of a named pack. With `fds` (a batch of reads, see
 * `BlobStore.batchReader`), the pack is opened once and its descriptor kept there
 * for the caller to close: an open and a close per object were a third of reading
 * a restore's blobs. A kept descriptor stays valid if the pack is removed meanwhile
 * (GC rewrites packs under new names, never in place), and `entry` came from that
 * same pack's index, so what it reads is still that object.
 */
export function readPackObject(file: string, entry: PackEntry, fds?: Map<string, number>): Buffer {
  if (fds) {
    let fd = fds.get(file);
    if (fd === undefined) {
      fd = fss.openSync(file, 'r');
      fds.set(file, fd);
    }
    return preadExact(fd, entry.offset, entry.length);
  }
  const fd = fss.openSync(file, 'r');
  try {
    return preadExact(fd, entry.offset, entry.length);
  } finally {
    fss.closeSync(fd);
  }
}

function preadExact(fd: number, offset: number, length: number): Buffer {
  const buf = Buffer.allocUnsafe(length);
  let got = 0;
  while (got < length) {
    const n = fss.readSync(fd, buf, got, length - got, offset + got);
    if (n === 0) throw Object.assign(new Error('pack object extends past the end of the file'), { code: 'EPACKSHORT' });
    got += n;
  }
  return buf;
}

function writeAll(fd: number, buf: Uint8Array): void {
  let done = 0;
  while (done < buf.length) done += fss.writeSync(fd, buf, done, buf.length - done);
}
