/**
 * Blob body encoding, and a small pool of worker threads that does it off the main
 * thread for bulk checkpoints. A first checkpoint of ~90 MB of source spends most of
 * its CPU compressing; on the main thread that serializes with reading and hashing,
 * and Node's async zlib costs a thread-pool round trip per blob. The pool overlaps
 * compression with the walk on the other core(s), one message per blob, the bytes
 * transferred (not copied) both ways.
 *
 * Encoding (the object's 1-byte header): 0x00 raw, 0x01 raw deflate (older stores),
 * 0x02 brotli. Brotli quality 1 compresses source code about twice as fast as
 * deflate level 1 at the same ratio (measured on the bench's node_modules corpus:
 * 616 ms vs 1,206 ms for 90 MB, ratio 0.287 vs 0.284).
 */
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import zlib from 'node:zlib';

export const HEADER_RAW = 0x00;
export const HEADER_DEFLATE = 0x01;
export const HEADER_BROTLI = 0x02;
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
  if (header === HEADER_RAW) return body;
  if (header === HEADER_BROTLI) return zlib.brotliDecompressSync(body);
  if (header === HEADER_DEFLATE) return zlib.inflateRawSync(body);
  throw Object.assign(new Error(`unknown header byte ${header}`), { code: 'EBADHEADER' });
}

const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
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
// One message per batch: the inputs arrive in one ArrayBuffer (job i is bytes
// [at_i, at_i + len_i)), and the outputs go back in one, with their encodings.
parentPort.on('message', (m) => {
  const input = new Uint8Array(m.buf);
  const outs = [];
  let total = 0;
  for (const job of m.jobs) {
    const bytes = input.subarray(job.at, job.at + job.len);
    let out = null;
    try {
      out = encode(bytes, m.quality);
    } catch (err) {
      outs.push({ id: job.id, error: String((err && err.message) || err) });
      continue;
    }
    outs.push({ id: job.id, header: out === null ? ${HEADER_RAW} : ${HEADER_BROTLI}, body: out === null ? bytes : out });
    total += out === null ? bytes.length : out.length;
  }
  const buf = new Uint8Array(total);
  let at = 0;
  const results = outs.map((o) => {
    if (o.error !== undefined) return o;
    buf.set(o.body, at);
    const r = { id: o.id, header: o.header, at, len: o.body.length };
    at += o.body.length;
    return r;
  });
  // The input buffer goes back too, to be reused for a later batch (fresh memory costs page faults).
  parentPort.postMessage({ buf: buf.buffer, input: m.buf, results }, [buf.buffer, m.buf]);
});
`;

interface Job {
  resolve: (e: Encoded) => void;
  reject: (err: Error) => void;
  bytes: number;
}

interface Slot {
  worker: Worker;
  jobs: Map<number, Job>;
  queuedBytes: number;
}

/** A message carries blobs until it holds this many bytes (or the event loop turns): one postMessage per blob cost ~20 µs each. */
const BATCH_BYTES = 256 * 1024;
/** Arenas kept for reuse: fresh memory costs a page fault per 4 KiB on first write (~22k for 90 MB). Bounds what a pool holds. */
const SPARE_ARENAS = 32;

/**
 * Worker threads that encode blob bodies. Blobs are sent in batches to the worker
 * with the fewest queued bytes. `close()` terminates them; a pool is meant to live
 * for one bulk scan.
 */
export class CompressPool {
  private readonly slots: Slot[] = [];
  private nextId = 0;
  private failed: Error | null = null;
  private batch: { id: number; at: number; len: number; job: Job }[] = [];
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
      const slot: Slot = { worker: new Worker(WORKER_SOURCE, { eval: true, execArgv: [] }), jobs: new Map(), queuedBytes: 0 };
      slot.worker.on('message', ({ buf, input, results }: { buf: ArrayBuffer; input: ArrayBuffer; results: { id: number; header?: number; at?: number; len?: number; error?: string }[] }) => {
        if (this.spare.length < SPARE_ARENAS && input.byteLength >= BATCH_BYTES * 2) this.spare.push(Buffer.from(input));
        for (const m of results) {
          const job = slot.jobs.get(m.id);
          if (!job) continue;
          slot.jobs.delete(m.id);
          slot.queuedBytes -= job.bytes;
          if (m.error !== undefined) job.reject(new Error(`[snapshot] compression worker: ${m.error}`));
          else job.resolve({ header: m.header!, body: Buffer.from(buf, m.at!, m.len!) });
        }
      });
      const fail = (err: Error) => {
        this.failed ??= err;
        for (const job of slot.jobs.values()) job.reject(err);
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

  /** Bytes sent to workers (or batched for them) and not yet returned. */
  get queuedBytes(): number {
    let n = this.batchBytes;
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
      this.batch.push({ id: this.nextId++, at, len: bytes.length, job: { resolve, reject, bytes: bytes.length } });
      if (this.batchBytes >= BATCH_BYTES) this.send();
      else if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => {
          this.flushScheduled = false;
          this.send();
        });
      }
    });
  }

  private send(): void {
    if (this.batch.length === 0) return;
    const batch = this.batch;
    // The arena itself goes to the worker (transferred, not copied); a fresh one takes its place.
    const buf = this.arena.buffer as ArrayBuffer;
    this.arena = this.spare.pop() ?? Buffer.allocUnsafeSlow(BATCH_BYTES * 2);
    this.batch = [];
    this.batchBytes = 0;
    let slot = this.slots[0]!;
    for (const s of this.slots) if (s.queuedBytes < slot.queuedBytes) slot = s;
    for (const b of batch) {
      slot.jobs.set(b.id, b.job);
      slot.queuedBytes += b.job.bytes;
    }
    slot.worker.postMessage({ quality: this.quality, buf, jobs: batch.map((b) => ({ id: b.id, at: b.at, len: b.len })) }, [buf]);
  }

  async close(): Promise<void> {
    await Promise.all(this.slots.map((s) => s.worker.terminate()));
  }
}
