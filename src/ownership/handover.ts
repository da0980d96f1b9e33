import { postLoopback } from '../core/engine/loopback';
import { errorMessage } from '../core/model/errors';
import { HANDOVER_PATH } from './backgroundStart';
import type { Discovery } from './discovery';
import { storeClaimHeaders } from './ownOrRelay';

/**
 * Asks a background owner to give its store up (a VS Code window that opens, `waypoint
 * serve`): it answers the calls in flight, closes the store and releases the lock, and
 * whoever asked takes the store over by replaying the journal, so nothing it
 * acknowledged is lost. Resolves to null when it agreed, or to why it did not.
 */
export async function askBackgroundOwnerForStore(storeDir: string, d: Discovery): Promise<string | null> {
  try {
    const res = await postLoopback(new URL(HANDOVER_PATH, d.url), { authorization: `Bearer ${d.token}`, 'content-type': 'application/json', ...storeClaimHeaders(storeDir) }, '{}', { timeoutMs: 5_000, connectTimeoutMs: 2_000 });
    return res.status === 200 ? null : `it answered ${res.status}`;
  } catch (e) {
    return errorMessage(e);
  }
}
