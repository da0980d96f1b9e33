import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import { isStale, readLock, type LockInfo } from '../core/store/ownerLock';
import { writeFileAtomicSync } from '../core/store/fsutil';
import { assertStoreNotLinked } from '../core/store/storeDir';

/**
 * `.waypoint/mcp.json`: how a relay reaches the process that owns the store —
 * its MCP URL and bearer token. Readable by the user only (0600), written
 * atomically, removed when the owner stops. The owner lock's `endpoint` names the
 * same URL; a relay trusts the pair only when both agree and the lock's pid lives.
 */
export const DISCOVERY_FILE = 'mcp.json';

export const Discovery = z.strictObject({
  url: z.string().url(),
  token: z.string().min(32).max(256),
  pid: z.number().int().positive(),
  startedAt: z.number(),
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

export type OwnerStatus =
  /** Nobody owns the store (or the owner is dead): open it yourself. */
  | { kind: 'none' }
  /** A live owner serves MCP over HTTP: relay to it. */
  | { kind: 'serving'; discovery: Discovery; lock: LockInfo }
  /** A live owner without an endpoint (a CLI command mid-run, or an owner still starting). */
  | { kind: 'busy'; lock: LockInfo };

export function findOwner(storeDir: string): OwnerStatus {
  // A linked store (a hostile clone) is refused before its lock or token is read and trusted.
  assertStoreNotLinked(storeDir);
  const { info, text } = readLock(storeDir);
  if (text === null || isStale(info)) return { kind: 'none' };
  if (!info) return { kind: 'none' };
  const url = info.endpoint?.url;
  if (url) {
    const d = readDiscovery(storeDir);
    if (d && d.url === url && d.pid === info.pid) return { kind: 'serving', discovery: d, lock: info };
  }
  return { kind: 'busy', lock: info };
}
