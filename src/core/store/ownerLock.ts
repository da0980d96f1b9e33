import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { WaypointError } from '../model/errors';
import { fsyncDirSync, isPidAlive, tempPathFor, writeFileAtomicSync } from './fsutil';
import { STORE_FILE_MODE } from './storeDir';

/**
 * `.waypoint/owner.lock`: which process owns the store. It holds the owner's pid,
 * host, start time, a lease that the owner renews, and (once it serves one) the
 * endpoint other processes relay to.
 *
 * Acquisition is atomic: the lock is created with link(2) from a complete temp
 * file, which fails if the lock exists, so readers never see a half-written lock.
 * A stale lock (its pid is gone on this host, or its lease expired) is taken over
 * under a short-lived `owner.lock.takeover` mutex, re-checking staleness inside it,
 * so two processes racing for a stale lock cannot both win.
 */
export const LockInfo = z.object({
  ownerId: z.string(),
  pid: z.number().int(),
  host: z.string(),
  startedAt: z.number(),
  leaseExpiresAt: z.number(),
  endpoint: z.object({ url: z.string(), discoveryFile: z.string().optional() }).nullable().optional(),
});
export type LockInfo = z.infer<typeof LockInfo>;

export interface AcquireOptions {
  /** How long a second opener waits for the owner to go away. */
  waitMs?: number;
  leaseMs?: number;
  ownerId?: string;
}

const TAKEOVER_STALE_MS = 10_000;

export function lockPath(dir: string): string {
  return path.join(dir, 'owner.lock');
}

export function readLock(dir: string): { info: LockInfo | null; text: string | null } {
  let text: string;
  try {
    text = fs.readFileSync(lockPath(dir), 'utf8');
  } catch {
    return { info: null, text: null };
  }
  try {
    return { info: LockInfo.parse(JSON.parse(text)), text };
  } catch {
    return { info: null, text };
  }
}

export function isStale(info: LockInfo | null, now = Date.now()): boolean {
  if (!info) return true; // unreadable content: nobody can be shown to own it
  if (info.host === os.hostname() && !isPidAlive(info.pid)) return true;
  return info.leaseExpiresAt < now;
}

export function describeOwner(info: LockInfo): string {
  return `pid ${info.pid} on ${info.host} (owner ${info.ownerId}, since ${new Date(info.startedAt).toISOString()}, lease until ${new Date(
    info.leaseExpiresAt,
  ).toISOString()})`;
}

export class OwnerLock {
  private released = false;
  private timer: NodeJS.Timeout | undefined;

  private constructor(
    readonly dir: string,
    private info: LockInfo,
    private readonly leaseMs: number,
  ) {}

  get ownerId(): string {
    return this.info.ownerId;
  }
  get current(): LockInfo {
    return this.info;
  }

  static async acquire(dir: string, opts: AcquireOptions = {}): Promise<OwnerLock> {
    const leaseMs = opts.leaseMs ?? 30_000;
    const deadline = Date.now() + (opts.waitMs ?? 2_000);
    const info: LockInfo = {
      ownerId: opts.ownerId ?? randomUUID(),
      pid: process.pid,
      host: os.hostname(),
      startedAt: Date.now(),
      leaseExpiresAt: Date.now() + leaseMs,
      endpoint: null,
    };
    const file = lockPath(dir);
    for (;;) {
      if (tryCreate(file, info)) break;
      const seen = readLock(dir);
      if (seen.text !== null && isStale(seen.info) && takeOver(dir, seen.text, info)) break;
      if (Date.now() >= deadline) {
        const owner = readLock(dir).info;
        throw new WaypointError(
          'locked',
          owner
            ? `The Waypoint store in ${dir} is owned by ${describeOwner(owner)}. Close that process, or talk to it instead of opening the store.`
            : `The Waypoint store in ${dir} is locked (owner.lock could not be taken).`,
          { owner },
        );
      }
      await new Promise((r) => setTimeout(r, 25 + Math.random() * 50));
    }
    const lock = new OwnerLock(dir, info, leaseMs);
    lock.startRenewal();
    return lock;
  }

  private startRenewal(): void {
    // Renew at a third of the lease so one missed tick does not lose ownership.
    this.timer = setInterval(() => this.renew(), Math.max(1000, this.leaseMs / 3));
    this.timer.unref();
  }

  renew(): void {
    if (this.released) return;
    this.write({ ...this.info, leaseExpiresAt: Date.now() + this.leaseMs });
  }

  /** Records the endpoint relays should use (MCP over HTTP). */
  setEndpoint(endpoint: LockInfo['endpoint']): void {
    this.write({ ...this.info, endpoint, leaseExpiresAt: Date.now() + this.leaseMs });
  }

  private write(next: LockInfo): void {
    const seen = readLock(this.dir).info;
    if (!seen || seen.ownerId !== this.info.ownerId) {
      // Someone took the store over (our lease lapsed while we were stalled); do not fight.
      return;
    }
    writeFileAtomicSync(lockPath(this.dir), JSON.stringify(next), STORE_FILE_MODE);
    this.info = next;
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    clearInterval(this.timer);
    const seen = readLock(this.dir).info;
    if (seen && seen.ownerId === this.info.ownerId) fs.rmSync(lockPath(this.dir), { force: true });
  }
}

function tryCreate(file: string, info: LockInfo): boolean {
  const tmp = tempPathFor(file);
  fs.writeFileSync(tmp, JSON.stringify(info), { mode: STORE_FILE_MODE, flag: 'wx' });
  const fd = fs.openSync(tmp, 'r');
  fs.fsyncSync(fd);
  fs.closeSync(fd);
  try {
    fs.linkSync(tmp, file);
    fsyncDirSync(path.dirname(file));
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw e;
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

function takeOver(dir: string, staleText: string, info: LockInfo): boolean {
  const mutex = path.join(dir, 'owner.lock.takeover');
  try {
    fs.writeFileSync(mutex, String(process.pid), { flag: 'wx', mode: STORE_FILE_MODE });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    try {
      // A taker that crashed inside the mutex must not block everyone forever.
      if (Date.now() - fs.statSync(mutex).mtimeMs > TAKEOVER_STALE_MS) fs.rmSync(mutex, { force: true });
    } catch {
      // gone already
    }
    return false;
  }
  try {
    const again = readLock(dir);
    if (again.text !== staleText) return false; // it changed under us: re-evaluate from the top
    fs.rmSync(lockPath(dir), { force: true });
    return tryCreate(lockPath(dir), info);
  } finally {
    fs.rmSync(mutex, { force: true });
  }
}
