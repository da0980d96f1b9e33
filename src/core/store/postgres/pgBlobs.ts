import type { Pool, PoolClient } from 'pg';
import { WaypointError } from '../../model/errors';
import { sha256Hex } from '../../snapshot/blobStore';
import { isConnectionError, unavailable } from './connection';

/**
 * Content-addressed objects in the team store (`waypoint.blobs`): checkpoints' file
 * contents and manifest objects, keyed by the SHA-256 of their content and shared by
 * every workspace, so identical content is stored once however many workspaces hold it.
 *
 * Written with `INSERT … ON CONFLICT DO NOTHING` (a retry after a dropped connection,
 * or two workspaces uploading the same content at once, cannot duplicate or fail), in
 * bounded transactions. Content is stored as it is (PostgreSQL's TOAST compresses it);
 * an object over CHUNK_BYTES goes in parts (`waypoint.blob_chunks`), and its `blobs`
 * row, written last, is what makes it exist: a reader never sees half of one.
 *
 * Everything read back is checked against its hash and size: a shared database is
 * input like a file on disk, and a missing or altered object is a clear error, never
 * wrong content.
 */

/** Parts of a big object; also the most one row holds (a 1 GB bytea cannot be one allocation on both sides). */
export const CHUNK_BYTES = 1024 * 1024;
/** One transaction writes at most this many bytes, or this many rows (the outbox's batches). */
export const BATCH_BYTES = 8 * 1024 * 1024;
export const BATCH_ROWS = 500;
/** Hashes asked about in one `ANY($1)` query. */
const LOOKUP_BATCH = 1000;

const HASH_RE = /^[0-9a-f]{64}$/;

export function assertObjectHash(hash: string): void {
  if (typeof hash !== 'string' || !HASH_RE.test(hash)) {
    throw new WaypointError('invalid_input', `Invalid object hash ${JSON.stringify(String(hash).slice(0, 80))}: expected 64 lowercase hex characters.`);
  }
}

/** One object to write: its hash (already checked against `bytes` by the caller) and content. */
export interface PgObject {
  hash: string;
  bytes: Buffer;
}

type Row = { kind: 'whole'; hash: string; bytes: Buffer } | { kind: 'chunk'; hash: string; idx: number; bytes: Buffer } | { kind: 'head'; hash: string; size: number; chunks: number };

function rowBytes(r: Row): number {
  return r.kind === 'head' ? 100 : r.bytes.length + 100;
}

/** The rows an object becomes: one row, or its chunks followed by the head that makes it exist. */
function* rowsOf(o: PgObject): Generator<Row> {
  if (o.bytes.length <= CHUNK_BYTES) {
    yield { kind: 'whole', hash: o.hash, bytes: o.bytes };
    return;
  }
  const n = Math.ceil(o.bytes.length / CHUNK_BYTES);
  for (let i = 0; i < n; i++) yield { kind: 'chunk', hash: o.hash, idx: i, bytes: o.bytes.subarray(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES) };
  yield { kind: 'head', hash: o.hash, size: o.bytes.length, chunks: n };
}

export class PgBlobs {
  constructor(
    private readonly pool: Pool,
    /** For messages (redacted). */
    private readonly url: string,
  ) {}

  private async q<T>(sql: string, params: unknown[], doing = 'read from'): Promise<T[]> {
    try {
      return (await this.pool.query(sql, params)).rows as T[];
    } catch (e) {
      throw isConnectionError(e) ? unavailable(e, this.url, doing) : e;
    }
  }

  /** Which of `hashes` the store holds (whole: a chunked object counts once its head is written). */
  async present(hashes: readonly string[]): Promise<Set<string>> {
    const out = new Set<string>();
    const unique = [...new Set(hashes)];
    for (const h of unique) assertObjectHash(h);
    for (let i = 0; i < unique.length; i += LOOKUP_BATCH) {
      const rows = await this.q<{ hash: string }>('SELECT hash FROM waypoint.blobs WHERE hash = ANY($1::text[])', [unique.slice(i, i + LOOKUP_BATCH)]);
      for (const r of rows) out.add(r.hash);
    }
    return out;
  }

  /**
   * Writes the objects, in transactions of at most BATCH_BYTES / BATCH_ROWS, in the
   * order given (a caller puts contents before the manifests naming them, so a manifest
   * in the store means its contents are too). Objects already present are left as they
   * are. A failure part-way leaves whole transactions written and nothing half-visible;
   * calling again with the same objects finishes the job.
   */
  async put(objects: Iterable<PgObject>): Promise<{ rows: number; bytes: number }> {
    let batch: Row[] = [];
    let bytes = 0;
    let rows = 0;
    let total = 0;
    const flush = async () => {
      if (!batch.length) return;
      await this.writeBatch(batch);
      rows += batch.length;
      batch = [];
      bytes = 0;
    };
    for (const o of objects) {
      assertObjectHash(o.hash);
      total += o.bytes.length;
      for (const r of rowsOf(o)) {
        if (batch.length && (bytes + rowBytes(r) > BATCH_BYTES || batch.length >= BATCH_ROWS)) await flush();
        batch.push(r);
        bytes += rowBytes(r);
      }
    }
    await flush();
    return { rows, bytes: total };
  }

  private async writeBatch(batch: Row[]): Promise<void> {
    let client: PoolClient;
    try {
      client = await this.pool.connect();
    } catch (e) {
      throw unavailable(e, this.url, 'write to');
    }
    const ignore = () => undefined;
    client.on('error', ignore);
    let failed: Error | undefined;
    try {
      await client.query('BEGIN');
      const whole = batch.filter((r): r is Extract<Row, { kind: 'whole' }> => r.kind === 'whole');
      const chunks = batch.filter((r): r is Extract<Row, { kind: 'chunk' }> => r.kind === 'chunk');
      const heads = batch.filter((r): r is Extract<Row, { kind: 'head' }> => r.kind === 'head');
      if (whole.length) {
        await client.query(
          `INSERT INTO waypoint.blobs (hash, size, data, chunks)
           SELECT h, octet_length(d), d, 0 FROM unnest($1::text[], $2::bytea[]) AS u(h, d)
           ON CONFLICT (hash) DO NOTHING`,
          [whole.map((r) => r.hash), whole.map((r) => r.bytes)],
        );
      }
      if (chunks.length) {
        await client.query(
          `INSERT INTO waypoint.blob_chunks (hash, idx, data)
           SELECT * FROM unnest($1::text[], $2::int[], $3::bytea[])
           ON CONFLICT (hash, idx) DO NOTHING`,
          [chunks.map((r) => r.hash), chunks.map((r) => r.idx), chunks.map((r) => r.bytes)],
        );
      }
      // A head is written in the transaction of its last chunk or a later one: never before its parts.
      if (heads.length) {
        await client.query(
          `INSERT INTO waypoint.blobs (hash, size, data, chunks)
           SELECT * FROM unnest($1::text[], $2::bigint[], $3::bytea[], $4::int[])
           ON CONFLICT (hash) DO NOTHING`,
          [heads.map((r) => r.hash), heads.map((r) => r.size), heads.map(() => Buffer.alloc(0)), heads.map((r) => r.chunks)],
        );
      }
      await client.query('COMMIT');
    } catch (e) {
      failed = e as Error;
      await client.query('ROLLBACK').catch(() => undefined);
      throw isConnectionError(e) ? unavailable(e, this.url, 'write to') : e;
    } finally {
      client.off('error', ignore);
      client.release(failed);
    }
  }

  /**
   * An object's content, checked: `not_found` when the store does not hold it (not
   * uploaded yet, or never), `corrupt` when what it holds does not hash to its name.
   */
  async get(hash: string): Promise<Buffer> {
    assertObjectHash(hash);
    const rows = await this.q<{ size: number; chunks: number; data: Buffer }>('SELECT size, chunks, data FROM waypoint.blobs WHERE hash = $1', [hash]);
    const row = rows[0];
    if (!row) {
      throw new WaypointError('not_found', `Object ${hash.slice(0, 12)}… is not in the team store: it was not uploaded (yet), or it was lost. Its workspace's owner uploads it when it next runs with the team store.`, { hash });
    }
    let bytes: Buffer;
    const chunks = Number(row.chunks);
    if (chunks > 0) {
      const parts = await this.q<{ idx: number; data: Buffer }>('SELECT idx, data FROM waypoint.blob_chunks WHERE hash = $1 ORDER BY idx', [hash]);
      if (parts.length !== chunks || parts.some((p, i) => Number(p.idx) !== i)) throw corrupt(hash, `it has ${parts.length} of its ${chunks} parts`);
      bytes = Buffer.concat(parts.map((p) => p.data));
    } else {
      bytes = row.data;
    }
    if (bytes.length !== Number(row.size)) throw corrupt(hash, `it holds ${bytes.length} bytes, its row says ${row.size}`);
    if (sha256Hex(bytes) !== hash) throw corrupt(hash, 'its content does not hash to its name');
    return bytes;
  }

  /** How far this workspace's checkpoints are uploaded: every checkpoint.created at or below it is. */
  async uploadedSeq(workspaceId: string): Promise<number> {
    const r = await this.q<{ seq: number }>('SELECT seq FROM waypoint.blob_uploads WHERE workspace_id = $1', [workspaceId]);
    return r[0] ? Number(r[0].seq) : 0;
  }

  /** Moves the cursor forward (never back: two uploaders of one workspace after a takeover cannot undo each other). */
  async markUploaded(workspaceId: string, seq: number): Promise<void> {
    await this.q(
      `INSERT INTO waypoint.blob_uploads (workspace_id, seq) VALUES ($1, $2)
       ON CONFLICT (workspace_id) DO UPDATE SET seq = GREATEST(waypoint.blob_uploads.seq, excluded.seq), updated_at = now()`,
      [workspaceId, seq],
      'write to',
    );
  }
}

function corrupt(hash: string, detail: string): WaypointError {
  return new WaypointError('corrupt', `Object ${hash.slice(0, 12)}… in the team store is corrupt: ${detail}. Nothing was shown from it (someone with write access to the database altered it, or the database is damaged).`, { hash });
}
