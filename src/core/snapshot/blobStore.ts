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
   * 'immediate' (default): every `put` fsyncs its file and directory before resolving.
   * 'deferred': `put` only writes + renames; the caller MUST `flush()` before recording
   * any reference to the blobs. Used for scans, where one batch barrier is far cheaper
   * than thousands of fsyncs.
   */
  durability?: 'immediate' | 'deferred';
  /** zlib level; 1 is fast and within a few % of the default's ratio on source code. */
  compressionLevel?: number;
}

export class BlobStore {
  readonly dir: string;
  private readonly durability: 'immediate' | 'deferred';
  private readonly level: number;
  private readonly knownFanout = new Set<string>();
  private pendingFiles: string[] = [];
  private readonly pendingDirs = new Set<string>();

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
    try {
      await fs.access(this.pathOf(hash));
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
  }

  /** Stored size in bytes, or null when absent. */
  async sizeOf(hash: string): Promise<number | null> {
    try {
      return (await fs.stat(this.pathOf(hash))).size;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }

  async put(bytes: Uint8Array, knownHash?: string): Promise<PutResult> {
    const hash = knownHash ?? sha256Hex(bytes);
    const target = this.pathOf(hash);
    const existing = await this.sizeOf(hash);
    // Existing objects are never rewritten: content addressing makes them identical.
    if (existing !== null) return { hash, storedBytes: existing, isNew: false };

    let body: Uint8Array = bytes;
    let header = HEADER_RAW;
    if (bytes.length >= MIN_COMPRESS_BYTES) {
      const deflated = await deflateRaw(bytes, { level: this.level });
      // Only keep compression when it saves at least ~10 %: incompressible content
      // (images, archives) is stored as is and reads back without inflating.
      if (deflated.length <= bytes.length * 0.9) {
        body = deflated;
        header = HEADER_DEFLATE;
      }
    }
    const fanout = path.dirname(target);
    await this.ensureFanout(fanout);
    const tmp = path.join(this.dir, `${TEMP_PREFIX}${randomBytes(8).toString('hex')}`);
    const fh = await fs.open(tmp, 'wx', 0o644);
    try {
      await fh.writev([Buffer.of(header), body]);
      if (this.durability === 'immediate') await fh.sync();
    } catch (err) {
      await fh.close().catch(() => {});
      await fs.rm(tmp, { force: true });
      throw err;
    }
    await fh.close();
    await fs.rename(tmp, target);
    if (this.durability === 'immediate') {
      await fsyncDir(fanout);
    } else {
      this.pendingFiles.push(target);
      this.pendingDirs.add(fanout);
    }
    return { hash, storedBytes: body.length + 1, isNew: true };
  }

  /** Reads and stores a file's content. */
  async putFile(absPath: string): Promise<PutResult> {
    return this.put(await fs.readFile(absPath));
  }

  async get(hash: string): Promise<Buffer> {
    let raw: Buffer;
    try {
      raw = await fs.readFile(this.pathOf(hash));
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
      raw = fss.readFileSync(this.pathOf(hash));
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
    return fss.existsSync(this.pathOf(hash));
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

  /** Removes temp files a crash left behind. Returns how many were removed. */
  async sweepTemp(): Promise<number> {
    let names: string[];
    try {
      names = await fs.readdir(this.dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      throw err;
    }
    let n = 0;
    for (const name of names) {
      if (!name.startsWith(TEMP_PREFIX)) continue;
      await fs.rm(path.join(this.dir, name), { force: true });
      n++;
    }
    return n;
  }

  /**
   * Makes every blob written since the last flush durable (deferred mode). On Linux a
   * large batch uses one syncfs(2) (`sync -f`) instead of thousands of fsyncs; elsewhere,
   * or if that fails, each file and fan-out directory is fsynced.
   */
  async flush(): Promise<void> {
    const files = this.pendingFiles;
    const dirs = [...this.pendingDirs];
    this.pendingFiles = [];
    this.pendingDirs.clear();
    if (files.length === 0) return;
    if (process.platform === 'linux' && files.length > 32) {
      try {
        await execFileP('sync', ['-f', this.dir]);
        return;
      } catch {
        // fall through to per-file fsync
      }
    }
    await forEachLimit(files, 16, fsyncFile);
    await forEachLimit([...dirs, this.dir], 16, fsyncDir);
  }

  private async ensureFanout(fanout: string): Promise<void> {
    if (this.knownFanout.has(fanout)) return;
    await fs.mkdir(fanout, { recursive: true });
    // A new fan-out directory's own entry in <dir> must be durable too.
    if (this.durability === 'immediate') await fsyncDir(this.dir);
    else this.pendingDirs.add(this.dir);
    this.knownFanout.add(fanout);
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
