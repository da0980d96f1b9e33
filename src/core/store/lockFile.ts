import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { isPidAlive } from './fsutil';

/**
 * The owner lock file as bytes and its lease arithmetic, with no schema library: the
 * CLI's fast hook path reads the lock on every hook call and must not pay for loading
 * zod. `ownerLock.ts` validates the content with its zod schema; the fast path with a
 * stricter hand check (see hookFastPath.ts) that falls back to the full path when unsure.
 */
export function lockPath(dir: string): string {
  return path.join(dir, 'owner.lock');
}

/** The lock's fields the lease arithmetic needs. */
export interface LeaseFields {
  pid: number;
  host: string;
  leaseExpiresAt: number;
  leaseMs?: number;
}

/** The lock's text and mtime, from one descriptor (both belong to the same file); null if absent or unreadable. */
export function readLockFile(dir: string): { text: string; mtimeMs: number } | null {
  let fd: number;
  try {
    fd = fs.openSync(lockPath(dir), fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0));
  } catch {
    return null;
  }
  try {
    return { mtimeMs: fs.fstatSync(fd).mtimeMs, text: fs.readFileSync(fd, 'utf8') };
  } catch {
    return null;
  } finally {
    fs.closeSync(fd);
  }
}

/** When the lease runs out: the later of what the lock says and its last renewal plus the lease. */
export function leaseEnd(seen: { info: LeaseFields | null; mtimeMs?: number }): number {
  const info = seen.info;
  if (!info) return 0;
  const renewed = info.leaseMs !== undefined && seen.mtimeMs !== undefined ? seen.mtimeMs + info.leaseMs : 0;
  return Math.max(info.leaseExpiresAt, renewed);
}

/** How far another machine's clock may run ahead of this one's before its lease is not believed. */
const CLOCK_SKEW_MS = 5 * 60_000;
/** Longer than any owner asks for: a lock claiming more is no lease to honour. */
const MAX_LEASE_MS = 60 * 60_000;

/**
 * A lease that ends far beyond its own length from now was not given by a running
 * owner with a sane clock: a lock copied from another machine, a clock years off, a
 * hand-made file. Such a lease is treated as expired, so it cannot lock a store out.
 */
export function isAbsurdLease(seen: { info: LeaseFields | null; mtimeMs?: number }, now = Date.now()): boolean {
  const info = seen.info;
  if (!info) return false;
  // A lock of an older version does not say its lease's length: the longest believable is assumed.
  const length = Math.min(info.leaseMs ?? MAX_LEASE_MS, MAX_LEASE_MS);
  return leaseEnd(seen) > now + length + CLOCK_SKEW_MS;
}

export function isStale(seen: { info: LeaseFields | null; mtimeMs?: number }, now = Date.now()): boolean {
  const info = seen.info;
  if (!info) return true; // unreadable content: nobody can be shown to own it
  if (info.host === os.hostname() && !isPidAlive(info.pid)) return true;
  // Another machine's pid cannot be checked from here: only its lease counts, if believable.
  return leaseEnd(seen) < now || isAbsurdLease(seen, now);
}
