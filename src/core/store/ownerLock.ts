import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { z } from 'zod';
import { WaypointError } from '../model/errors';
import { fsyncDirSync, isPidAlive, tempPathFor, writeFileAtomicSync } from './fsutil';
import { isStale, leaseEnd, lockPath, readLockFile } from './lockFile';
import { registerBeat, unregisterBeat } from '../liveness';

/**
 * `.waypoint/owner.lock`: which process owns the store. It holds the owner's pid,
 * host, start time, its lease and its fencing epoch.
 *
 * Acquisition is atomic: the lock is created with link(2) from a complete temp
 * file, which fails if the lock exists, so readers never see a half-written lock.
 * A stale lock (its pid is gone on this host, or its lease expired) is taken over
 * under a short-lived `owner.lock.takeover` mutex, re-checking staleness inside it,
 * so two processes racing for a stale lock cannot both win.
 *
 * Fencing. An owner can be stalled past its lease (Ctrl-Z, a debugger, a laptop
 * lid) and replaced; when it wakes it must never acknowledge another write. So:
 *  - every ownership carries an epoch, one more than any the store has seen, and
 *    a takeover always bumps it;
 *  - the lock's content is written once, at acquisition, and never rewritten: the
 *    lease is renewed by touching the file's mtime (expiry = mtime + leaseMs),
 *    through the descriptor its content was checked on, so a stalled owner that
 *    wakes between its check and its renewal touches only its own, replaced file;
 *    it can never put its own content back;
 *  - before answering any write the store calls `assertHeld()`, which reads the
 *    lock and refuses (`lost_ownership`) unless it still names this owner and
 *    epoch. The write was durable before that read, so if the read still saw this
 *    owner, the takeover (which replaces the lock first and reads the journal
 *    after) replays the write: nothing acknowledged is lost;
 *  - renewal runs on a worker thread, but proves the main thread alive: the main
 *    thread marks every turn of its event loop (a timer), and the worker moves the
 *    lease only up to the last mark. An owner whose main thread is blocked (a
 *    blocking open of a FIFO, a runaway loop) stops being renewed and is taken over
 *    once its lease runs out; a thread that merely runs is no proof anyone answers.
 *    Long synchronous work must therefore yield well within the lease.
 */
export const LockInfo = z.object({
  ownerId: z.string(),
  pid: z.number().int(),
  host: z.string(),
  startedAt: z.number(),
  /** The lease's end when the lock was written; renewals move the file's mtime instead (see leaseMs). */
  leaseExpiresAt: z.number(),
  /** Length of the lease: it ends leaseMs after the lock file's mtime. Absent in locks of older versions. */
  leaseMs: z.number().positive().optional(),
  /** The fencing token: every ownership has a higher one than any before it. 0 in locks of older versions. */
  epoch: z.number().int().nonnegative().default(0),
  /** Older versions recorded their MCP endpoint here; it now lives only in the discovery file. */
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
/** The highest epoch handed out so far (a hint that keeps epochs rising across clean releases). */
const EPOCH_FILE = 'owner.epoch';


export interface ReadLock {
  info: LockInfo | null;
  text: string | null;
  /** The lock file's mtime: the last renewal. */
  mtimeMs?: number;
}

export function readLock(dir: string): ReadLock {
  const raw = readLockFile(dir);
  if (!raw) return { info: null, text: null };
  try {
    return { info: LockInfo.parse(JSON.parse(raw.text)), text: raw.text, mtimeMs: raw.mtimeMs };
  } catch {
    return { info: null, text: raw.text, mtimeMs: raw.mtimeMs };
  }
}

export { isStale, leaseEnd, lockPath };

let lockReadBuf = Buffer.alloc(4096);

/**
 * True when the lock file holds exactly `bytes`: one open, one read, one close, and no
 * parsing — it runs before every acknowledged write (readLock's descriptor stat, whole-
 * file read, JSON and schema parse were ~60% of that check). Anything unexpected (no
 * file, a link, a read error, other bytes) is false, and the caller looks closer.
 */
function lockFileHolds(dir: string, bytes: Buffer): boolean {
  if (lockReadBuf.length <= bytes.length) lockReadBuf = Buffer.alloc(bytes.length + 1);
  let fd: number;
  try {
    fd = fs.openSync(lockPath(dir), fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0));
  } catch {
    return false;
  }
  try {
    // One byte more than ours is asked for, so a longer file never compares equal.
    let n = 0;
    for (let r = -1; r !== 0 && n <= bytes.length; n += r) r = fs.readSync(fd, lockReadBuf, n, bytes.length + 1 - n, n);
    return n === bytes.length && lockReadBuf.subarray(0, n).equals(bytes);
  } catch {
    return false;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Magic numbers (statfs f_type) of Linux file systems whose metadata a stat reads
 * fresh from this kernel: ext2/3/4, xfs, btrfs, tmpfs, overlayfs, zfs, f2fs, bcachefs.
 * A network file system (NFS, SMB, 9p, FUSE) may answer a stat from an attribute
 * cache for seconds, long enough to miss another host's takeover.
 */
const LOCAL_FS_TYPES = new Set([0xef53, 0x58465342, 0x9123683e, 0x01021994, 0x794c7630, 0x2fc12fc1, 0xf2f52010, 0xca451a4e]);

function statIsFresh(dir: string): boolean {
  if (process.platform !== 'linux') return false;
  try {
    return LOCAL_FS_TYPES.has(Number(fs.statfsSync(dir).type));
  } catch {
    return false;
  }
}

/** What identifies one version of the lock file: any change to it gives another. */
type LockVersion = { dev: bigint; ino: bigint; size: bigint; ctimeNs: bigint };

function lockVersion(file: string): LockVersion | null {
  try {
    const s = fs.lstatSync(file, { bigint: true, throwIfNoEntry: false });
    return s?.isFile() ? { dev: s.dev, ino: s.ino, size: s.size, ctimeNs: s.ctimeNs } : null;
  } catch {
    return null;
  }
}

const sameVersion = (a: LockVersion, b: LockVersion): boolean => a.ino === b.ino && a.dev === b.dev && a.ctimeNs === b.ctimeNs && a.size === b.size;

export function describeOwner(info: LockInfo, seen?: Pick<ReadLock, 'mtimeMs'>, o: { unlockHint?: boolean } = {}): string {
  const until = leaseEnd({ info, mtimeMs: seen?.mtimeMs });
  // Whose lock it is matters most when it is another machine's: nothing here can tell
  // whether that process still runs, and the folder (with its lock) may be a copy.
  const foreign =
    info.host === os.hostname()
      ? ''
      : o.unlockHint === false
        ? 'another machine; '
        : `another machine, which this one cannot check: if no Waypoint there is using this folder (a copied or cloned folder, a synced drive), run 'waypoint unlock' here; `;
  return `pid ${info.pid} on ${info.host} (${foreign}owner ${info.ownerId}, epoch ${info.epoch}, since ${isoTime(info.startedAt)}, lease until ${isoTime(until)})`;
}

/** A time from a lock file, which may hold any number: an impossible one is shown as it is. */
function isoTime(ms: number): string {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? String(ms) : d.toISOString();
}

export class OwnerLock {
  private released = false;
  private lostReason: string | null = null;
  private renewer: Worker | undefined;
  private beatTimer: NodeJS.Timeout | undefined;
  private beat: BigInt64Array | undefined;
  private readonly lostListeners = new Set<(reason: string) => void>();

  private constructor(
    readonly dir: string,
    private readonly info: LockInfo,
    private readonly text: string,
    /**
     * True when this ownership began by taking over a lock whose holder may still be
     * running (its lease ran out, but its pid lives or is on another host): that
     * holder may wake and write, so the store fences what it left open. A holder whose
     * pid is gone on this host cannot.
     */
    readonly tookOver: boolean,
  ) {
    this.bytes = Buffer.from(text, 'utf8');
    this.file = lockPath(dir);
    this.remembersVersion = statIsFresh(dir);
  }
  /** The lock's content as written, for the check before every acknowledgement (see lockFileHolds). */
  private readonly bytes: Buffer;
  private readonly file: string;
  /**
   * The lock file's version (inode, size, change time) when it last read back as ours,
   * on a local file system only (null elsewhere, or once it changed): see assertHeld.
   */
  private ourVersion: LockVersion | null = null;
  private readonly remembersVersion: boolean;

  get ownerId(): string {
    return this.info.ownerId;
  }
  get epoch(): number {
    return this.info.epoch;
  }
  get current(): LockInfo {
    return this.info;
  }
  /** Why ownership was lost, or null while it is held. */
  get lost(): string | null {
    return this.lostReason;
  }

  static async acquire(dir: string, opts: AcquireOptions = {}): Promise<OwnerLock> {
    const leaseMs = opts.leaseMs ?? 30_000;
    const deadline = Date.now() + (opts.waitMs ?? 2_000);
    const ownerId = opts.ownerId ?? randomUUID();
    const file = lockPath(dir);
    const make = (seenEpoch: number): LockInfo => ({
      ownerId,
      pid: process.pid,
      host: os.hostname(),
      startedAt: Date.now(),
      leaseExpiresAt: Date.now() + leaseMs,
      leaseMs,
      epoch: Math.max(seenEpoch, readEpochHint(dir)) + 1,
    });
    for (;;) {
      let info = make(0);
      let tookOver = false;
      let won = tryCreate(file, info);
      if (!won) {
        const seen = readLock(dir);
        if (seen.text !== null && isStale(seen)) {
          info = make(seen.info?.epoch ?? 0);
          won = takeOver(dir, seen.text, info);
          tookOver = won && !(seen.info && seen.info.host === os.hostname() && !isPidAlive(seen.info.pid));
        }
      }
      if (won) {
        const lock = new OwnerLock(dir, info, JSON.stringify(info), tookOver);
        writeEpochHint(dir, info.epoch);
        lock.startRenewal(leaseMs);
        return lock;
      }
      if (Date.now() >= deadline) {
        const seen = readLock(dir);
        throw new WaypointError(
          'locked',
          seen.info
            ? `The Waypoint store in ${dir} is owned by ${describeOwner(seen.info, seen)}. Close that process, or talk to it instead of opening the store.`
            : `The Waypoint store in ${dir} is locked (owner.lock could not be taken).`,
          { owner: seen.info },
        );
      }
      await new Promise((r) => setTimeout(r, 25 + Math.random() * 50));
    }
  }

  /**
   * Throws `lost_ownership` unless the lock on disk is still exactly ours. Called
   * after a write is durable and before it is acknowledged, and before anything
   * that replaces a store file.
   */
  assertHeld(): void {
    if (this.lostReason === null && !this.released && !this.stillOurs()) {
      // Not byte for byte ours: read it whole to say whose it is now.
      const seen = readLock(this.dir);
      if (seen.text !== this.text) {
        this.markLost(
          seen.info
            ? `it was taken over by ${describeOwner(seen.info, seen)} while this process (epoch ${this.info.epoch}) was stalled past its lease`
            : `another process took the store over while this one (epoch ${this.info.epoch}) was stalled past its lease, and has since released it`,
        );
      }
    }
    if (this.lostReason !== null) {
      throw new WaypointError('lost_ownership', `This process no longer owns the Waypoint store in ${this.dir}: ${this.lostReason}. It accepts no more writes; talk to the current owner instead.`, {
        epoch: this.info.epoch,
      });
    }
    if (this.released) throw new WaypointError('io', 'The store is closed.');
  }

  /**
   * Whether the lock file still holds exactly our bytes. Every change of its content
   * comes with a new inode (locks are made with link(2), released by rename), and any
   * change at all — a renewal's futimes included — moves its change time, which no
   * process can set back. So a lock whose inode, size and change time are those it had
   * when it last read back as ours still is, and one lstat (~4 µs) answers instead of
   * an open, a read and a close (~10–18 µs) before every acknowledged write. The
   * version is taken before the read, so a change during the read is seen next time.
   */
  private stillOurs(): boolean {
    if (!this.remembersVersion) return lockFileHolds(this.dir, this.bytes);
    const now = lockVersion(this.file);
    if (now && this.ourVersion && sameVersion(now, this.ourVersion)) return true;
    const holds = now !== null && lockFileHolds(this.dir, this.bytes);
    this.ourVersion = holds ? now : null;
    return holds;
  }

  /** Called once if ownership is found lost (by a write's check or by the renewal thread). */
  onLost(listener: (reason: string) => void): { dispose(): void } {
    this.lostListeners.add(listener);
    return { dispose: () => this.lostListeners.delete(listener) };
  }

  private markLost(reason: string): void {
    if (this.lostReason !== null) return;
    this.lostReason = reason;
    this.stopRenewal();
    for (const l of this.lostListeners) {
      try {
        l(reason);
      } catch {
        // a listener's failure must not hide the loss from the others
      }
    }
  }

  /**
   * Renews on a worker thread at a third of the lease (so one missed tick does not
   * lose ownership), touching the lock only while it is still ours, and only up to
   * the main loop's last turn (see the class comment). The worker reports a lock
   * that is no longer ours; the main thread then fences itself.
   */
  private startRenewal(leaseMs: number): void {
    const beat = new BigInt64Array(new SharedArrayBuffer(8));
    const mark = registerBeat(beat);
    this.beat = beat;
    mark();
    // Often enough that the renewal lags the loop's real last turn by little of the lease.
    this.beatTimer = setInterval(mark, Math.max(50, Math.min(1_000, Math.floor(leaseMs / 6))));
    this.beatTimer.unref();
    const worker = new Worker(RENEWER_SOURCE, {
      eval: true,
      execArgv: [],
      workerData: { file: lockPath(this.dir), text: this.text, intervalMs: Math.max(250, Math.floor(leaseMs / 3)), beat },
    });
    worker.unref();
    worker.on('message', (m: { lost?: boolean }) => {
      if (m.lost && !this.released) {
        // Confirm on this thread (reads the lock again) so listeners get one clear reason.
        try {
          this.assertHeld();
        } catch {
          // recorded by assertHeld
        }
      }
    });
    worker.on('error', () => undefined);
    this.renewer = worker;
  }

  private stopRenewal(): void {
    clearInterval(this.beatTimer);
    this.beatTimer = undefined;
    if (this.beat) unregisterBeat(this.beat);
    this.beat = undefined;
    void this.renewer?.terminate();
    this.renewer = undefined;
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.stopRenewal();
    releaseIfOurs(this.dir, this.text);
  }
}

/**
 * Removes the lock only if it is ours. It is first renamed to a private name and
 * checked there, so a stalled owner that wakes mid-release never removes a
 * successor's lock on the strength of an old check; a successor's lock taken by
 * mistake is put back with link(2), which cannot overwrite a newer one.
 */
function releaseIfOurs(dir: string, text: string): void {
  const file = lockPath(dir);
  if (readLock(dir).text !== text) return;
  const aside = `${file}.release-${process.pid}-${randomUUID().slice(0, 8)}`;
  try {
    fs.renameSync(file, aside);
  } catch {
    return; // gone already
  }
  let asideText: string | null = null;
  try {
    asideText = fs.readFileSync(aside, 'utf8');
  } catch {
    // unreadable: treat as not ours
  }
  if (asideText !== text) {
    try {
      fs.linkSync(aside, file);
    } catch {
      // a newer lock exists already; the one we moved is superseded and its holder fences itself
    }
  }
  fs.rmSync(aside, { force: true });
}

function readEpochHint(dir: string): number {
  try {
    const n = Number(fs.readFileSync(path.join(dir, EPOCH_FILE), 'utf8').trim());
    return Number.isSafeInteger(n) && n >= 0 ? n : 0;
  } catch {
    return 0;
  }
}

function writeEpochHint(dir: string, epoch: number): void {
  // A hint, not a guard (the lock itself fences): written atomically but not fsync'd,
  // as it costs a flush on every open; the journal's headers carry the epochs durably.
  const file = path.join(dir, EPOCH_FILE);
  const tmp = tempPathFor(file);
  try {
    fs.writeFileSync(tmp, `${epoch}\n`, { mode: 0o600, flag: 'wx' });
    fs.renameSync(tmp, file);
  } catch {
    fs.rmSync(tmp, { force: true });
  }
}

/**
 * `waypoint unlock`: ends, now, the lease of the lock that still holds `seenText`. The
 * lock is rewritten rather than removed — same holder, a lease already over — so the
 * holder, should it run or wake, finds its text gone and fences itself, and the next
 * opener takes the store over by the takeover path, which fences whatever that holder
 * left open (a journal segment it may still append to). An unreadable lock, which
 * nobody can be shown to hold, is removed. Done under the takeover mutex.
 */
export function expireLock(dir: string, seenText: string): 'expired' | 'removed' | 'changed' | 'busy' {
  const mutex = path.join(dir, 'owner.lock.takeover');
  try {
    fs.writeFileSync(mutex, String(process.pid), { flag: 'wx', mode: 0o600 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    return 'busy';
  }
  try {
    const now = readLock(dir);
    if (now.text !== seenText) return 'changed';
    let raw: unknown = null;
    try {
      raw = JSON.parse(seenText);
    } catch {
      // not JSON: removed below
    }
    if (!now.info || raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
      fs.rmSync(lockPath(dir), { force: true });
      return 'removed';
    }
    writeFileAtomicSync(lockPath(dir), JSON.stringify({ ...raw, leaseExpiresAt: 0, leaseMs: 1 }), 0o600);
    return 'expired';
  } finally {
    fs.rmSync(mutex, { force: true });
  }
}

/** Raises the epoch hint to at least `epoch` (an opener that found a higher one in the journal). */
export function noteEpoch(dir: string, epoch: number): void {
  if (epoch > readEpochHint(dir)) writeEpochHint(dir, epoch);
}

function tryCreate(file: string, info: LockInfo): boolean {
  const tmp = tempPathFor(file);
  fs.writeFileSync(tmp, JSON.stringify(info), { mode: 0o600 });
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
    fs.writeFileSync(mutex, String(process.pid), { flag: 'wx', mode: 0o600 });
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
    // It changed under us, or was renewed after all: re-evaluate from the top.
    if (again.text !== staleText || !isStale(again)) return false;
    fs.rmSync(lockPath(dir), { force: true });
    return tryCreate(lockPath(dir), info);
  } finally {
    fs.rmSync(mutex, { force: true });
  }
}

/**
 * The renewal thread: every interval, open the lock and, if it still holds exactly
 * our text, set its mtime to the main loop's last turn (`beat`, written by the main
 * thread); otherwise tell the main thread and stop. The time is set on the descriptor
 * whose content was checked, so a successor's lock (a new file) is never touched.
 * Plain JavaScript, evaluated in the worker (no bundling needed), using only node:fs.
 */
const RENEWER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs');
const { file, text, intervalMs, beat } = workerData;
let renewedTo = 0;
const timer = setInterval(() => {
  let fd = -1;
  let now = null;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW || 0));
    now = fs.readFileSync(fd, 'utf8');
  } catch {}
  try {
    if (now !== text) { clearInterval(timer); parentPort.postMessage({ lost: true }); return; }
    const at = Number(Atomics.load(beat, 0));
    // Any new mark counts (not only a later one): a clock set back must not stop renewal.
    if (at !== renewedTo) { const t = new Date(at); fs.futimesSync(fd, t, t); renewedTo = at; }
  } catch {
  } finally {
    if (fd >= 0) try { fs.closeSync(fd); } catch {}
  }
}, intervalMs);
`;

/**
 * Drops a lock that is proven not to be this store's: its holder's own record says it
 * serves another store (this folder is a copy, and the lock came with it). Removed only
 * while it is still exactly the text seen, under the takeover mutex, so a lock a process
 * took here since is never touched; the original's owner is never signalled or contacted.
 */
export function evictForeignLock(dir: string, seenText: string): boolean {
  const mutex = path.join(dir, 'owner.lock.takeover');
  try {
    fs.writeFileSync(mutex, String(process.pid), { flag: 'wx', mode: 0o600 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    return false;
  }
  try {
    if (readLock(dir).text !== seenText) return false;
    fs.rmSync(lockPath(dir), { force: true });
    return true;
  } finally {
    fs.rmSync(mutex, { force: true });
  }
}
