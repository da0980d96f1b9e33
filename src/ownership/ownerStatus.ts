import { isStale, type LeaseFields } from '../core/store/lockFile';

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
  | { kind: 'busy'; lock: L };

type LockLike = LeaseFields & { epoch: number; endpoint?: { url: string } | null };
type DiscoveryLike = { pid: number; epoch?: number; url: string };

export function ownerStatusOf<L extends LockLike, D extends DiscoveryLike>(seen: { text: string | null; info: L | null; mtimeMs?: number }, d: D | null): OwnerStatusOf<L, D> {
  const { info, text } = seen;
  if (text === null || isStale(seen)) return { kind: 'none' };
  if (!info) return { kind: 'none' };
  // The discovery file must be the lock holder's own: same pid and the same epoch (a replaced
  // owner's file, or a dead one's, never names the current holder's epoch).
  if (d && d.pid === info.pid && (d.epoch ?? 0) === info.epoch && (!info.endpoint?.url || info.endpoint.url === d.url)) return { kind: 'serving', discovery: d, lock: info };
  return { kind: 'busy', lock: info };
}
