import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import { evictForeignLock, readLock, type LockInfo } from '../core/store/ownerLock';
import { ownerStatusOf, type OwnerStatusOf } from './ownerStatus';
import { DISCOVERY_FILE_NAME, storeDirOf } from './storeDirOf';
import { writeFileAtomicSync } from '../core/store/fsutil';
import { assertStoreNotLinked } from '../core/store/storeDir';
import { noteFolderIdentity, storeClaimOf } from '../core/store/folderIdentity';

/**
 * `.waypoint/mcp.json`: how a relay reaches the process that owns the store —
 * its MCP URL and bearer token. Readable by the user only (0600), written
 * atomically, removed when the owner stops. It names the owner's pid and fencing
 * epoch; a relay trusts it only when the owner lock names the same pid and epoch
 * and the lock is live, and when the store it names is this folder's (a copied
 * folder holds the original's file).
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
  /** The store the owner serves (see folderIdentity.ts): a relay compares it with its own folder's first. */
  store: z
    .strictObject({
      id: z.string().regex(/^[A-Za-z0-9_-]{8,64}$/),
      dir: z.string().min(1).max(4096),
      dev: z.string().regex(/^\d{1,24}$/),
      ino: z.string().regex(/^\d{1,24}$/),
    })
    .optional(),
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

/**
 * Who owns the store, as far as this folder is concerned. The folder's identity is brought
 * up to date first (a copy drops the original's lock and discovery file, and says so once
 * through `log`); a lock whose owner proves it serves another store is dropped here too.
 * `foreign` is left only for an owner that cannot say which store it serves.
 */
export function findOwner(storeDir: string, log?: { warn(msg: string): void }): OwnerStatus {
  // A linked store (a hostile clone) is refused before its lock or token is read and trusted.
  assertStoreNotLinked(storeDir);
  noteFolderIdentity(storeDir, log);
  for (let tries = 0; ; tries++) {
    const seen = readLock(storeDir);
    const s = ownerStatusOf(seen, seen.info ? readDiscovery(storeDir) : null, storeClaimOf(storeDir));
    if (s.kind !== 'foreign' || !s.proven || seen.text === null || tries > 0) return s;
    log?.warn(`the owner lock here names pid ${s.lock.pid}, which serves the store in ${s.discovery.store?.dir ?? '?'}, not this one: dropped it (that owner is not touched).`);
    evictForeignLock(storeDir, seen.text);
    removeDiscovery(storeDir, s.discovery.token);
  }
}
