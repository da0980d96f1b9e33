import { isStale, type LeaseFields } from '../core/store/lockFile';
import { servesClaim, type ServedStore, type StoreClaim } from '../core/store/folderIdentity';

/**
 * Who owns a store, decided from its lock and discovery file once both are read and
 * validated — with zod by `findOwner`, by hand on the fast hook path; one rule for both.
 */
export type OwnerStatusOf<L, D> =
  /** Nobody owns the store (or the owner is dead): open it yourself. */
  | { kind: 'none' }
  /** A live owner serves MCP over HTTP: relay to it. */
  | { kind: 'serving'; discovery: D; lock: L }
  /** A live owner without an endpoint (a CLI command mid-run, or an owner still starting). */
  | { kind: 'busy'; lock: L }
  /**
   * The lock and discovery file name an owner that serves another store (this folder is a
   * copy, and they are the original's): never relayed to; `proven` when the owner's own
   * record says which store it serves (then its lock here is not this folder's and may be
   * dropped), false when it names none (an older Waypoint: left alone, and not relayed to).
   */
  | { kind: 'foreign'; lock: L; discovery: D; proven: boolean };

type LockLike = LeaseFields & { epoch: number; endpoint?: { url: string } | null };
type DiscoveryLike = { pid: number; epoch?: number; url: string; store?: ServedStore };

/** `here`: this store directory's claim (its recorded id, device and inode), which a serving owner must match. */
export function ownerStatusOf<L extends LockLike, D extends DiscoveryLike>(seen: { text: string | null; info: L | null; mtimeMs?: number }, d: D | null, here: StoreClaim | null): OwnerStatusOf<L, D> {
  const { info, text } = seen;
  if (text === null || isStale(seen)) return { kind: 'none' };
  if (!info) return { kind: 'none' };
  // The discovery file must be the lock holder's own: same pid and the same epoch (a replaced
  // owner's file, or a dead one's, never names the current holder's epoch).
  if (d && d.pid === info.pid && (d.epoch ?? 0) === info.epoch && (!info.endpoint?.url || info.endpoint.url === d.url)) {
    if (!d.store) return { kind: 'foreign', discovery: d, lock: info, proven: false };
    if (!here || !servesClaim(d.store, here)) return { kind: 'foreign', discovery: d, lock: info, proven: true };
    return { kind: 'serving', discovery: d, lock: info };
  }
  return { kind: 'busy', lock: info };
}
