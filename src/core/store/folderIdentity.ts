import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';
import { writeFileAtomicSync } from './fsutil';

/**
 * `.waypoint/identity.json`: which folder a store belongs to. A store is copied with its
 * folder (`cp -a`, a backup restored beside the original, rsync to another machine), and
 * with it come the original's `owner.lock` and `mcp.json`: trusted as they are, a command
 * run in the copy would relay to the original's owner and change the original's files.
 * So every store records a random id with the real path, device and inode of its store
 * directory and the machine it is on; an owner answers with them (its discovery file,
 * and a refusal of any call that names another store), and a relaying process compares
 * them with its own folder before it relays anything.
 *
 * On open the record is compared with the directory: the same device and inode is the same
 * folder (perhaps renamed: the path is updated); a different one whose recorded original
 * still exists and still holds this id under its recorded device and inode is a copy — it
 * gets an id of its own and drops the original's lock, discovery file and team-store
 * workspace id (never touching the original or its owner); otherwise the folder was moved
 * and keeps its id. A record made on another machine makes a copy too.
 *
 * No schema library here: the fast hook path checks an owner's identity on every hook.
 */
export const IDENTITY_FILE = 'identity.json';
const MUTEX_FILE = 'identity.json.lock';
const MUTEX_STALE_MS = 10_000;
/** What belongs to the original's owner and team-store identity, dropped from a copy. */
const COPIED_OWNER_FILES = ['owner.lock', 'mcp.json', 'workspace-id.json'];

export interface FolderIdentity {
  id: string;
  /** The store directory's real path when the record was made (or last updated). */
  dir: string;
  /** Device and inode of the store directory, as decimal strings (they may pass 2^53). */
  dev: string;
  ino: string;
  machine: string;
  createdAt: number;
}

export type IdentityChange =
  | { kind: 'same' | 'new' | 'renamed' | 'moved' }
  /** A copy of `original` (on `machine`): it was given a new id, and the original's owner files were dropped here. */
  | { kind: 'copy'; original: string; machine: string };

const ID_RE = /^[A-Za-z0-9_-]{8,64}$/;
const NUM_RE = /^\d{1,24}$/;

/**
 * The machine a record was made on: the host name, not WAYPOINT_MACHINE (a label for the
 * team store that one shell may set and the editor not; a folder must not look copied
 * because of it).
 */
export function hostMachine(): string {
  return os.hostname();
}

/** Device and inode of a directory (not followed if it is a link), or null when it does not exist. */
export function dirFingerprint(dir: string): { dev: string; ino: string } | null {
  try {
    const st = fs.lstatSync(dir, { bigint: true });
    return st.isDirectory() ? { dev: String(st.dev), ino: String(st.ino) } : null;
  } catch {
    return null;
  }
}

function realDir(dir: string): string {
  try {
    return fs.realpathSync.native(dir);
  } catch {
    return path.resolve(dir);
  }
}

function parseIdentity(text: string): FolderIdentity | null {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return null;
  const o = v as Record<string, unknown>;
  const { id, dir, dev, ino, machine, createdAt } = o;
  if (typeof id !== 'string' || !ID_RE.test(id)) return null;
  if (typeof dir !== 'string' || !path.isAbsolute(dir) || dir.length > 4096 || dir.includes('\0')) return null;
  if (typeof dev !== 'string' || !NUM_RE.test(dev) || typeof ino !== 'string' || !NUM_RE.test(ino)) return null;
  if (typeof machine !== 'string' || machine.length > 255 || typeof createdAt !== 'number' || !Number.isFinite(createdAt)) return null;
  return { id, dir, dev, ino, machine, createdAt };
}

/** The identity a store directory records, or null (none yet, unreadable, malformed, a link). */
export function readFolderIdentity(storeDir: string): FolderIdentity | null {
  let fd: number;
  try {
    fd = fs.openSync(path.join(storeDir, IDENTITY_FILE), fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0));
  } catch {
    return null;
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile() || st.size > 64 * 1024) return null;
    return parseIdentity(fs.readFileSync(fd, 'utf8'));
  } catch {
    return null;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * What a relaying process sends and an owner must match: this store directory's recorded
 * id with its actual device and inode. Null when the directory does not exist.
 */
export interface StoreClaim {
  id: string | null;
  dev: string;
  ino: string;
}

export function storeClaimOf(storeDir: string): StoreClaim | null {
  const fp = dirFingerprint(storeDir);
  if (!fp) return null;
  return { id: readFolderIdentity(storeDir)?.id ?? null, ...fp };
}

/** The header a relaying process sends with every call: the owner refuses a call meant for another store. */
export const STORE_CLAIM_HEADER = 'x-waypoint-store';

export function claimHeader(c: StoreClaim): string {
  return `${c.id ?? '-'}:${c.dev}:${c.ino}`;
}

/** What an owner serves, as its discovery file and its refusals name it. */
export interface ServedStore {
  id: string;
  dir: string;
  dev: string;
  ino: string;
}

/**
 * Whether an owner serving `served` is the owner of the store a process found at `here`:
 * the same directory (device and inode) and, when this folder has a recorded id, the same id.
 */
export function servesClaim(served: ServedStore, here: StoreClaim): boolean {
  return served.dev === here.dev && served.ino === here.ino && (here.id === null || here.id === served.id);
}

/** Parses a claim header (`id:dev:ino`), or null for anything else. */
export function parseClaimHeader(v: string): StoreClaim | null {
  const m = /^([A-Za-z0-9_-]{8,64}|-):(\d{1,24}):(\d{1,24})$/.exec(v);
  return m ? { id: m[1] === '-' ? null : m[1], dev: m[2], ino: m[3] } : null;
}

function writeIdentity(storeDir: string, ident: FolderIdentity): void {
  // Whole or not at all: a temp created new (O_EXCL never follows a link), fsynced, renamed over.
  writeFileAtomicSync(path.join(storeDir, IDENTITY_FILE), JSON.stringify({ version: 1, ...ident }, null, 2) + '\n', 0o600);
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** A short mutex (O_EXCL file) so two processes opening a copy at once agree on one new id. */
function withMutex<T>(storeDir: string, fn: () => T): T {
  const mutex = path.join(storeDir, MUTEX_FILE);
  const deadline = Date.now() + 5_000;
  for (;;) {
    try {
      fs.writeFileSync(mutex, String(process.pid), { flag: 'wx', mode: 0o600 });
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      try {
        // A holder that crashed inside must not block everyone forever.
        if (Date.now() - fs.statSync(mutex).mtimeMs > MUTEX_STALE_MS || Date.now() > deadline) fs.rmSync(mutex, { force: true });
      } catch {
        // gone already
      }
      sleepSync(10 + Math.random() * 20);
    }
  }
  try {
    return fn();
  } finally {
    fs.rmSync(mutex, { force: true });
  }
}

/** Whether the folder `rec` names still exists and still holds `rec`'s id under its recorded device and inode. */
function originalStillThere(rec: FolderIdentity): boolean {
  const fp = dirFingerprint(rec.dir);
  if (!fp || fp.dev !== rec.dev || fp.ino !== rec.ino) return false;
  return readFolderIdentity(rec.dir)?.id === rec.id;
}

function decide(rec: FolderIdentity | null, here: { dir: string; dev: string; ino: string }, machine: string): IdentityChange {
  if (!rec) return { kind: 'new' };
  if (rec.machine !== machine) return { kind: 'copy', original: rec.dir, machine: rec.machine };
  if (rec.dev === here.dev && rec.ino === here.ino) return { kind: rec.dir === here.dir ? 'same' : 'renamed' };
  // Same path, another inode (restored from a backup, a device renumbered): still this folder.
  if (rec.dir === here.dir) return { kind: 'moved' };
  return originalStillThere(rec) ? { kind: 'copy', original: rec.dir, machine: rec.machine } : { kind: 'moved' };
}

/**
 * Compares a store directory with its recorded identity and brings the record up to date
 * (see the top of this file). The store directory must exist. Returns the identity now in
 * force and what changed; a `copy` is the caller's to announce, once. A record that cannot
 * be written (a full or read-only disk) is not fatal: the identity is still returned, and
 * the copied owner files are still dropped (removing needs no space).
 */
export function reconcileFolderIdentity(storeDir: string, machine = hostMachine()): { identity: FolderIdentity; change: IdentityChange } {
  const fp = dirFingerprint(storeDir);
  if (!fp) throw new Error(`reconcileFolderIdentity: ${storeDir} is not a directory`);
  const here = { dir: realDir(storeDir), ...fp };
  const first = readFolderIdentity(storeDir);
  const quick = decide(first, here, machine);
  if (quick.kind === 'same') return { identity: first!, change: quick };
  const run = () => {
    // Decided again inside the mutex: another process may have just done it.
    const rec = readFolderIdentity(storeDir);
    const change = decide(rec, here, machine);
    if (change.kind === 'same') return { identity: rec!, change };
    if (change.kind === 'copy') {
      // These name the original's owner and team-store workspace: never ours to use.
      for (const f of COPIED_OWNER_FILES) fs.rmSync(path.join(storeDir, f), { force: true });
    }
    const keep = rec && (change.kind === 'renamed' || change.kind === 'moved');
    const identity: FolderIdentity = { id: keep ? rec.id : randomUUID(), ...here, machine, createdAt: keep ? rec.createdAt : Date.now() };
    try {
      writeIdentity(storeDir, identity);
    } catch {
      // Not writable now (full or read-only disk): compared again on the next open.
    }
    return { identity, change };
  };
  try {
    return withMutex(storeDir, run);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    // A read-only or full disk cannot take the mutex file; decide without it (nothing to race with that can write either).
    if (code === 'EROFS' || code === 'ENOSPC' || code === 'EACCES' || code === 'EPERM') return run();
    throw e;
  }
}

/** The one line that tells a person their folder was found to be a copy. */
export function copyNotice(storeDir: string, change: Extract<IdentityChange, { kind: 'copy' }>, machine: string): string {
  const folder = path.dirname(realDir(storeDir));
  const from = change.machine !== machine ? `${path.dirname(change.original)} on ${change.machine}` : path.dirname(change.original);
  return `This folder (${folder}) is a copy of ${from}; Waypoint gave it its own identity. Its Waypoint history up to the copy is kept here; from now on it is recorded apart from the original, which is untouched.`;
}

/** Brings a store's folder identity up to date, if the store exists; a copy is announced once, by whoever finds it. */
export function noteFolderIdentity(storeDir: string, log?: { warn(msg: string): void }): void {
  if (!dirFingerprint(storeDir)) return;
  const r = reconcileFolderIdentity(storeDir);
  if (r.change.kind === 'copy') log?.warn(copyNotice(storeDir, r.change, hostMachine()));
}
