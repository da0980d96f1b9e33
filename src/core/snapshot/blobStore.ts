/**
 * Content-addressed blob store: `<dir>/ab/cdef…` where `abcdef…` is the SHA-256
 * hex of the raw content. Each object file starts with a 1-byte header saying how
 * the rest is encoded, so compression can be decided per blob:
 *   0x00 raw, 0x01 raw-deflate.
 * Objects are written to a temp file in `<dir>`, renamed into place, and made
 * durable before `put` resolves (or, in deferred mode, before `flush` resolves),
 * so nothing can refer to a blob that a crash could lose.
 */
import { createHash, randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import fss from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import zlib from 'node:zlib';

const deflateRaw = promisify(zlib.deflateRaw);
const inflateRaw = promisify(zlib.inflateRaw);
const execFileP = promisify(execFile);

const HEADER_RAW = 0x00;
const HEADER_DEFLATE = 0x01;
const HASH_RE = /^[0-9a-f]{64}$/;
const TEMP_PREFIX = 'tmp-';
/** Blobs smaller than this are stored raw: compression cannot pay for its header. */
const MIN_COMPRESS_BYTES = 64;

export class BlobNotFoundError extends Error {
  constructor(readonly hash: string) {
    super(`blob ${hash} is not in the store`);
    this.name = 'BlobNotFoundError';
  }
}

export class CorruptBlobError extends Error {
  constructor(readonly hash: string, detail: string) {
    super(`blob ${hash} is corrupt: ${detail}`);
    this.name = 'CorruptBlobError';
  }
}

export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

export function assertHash(hash: string): void {
  if (typeof hash !== 'string' || !HASH_RE.test(hash)) {
    throw new Error(`invalid blob hash ${JSON.stringify(String(hash).slice(0, 80))}: expected 64 lowercase hex characters`);
  }
}

export interface PutResult {
  hash: string;
  /** Bytes the object occupies in the store (header included). */
  storedBytes: number;
  /** False when identical content was already stored (nothing was written). */
  isNew: boolean;
}

export interface BlobStoreOptions {
  /**
   * 'immediate' (default): every `put` writes a temp file, fsyncs it, renames it into
   * place and fsyncs the directory before resolving.
   * 'deferred': `put` only writes the temp file; `flush()` makes the whole batch
   * durable (fsync every temp, rename, fsync the directories) and only then gives the
   * blobs their names. A named blob therefore always has durable content, even after
   * a crash, so later dedup can trust it. Pending blobs are readable (`get`, `has`)
   * by this instance before the flush. The caller MUST `flush()` before recording
   * any reference to a blob (`scan` and `ManifestStore.save` do).
   */
  durability?: 'immediate' | 'deferred';
  /** zlib level; 1 is fast and within a few % of the default's ratio on source code. */
  compressionLevel?: number;
}

interface PendingBlob {
  tmp: string;
  storedBytes: number;
}

/** Above this many pending blobs, one syncfs(2) beats per-file fsyncs (Linux only). */
const SYNCFS_THRESHOLD = 256;

export class BlobStore {
  readonly dir: string;
  private readonly durability: 'immediate' | 'deferred';
  private readonly level: number;
  private readonly knownFanout = new Set<string>();
  private readonly pending = new Map<string, PendingBlob>();
  private dirReady = false;

  constructor(dir: string, opts: BlobStoreOptions = {}) {
    this.dir = path.resolve(dir);
    this.durability = opts.durability ?? 'immediate';
    this.level = opts.compressionLevel ?? 1;
  }

  pathOf(hash: string): string {
    assertHash(hash);
    return path.join(this.dir, hash.slice(0, 2), hash.slice(2));
  }

  async has(hash: string): Promise<boolean> {
    return (await this.sizeOf(hash)) !== null;
  }

  /** Stored size in bytes, or null when absent. */
  async sizeOf(hash: string): Promise<number | null> {
    const file = this.pathOf(hash);
    const p = this.pending.get(hash);
    if (p) return p.storedBytes;
    // stat is metadata-only: sync avoids a thread-pool round trip per blob.
    return fss.statSync(file, { throwIfNoEntry: false })?.size ?? null;
  }

  /**
   * Stores `bytes` under their SHA-256. `inline` compresses on the calling thread:
   * faster for a handful of blobs (no thread-pool round trip), slower for a bulk
   * scan, where pool compression overlaps with hashing on another core.
   */
  async put(bytes: Uint8Array, opts: { inline?: boolean } = {}): Promise<PutResult> {
    const hash = sha256Hex(bytes);
    const existing = await this.sizeOf(hash);
    // Existing objects are never rewritten: content addressing makes them identical.
    if (existing !== null) return { hash, storedBytes: existing, isNew: false };

    let body: Uint8Array = bytes;
    let header = HEADER_RAW;
    if (bytes.length >= MIN_COMPRESS_BYTES) {
      const deflated = opts.inline ? zlib.deflateRawSync(bytes, { level: this.level }) : await deflateRaw(bytes, { level: this.level });
      // Only keep compression when it saves at least ~10 %: incompressible content
      // (images, archives) is stored as is and reads back without inflating.
      if (deflated.length <= bytes.length * 0.9) {
        body = deflated;
        header = HEADER_DEFLATE;
      }
    }
    // Another put of the same content may have finished while we compressed.
    if (this.pending.has(hash)) return { hash, storedBytes: this.pending.get(hash)!.storedBytes, isNew: false };
    if (!this.dirReady) {
      await fs.mkdir(this.dir, { recursive: true });
      this.dirReady = true;
    }
    const tmp = path.join(this.dir, `${TEMP_PREFIX}${randomBytes(8).toString('hex')}`);
    const storedBytes = body.length + 1;
    if (this.durability === 'deferred') {
      // Small synchronous write: cheaper than three thread-pool round trips per blob.
      fss.writeFileSync(tmp, Buffer.concat([Buffer.of(header), body]), { flag: 'wx', mode: 0o644 });
      this.pending.set(hash, { tmp, storedBytes });
      return { hash, storedBytes, isNew: true };
    }
    const fh = await fs.open(tmp, 'wx', 0o644);
    try {
      await fh.writev([Buffer.of(header), body]);
      await fh.sync();
    } catch (err) {
      await fh.close().catch(() => {});
      await fs.rm(tmp, { force: true });
      throw err;
    }
    await fh.close();
    const target = this.pathOf(hash);
    await this.ensureFanout(path.dirname(target), true);
    await fs.rename(tmp, target);
    await fsyncDir(path.dirname(target));
    return { hash, storedBytes, isNew: true };
  }

  /** Reads and stores a file's content. */
  async putFile(absPath: string): Promise<PutResult> {
    return this.put(await fs.readFile(absPath));
  }

  async get(hash: string): Promise<Buffer> {
    let raw: Buffer;
    try {
      raw = await fs.readFile(this.pending.get(hash)?.tmp ?? this.pathOf(hash));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new BlobNotFoundError(hash);
      throw err;
    }
    if (raw.length === 0) throw new CorruptBlobError(hash, 'empty object file');
    const header = raw[0];
    const body = raw.subarray(1);
    if (header === HEADER_RAW) return body;
    if (header === HEADER_DEFLATE) {
      try {
        return await inflateRaw(body);
      } catch (err) {
        throw new CorruptBlobError(hash, `cannot inflate (${(err as Error).message})`);
      }
    }
    throw new CorruptBlobError(hash, `unknown header byte ${header}`);
  }

  /** Synchronous `get`, for restore's tight loop (small files; avoids thread-pool round trips). */
  getSync(hash: string): Buffer {
    let raw: Buffer;
    try {
      raw = fss.readFileSync(this.pending.get(hash)?.tmp ?? this.pathOf(hash));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new BlobNotFoundError(hash);
      throw err;
    }
    if (raw.length === 0) throw new CorruptBlobError(hash, 'empty object file');
    const header = raw[0];
    if (header === HEADER_RAW) return raw.subarray(1);
    if (header === HEADER_DEFLATE) {
      try {
        return zlib.inflateRawSync(raw.subarray(1));
      } catch (err) {
        throw new CorruptBlobError(hash, `cannot inflate (${(err as Error).message})`);
      }
    }
    throw new CorruptBlobError(hash, `unknown header byte ${header}`);
  }

  hasSync(hash: string): boolean {
    return this.pending.has(hash) || fss.existsSync(this.pathOf(hash));
  }

  /** Reads the blob back and checks that it still hashes to its name. */
  async verify(hash: string): Promise<boolean> {
    try {
      return sha256Hex(await this.get(hash)) === hash;
    } catch (err) {
      if (err instanceof CorruptBlobError || err instanceof BlobNotFoundError) return false;
      throw err;
    }
  }

  /** Deletes a blob (retention/GC). Absent blobs are fine: deleting is idempotent. */
  async delete(hash: string): Promise<void> {
    const p = this.pending.get(hash);
    if (p) {
      this.pending.delete(hash);
      await fs.rm(p.tmp, { force: true });
    }
    await fs.rm(this.pathOf(hash), { force: true });
  }

  async *list(): AsyncIterable<string> {
    let fanouts: string[];
    try {
      fanouts = await fs.readdir(this.dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    for (const f of fanouts.sort()) {
      if (!/^[0-9a-f]{2}$/.test(f)) continue;
      for (const rest of (await fs.readdir(path.join(this.dir, f))).sort()) {
        const hash = f + rest;
        if (HASH_RE.test(hash)) yield hash;
      }
    }
  }

  /** Removes temp files a crash left behind (not this instance's pending ones). Returns how many were removed. */
  async sweepTemp(): Promise<number> {
    let names: string[];
    try {
      names = await fs.readdir(this.dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      throw err;
    }
    const mine = new Set([...this.pending.values()].map((p) => path.basename(p.tmp)));
    let n = 0;
    for (const name of names) {
      if (!name.startsWith(TEMP_PREFIX) || mine.has(name)) continue;
      await fs.rm(path.join(this.dir, name), { force: true });
      n++;
    }
    return n;
  }

  /** Blobs written but not yet flushed (deferred mode). */
  get pendingCount(): number {
    return this.pending.size;
  }

  /**
   * Makes every pending blob durable, then names it: fsync each temp file, rename it
   * into its fan-out directory, fsync the directories. On Linux a large batch uses
   * syncfs(2) (`sync -f`) for each of the two barriers instead of thousands of fsyncs;
   * elsewhere, or if that fails, files and directories are fsynced concurrently.
   */
  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = [...this.pending.entries()];
    const useSyncfs = process.platform === 'linux' && batch.length > SYNCFS_THRESHOLD && (await syncfs(this.dir));
    if (!useSyncfs) await forEachLimit(batch, 32, async ([, p]) => fsyncFile(p.tmp));
    const dirs = new Set<string>();
    for (const [hash, p] of batch) {
      const target = this.pathOf(hash);
      const fanout = path.dirname(target);
      if (await this.ensureFanout(fanout, false)) dirs.add(this.dir);
      fss.renameSync(p.tmp, target);
      dirs.add(fanout);
      this.pending.delete(hash);
    }
    if (!(useSyncfs && (await syncfs(this.dir)))) await forEachLimit([...dirs], 32, fsyncDir);
  }

  /** Creates a fan-out directory if needed; returns true when it was created. */
  private async ensureFanout(fanout: string, durableNow: boolean): Promise<boolean> {
    if (this.knownFanout.has(fanout)) return false;
    let created = false;
    try {
      await fs.mkdir(fanout);
      created = true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    // A new fan-out directory's own entry in <dir> must be durable too.
    if (created && durableNow) await fsyncDir(this.dir);
    this.knownFanout.add(fanout);
    return created;
  }
}

async function syncfs(dir: string): Promise<boolean> {
  try {
    await execFileP('sync', ['-f', dir]);
    return true;
  } catch {
    return false;
  }
}

async function fsyncFile(file: string): Promise<void> {
  const fh = await fs.open(file, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

async function fsyncDir(dir: string): Promise<void> {
  // Directory fsync is not supported on Windows; the rename is as durable as it gets there.
  if (process.platform === 'win32') return;
  const fh = await fs.open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Runs `fn` over `items` with at most `limit` in flight. */
export async function forEachLimit<T>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i]!, i);
    }
  });
  await Promise.all(workers);
}
