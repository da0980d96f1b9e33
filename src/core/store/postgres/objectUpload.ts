import type { Pool } from 'pg';
import type { Logger } from '../../log';
import { errorMessage } from '../../model/errors';
import { BlobNotFoundError, CorruptBlobError, sha256Hex, type BlobStore } from '../../snapshot/blobStore';
import { CorruptManifestError } from '../../snapshot/manifest';
import type { Disposable, EventLog } from '../eventLog';
import { createPool, isConnectionError, unavailable } from './connection';
import { PgBlobs, type PgObject } from './pgBlobs';

/**
 * Copies each checkpoint's objects (its manifest objects down the delta chain, and
 * the content of every file it records) into the team store, so another machine can
 * review the task's changes with only the store's URL.
 *
 * Off the checkpoint's path: a checkpoint is acknowledged once its local objects and
 * its event are durable, exactly as without a team store; the upload follows. Its
 * outbox is the event log itself: the workspace's `checkpoint.created` events past a
 * cursor kept in `waypoint.blob_uploads`, moved only after their objects committed.
 * So a crash, a closed editor or a dropped connection loses nothing: the next run
 * (or the next retry) starts again from the cursor, and re-sending what a lost reply
 * had already committed writes nothing twice (ON CONFLICT DO NOTHING on the hash).
 */

/** checkpoint.created events read per page of the outbox. */
const PAGE = 100;
/** Hashes remembered as present in the store (beyond it, the memory is dropped and the store asked again). */
const KNOWN_MAX = 500_000;
const RETRY_MIN_MS = 250;
const HASH_RE = /^[0-9a-f]{64}$/;
const RETRY_MAX_MS = 10_000;

export interface UploadStats {
  checkpoints: number;
  /** Objects written (not counting those the store already held). */
  objects: number;
  bytes: number;
  /** Failed passes retried (the server unreachable, a dropped connection). */
  retries: number;
  /** Checkpoints whose local objects could not be read (pruned or damaged here): left out, and logged. */
  skipped: number;
  lastError: string | null;
}

export interface ObjectUploadOptions {
  url: string;
  workspaceId: string;
  /** The workspace's local blob store (read only here). */
  blobs: BlobStore;
  /** Its log: new durable events wake the uploader. */
  log: Pick<EventLog, 'subscribe' | 'lastSeq'>;
  logger?: Logger;
}

export class ObjectUpload {
  readonly stats: UploadStats = { checkpoints: 0, objects: 0, bytes: 0, retries: 0, skipped: 0, lastError: null };
  private readonly pool: Pool;
  private readonly store: PgBlobs;
  private readonly known = new Set<string>();
  private readonly subscription: Disposable;
  /** The highest seq the uploader was told of, and the highest it has caught up to. */
  private wanted: number;
  private doneThrough = 0;
  private cursor: number | null = null;
  private closed = false;
  private wake: (() => void) | null = null;
  private idleWaiters: (() => void)[] = [];
  private readonly loop: Promise<void>;

  constructor(private readonly o: ObjectUploadOptions) {
    this.pool = createPool(o.url, { max: 1, application: 'waypoint upload' });
    this.store = new PgBlobs(this.pool, o.url);
    // Everything before this run counts as wanted: the cursor may be behind (a crash, a restart).
    this.wanted = Math.max(1, o.log.lastSeq);
    this.subscription = o.log.subscribe((events) => {
      let top = 0;
      for (const e of events) if (e.type === 'checkpoint.created') top = Math.max(top, e.seq);
      if (top) this.kick(top);
    });
    this.loop = this.run();
  }

  private kick(seq: number): void {
    this.wanted = Math.max(this.wanted, seq);
    this.wake?.();
  }

  /** Resolves once every checkpoint recorded so far is uploaded (or `closed`). */
  idle(): Promise<void> {
    if (this.doneThrough >= this.wanted || this.closed) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Whether uploads are still owed (for `close` and the logs). */
  get behind(): boolean {
    return this.doneThrough < this.wanted;
  }

  private async run(): Promise<void> {
    let backoff = RETRY_MIN_MS;
    while (!this.closed) {
      if (this.doneThrough >= this.wanted) {
        for (const w of this.idleWaiters.splice(0)) w();
        await new Promise<void>((r) => (this.wake = r));
        this.wake = null;
        continue;
      }
      const target = this.wanted;
      try {
        await this.catchUp();
        this.doneThrough = Math.max(this.doneThrough, target);
        if (this.stats.lastError) this.o.logger?.info('[team-store] object upload resumed and caught up');
        this.stats.lastError = null;
        backoff = RETRY_MIN_MS;
      } catch (e) {
        if (this.closed) break;
        const first = this.stats.lastError === null;
        this.stats.lastError = errorMessage(isConnectionError(e) ? unavailable(e, this.o.url, 'upload to') : e);
        this.stats.retries++;
        if (first) this.o.logger?.warn(`[team-store] uploading checkpoints' objects failed; retrying (nothing is lost: the upload resumes where it stopped): ${this.stats.lastError}`);
        await new Promise<void>((r) => {
          const t = setTimeout(r, backoff);
          t.unref?.();
          this.wake = () => {
            clearTimeout(t);
            r();
          };
        });
        this.wake = null;
        backoff = Math.min(backoff * 2, RETRY_MAX_MS);
      }
    }
    for (const w of this.idleWaiters.splice(0)) w();
  }

  /** Uploads every checkpoint past the cursor, a page at a time, moving the cursor after each page committed. */
  private async catchUp(): Promise<void> {
    this.cursor ??= await this.store.uploadedSeq(this.o.workspaceId);
    for (;;) {
      const rows = await this.events(this.cursor);
      for (const r of rows) {
        if (this.closed) return;
        const ref = (r.data as { manifestRef?: unknown } | null)?.manifestRef;
        if (typeof ref === 'string' && HASH_RE.test(ref)) await this.uploadCheckpoint(String((r.data as { checkpointId?: unknown }).checkpointId ?? '?'), ref);
      }
      if (!rows.length) return;
      const last = Number(rows[rows.length - 1].seq);
      await this.store.markUploaded(this.o.workspaceId, last);
      this.cursor = last;
      if (rows.length < PAGE) return;
    }
  }

  private async events(after: number): Promise<{ seq: number; data: unknown }[]> {
    const r = await this.pool.query(`SELECT seq, data FROM waypoint.events WHERE workspace_id = $1 AND type = 'checkpoint.created' AND seq > $2 ORDER BY seq LIMIT ${PAGE}`, [this.o.workspaceId, after]);
    return r.rows as { seq: number; data: unknown }[];
  }

  /**
   * One checkpoint: its manifest objects down to the first one the store (or this run)
   * already has, and the contents those objects add. A delta adds only its `set`: what
   * it does not set is its parent's, uploaded with the parent. So a checkpoint after a
   * few edits costs a few small reads, not a walk of the whole manifest.
   */
  private async uploadCheckpoint(checkpointId: string, ref: string): Promise<void> {
    const local = this.o.blobs;
    let chain: { hash: string; bytes: Buffer; files: string[] }[];
    try {
      chain = this.chainFrom(ref);
    } catch (e) {
      if (!isLocalDamage(e)) throw e;
      this.skip(checkpointId, e);
      return;
    }
    // Cut where the store has it: a manifest object there means its parents and contents are too (written in that order).
    const inStore = await this.store.present(chain.map((c) => c.hash));
    const cut = chain.findIndex((c) => inStore.has(c.hash));
    const owed = cut < 0 ? chain : chain.slice(0, cut);
    for (const c of chain.slice(owed.length)) this.known.add(c.hash);
    const files = [...new Set(owed.flatMap((c) => c.files))].filter((h) => !this.known.has(h));
    const have = await this.store.present(files);
    const missing = files.filter((h) => !have.has(h));
    const bytesOf = new Map(owed.map((c) => [c.hash, c.bytes]));
    // Contents first, then manifest objects from the deepest up.
    const order = [...missing, ...owed.map((c) => c.hash).reverse()];
    let objects = 0;
    try {
      const r = await this.store.put(
        (function* (): Generator<PgObject> {
          for (const hash of order) {
            const bytes = bytesOf.get(hash) ?? local.getSync(hash);
            // A local object that does not hash to its name is not sent: a reader would refuse it anyway.
            if (sha256Hex(bytes) !== hash) throw new CorruptBlobError(hash, 'its content does not hash to its name');
            objects++;
            yield { hash, bytes };
          }
        })(),
      );
      this.stats.bytes += r.bytes;
    } catch (e) {
      if (!isLocalDamage(e)) throw e;
      this.skip(checkpointId, e);
      return;
    }
    this.stats.objects += objects;
    this.stats.checkpoints++;
    if (this.known.size + order.length + have.size > KNOWN_MAX) this.known.clear();
    for (const h of order) this.known.add(h);
    for (const h of have) this.known.add(h);
  }

  /**
   * The manifest objects from `ref` down to one this run knows is in the store (or to
   * the full manifest), each with the file contents it adds. Reads this workspace's own
   * objects; a delta is small JSON, a full manifest is parsed only when it is not known.
   */
  private chainFrom(ref: string): { hash: string; bytes: Buffer; files: string[] }[] {
    const out: { hash: string; bytes: Buffer; files: string[] }[] = [];
    for (let cursor = ref, guard = 0; !this.known.has(cursor); guard++) {
      if (guard > 100_000) throw new CorruptManifestError(ref, 'delta chain does not end');
      const bytes = this.o.blobs.getSync(cursor);
      let obj: { full?: unknown; parent?: unknown; entries?: unknown; set?: unknown };
      try {
        obj = JSON.parse(bytes.toString('utf8')) as typeof obj;
      } catch {
        throw new CorruptManifestError(cursor, 'not JSON');
      }
      const entries = (obj.full === true ? obj.entries : obj.set) as Record<string, { type?: unknown; hash?: unknown }> | undefined;
      if (!entries || typeof entries !== 'object') throw new CorruptManifestError(cursor, 'no entries');
      const files: string[] = [];
      for (const k in entries) {
        const e = entries[k];
        if (e?.type === 'file' && typeof e.hash === 'string' && HASH_RE.test(e.hash)) files.push(e.hash);
      }
      out.push({ hash: cursor, bytes, files });
      if (obj.full === true) break;
      if (typeof obj.parent !== 'string' || !HASH_RE.test(obj.parent)) throw new CorruptManifestError(cursor, 'a delta without a valid parent');
      cursor = obj.parent;
    }
    return out;
  }

  private skip(checkpointId: string, e: unknown): void {
    this.stats.skipped++;
    this.o.logger?.warn(`[team-store] checkpoint ${checkpointId} is not uploaded: its objects cannot be read here (${errorMessage(e)}); another machine cannot review it`);
  }

  /**
   * Stops after waiting up to `drainMs` for what is owed (a CLI command's checkpoint
   * uploads before the process exits when the store is reachable). What is still owed
   * stays in the outbox for the next run.
   */
  async close(drainMs = 5000): Promise<void> {
    if (this.behind && drainMs > 0) {
      await Promise.race([this.idle(), new Promise<void>((r) => setTimeout(r, drainMs).unref?.())]);
    }
    if (this.behind) this.o.logger?.info('[team-store] some checkpoints are not uploaded yet: the next run with the team store uploads them');
    this.closed = true;
    this.subscription.dispose();
    this.wake?.();
    await Promise.race([this.loop, new Promise<void>((r) => setTimeout(r, 2000).unref?.())]);
    await this.pool.end().catch(() => undefined);
  }
}

/** Errors of the local copy (pruned, damaged), as opposed to the team store's: those are retried. */
function isLocalDamage(e: unknown): boolean {
  return e instanceof BlobNotFoundError || e instanceof CorruptBlobError || e instanceof CorruptManifestError;
}
