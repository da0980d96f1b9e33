import { errorMessage } from '../model/errors';
import type { StoreBackend } from './eventLog';
import { EventStore, type StoreOptions } from './eventStore';

/**
 * Opens the embedded backend of a workspace: the journal-and-generations EventLog in
 * `.waypoint/` and the sql.js projection it feeds. A full disk: opening for writing
 * needs a lock file, a journal segment, an export on close. Reading needs none of
 * them, so the store opens read-only and what only reads still works. `isNoSpace`
 * is the engine's test of a full disk (or quota).
 */
export async function openEmbeddedBackend(opts: StoreOptions, isNoSpace: (e: unknown) => boolean): Promise<StoreBackend> {
  let store: EventStore;
  try {
    store = await EventStore.open(opts);
  } catch (e) {
    if (!isNoSpace(e)) throw e;
    store = await EventStore.open({
      ...opts,
      readOnly: `The disk holding ${opts.dir} is full (${errorMessage(e)}): the store was opened read-only. Listing and reading tasks works; anything that records (a checkpoint, a step, a rollback) needs space there first.`,
    });
  }
  return { log: store, projection: store.projection };
}
