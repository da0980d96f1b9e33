import type { Logger } from '../../log';
import type { StoreBackend } from '../eventLog';
import { OwnerLock, type AcquireOptions } from '../ownerLock';
import { SqlProjection } from '../projection';
import { ensurePrivateStoreDir } from '../storeDir';
import { copyOfWorkspaceAt, renewWorkspaceIdentity, workspaceIdentity } from '../workspaceIdentity';
import { PgEventLog } from './pgEventLog';
import { PgProjectionReader } from './pgProjectionReader';
import { ObjectUpload } from './objectUpload';
import type { BlobStore } from '../../snapshot/blobStore';

export interface PostgresBackendOptions {
  /** postgresql://… (credentials and TLS parameters as the person gave them; never written anywhere). */
  url: string;
  /** The workspace's `.waypoint` directory: its id, the local owner lock, blobs and manifests. */
  storeDir: string;
  workspacePath: string;
  log?: Logger;
  lock?: AcquireOptions;
  /** Keep retrying a commit this long while the database is unreachable (ms). */
  retryMs?: number;
  env?: NodeJS.ProcessEnv;
  clock?: () => number;
  /** Copy checkpoints' objects into the store for other machines' review (default true; tests turn it off to leave an outbox behind). */
  uploadObjects?: boolean;
}

/**
 * The engine's backend on the team store: the workspace's PostgreSQL log, the sql.js
 * projection it folds into, and a reader scoped to the workspace.
 *
 * The local owner lock in `.waypoint/` is taken as with the embedded store, so on
 * one machine the one-owner-per-workspace rule (and relaying to the owner) holds as
 * today; the PostgreSQL epoch is what fences a replaced writer on any machine.
 */
export async function openPostgresBackend(o: PostgresBackendOptions): Promise<StoreBackend & { log: PgEventLog }> {
  ensurePrivateStoreDir(o.storeDir);
  let identity = workspaceIdentity(o.storeDir, o.workspacePath, o.env);
  const lock = await OwnerLock.acquire(o.storeDir, o.lock);
  let log: PgEventLog | undefined;
  let reader: PgProjectionReader | undefined;
  try {
    const projection = await SqlProjection.empty();
    log = await PgEventLog.open({
      url: o.url,
      workspace: identity,
      owner: lock.ownerId,
      ownerEpoch: lock.epoch,
      // A folder copied before folders had identities still holds the original's id: the
      // team store says where that id was last used, and if that folder still holds it, this is the copy.
      claimIdentity: (recorded) => {
        if (!copyOfWorkspaceAt(recorded, identity)) return null;
        identity = renewWorkspaceIdentity(o.storeDir, o.workspacePath, o.env);
        o.log?.warn(`This folder (${identity.path}) shared its team-store workspace id with ${recorded.path}, of which it is a copy; Waypoint gave it its own (${identity.id}). What was recorded under the shared id stays with ${recorded.path}.`);
        return identity;
      },
      log: o.log,
      retryMs: o.retryMs,
      clock: o.clock,
      projection,
      // The lock and the reader's pool go with the log.
      onClose: async () => {
        lock.release();
        await reader?.close();
      },
    });
    const opened = log;
    lock.onLost(() => void opened.close());
    reader = await PgProjectionReader.open(o.url, { workspaceId: identity.id });
    const startObjectUpload =
      o.uploadObjects === false ? undefined : (blobs: BlobStore) => new ObjectUpload({ url: o.url, workspaceId: identity.id, blobs, log: opened, logger: o.log });
    return { log, projection, reader, startObjectUpload };
  } catch (e) {
    if (log) await log.close().catch(() => undefined);
    else lock.release();
    throw e;
  }
}
