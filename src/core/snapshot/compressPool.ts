/**
 * Blob body encoding, and a small pool of worker threads that does it off the main
 * thread for bulk checkpoints. A first checkpoint of ~90 MB of source spends most of
 * its CPU compressing; on the main thread that serializes with reading and hashing,
 * and Node's async zlib costs a thread-pool round trip per blob. The pool overlaps
 * compression with the walk on the other core(s), one message per blob, the bytes
 * transferred (not copied) both ways.
 *
 * Encoding (the object's 1-byte header): 0x00 raw, 0x01 raw deflate (older stores),
 * 0x02 brotli, 0x03 raw awaiting compaction, 0x04 a delta against another object of
 * the same pack (written by compaction: see HEADER_DELTA). Brotli quality 1 compresses source code about twice as fast as
 * deflate level 1 at the same ratio (measured on the bench's node_modules corpus:
 * 616 ms vs 1,206 ms for 90 MB, ratio 0.287 vs 0.284).
 */
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import zlib from 'node:zlib';
import { EARLY_SYNC_BYTES, MAX_PACK_BYTES, PACK_MAGIC, PACK_TEMP_PREFIX } from './packFile.js';
import { CONFIRM_AFTER_MS, CONFIRM_MIN_PAUSE_MS, READ_ATTEMPTS } from './scan/fsAccess.js';

export const HEADER_RAW = 0x00;
export const HEADER_DEFLATE = 0x01;
export const HEADER_BROTLI = 0x02;
/**
 * Raw, not yet looked at for compression: a bulk first checkpoint stores new content
 * this way so that it is durable in read + hash + write time, and the blob store's
 * `compact` encodes it afterwards (see BlobStore.compact). Only ever in packs named
 * as awaiting compaction (packFile.ts).
 */
export const HEADER_PENDING = 0x03;
/**
 * Compressed against a similar object (its base) in the same pack, as git's packs
 * store deltas: raw deflate with the base's last 32 KB as the preset dictionary, so
 * LZ77 matches reach back into the base. A delta and its compression in one native
 * pass, on the worker threads compaction already uses (no delta library can run
 * there: the workers are evaluated source). Measured on the snapshot bench's 13,000
 * node_modules objects (79 MB), sorted by name like git's pack-objects: 19.5 MB brotli
 * alone, 16.6 MB with these deltas, in ~5 s on two workers (git's own deltas take its
 * pack from 21.0 to 17.2 MB).
 *
 * Body: the base's SHA-256 (32 bytes) | the content's length (u32 LE) | deflated bytes.
 */
export const HEADER_DELTA = 0x04;
/** What a delta's body holds before its deflated bytes. */
export const DELTA_HEAD_BYTES = 36;
/** Deflate's window: only this much of the base can be matched against. */
const DELTA_DICT_BYTES = 32 * 1024;
/** Compaction tries each object against this many objects before it in name order (git's default window). */
export const DELTA_WINDOW = 10;
/** A delta's base may itself be a delta, this many deep at most: reading an object decodes its whole chain. */
export const MAX_DELTA_DEPTH = 10;
/**
 * A base that is itself a delta must earn its depth, as in git's pack-objects: a
 * delta against a base at depth k counts as (1 + k × this) times its size. Reading
 * costs a decode per level (~25 µs for source); on the snapshot bench this keeps
 * the mean chain at 1.1 (2.9 without it) for 0.1 MB more (16.6 vs 16.5 MB), and a
 * restore's reads of 100 files at ~6 ms (3.7 ms with no deltas, 12–17 ms without the penalty).
 */
const DELTA_DEPTH_PENALTY = 0.3;
/** Larger objects are not tried against a base: deflate's window covers the first 32 KB of a target, past that the base is out of reach. */
const MAX_DELTA_TARGET = 256 * 1024;
/** Compaction has time (it runs in the background): brotli 6 stores source ~20 % smaller than the capture-time quality 1, at ~3× its CPU. */
export const COMPACT_QUALITY = 6;

/** The part of a base a delta's dictionary is: its last 32 KB. */
export function deltaDictionary(base: Uint8Array): Uint8Array {
  return base.length > DELTA_DICT_BYTES ? base.subarray(base.length - DELTA_DICT_BYTES) : base;
}

/** A delta object's base and expected length (throws EBADHEADER when the body is too short to hold them). */
export function deltaBase(raw: Buffer): { base: string; length: number } {
  if (raw.length < 1 + DELTA_HEAD_BYTES) throw Object.assign(new Error('delta object too short'), { code: 'EBADHEADER' });
  return { base: raw.toString('hex', 1, 33), length: raw.readUInt32LE(33) };
}

/** Decodes a delta object (header byte + body) given its base's content. */
export function applyDeltaObject(raw: Buffer, base: Uint8Array): Buffer {
  const { length } = deltaBase(raw);
  const out = zlib.inflateRawSync(raw.subarray(1 + DELTA_HEAD_BYTES), { dictionary: deltaDictionary(base) });
  if (out.length !== length) throw Object.assign(new Error(`delta gave ${out.length} bytes, expected ${length}`), { code: 'EBADHEADER' });
  return out;
}

/** Blobs smaller than this are stored raw: compression cannot pay for its header. */
export const MIN_COMPRESS_BYTES = 64;
/** Large blobs are sampled first: compressing a whole archive or image only to throw it away is the costly case. */
export const SAMPLE_FROM_BYTES = 256 * 1024;
const SAMPLE_BYTES = 32 * 1024;
/** Compression is kept only when it saves at least ~10 %. */
const KEEP_RATIO = 0.9;
export const DEFAULT_QUALITY = 1;

export interface Encoded {
  header: number;
  body: Uint8Array;
}

function brotli(bytes: Uint8Array, quality: number): Buffer {
  return zlib.brotliCompressSync(bytes, {
    params: { [zlib.constants.BROTLI_PARAM_QUALITY]: quality, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes.length },
  });
}

/**
 * Encodes one blob body on the calling thread. Keep in step with WORKER_SOURCE
 * below (the worker cannot import this module: the extension is one bundle).
 */
export function encodeBody(bytes: Uint8Array, quality: number): Encoded {
  if (bytes.length < MIN_COMPRESS_BYTES) return { header: HEADER_RAW, body: bytes };
  if (bytes.length >= SAMPLE_FROM_BYTES) {
    const at = Math.floor((bytes.length - SAMPLE_BYTES) / 2);
    const sample = bytes.subarray(at, at + SAMPLE_BYTES);
    if (brotli(sample, quality).length > sample.length * KEEP_RATIO) return { header: HEADER_RAW, body: bytes };
  }
  const out = brotli(bytes, quality);
  return out.length <= bytes.length * KEEP_RATIO ? { header: HEADER_BROTLI, body: out } : { header: HEADER_RAW, body: bytes };
}

/** Decodes a stored object (header byte + body). Throws on an unknown header or a damaged body. */
export function decodeObject(raw: Buffer): Buffer {
  const header = raw[0];
  const body = raw.subarray(1);
  if (header === HEADER_RAW || header === HEADER_PENDING) return body;
  if (header === HEADER_BROTLI) return zlib.brotliDecompressSync(body);
  if (header === HEADER_DEFLATE) return zlib.inflateRawSync(body);
  if (header === HEADER_DELTA) throw Object.assign(new Error('a delta object needs its base (BlobStore decodes it)'), { code: 'EBADHEADER' });
  throw Object.assign(new Error(`unknown header byte ${header}`), { code: 'EBADHEADER' });
}

/** A message carries blobs until it holds this many bytes (or the event loop turns): one postMessage per blob cost ~20 µs each. */
const BATCH_BYTES = 256 * 1024;
/** File jobs per message: a few dozen files amortize a message without starving the other worker. */
const FILE_BATCH = 24;
/** A worker reads files up to this size into one reused buffer (larger ones get their own). */
const FILE_SCRATCH_BYTES = 1024 * 1024;
/** Weight of one queued file job when picking the least-loaded worker (a typical source file). */
const FILE_JOB_WEIGHT = 8 * 1024;
/** Arenas kept for reuse: fresh memory costs a page fault per 4 KiB on first write (~22k for 90 MB). Bounds what a pool holds. */
const SPARE_ARENAS = 32;

const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const fs = require('node:fs');
const crypto = require('node:crypto');
const zlib = require('node:zlib');
const brotli = (bytes, quality) => zlib.brotliCompressSync(bytes, { params: {
  [zlib.constants.BROTLI_PARAM_QUALITY]: quality, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes.length } });
function encode(bytes, quality) {
  if (bytes.length < ${MIN_COMPRESS_BYTES}) return null;
  if (bytes.length >= ${SAMPLE_FROM_BYTES}) {
    const at = Math.floor((bytes.length - ${SAMPLE_BYTES}) / 2);
    const sample = bytes.subarray(at, at + ${SAMPLE_BYTES});
    if (brotli(sample, quality).length > sample.length * ${KEEP_RATIO}) return null;
  }
  const out = brotli(bytes, quality);
  return out.length <= bytes.length * ${KEEP_RATIO} ? out : null;
}
// Compaction's similar objects (jobs with a stream): each stream's objects arrive in
// name order, and the last ${DELTA_WINDOW} stay here as deflate dictionaries (their last
// ${DELTA_DICT_BYTES} bytes), with their delta depth (see HEADER_DELTA).
let winStream = null;
let win = [];
function encodeSimilar(bytes, quality, hash) {
  const full = encode(bytes, quality);
  let header = full === null ? ${HEADER_RAW} : ${HEADER_BROTLI};
  let body = full === null ? bytes : full;
  let depth = 0;
  let best = body.length;
  if (bytes.length >= ${MIN_COMPRESS_BYTES} && bytes.length <= ${MAX_DELTA_TARGET}) {
    for (let i = win.length - 1; i >= 0; i--) {
      const b = win[i];
      if (b.depth >= ${MAX_DELTA_DEPTH} || b.len * 4 < bytes.length || b.len > bytes.length * 4) continue;
      const d = zlib.deflateRawSync(bytes, { level: 6, dictionary: b.dict });
      const score = (d.length + ${DELTA_HEAD_BYTES}) * (1 + b.depth * ${DELTA_DEPTH_PENALTY});
      if (score >= best) continue;
      best = score;
      const head = Buffer.allocUnsafe(${DELTA_HEAD_BYTES});
      head.write(b.hash, 0, 32, 'hex');
      head.writeUInt32LE(bytes.length, 32);
      header = ${HEADER_DELTA};
      body = Buffer.concat([head, d]);
      depth = b.depth + 1;
    }
  }
  const dict = bytes.length > ${DELTA_DICT_BYTES} ? bytes.subarray(bytes.length - ${DELTA_DICT_BYTES}) : bytes;
  win.push({ hash, len: bytes.length, depth, dict: Buffer.from(dict) });
  if (win.length > ${DELTA_WINDOW}) win.shift();
  return { header, body };
}
const sha256 = crypto.hash ? (b) => crypto.hash('sha256', b, 'hex') : (b) => crypto.createHash('sha256').update(b).digest('hex');
// O_NOFOLLOW: a file swapped for a symlink is not followed; O_NONBLOCK: a file swapped
// for a FIFO cannot block the open (fstat then refuses it).
const O_READ = fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | (fs.constants.O_NONBLOCK || 0);
let scratch = Buffer.allocUnsafeSlow(${FILE_SCRATCH_BYTES});
/** A recently changed file's second read, compared with the first. */
let verify = Buffer.allocUnsafeSlow(0);
const pause = new Int32Array(new SharedArrayBuffer(4));
/** The batch's output: bodies appended as they are produced (a raw body is a view of scratch). */
let out = Buffer.allocUnsafeSlow(${BATCH_BYTES} * 2);
let outAt = 0;
function emit(body) {
  if (outAt + body.length > out.length) {
    const bigger = Buffer.allocUnsafeSlow(Math.max(out.length * 2, outAt + body.length));
    out.copy(bigger, 0, 0, outAt);
    out = bigger;
  }
  out.set(body, outAt);
  outAt += body.length;
  return outAt - body.length;
}
// A pack this worker writes raw objects to (readFile with a pack directory): the
// content never goes back to the main thread. Objects are appended through a 1 MB
// buffer written out before each answer (so the main thread can read them back),
// flushed early every ${EARLY_SYNC_BYTES} bytes on the thread pool, and made durable
// by 'seal' at the end of the scan. Same content twice in one pack is stored once.
let pack = null;
const sealedPacks = [];
function openPack(dir) {
  const tmp = dir + '/${PACK_TEMP_PREFIX}' + crypto.randomBytes(8).toString('hex') + '.pack';
  const fd = fs.openSync(tmp, 'wx', 0o600); // private: copies of workspace files
  const head = Buffer.alloc(4);
  head.writeUInt32LE(${PACK_MAGIC}, 0);
  fs.writeSync(fd, head);
  pack = { tmp, fd, size: 4, buf: Buffer.allocUnsafeSlow(1024 * 1024), buffered: 0, hashes: new Map(), syncedUpTo: 0, syncing: false, closeAfterSync: false, onSynced: null };
}
function writeAll(fd, buf) {
  let done = 0;
  while (done < buf.length) done += fs.writeSync(fd, buf, done, buf.length - done);
}
function packWriteBuffered() {
  if (!pack || pack.buffered === 0) return;
  writeAll(pack.fd, pack.buf.subarray(0, pack.buffered));
  pack.buffered = 0;
  const p = pack;
  if (!p.syncing && p.size - p.syncedUpTo >= ${EARLY_SYNC_BYTES}) {
    p.syncing = true;
    p.syncedUpTo = p.size;
    fs.fdatasync(p.fd, () => {
      p.syncing = false;
      if (p.closeAfterSync) fs.close(p.fd, () => {});
      if (p.onSynced) p.onSynced();
    });
  }
}
function sealPack() {
  if (!pack) return;
  packWriteBuffered();
  fs.fdatasyncSync(pack.fd);
  // An early flush still running keeps the descriptor until it ends.
  if (pack.syncing) pack.closeAfterSync = true;
  else fs.closeSync(pack.fd);
  sealedPacks.push({ tmp: pack.tmp, size: pack.size });
  pack = null;
}
function packAppend(dir, hash, header, bytes) {
  if (pack && pack.hashes.has(hash)) return pack.hashes.get(hash);
  const length = bytes.length + 1;
  if (pack && pack.size + length > ${MAX_PACK_BYTES}) sealPack();
  if (!pack) openPack(dir);
  const at = { offset: pack.size, length };
  if (pack.buffered + length > pack.buf.length) packWriteBuffered();
  if (length > pack.buf.length) {
    writeAll(pack.fd, Buffer.of(header));
    writeAll(pack.fd, bytes);
  } else {
    pack.buf[pack.buffered] = header;
    pack.buf.set(bytes, pack.buffered + 1);
    pack.buffered += length;
  }
  pack.size += length;
  pack.hashes.set(hash, at);
  return at;
}
function readOne(job, quality, maxBytes, packDir) {
  let fd;
  try {
    fd = fs.openSync(job.io, O_READ);
  } catch (err) {
    return { id: job.id, code: err.code || 'EUNKNOWN', message: String(err.message || err) };
  }
  try {
    let st = fs.fstatSync(fd);
    if (!st.isFile()) return { id: job.id, code: 'ENOTREG', message: 'no longer a regular file' };
    // Each read is checked by a second fstat: a write during it (ctime, mtime, size)
    // means the bytes may mix two versions, so it is read again (see sameVersion in scan/fsAccess.ts).
    let got = 0;
    let buf = scratch;
    for (let attempt = 1; ; attempt++) {
      if (st.size > maxBytes) return { id: job.id, size: st.size, mtimeMs: st.mtimeMs, ino: st.ino, exec: (st.mode & 0o111) !== 0, skipped: true };
      buf = st.size <= scratch.length ? scratch : Buffer.allocUnsafeSlow(st.size);
      got = 0;
      while (got < st.size) {
        const n = fs.readSync(fd, buf, got, st.size - got, got);
        if (n === 0) break;
        got += n;
      }
      const after = fs.fstatSync(fd);
      if (got === st.size && after.ctimeMs === st.ctimeMs && after.mtimeMs === st.mtimeMs && after.size === st.size) {
        // Recently changed: a write under way since before the first fstat shows only to a second read (see recentlyChanged in scan/fsAccess.ts).
        if (Date.now() - after.ctimeMs >= (after.ctimeMs % 1000 === 0 ? 3000 : 1000)) break;
        if (verify.length < got) verify = Buffer.allocUnsafeSlow(got);
        // A moment later (blocking only this worker), so a writer descheduled mid-copy gets to go on (confirmPauseMs in scan/fsAccess.ts).
        Atomics.wait(pause, 0, 0, Math.min(${CONFIRM_AFTER_MS}, Math.max(${CONFIRM_MIN_PAUSE_MS}, after.ctimeMs + ${CONFIRM_AFTER_MS} - Date.now())));
        let again = 0;
        while (again < got) {
          const n = fs.readSync(fd, verify, again, got - again, again);
          if (n === 0) break;
          again += n;
        }
        const last = fs.fstatSync(fd);
        if (again === got && last.ctimeMs === st.ctimeMs && last.mtimeMs === st.mtimeMs && last.size === st.size && verify.subarray(0, got).equals(buf.subarray(0, got))) break;
      }
      if (attempt === ${READ_ATTEMPTS}) return { id: job.id, code: 'ECHANGING', message: 'was changing while it was read (${READ_ATTEMPTS} attempts): not captured' };
      st = fs.fstatSync(fd); // the version the next read is checked against
    }
    const r = { id: job.id, size: st.size, mtimeMs: st.mtimeMs, ino: st.ino, exec: (st.mode & 0o111) !== 0 };
    const bytes = buf.subarray(0, got);
    const hash = sha256(bytes);
    if (packDir) {
      const header = got >= ${MIN_COMPRESS_BYTES} ? ${HEADER_PENDING} : ${HEADER_RAW};
      let at;
      try {
        at = packAppend(packDir, hash, header, bytes);
      } catch (err) {
        return { id: job.id, code: err.code || 'EUNKNOWN', message: 'writing the pack: ' + String(err.message || err), fatal: true };
      }
      return Object.assign(r, { length: got, hash, header, tmp: pack.tmp, offset: at.offset, len: at.length });
    }
    const enc = encode(bytes, quality);
    const body = enc === null ? bytes : enc;
    return Object.assign(r, { length: got, hash, header: enc === null ? ${HEADER_RAW} : ${HEADER_BROTLI}, at: emit(body), len: body.length });
  } catch (err) {
    return { id: job.id, code: err.code || 'EUNKNOWN', message: String(err.message || err) };
  } finally {
    fs.closeSync(fd);
  }
}
// One message per batch: encode jobs' inputs arrive in one ArrayBuffer (job i is
// bytes [at_i, at_i + len_i)); file jobs name a file to read, hash and encode here.
// Outputs go back in one ArrayBuffer, with their encodings.
parentPort.on('message', (m) => {
  if (m.seal) {
    // After any early flush in flight has ended: the pool may end this thread right
    // after the answer, and a descriptor left for that flush's callback to close
    // would then stay open in the process (threads share descriptors).
    const p = pack;
    new Promise((resolve) => {
      if (p && p.syncing) p.onSynced = resolve;
      else resolve();
    }).then(() => {
      let error;
      try {
        sealPack();
      } catch (err) {
        error = String((err && err.message) || err);
      }
      parentPort.postMessage({ sealed: sealedPacks.splice(0), error });
    });
    return;
  }
  outAt = 0;
  const results = [];
  if (m.files) {
    for (const job of m.files) results.push(readOne(job, m.quality, m.maxBytes, m.packDir));
    try {
      packWriteBuffered();
    } catch (err) {
      for (const r of results) if (r.tmp !== undefined) Object.assign(r, { code: err.code || 'EUNKNOWN', message: 'writing the pack: ' + String(err.message || err), fatal: true });
    }
  } else {
    const input = new Uint8Array(m.buf);
    if (m.stream !== undefined && m.stream !== winStream) {
      winStream = m.stream;
      win = [];
    }
    for (const job of m.jobs) {
      const bytes = input.subarray(job.at, job.at + job.len);
      if (m.stream !== undefined) {
        try {
          const r = encodeSimilar(bytes, m.quality, job.hash);
          results.push({ id: job.id, header: r.header, at: emit(r.body), len: r.body.length });
        } catch (err) {
          results.push({ id: job.id, error: String((err && err.message) || err) });
        }
        continue;
      }
      let enc = null;
      try {
        enc = encode(bytes, m.quality);
      } catch (err) {
        results.push({ id: job.id, error: String((err && err.message) || err) });
        continue;
      }
      const body = enc === null ? bytes : enc;
      results.push({ id: job.id, header: enc === null ? ${HEADER_RAW} : ${HEADER_BROTLI}, at: emit(body), len: body.length });
    }
  }
  // The output is copied out once (transferring the growable arena would leave this
  // thread a fresh one to fault in per batch); the input buffer goes back for reuse.
  const buf = new Uint8Array(outAt);
  buf.set(out.subarray(0, outAt));
  const transfer = m.buf ? [buf.buffer, m.buf] : [buf.buffer];
  parentPort.postMessage({ buf: buf.buffer, input: m.buf, results }, transfer);
});
`;

/** What a worker found reading one file (see `CompressPool.readFile`). */
export type FileRead =
  | { kind: 'error'; code: string; message: string }
  | { kind: 'skipped'; size: number; mtimeMs: number; ino: number; exec: boolean }
  | { kind: 'read'; size: number; mtimeMs: number; ino: number; exec: boolean; length: number; hash: string; encoded: Encoded; packed?: undefined }
  /** Stored by the worker in its pack (readFile with `packDir`): `tmp` is the pack's file, the object is at [offset, offset + length). */
  | { kind: 'read'; size: number; mtimeMs: number; ino: number; exec: boolean; length: number; hash: string; encoded?: undefined; packed: { tmp: string; offset: number; length: number } };

interface WorkerResult {
  id: number;
  error?: string;
  code?: string;
  message?: string;
  header?: number;
  at?: number;
  len?: number;
  size?: number;
  mtimeMs?: number;
  ino?: number;
  exec?: boolean;
  skipped?: boolean;
  length?: number;
  hash?: string;
  tmp?: string;
  offset?: number;
  fatal?: boolean;
}

interface Job {
  settle: (m: WorkerResult, buf: ArrayBuffer) => void;
  fail: (err: Error) => void;
  weight: number;
}

interface Slot {
  worker: Worker;
  jobs: Map<number, Job>;
  queuedBytes: number;
  /** Answers to `seal` messages, in order. */
  sealWaiters: ((m: { sealed: { tmp: string; size: number }[]; error?: string }) => void)[];
}

/**
 * Worker threads for bulk checkpoints. Two kinds of work, each sent in batches to
 * the worker with the least queued:
 * - `encode(bytes)`: compress content the main thread has read (a rescan's changed files);
 * - `readFile(io)`: open, fstat, read, hash and compress a whole file on the worker
 *   (a first checkpoint: the per-file syscalls, SHA-256 and brotli all leave the
 *   main thread, which only walks directories and appends results to the pack).
 * `close()` terminates them; a pool is meant to live for one bulk scan.
 */
export class CompressPool {
  private readonly slots: Slot[] = [];
  private nextId = 0;
  private failed: Error | null = null;
  private batch: { id: number; at: number; len: number; job: Job }[] = [];
  private fileBatch: { id: number; io: string; job: Job }[] = [];
  /** The next message's input bytes [0, batchBytes). */
  private arena: Buffer = Buffer.allocUnsafeSlow(BATCH_BYTES * 2);
  /** Arenas back from the workers, for reuse. */
  private readonly spare: Buffer[] = [];
  private batchBytes = 0;
  private flushScheduled = false;

  constructor(
    readonly quality = DEFAULT_QUALITY,
    size = Math.max(1, Math.min(4, os.availableParallelism?.() ?? os.cpus().length)),
  ) {
    for (let i = 0; i < size; i++) {
      const slot: Slot = { worker: new Worker(WORKER_SOURCE, { eval: true, execArgv: [] }), jobs: new Map(), queuedBytes: 0, sealWaiters: [] };
      slot.worker.on('message', (msg: { buf: ArrayBuffer; input?: ArrayBuffer; results: WorkerResult[] } | { sealed: { tmp: string; size: number }[]; error?: string }) => {
        if ('sealed' in msg) {
          slot.sealWaiters.shift()?.(msg);
          return;
        }
        const { buf, input, results } = msg;
        if (input && this.spare.length < SPARE_ARENAS && input.byteLength >= BATCH_BYTES * 2) this.spare.push(Buffer.from(input));
        for (const m of results) {
          const job = slot.jobs.get(m.id);
          if (!job) continue;
          slot.jobs.delete(m.id);
          slot.queuedBytes -= job.weight;
          job.settle(m, buf);
        }
      });
      const fail = (err: Error) => {
        this.failed ??= err;
        for (const job of slot.jobs.values()) job.fail(err);
        slot.jobs.clear();
        slot.queuedBytes = 0;
      };
      slot.worker.on('error', fail);
      slot.worker.on('exit', (code) => {
        if (slot.jobs.size) fail(new Error(`[snapshot] compression worker exited (code ${code})`));
      });
      this.slots.push(slot);
    }
  }

  /** Bytes sent to workers (or batched for them) and not yet returned; a file job counts as FILE_JOB_WEIGHT. */
  get queuedBytes(): number {
    let n = this.batchBytes + this.fileBatch.length * FILE_JOB_WEIGHT;
    for (const s of this.slots) n += s.queuedBytes;
    return n;
  }

  /**
   * Encodes `bytes` on a worker. The bytes are copied into the next message before
   * this returns, so the caller may reuse their memory as soon as it has the promise.
   */
  encode(bytes: Uint8Array): Promise<Encoded> {
    if (this.failed) return Promise.reject(this.failed);
    if (bytes.length < MIN_COMPRESS_BYTES) return Promise.resolve({ header: HEADER_RAW, body: Buffer.from(bytes) });
    if (this.batchBytes + bytes.length > this.arena.length) this.send();
    if (bytes.length > this.arena.length) {
      this.spare.push(this.arena);
      this.arena = Buffer.allocUnsafeSlow(bytes.length);
    }
    this.arena.set(bytes, this.batchBytes);
    const at = this.batchBytes;
    this.batchBytes += bytes.length;
    return new Promise<Encoded>((resolve, reject) => {
      const job: Job = {
        weight: bytes.length,
        fail: reject,
        settle: (m, buf) => {
          if (m.error !== undefined) reject(new Error(`[snapshot] compression worker: ${m.error}`));
          else resolve({ header: m.header!, body: Buffer.from(buf, m.at!, m.len!) });
        },
      };
      this.batch.push({ id: this.nextId++, at, len: bytes.length, job });
      if (this.batchBytes >= BATCH_BYTES) this.send();
      else this.scheduleSend();
    });
  }

  /** How many worker threads the pool runs (streams of `encodeSimilar` are pinned to one each). */
  get size(): number {
    return this.slots.length;
  }

  /**
   * Encodes objects of one stream on worker `lane` (0 ≤ lane < size), each tried as a
   * delta against the objects sent before it in the same stream (see HEADER_DELTA):
   * the caller sends a pack's objects in name order, and every object sent is stored
   * in that pack (a delta's base must be). A new stream name starts an empty window.
   * One message per call; the answers come in the order given.
   */
  encodeSimilar(lane: number, stream: string, items: readonly { hash: string; bytes: Uint8Array }[]): Promise<Encoded[]> {
    if (this.failed) return Promise.reject(this.failed);
    const slot = this.slots[lane % this.slots.length]!;
    const total = items.reduce((n, it) => n + it.bytes.length, 0);
    const buf = Buffer.allocUnsafeSlow(Math.max(1, total));
    const jobs: { id: number; at: number; len: number; hash: string }[] = [];
    let at = 0;
    for (const it of items) {
      buf.set(it.bytes, at);
      jobs.push({ id: this.nextId++, at, len: it.bytes.length, hash: it.hash });
      at += it.bytes.length;
    }
    const settled = jobs.map(
      (j) =>
        new Promise<Encoded>((resolve, reject) => {
          slot.jobs.set(j.id, {
            weight: j.len,
            fail: reject,
            settle: (m, out) => {
              if (m.error !== undefined) reject(new Error(`[snapshot] compression worker: ${m.error}`));
              else resolve({ header: m.header!, body: Buffer.from(out, m.at!, m.len!) });
            },
          });
          slot.queuedBytes += j.len;
        }),
    );
    slot.worker.postMessage({ quality: this.quality, buf: buf.buffer, stream, jobs }, [buf.buffer as ArrayBuffer]);
    return Promise.all(settled);
  }

  /**
   * Reads the regular file at `io` on a worker (opened with O_NOFOLLOW | O_NONBLOCK,
   * so `io` must reach it through a trusted directory, e.g. /proc/self/fd/N/name),
   * hashes it and encodes it for the blob store. Files over `maxBytes` are not read.
   * Errors opening or reading come back as `kind: 'error'` with the errno code.
   * `packDir`: the worker appends the content raw (HEADER_PENDING) to its own pack
   * there instead of sending it back (see WorkerPack); `sealPacks` ends those packs.
   */
  readFile(io: string, maxBytes: number, opts: { packDir?: string } = {}): Promise<FileRead> {
    if (this.failed) return Promise.reject(this.failed);
    const packDir = opts.packDir ?? null;
    return new Promise<FileRead>((resolve, reject) => {
      const job: Job = {
        weight: FILE_JOB_WEIGHT,
        fail: reject,
        settle: (m, buf) => {
          if (m.fatal) reject(Object.assign(new Error(`[snapshot] compression worker: ${m.message}`), { code: m.code }));
          else if (m.code !== undefined) resolve({ kind: 'error', code: m.code, message: m.message ?? m.code });
          else if (m.skipped) resolve({ kind: 'skipped', size: m.size!, mtimeMs: m.mtimeMs!, ino: m.ino!, exec: m.exec! });
          else if (m.tmp !== undefined) {
            this.packsWritten.add(m.tmp);
            resolve({ kind: 'read', size: m.size!, mtimeMs: m.mtimeMs!, ino: m.ino!, exec: m.exec!, length: m.length!, hash: m.hash!, packed: { tmp: m.tmp, offset: m.offset!, length: m.len! } });
          } else {
            resolve({
              kind: 'read',
              size: m.size!,
              mtimeMs: m.mtimeMs!,
              ino: m.ino!,
              exec: m.exec!,
              length: m.length!,
              hash: m.hash!,
              encoded: { header: m.header!, body: Buffer.from(buf, m.at!, m.len!) },
            });
          }
        },
      };
      if (this.fileBatch.length > 0 && packDir !== this.packDir) this.sendFiles(this.maxBytes);
      this.packDir = packDir;
      this.fileBatch.push({ id: this.nextId++, io, job });
      if (this.fileBatch.length >= FILE_BATCH) this.sendFiles(maxBytes);
      else this.scheduleSend(maxBytes);
    });
  }

  private maxBytes = 0;
  /** Where the workers write the file batch being gathered (see readFile), or null. */
  private packDir: string | null = null;
  /** Temp packs workers have reported objects in. */
  private readonly packsWritten = new Set<string>();

  private scheduleSend(maxBytes?: number): void {
    if (maxBytes !== undefined) this.maxBytes = maxBytes;
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      this.send();
      this.sendFiles(this.maxBytes);
    });
  }

  private leastLoaded(): Slot {
    let slot = this.slots[0]!;
    for (const s of this.slots) if (s.queuedBytes < slot.queuedBytes) slot = s;
    return slot;
  }

  private sendFiles(maxBytes: number): void {
    if (this.fileBatch.length === 0) return;
    const batch = this.fileBatch;
    this.fileBatch = [];
    const slot = this.leastLoaded();
    for (const b of batch) {
      slot.jobs.set(b.id, b.job);
      slot.queuedBytes += b.job.weight;
    }
    slot.worker.postMessage({ quality: this.quality, maxBytes, packDir: this.packDir, files: batch.map((b) => ({ id: b.id, io: b.io })) });
  }

  private send(): void {
    if (this.batch.length === 0) return;
    const batch = this.batch;
    // The arena itself goes to the worker (transferred, not copied); a fresh one takes its place.
    const buf = this.arena.buffer as ArrayBuffer;
    this.arena = this.spare.pop() ?? Buffer.allocUnsafeSlow(BATCH_BYTES * 2);
    this.batch = [];
    this.batchBytes = 0;
    const slot = this.leastLoaded();
    for (const b of batch) {
      slot.jobs.set(b.id, b.job);
      slot.queuedBytes += b.job.weight;
    }
    slot.worker.postMessage({ quality: this.quality, buf, jobs: batch.map((b) => ({ id: b.id, at: b.at, len: b.len })) }, [buf]);
  }

  /**
   * Ends the workers' packs (readFile with `packDir`): each worker writes out,
   * fdatasyncs and closes its pack(s). Call once every readFile has settled. Returns
   * each pack's temp file and the bytes of objects it holds.
   */
  async sealPacks(): Promise<{ tmp: string; size: number }[]> {
    if (this.failed) throw this.failed;
    if (this.packsWritten.size === 0) return [];
    const replies = await Promise.all(
      this.slots.map(
        (slot) =>
          new Promise<{ sealed: { tmp: string; size: number }[]; error?: string }>((resolve, reject) => {
            const onExit = (code: number) => reject(new Error(`[snapshot] compression worker exited (code ${code}) while sealing its pack`));
            slot.worker.once('exit', onExit);
            slot.sealWaiters.push((m) => {
              slot.worker.off('exit', onExit);
              resolve(m);
            });
            slot.worker.postMessage({ seal: true });
          }),
      ),
    );
    const failed = replies.find((r) => r.error !== undefined);
    if (failed) throw new Error(`[snapshot] compression worker could not seal its pack: ${failed.error}`);
    return replies.flatMap((r) => r.sealed);
  }

  async close(): Promise<void> {
    await Promise.all(this.slots.map((s) => s.worker.terminate()));
  }
}
