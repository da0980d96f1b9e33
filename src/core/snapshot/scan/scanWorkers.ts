/**
 * The worker threads one scan may start (a CompressPool): they compress new content
 * past POOL_AFTER_BYTES, and in a bulk scan (a first checkpoint) they open, read,
 * hash and compress new files themselves — writing raw packs when compression is
 * deferred. This holds when to start them, the bound on files out with them, and the
 * packs they wrote until the scan seals or abandons them.
 */
import fss from 'node:fs';
import path from 'node:path';
import type { BlobStore } from '../blobStore.js';
import { CompressPool } from '../compressPool.js';
import type { WorkerPack } from '../packFile.js';
import { Slots } from './backpressure.js';

/** New content past this much in one scan goes to a worker pool for compression. */
const POOL_AFTER_BYTES = 4 * 1024 * 1024;
/**
 * New files (no previous entry) one scan reads on the main thread before it hands
 * the rest to worker threads that open, read, hash and compress them (a first
 * checkpoint). A few hundred files are quicker read here than a pool is started.
 */
const WORKER_READS_AFTER_FILES = 256;
/** Files handed to workers and not yet back: bounds descriptors held and results queued. */
const MAX_WORKER_FILES = 2048;

export class ScanWorkers {
  pool: CompressPool | null = null;
  /** Files a worker is reading. */
  readonly files = new Slots(MAX_WORKER_FILES);
  /**
   * With `deferCompression` on a deferred store: the pack directory the workers write
   * new files' content to (it never comes back to this thread), and the packs they
   * have reported, by temp file.
   */
  private packDir: string | null = null;
  private readonly packs = new Map<string, WorkerPack>();
  /** What each worker read is asked (the same object for every file). */
  readOpts: { packDir?: string } = {};
  /** Bytes of new content seen; past POOL_AFTER_BYTES the compression pool starts. */
  private bytesToStore = 0;
  /** New files met so far (see WORKER_READS_AFTER_FILES). */
  private newFiles = 0;

  constructor(
    private readonly blobs: BlobStore,
    private readonly deferCompression: boolean,
  ) {}

  /** Whether workers write raw packs (a bulk scan deferring compression): then files read here are stored raw too. */
  get defer(): boolean {
    return this.packDir !== null;
  }

  /** Counts `length` bytes of content about to be stored; past POOL_AFTER_BYTES the pool starts, to compress what follows. */
  storing(length: number): void {
    if (this.pool || length < 64) return;
    this.bytesToStore += length;
    if (this.bytesToStore > POOL_AFTER_BYTES) this.pool = new CompressPool();
  }

  /** One more new file met: whether it (and every new file after it) goes to a worker, starting the pool past WORKER_READS_AFTER_FILES. */
  readsNewFile(): boolean {
    if (this.pool) return true;
    if (++this.newFiles <= WORKER_READS_AFTER_FILES) return false;
    this.pool = new CompressPool();
    if (this.deferCompression && this.blobs.deferred) this.packDir = this.blobs.packDirForWorkers();
    if (this.packDir) this.readOpts = { packDir: this.packDir };
    return true;
  }

  /** The pack a worker reported writing to `tmp`, taken on by the store on first report. */
  pack(tmp: string): WorkerPack {
    let pack = this.packs.get(tmp);
    if (!pack) this.packs.set(tmp, (pack = this.blobs.adoptWorkerPack(tmp)));
    return pack;
  }

  /** After the walk: the workers make their packs durable; each becomes ready to be named by the store's flush. */
  async sealPacks(): Promise<void> {
    if (!this.pool || !this.packDir) return;
    for (const { tmp, size } of await this.pool.sealPacks()) {
      const pack = this.packs.get(tmp);
      if (pack) pack.seal(size);
      else fss.rmSync(tmp, { force: true }); // nothing in it was reported: no blob refers to it
    }
    for (const pack of this.packs.values()) if (!pack.sealed) throw new Error(`[snapshot] a worker did not seal its pack ${path.basename(pack.tmp)}`);
  }

  /**
   * The scan failed: workers may still be writing, so they close their packs (threads
   * share the process's descriptors, so ending a thread would not) and stop; then
   * their packs (reported, and any others they sealed) are removed, never named.
   */
  async abandon(): Promise<void> {
    const sealed = (await this.pool?.sealPacks().catch(() => undefined)) ?? [];
    await this.pool?.close();
    this.pool = null;
    this.blobs.abandonWorkerPacks(this.packs.values());
    for (const { tmp } of sealed) if (!this.packs.has(tmp)) fss.rmSync(tmp, { force: true });
    this.packs.clear();
  }

  async close(): Promise<void> {
    await this.pool?.close();
  }
}
