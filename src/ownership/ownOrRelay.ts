import type { Logger } from '../core/log';
import { describeOwner, type LockInfo } from '../core/store/ownerLock';
import { STORE_CLAIM_HEADER, claimHeader, storeClaimOf } from '../core/store/folderIdentity';
import { findOwner, type Discovery } from './discovery';

/**
 * The one switch every process outside an owner goes through: own this store, relay
 * to the process that owns it, or wait. `waypoint mcp` and the CLI (resolve.ts), a
 * window's long-lived link (storeLink.ts) and `waypoint serve` all ask here, so the
 * rule — and where a folder's identity is checked — is written once:
 *
 * - nobody holds the store: own it;
 * - a live owner serves an endpoint and has proved it serves this folder's store
 *   (see folderIdentity.ts): relay to it, every call carrying this folder's claim so
 *   an owner of another store refuses it before it runs;
 * - a live holder serves no endpoint (a CLI command mid-run, an owner starting or
 *   stopping), or does not say which folder it serves (an older Waypoint): wait, and
 *   say why in words a person can act on.
 */
export type StoreDecision =
  | { kind: 'own' }
  | { kind: 'relay'; discovery: Discovery; owner: LockInfo; headers: StoreClaimHeader }
  | { kind: 'wait'; owner: LockInfo; reason: string };

/**
 * The header every relayed call carries (`x-waypoint-store`: this folder's store id, device
 * and inode): an owner that serves another store refuses the call before it runs it.
 */
export type StoreClaimHeader = Record<string, string>;

export function storeClaimHeaders(storeDir: string): StoreClaimHeader {
  const c = storeClaimOf(storeDir);
  return c ? { [STORE_CLAIM_HEADER]: claimHeader(c) } : {};
}

/** Looks at the store's owner lock and discovery file once and decides (see StoreDecision). */
export function ownOrRelay(storeDir: string, log?: Pick<Logger, 'warn'>): StoreDecision {
  const s = findOwner(storeDir, log);
  switch (s.kind) {
    case 'none':
      return { kind: 'own' };
    case 'serving':
      return { kind: 'relay', discovery: s.discovery, owner: s.lock, headers: storeClaimHeaders(storeDir) };
    case 'busy':
      return { kind: 'wait', owner: s.lock, reason: `it is held by ${describeOwner(s.lock)}, which serves no endpoint (a CLI command still running, or an owner starting or stopping)` };
    case 'foreign':
      return {
        kind: 'wait',
        owner: s.lock,
        reason: `it is held by ${describeOwner(s.lock)}, an owner that does not say which folder it serves (an older Waypoint?), so nothing is relayed to it; stop it, or update it`,
      };
  }
}
