/**
 * Content-addressed blob store: `<dir>/ab/cdef…` where `abcdef…` is the SHA-256
 * hex of the raw content. Each object file starts with a 1-byte header saying how
 * the rest is encoded, so compression can be decided per blob:
 *   0x00 raw, 0x01 raw-deflate (written by earlier versions), 0x02 brotli,
 *   0x03 raw awaiting compaction (see compressPool.ts and `compact`), 0x04 a delta
 *   against another object of the same pack (written by `compact`).
 * Objects are written to a temp file in `<dir>`, renamed into place, and made
 * durable before `put` resolves. In deferred mode a batch of new objects goes into
 * one pack file instead (`<dir>/pack/`, see packFile.ts), made durable and named
 * before `flush` resolves. Either way nothing can refer to a blob a crash could lose.
 */
import crypto, { createHash, randomBytes } from 'node:crypto';
import fss from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import zlib from 'node:zlib';
import { COMPACT_QUALITY, CompressPool, DEFAULT_QUALITY, HEADER_BROTLI, HEADER_DEFLATE, HEADER_DELTA, HEADER_PENDING, HEADER_RAW, MIN_COMPRESS_BYTES, applyDeltaObject, decodeObject, deltaBase, encodeBody, type Encoded } from './compressPool.js';
import { MAX_PACK_BYTES, PACK_RE, PACK_TEMP_PREFIX, PackWriter, WorkerPack, findInRawIndex, isUncompactedPack, readPackIndex, readPackObject, readRawPackIndex, type PackEntry, type PendingPack } from './packFile.js';

const HASH_RE = /^[0-9a-f]{64}$/;
/** Sizes above this are decoded in chunks as without a size (a manifest's size is a hint, not trusted for one allocation). */
const MAX_SIZED_DECODE = 64 * 1024 * 1024;
const TEMP_PREFIX = 'tmp-';
/** Compaction keeps at most this many bytes on the compression workers at once. */
const COMPACT_INFLIGHT_BYTES = 8 * 1024 * 1024;
/** Compaction sends a stream's objects to its worker this many bytes at a time. */
const COMPACT_MESSAGE_BYTES = 512 * 1024;
/** Bytes of decoded delta bases a batch reader keeps (oldest dropped first). */
const BATCH_BASE_BYTES = 8 * 1024 * 1024;

/** A batch reader's decoded delta bases, oldest first. */
interface DecodedBases {
  map: Map<string, Buffer>;
  bytes: number;
}
/** A delta chain longer than this is damage (compaction writes at most MAX_DELTA_DEPTH, a rewrite may add a few): reading stops. */
const MAX_READ_DEPTH = 64;

export interface CompactOptions {
  /**
   * A path for a blob, where the caller knows one (the checkpoint that stored it):
   * objects are tried as deltas against others in order of their names, as git's
   * pack-objects does (same file names in different folders, copies of one
   * library, .cjs beside .mjs). Without names they are ordered by size only, which
   * finds far fewer similar pairs.
   */
  nameOf?: (hash: string) => string | undefined;
  /**
   * Asked before each batch of objects: true ends the compaction there (CompactionStopped),
   * its partial pack removed and the raw packs left as they were, as a crash would leave
   * them (the next compaction does it all). An owner handing its store over does not make
   * the one who takes it wait for this.
   */
  shouldStop?: () => boolean;
}

/** A compaction ended early because its caller asked (CompactOptions.shouldStop). */
export class CompactionStopped extends Error {
  constructor() {
    super('the compaction was stopped; the content stays stored raw');
  }
}

/** What one `compact()` did. */
export interface CompactResult {
  packs: number;
  objects: number;
  bytesBefore: number;
  bytesAfter: number;
}

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

/** One-shot `crypto.hash` (Node ≥ 20.12) is about twice as fast as a Hash object for source-sized input. */
const oneShot = (crypto as { hash?: (alg: string, data: Uint8Array, enc: 'hex') => string }).hash;

export function sha256Hex(bytes: Uint8Array): string {
  return oneShot ? oneShot('sha256', bytes, 'hex') : createHash('sha256').update(bytes).digest('hex');
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
   * 'deferred': `put` appends the object to a pack being written; `flush()` makes
   * the whole batch durable (one fdatasync of the pack with its index, one rename,
   * one directory fsync) and only then gives the blobs their names. A named blob
   * therefore always has durable content, even after a crash, so later dedup can
   * trust it. Pending blobs are readable (`get`, `has`) by this instance before the
   * flush. The caller MUST `flush()` before recording any reference to a blob
   * (`scan` and `ManifestStore.save` do).
   */
  durability?: 'immediate' | 'deferred';
  /** Brotli quality; 1 is fast and as small as deflate level 1 on source code (see compressPool.ts). */
  compressionLevel?: number;
}

/** See `BlobStore.batchReader`. */
export interface BlobReader {
  /** The blob's content, as `getSync`. `size`: its size if known (a manifest's), which saves copies. */
  get(hash: string, size?: number): Buffer;
  close(): void;
}

interface PendingBlob {
  writer: PendingPack;
  entry: PackEntry;
}

interface PackedBlob {
  pack: string;
  entry: PackEntry;
}

const PACK_DIR = 'pack';
/** Dedup lookups answered from raw pack indexes before they are loaded whole (see dedupProbe). */
const PROBES_BEFORE_LOAD = 64;
/** Private to the user: objects are copies of workspace files, some readable by their owner only. */
const FILE_MODE = 0o600;
const DIR_MODE = 0o700;

export class BlobStore {
  readonly dir: string;
  private readonly durability: 'immediate' | 'deferred';
  private readonly level: number;
  private readonly knownFanout = new Set<string>();
  private readonly pending = new Map<string, PendingBlob>();
  /** Packs being written by this instance (one, unless a batch outgrows MAX_PACK_BYTES). */
  private writers: PackWriter[] = [];
  /** Packs compression-pool workers write for this instance (see WorkerPack), until flushed or abandoned. */
  private workerPacks: WorkerPack[] = [];
  /** Named packs' indexes, loaded lazily and refreshed when the pack directory changes. */
  private readonly packed = new Map<string, PackedBlob>();
  private readonly packsLoaded = new Set<string>();
  private packDirMtime = -1;
  /** Named packs whose index would not read (damage); their blobs count as missing. */
  readonly damagedPacks: { name: string; reason: string }[] = [];
  private dirReady = false;
  /** Bodies being encoded on a pool, by hash: a second put of the same content waits instead of encoding it again. */
  private readonly encoding = new Map<string, Promise<Encoded>>();
  private flushing: Promise<void> = Promise.resolve();
  /** Pack rewrites (compaction, deletion), one at a time: both replace a pack by a new one. */
  private maintaining: Promise<unknown> = Promise.resolve();

  constructor(dir: string, opts: BlobStoreOptions = {}) {
    this.dir = path.resolve(dir);
    this.durability = opts.durability ?? 'immediate';
    this.level = opts.compressionLevel ?? DEFAULT_QUALITY;
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
    return this.sizeOfSync(hash);
  }

  /**
   * `recheck` false (dedup in `put`): packs are loaded once, but a miss does not look
   * for packs named since by another instance; at worst that stores a duplicate,
   * and it saves a directory stat per new blob in a bulk checkpoint.
   */
  private sizeOfSync(hash: string, recheck = true): number | null {
    assertHash(hash);
    const p = this.pending.get(hash);
    if (p) return p.entry.length;
    const inPack = recheck ? this.packedEntry(hash) : (this.packed.get(hash) ?? this.dedupProbe(hash));
    if (inPack) return inPack.entry.length;
    // Dedup in a bulk put: stores written in deferred mode have no loose objects; a
    // stat per new blob (13k in a first checkpoint) is skipped when the fan-out
    // directory is not there (listed once; a loose object added since by another
    // instance at worst gets a duplicate in a pack).
    if (!recheck && !this.looseFanouts().has(hash.slice(0, 2))) return null;
    // stat is metadata-only: sync avoids a thread-pool round trip per blob.
    return fss.statSync(this.pathOf(hash), { throwIfNoEntry: false })?.size ?? null;
  }

  /**
   * Dedup (`recheck` false) before the packs' indexes are loaded: the few puts of a
   * small checkpoint search the raw indexes (readRawPackIndex) instead of decoding
   * every entry of every pack into `packed` (50,000 objects for ten lookups, a tenth
   * of a fresh process's checkpoint). Past PROBES_BEFORE_LOAD lookups (a bulk
   * checkpoint) the indexes are loaded as before. Same answers either way: a pack
   * named since is not looked for (see sizeOfSync), a damaged one is skipped here and
   * recorded when the indexes are loaded.
   */
  private dedupProbe(hash: string): PackedBlob | undefined {
    if (this.packDirMtime !== -1) return undefined; // loaded: `packed` answered
    if (++this.probes > PROBES_BEFORE_LOAD) {
      this.rawIndexes = null;
      this.refreshPacks();
      return this.packed.get(hash);
    }
    if (!this.rawIndexes) {
      this.rawIndexes = [];
      const dir = path.join(this.dir, PACK_DIR);
      let names: string[] = [];
      try {
        names = fss.readdirSync(dir);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
      for (const name of names) {
        if (!PACK_RE.test(name)) continue;
        const file = path.join(dir, name);
        try {
          this.rawIndexes.push({ file, ...readRawPackIndex(file) });
        } catch {
          // Damage: recorded in damagedPacks when the indexes are loaded; its blobs read as missing meanwhile, as there.
        }
      }
    }
    const needle = Buffer.from(hash, 'hex');
    // A compacted copy is preferred to a raw one, as refreshPacks maps it.
    let found: PackedBlob | undefined;
    for (const raw of this.rawIndexes) {
      let entry: PackEntry | null;
      try {
        entry = findInRawIndex(raw, needle);
      } catch {
        continue;
      }
      if (!entry) continue;
      found = { pack: raw.file, entry };
      if (!isUncompactedPack(path.basename(raw.file))) break;
    }
    return found;
  }

  /**
   * Loads every named pack's index into memory now, for a long-lived owner: its dedup
   * lookups then answer from a map (not a search of raw indexes, ~0.3 ms a miss on 50,000
   * objects), and the load that PROBES_BEFORE_LOAD would otherwise trigger in the middle of
   * some later checkpoint (~100 ms on 50,000 objects) happens while nobody waits for it.
   */
  loadIndexes(): void {
    if (this.packDirMtime !== -1) return;
    this.rawIndexes = null;
    this.refreshPacks();
  }

  /** Whether the packs' indexes are in memory (loadIndexes, or past PROBES_BEFORE_LOAD lookups). */
  get indexesLoaded(): boolean {
    return this.packDirMtime !== -1;
  }

  private rawIndexes: { file: string; index: Buffer; indexOffset: number }[] | null = null;
  private probes = 0;

  private looseFanoutNames: Set<string> | null = null;

  private looseFanouts(): Set<string> {
    if (!this.looseFanoutNames) {
      let names: string[] = [];
      try {
        names = fss.readdirSync(this.dir);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
      this.looseFanoutNames = new Set(names.filter((n) => /^[0-9a-f]{2}$/.test(n)));
    }
    return this.looseFanoutNames;
  }

  /** Where a named packed blob lives; re-reads the pack directory if it changed since the last look. */
  private packedEntry(hash: string): PackedBlob | undefined {
    return this.packed.get(hash) ?? (this.refreshPacks() ? this.packed.get(hash) : undefined);
  }

  /** Drops a pack that is gone (rewritten by another instance's GC) so a refresh finds where its blobs went. */
  private forgetPack(file: string): void {
    for (const [h, b] of this.packed) if (b.pack === file) this.packed.delete(h);
    this.packsLoaded.delete(path.basename(file));
    this.packDirMtime = -1;
    this.rawIndexes = null;
  }

  /**
   * Loads the indexes of packs not seen yet. Cheap when nothing changed: one stat of
   * the pack directory (re-listed when its mtime moved, or is too recent to trust on
   * a file system with coarse timestamps). Returns whether anything new was loaded.
   */
  private refreshPacks(): boolean {
    const dir = path.join(this.dir, PACK_DIR);
    const st = fss.statSync(dir, { throwIfNoEntry: false });
    if (!st) return false;
    // Whole-second mtimes suggest a coarse file system: a pack named within the same tick would not move it.
    if (st.mtimeMs === this.packDirMtime && (st.mtimeMs % 1000 !== 0 || Date.now() - st.mtimeMs > 2000)) return false;
    this.packDirMtime = st.mtimeMs;
    let added = false;
    const names = fss.readdirSync(dir);
    // Packs gone since they were loaded (another instance's GC rewrote them) are dropped
    // first: their blobs must map to the packs that replaced them, listed here.
    const present = new Set(names);
    for (const name of [...this.packsLoaded]) {
      if (present.has(name)) continue;
      const file = path.join(dir, name);
      for (const [h, b] of this.packed) if (b.pack === file) this.packed.delete(h);
      this.packsLoaded.delete(name);
    }
    for (const name of names) {
      if (!PACK_RE.test(name) || this.packsLoaded.has(name)) continue;
      const file = path.join(dir, name);
      this.packsLoaded.add(name);
      let entries: PackEntry[];
      try {
        entries = readPackIndex(file);
      } catch (err) {
        // Named packs are written whole before their rename, so this is damage. Its blobs
        // read as missing (verify reports them) and are stored afresh by the next scan.
        this.damagedPacks.push({ name, reason: (err as Error).message });
        continue;
      }
      // A blob in a raw pack and in a compacted one (a crash between compaction's two
      // steps) maps to the compacted copy: smaller to read, and compaction skips it.
      const compacted = !isUncompactedPack(name);
      for (const entry of entries) {
        const known = this.packed.get(entry.hash);
        if (!known || (compacted && isUncompactedPack(path.basename(known.pack)))) this.packed.set(entry.hash, { pack: file, entry });
      }
      added = true;
    }
    return added;
  }

  /**
   * Stores `bytes` under their SHA-256. The body is encoded on `pool`'s worker
   * threads when one is given (bulk scans), else on the calling
   * thread, which for a handful of blobs beats any hand-off. `transient`: the caller
   * reuses the memory of `bytes` once this returns its promise. `inline` is accepted
   * for callers written against the earlier thread-pool path; encoding is inline
   * either way without a pool. `defer` (deferred mode): stored raw, for `compact` to
   * compress later (what a bulk checkpoint does, so it is durable sooner).
   */
  async put(bytes: Uint8Array, opts: { inline?: boolean; pool?: CompressPool; transient?: boolean; defer?: boolean } = {}): Promise<PutResult> {
    const hash = sha256Hex(bytes);
    const existing = this.sizeOfSync(hash, false);
    // Existing objects are never rewritten: content addressing makes them identical.
    if (existing !== null) return { hash, storedBytes: existing, isNew: false };
    // The same content being encoded for another put (a copied file in a bulk scan).
    const encoding = this.encoding.get(hash);
    // `transient` bytes are only valid until this call returns its promise: keep a
    // copy if they are needed after an await (deferred mode otherwise consumes them
    // synchronously: the pool copies them into its message, a pack appends them).
    if (opts.transient && (encoding || this.durability !== 'deferred')) bytes = Buffer.from(bytes);
    if (encoding) {
      await encoding;
      const size = this.sizeOfSync(hash, false);
      if (size !== null) return { hash, storedBytes: size, isNew: false };
    }

    let enc: Encoded;
    if (opts.defer && this.durability === 'deferred' && bytes.length >= MIN_COMPRESS_BYTES) {
      enc = { header: HEADER_PENDING, body: bytes };
    } else if (opts.pool) {
      const p = opts.pool.encode(bytes);
      this.encoding.set(hash, p);
      try {
        enc = await p;
      } finally {
        this.encoding.delete(hash);
      }
    } else {
      enc = encodeBody(bytes, this.level);
    }
    return this.storeEncoded(hash, enc);
  }

  /**
   * Stores content already hashed and encoded elsewhere (a scan worker read, hashed
   * and compressed the file). `hash` must be the SHA-256 of the decoded content: the
   * caller computed it from the bytes it encoded. Deduplicates like `put`.
   */
  async putEncoded(hash: string, enc: Encoded): Promise<PutResult> {
    const existing = this.sizeOfSync(hash, false);
    if (existing !== null) return { hash, storedBytes: existing, isNew: false };
    return this.storeEncoded(hash, enc);
  }

  private async storeEncoded(hash: string, enc: Encoded): Promise<PutResult> {
    // Only packs are compacted: a loose object is encoded for good now.
    if (enc.header === HEADER_PENDING && this.durability !== 'deferred') enc = encodeBody(enc.body, this.level);
    const body = enc.body;
    const header = enc.header;
    // Another put of the same content may have finished while we compressed.
    if (this.pending.has(hash)) return { hash, storedBytes: this.pending.get(hash)!.entry.length, isNew: false };
    if (!this.dirReady) {
      fss.mkdirSync(this.dir, { recursive: true, mode: DIR_MODE });
      this.dirReady = true;
    }
    const storedBytes = body.length + 1;
    if (this.durability === 'deferred') {
      // Appended synchronously to this batch's pack: no file creation per blob.
      const writer = this.packWriter(storedBytes);
      if (header === HEADER_PENDING) writer.uncompacted = true;
      this.pending.set(hash, { writer, entry: writer.append(hash, header, body) });
      return { hash, storedBytes, isNew: true };
    }
    const tmp = path.join(this.dir, `${TEMP_PREFIX}${randomBytes(8).toString('hex')}`);
    const fh = await fs.open(tmp, 'wx', FILE_MODE);
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
    this.looseFanoutNames?.add(hash.slice(0, 2));
    await fs.rename(tmp, target);
    await fsyncDir(path.dirname(target));
    return { hash, storedBytes, isNew: true };
  }

  /** Whether new blobs go into packs made durable by `flush` (see BlobStoreOptions.durability). */
  get deferred(): boolean {
    return this.durability === 'deferred';
  }

  /** The pack directory, created (durably) if needed: where pool workers may write packs (`adoptWorkerPack`). Deferred mode only. */
  packDirForWorkers(): string {
    if (this.durability !== 'deferred') throw new Error('[snapshot] worker packs need a store in deferred mode');
    return this.ensurePackDir();
  }

  /** Takes on a pack a pool worker is writing in `packDirForWorkers()`: its objects become pending blobs via `putPacked`, named by `flush` once sealed. */
  adoptWorkerPack(tmp: string): WorkerPack {
    if (path.dirname(tmp) !== path.join(this.dir, PACK_DIR) || !path.basename(tmp).startsWith(PACK_TEMP_PREFIX)) throw new Error(`[snapshot] ${tmp} is not a pack temp of this store`);
    const pack = new WorkerPack(tmp);
    this.workerPacks.push(pack);
    return pack;
  }

  /**
   * Records an object a worker wrote to `pack` as a pending blob (flushed with the
   * rest). Content the store already holds, or that another pending pack holds, is
   * not recorded twice: that copy is left out of the pack's index.
   */
  putPacked(hash: string, pack: WorkerPack, entry: PackEntry): PutResult {
    // The worker computed it (a full assertHash per file is a regex run 13k times in a bulk scan).
    if (hash.length !== 64) assertHash(hash);
    const existing = this.sizeOfSync(hash, false);
    if (existing !== null) return { hash, storedBytes: existing, isNew: false };
    pack.add(entry);
    this.pending.set(hash, { writer: pack, entry });
    return { hash, storedBytes: entry.length, isNew: true };
  }

  /** Drops worker packs that will not be flushed (their scan failed): their pending blobs are forgotten and their files removed. */
  abandonWorkerPacks(packs: Iterable<WorkerPack>): void {
    const doomed = new Set(packs);
    if (doomed.size === 0) return;
    for (const [h, p] of this.pending) if (doomed.has(p.writer as WorkerPack)) this.pending.delete(h);
    this.workerPacks = this.workerPacks.filter((w) => !doomed.has(w));
    for (const w of doomed) {
      w.close();
      fss.rmSync(w.tmp, { force: true });
    }
  }

  /** Reads and stores a file's content. */
  async putFile(absPath: string): Promise<PutResult> {
    return this.put(await fs.readFile(absPath));
  }

  /** The stored object (header byte + body): pending, packed, or loose. `fds`: pack descriptors kept open for a batch. */
  private readRaw(hash: string, fds?: Map<string, number>): Buffer {
    assertHash(hash);
    const p = this.pending.get(hash);
    if (p) return p.writer.read(p.entry);
    const inPack = this.packed.get(hash);
    try {
      if (inPack) return readPackObject(inPack.pack, inPack.entry, fds);
      return fss.readFileSync(this.pathOf(hash));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EPACKSHORT') throw new CorruptBlobError(hash, (err as Error).message);
      if (code !== 'ENOENT') throw err;
    }
    // A pack named since we last looked (another instance flushed), or a pack rewritten by GC.
    if (inPack) this.forgetPack(inPack.pack);
    if (this.refreshPacks() || inPack) {
      const again = this.packed.get(hash);
      if (again && again !== inPack) return readPackObject(again.pack, again.entry, fds);
    }
    throw new BlobNotFoundError(hash);
  }

  async get(hash: string): Promise<Buffer> {
    return this.getSync(hash);
  }

  /**
   * Synchronous `get`: blobs are source-sized, and a thread-pool round trip per blob
   * costs more than the inflate (restore's tight loop, diff, verify).
   */
  getSync(hash: string): Buffer {
    return this.decode(hash, this.readRaw(hash));
  }

  /**
   * For many `getSync` calls in a row (a restore's preload): each pack file is opened
   * once for the batch instead of once per blob. Reads stay correct if a pack is
   * rewritten by GC meanwhile (see readPackObject). `close()` releases the packs.
   */
  batchReader(): BlobReader {
    const fds = new Map<string, number>();
    const bases: DecodedBases = { map: new Map(), bytes: 0 };
    return {
      get: (hash, size) => this.decode(hash, this.readRaw(hash, fds), size, fds, 0, bases),
      close: () => {
        for (const fd of fds.values()) fss.closeSync(fd);
        fds.clear();
        bases.map.clear();
        bases.bytes = 0;
      },
    };
  }

  private decode(hash: string, raw: Buffer, size?: number, fds?: Map<string, number>, depth = 0, bases?: DecodedBases): Buffer {
    if (raw.length === 0) throw new CorruptBlobError(hash, 'empty object file');
    if (raw[0] === HEADER_DELTA) return this.decodeDelta(hash, raw, fds, depth, bases);
    try {
      // Known size: brotli decodes into one buffer of that size (+1, so it never has
      // to look for more room) instead of 16 KB chunks concatenated at the end. The
      // floor keeps a wrong (too small) size from meaning thousands of tiny chunks.
      if (size !== undefined && raw[0] === HEADER_BROTLI && size < MAX_SIZED_DECODE) {
        return zlib.brotliDecompressSync(raw.subarray(1), { chunkSize: Math.max(4096, size + 1) });
      }
      return decodeObject(raw);
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      throw new CorruptBlobError(hash, e.code === 'EBADHEADER' ? e.message : `cannot decompress (${e.message})`);
    }
  }

  /**
   * A delta object: its base read and decoded first (the base lives in the same pack;
   * any copy of it is the same bytes). `bases`: a batch's decoded bases, since files
   * restored together often share them (the same file in several folders).
   */
  private decodeDelta(hash: string, raw: Buffer, fds: Map<string, number> | undefined, depth: number, bases?: DecodedBases): Buffer {
    let base: string;
    try {
      base = deltaBase(raw).base;
    } catch (err) {
      throw new CorruptBlobError(hash, (err as Error).message);
    }
    if (depth >= MAX_READ_DEPTH || base === hash) throw new CorruptBlobError(hash, `its delta chain is longer than ${MAX_READ_DEPTH} or loops`);
    let baseBytes = bases?.map.get(base);
    if (!baseBytes) {
      try {
        baseBytes = this.decode(base, this.readRaw(base, fds), undefined, fds, depth + 1, bases);
      } catch (err) {
        if (err instanceof BlobNotFoundError) throw new CorruptBlobError(hash, `the object it is a delta of (${base}) is missing`);
        if (err instanceof CorruptBlobError && err.hash !== hash) throw new CorruptBlobError(hash, `the object it is a delta of is damaged (${err.message})`);
        throw err;
      }
      if (bases && baseBytes.length <= BATCH_BASE_BYTES / 8) {
        bases.map.set(base, baseBytes);
        bases.bytes += baseBytes.length;
        for (const [h, b] of bases.map) {
          if (bases.bytes <= BATCH_BASE_BYTES) break;
          bases.map.delete(h);
          bases.bytes -= b.length;
        }
      }
    }
    try {
      return applyDeltaObject(raw, baseBytes);
    } catch (err) {
      throw new CorruptBlobError(hash, `cannot apply its delta (${(err as Error).message})`);
    }
  }

  hasSync(hash: string): boolean {
    return this.sizeOfSync(hash) !== null;
  }

  /**
   * Forgets what this instance learned about the directory (pack indexes, fan-out
   * listings): after objects were deleted behind its back (`rm -rf objects`), dedup
   * must not trust a pack it loaded before, or new checkpoints would refer to blobs
   * that are gone. Pending (unflushed) blobs are kept.
   */
  forgetLoadedState(): void {
    this.packed.clear();
    this.packsLoaded.clear();
    this.packDirMtime = -1;
    this.rawIndexes = null;
    this.looseFanoutNames = null;
    this.knownFanout.clear();
    this.dirReady = false;
    this.damagedPacks.length = 0;
  }

  /** Whether the blob is there and hashes to its name: 'ok', 'missing', or 'corrupt' (wrong content, undecodable, unreadable). */
  status(hash: string): 'ok' | 'missing' | 'corrupt' {
    if (!this.hasSync(hash)) return 'missing';
    try {
      return sha256Hex(this.getSync(hash)) === hash ? 'ok' : 'corrupt';
    } catch (err) {
      if (err instanceof BlobNotFoundError) return 'missing';
      if (err instanceof CorruptBlobError) return 'corrupt';
      const code = (err as NodeJS.ErrnoException).code;
      if (typeof code === 'string') return 'corrupt';
      throw err;
    }
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
    await this.deleteMany([hash]);
  }

  /**
   * Deletes blobs (retention/GC). A pack holding any of them is rewritten once with
   * its other objects (copied as stored, not recompressed): the new pack is durable
   * before the old one is removed, so a crash in between leaves a duplicate, never
   * a loss. Absent blobs are fine: deleting is idempotent.
   *
   * `fence` (the store's ownership check) runs before anything is deleted and again before
   * each old pack goes: blobs are shared by content, so a replaced owner deleting what its
   * own view no longer needs could delete what its successor's new checkpoints stored again.
   */
  deleteMany(hashes: Iterable<string>, fence: () => void = () => undefined): Promise<void> {
    const list = [...hashes];
    return this.maintain(() => this.deleteManyNow(list, fence));
  }

  /** Runs a pack rewrite after the ones before it. */
  private maintain<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.maintaining.then(fn, fn);
    this.maintaining = run.catch(() => undefined);
    return run;
  }

  private async deleteManyNow(hashes: string[], fence: () => void): Promise<void> {
    const doomed = new Set<string>();
    for (const h of hashes) {
      assertHash(h);
      doomed.add(h);
    }
    if (doomed.size === 0) return;
    fence();
    this.refreshPacks();
    const packs = new Set<string>();
    for (const h of doomed) {
      // Still in an unflushed pack: left out of its index, so never named.
      this.pending.delete(h);
      const inPack = this.packed.get(h);
      if (inPack) packs.add(inPack.pack);
      await fs.rm(this.pathOf(h), { force: true });
    }
    for (const pack of packs) {
      const keep = [...this.packed.values()].filter((b) => b.pack === pack && !doomed.has(b.entry.hash));
      if (keep.length) {
        const kept = new Set(keep.map((b) => b.entry.hash));
        // Each object's header (and a delta's base) without reading the objects whole.
        const fds = new Map<string, number>();
        const heads = keep.map((b) => {
          const head = readPackObject(pack, { ...b.entry, length: Math.min(b.entry.length, 37) }, fds);
          return { entry: b.entry, base: head[0] === HEADER_DELTA && head.length === 37 ? head.toString('hex', 1, 33) : null };
        });
        try {
          // Bases before their deltas, so that a delta is copied into the pack its base went to.
          // `base`: the hash a delta needs in its own pack (null: none; undefined: it goes, so the object is stored whole).
          const copy = (entry: PackEntry, base: string | null | undefined) => {
            const raw = readPackObject(pack, entry, fds);
            const writer = this.packWriter(raw.length);
            let header = raw[0]!;
            let body: Uint8Array = raw.subarray(1);
            if (base === undefined || (base !== null && this.pending.get(base)?.writer !== writer)) {
              // Stored whole, decoded while the old pack is still here.
              const enc = encodeBody(this.decode(entry.hash, raw, undefined, fds), this.level);
              header = enc.header;
              body = enc.body;
            }
            if (header === HEADER_PENDING) writer.uncompacted = true;
            this.pending.set(entry.hash, { writer, entry: writer.append(entry.hash, header, body) });
          };
          let waiting = heads.filter((h) => {
            if (h.base !== null && kept.has(h.base)) return true;
            copy(h.entry, h.base === null ? null : undefined);
            return false;
          });
          while (waiting.length) {
            const next = waiting.filter((h) => {
              if (!this.pending.has(h.base!)) return true;
              copy(h.entry, h.base);
              return false;
            });
            // A loop among bases (damage): the rest are stored whole, or fail to decode as they would to read.
            if (next.length === waiting.length) for (const h of next.splice(0)) copy(h.entry, undefined);
            waiting = next;
          }
        } finally {
          for (const fd of fds.values()) fss.closeSync(fd);
        }
        await this.flush();
      }
      fence();
      fss.rmSync(pack, { force: true });
      for (const [h, b] of this.packed) if (b.pack === pack) this.packed.delete(h);
      this.packsLoaded.delete(path.basename(pack));
    }
    if (packs.size) await fsyncDir(path.join(this.dir, PACK_DIR));
  }

  async *list(): AsyncIterable<string> {
    let fanouts: string[];
    try {
      fanouts = await fs.readdir(this.dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    const seen = new Set<string>();
    for (const f of fanouts.sort()) {
      if (!/^[0-9a-f]{2}$/.test(f)) continue;
      for (const rest of (await fs.readdir(path.join(this.dir, f))).sort()) {
        const hash = f + rest;
        if (HASH_RE.test(hash)) {
          seen.add(hash);
          yield hash;
        }
      }
    }
    this.refreshPacks();
    for (const hash of [...this.packed.keys()].sort()) if (!seen.has(hash)) yield hash;
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
    let n = 0;
    // Loose-object temps (immediate mode, and deferred mode before packs).
    for (const name of names) {
      if (!name.startsWith(TEMP_PREFIX)) continue;
      await fs.rm(path.join(this.dir, name), { force: true });
      n++;
    }
    const mine = new Set([...this.writers, ...this.workerPacks].map((w) => path.basename(w.tmp)));
    const packDir = path.join(this.dir, PACK_DIR);
    for (const name of fss.existsSync(packDir) ? fss.readdirSync(packDir) : []) {
      if (!name.startsWith(PACK_TEMP_PREFIX) || mine.has(name)) continue;
      await fs.rm(path.join(packDir, name), { force: true });
      n++;
    }
    return n;
  }

  /** Named packs holding objects that await compaction (HEADER_PENDING), by file name. */
  uncompactedPacks(): string[] {
    try {
      return fss.readdirSync(path.join(this.dir, PACK_DIR)).filter((n) => PACK_RE.test(n) && isUncompactedPack(n));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
  }

  /**
   * Compresses what a bulk checkpoint stored raw (HEADER_PENDING): each `-u` pack is
   * rewritten as a normal pack on a pool of worker threads started for the call.
   * Its pending objects are sorted by name (`nameOf`) and size, as git's
   * pack-objects sorts, split into one run per worker, and each object is stored
   * brotli-compressed (COMPACT_QUALITY) or as a delta against one of the few objects
   * before it in its run, whichever is smaller (see HEADER_DELTA): a delta's base is
   * always in the same new pack. Other objects are copied as stored. The new pack is
   * durable and named before the old one is removed, so a crash in between leaves
   * both, and the next compaction only removes the old one (its objects are already
   * held compressed). Readers holding the old pack keep reading it; others find the
   * new pack as they would after GC. Serialized with `deleteMany`.
   */
  compact(opts: CompactOptions = {}): Promise<CompactResult> {
    return this.maintain(() => this.compactNow(opts));
  }

  private async compactNow(opts: CompactOptions): Promise<CompactResult> {
    const result: CompactResult = { packs: 0, objects: 0, bytesBefore: 0, bytesAfter: 0 };
    const names = this.uncompactedPacks();
    if (names.length === 0) return result;
    this.refreshPacks();
    const packDir = path.join(this.dir, PACK_DIR);
    const pool = new CompressPool(Math.max(this.level, COMPACT_QUALITY));
    try {
      // All raw packs together, so that similar objects from different packs (a bulk
      // checkpoint writes one per worker) can be deltas of each other; a group stays
      // below the pack size limit (what compaction writes is never larger than what it reads).
      const groups: { files: string[]; entries: { file: string; entry: PackEntry }[] }[] = [];
      let group: (typeof groups)[number] = { files: [], entries: [] };
      let groupBytes = 0;
      for (const name of names) {
        const file = path.join(packDir, name);
        let entries: PackEntry[];
        try {
          entries = readPackIndex(file);
        } catch {
          // Gone (another instance compacted it) or damaged (its blobs read as missing; verify reports it).
          continue;
        }
        const bytes = entries.reduce((n, e) => n + e.length, 0);
        if (group.files.length && groupBytes + bytes > MAX_PACK_BYTES / 2) {
          groups.push(group);
          group = { files: [], entries: [] };
          groupBytes = 0;
        }
        group.files.push(file);
        for (const entry of entries) group.entries.push({ file, entry });
        groupBytes += bytes;
      }
      if (group.files.length) groups.push(group);
      for (const g of groups) {
        if (opts.shouldStop?.()) throw new CompactionStopped();
        await this.compactGroup(g.files, g.entries, pool, opts, result);
      }
    } finally {
      await pool.close();
    }
    return result;
  }

  /** Rewrites raw packs `files` as one normal pack (see `compact`), then removes them. */
  private async compactGroup(files: string[], entries: { file: string; entry: PackEntry }[], pool: CompressPool, opts: CompactOptions, result: CompactResult): Promise<void> {
    const packDir = path.join(this.dir, PACK_DIR);
    const group = new Set(files);
    const writer = PackWriter.create(packDir, `${PACK_TEMP_PREFIX}${randomBytes(8).toString('hex')}.pack`);
    const fds = new Map<string, number>();
    let final: string | null = null;
    const inflight = new Set<Promise<void>>();
    let failed = false;
    try {
      const toEncode: { file: string; entry: PackEntry; key: string }[] = [];
      const seen = new Set<string>();
      for (const { file, entry: e } of entries) {
        // Already held compressed (a crash after that pack was named, before these went), or twice in the group.
        const other = this.packed.get(e.hash);
        if (other && !group.has(other.pack) && !isUncompactedPack(path.basename(other.pack))) continue;
        if (seen.has(e.hash)) continue;
        seen.add(e.hash);
        result.bytesBefore += e.length;
        const header = readPackObject(file, { ...e, length: 1 }, fds)[0];
        if (header === HEADER_RAW || header === HEADER_DEFLATE) {
          const raw = readPackObject(file, e, fds);
          writer.append(e.hash, raw[0]!, raw.subarray(1));
          continue;
        }
        // Raw content, and what a GC rewrite or a save put here compressed (a delta's base may not come along; a manifest deserves the better quality too).
        const full = opts.nameOf?.(e.hash);
        toEncode.push({ file, entry: e, key: full === undefined ? '' : [...full.slice(full.lastIndexOf('/') + 1)].reverse().join('') });
      }
      // Same name (read backwards: same extension next) together, larger first, as git orders a window.
      toEncode.sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : y.entry.length - x.entry.length));
      const lanes = Math.min(pool.size, Math.max(1, toEncode.length));
      const per = Math.ceil(toEncode.length / lanes);
      const cursors = Array.from({ length: lanes }, (_, i) => ({ at: i * per, end: Math.min(toEncode.length, (i + 1) * per) }));
      const stream = randomBytes(6).toString('hex');
      for (let active = true; active; ) {
        active = false;
        if (opts.shouldStop?.()) throw new CompactionStopped();
        for (let lane = 0; lane < lanes; lane++) {
          const c = cursors[lane]!;
          if (c.at >= c.end) continue;
          active = true;
          const items: { hash: string; bytes: Uint8Array }[] = [];
          for (let bytes = 0; c.at < c.end && bytes < COMPACT_MESSAGE_BYTES; c.at++) {
            const { file, entry: e } = toEncode[c.at]!;
            const raw = readPackObject(file, e, fds);
            const content = raw[0] === HEADER_PENDING ? raw.subarray(1) : this.decode(e.hash, raw, undefined, fds);
            items.push({ hash: e.hash, bytes: content });
            bytes += content.length;
          }
          const p: Promise<void> = pool.encodeSimilar(lane, `${stream}:${lane}`, items).then((encoded) => {
            inflight.delete(p);
            if (!failed) encoded.forEach((enc, i) => writer.append(items[i]!.hash, enc.header, enc.body));
          });
          inflight.add(p);
          while (pool.queuedBytes > COMPACT_INFLIGHT_BYTES && inflight.size > 0) await Promise.race(inflight);
        }
      }
      await Promise.all(inflight);
      if (writer.entries.length > 0) {
        final = path.join(packDir, `pack-${randomBytes(8).toString('hex')}.pack`);
        writer.finish(final, () => true);
        fsyncDirSync(packDir);
      } else {
        writer.close();
        fss.rmSync(writer.tmp, { force: true });
      }
    } catch (err) {
      // No encode still in flight may append to the writer once it is closed.
      failed = true;
      await Promise.allSettled([...inflight]);
      writer.close();
      fss.rmSync(writer.tmp, { force: true });
      throw err;
    } finally {
      for (const fd of fds.values()) fss.closeSync(fd);
    }
    if (final) {
      this.packsLoaded.add(path.basename(final));
      for (const entry of writer.entries) {
        this.packed.set(entry.hash, { pack: final, entry });
        result.bytesAfter += entry.length;
      }
      result.objects += writer.entries.length;
    }
    for (const file of files) {
      fss.rmSync(file, { force: true });
      this.packsLoaded.delete(path.basename(file));
      result.packs++;
    }
    for (const [h, b] of this.packed) if (group.has(b.pack)) this.packed.delete(h);
    fsyncDirSync(packDir);
  }

  /** Blobs written but not yet flushed (deferred mode). */
  get pendingCount(): number {
    return this.pending.size;
  }

  /**
   * Makes every pending blob durable, then names it: each pack being written gets
   * its index, one fdatasync and its final name; then one fsync of the pack
   * directory makes the names durable. Two barriers per batch, whatever its size.
   */
  flush(): Promise<void> {
    // Serialized: a flush that finds nothing new to write still waits for the one in
    // flight, whose pack may hold this caller's blobs and is not durably named yet.
    const run = this.flushing.then(() => this.flushNow());
    this.flushing = run.catch(() => undefined);
    return run;
  }

  private async flushNow(): Promise<void> {
    if (this.writers.length === 0 && this.workerPacks.length === 0) return;
    const unsealed = this.workerPacks.find((w) => !w.sealed);
    if (unsealed) throw new Error(`[snapshot] cannot flush: pack ${path.basename(unsealed.tmp)} is still being written by a worker`);
    const writers: PendingPack[] = [...this.writers, ...this.workerPacks];
    this.writers = [];
    this.workerPacks = [];
    const packDir = path.join(this.dir, PACK_DIR);
    for (const w of writers) {
      const final = path.join(packDir, `pack-${randomBytes(8).toString('hex')}${w.uncompacted ? '-u' : ''}.pack`);
      let named: PackEntry[];
      try {
        named = w.finish(final, (e) => this.pending.get(e.hash)?.writer === w);
      } catch (err) {
        w.close();
        throw err;
      }
      this.packsLoaded.add(path.basename(final));
      for (const entry of named) {
        this.packed.set(entry.hash, { pack: final, entry });
        this.pending.delete(entry.hash);
      }
    }
    // Sync like the pack's fdatasync above: three thread-pool round trips (open, fsync,
    // close) cost more than the wait they would free the event loop for.
    fsyncDirSync(packDir);
  }

  /** The pack this instance is filling, started (in its own durable directory) when needed. */
  private packWriter(nextBytes: number): PackWriter {
    let w = this.writers[this.writers.length - 1];
    if (!w || w.bytes + nextBytes > MAX_PACK_BYTES) {
      w = PackWriter.create(this.ensurePackDir(), `${PACK_TEMP_PREFIX}${randomBytes(8).toString('hex')}.pack`);
      this.writers.push(w);
    }
    return w;
  }

  private ensurePackDir(): string {
    const packDir = path.join(this.dir, PACK_DIR);
    if (!fss.existsSync(packDir)) {
      fss.mkdirSync(packDir, { recursive: true, mode: DIR_MODE });
      // The pack directory's own entry must be durable before any pack named in it.
      fsyncDirSync(this.dir);
    }
    return packDir;
  }

  /** Creates a fan-out directory if needed; returns true when it was created. */
  private async ensureFanout(fanout: string, durableNow: boolean): Promise<boolean> {
    if (this.knownFanout.has(fanout)) return false;
    let created = false;
    try {
      await fs.mkdir(fanout, { mode: DIR_MODE });
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

function fsyncDirSync(dir: string): void {
  if (process.platform === 'win32') return;
  const fd = fss.openSync(dir, 'r');
  try {
    fss.fsyncSync(fd);
  } finally {
    fss.closeSync(fd);
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
