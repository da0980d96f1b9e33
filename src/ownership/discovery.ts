import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import { readLock, type LockInfo } from '../core/store/ownerLock';
import { ownerStatusOf, type OwnerStatusOf } from './ownerStatus';
import { DISCOVERY_FILE_NAME, storeDirOf } from './storeDirOf';
import { writeFileAtomicSync } from '../core/store/fsutil';
import { assertStoreNotLinked } from '../core/store/storeDir';

/**
 * `.waypoint/mcp.json`: how a relay reaches the process that owns the store —
 * its MCP URL and bearer token. Readable by the user only (0600), written
 * atomically, removed when the owner stops. It names the owner's pid and fencing
 * epoch; a relay trusts it only when the owner lock names the same pid and epoch
 * and the lock is live.
 */
export const DISCOVERY_FILE = DISCOVERY_FILE_NAME;
export { storeDirOf };

export const Discovery = z.strictObject({
  url: z.string().url(),
  token: z.string().min(32).max(256),
  pid: z.number().int().positive(),
  startedAt: z.number(),
  /** The owner's fencing epoch: the pair is trusted only while the lock names the same pid and epoch. */
  epoch: z.number().int().nonnegative().optional(),
});
export type Discovery = z.infer<typeof Discovery>;

export function discoveryPath(storeDir: string): string {
  return path.join(storeDir, DISCOVERY_FILE);
}

export function writeDiscovery(storeDir: string, d: Discovery): string {
  const file = discoveryPath(storeDir);
  writeFileAtomicSync(file, JSON.stringify(d, null, 2) + '\n', 0o600);
  // The umask may have widened nothing, but an existing inode's mode is not reset by rename targets; be explicit.
  fs.chmodSync(file, 0o600);
  return file;
}

export function readDiscovery(storeDir: string): Discovery | null {
  try {
    return Discovery.parse(JSON.parse(fs.readFileSync(discoveryPath(storeDir), 'utf8')));
  } catch {
    return null;
  }
}

/** Removes the discovery file if it is ours (a successor may already have written its own). */
export function removeDiscovery(storeDir: string, token: string): void {
  const d = readDiscovery(storeDir);
  if (d && d.token !== token) return;
  fs.rmSync(discoveryPath(storeDir), { force: true });
}

export type OwnerStatus = OwnerStatusOf<LockInfo, Discovery>;

export function findOwner(storeDir: string): OwnerStatus {
  // A linked store (a hostile clone) is refused before its lock or token is read and trusted.
  assertStoreNotLinked(storeDir);
  const seen = readLock(storeDir);
  return ownerStatusOf(seen, seen.info ? readDiscovery(storeDir) : null);
}
