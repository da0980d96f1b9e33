/**
 * The scanner's low-level file-system access: how directories and files are reached
 * without following symlinks (/proc/self/fd on Linux), synchronous and thread-pool
 * reads, and how errors are named and classified.
 */
import fss, { type Stats } from 'node:fs';
import { KIND_DIR, KIND_FILE, KIND_SYMLINK } from '../statPool.js';
import { RESERVED_DIRS } from '../paths.js';

/**
 * Linux: an open directory is reachable as /proc/self/fd/N, so a directory opened
 * once can be listed, and its entries opened, by that name: the kernel resolves it to
 * the very directory opened, whatever happens to the path since (openat without
 * openat). Elsewhere the walk falls back to checking real paths.
 */
export const PROC_FD = process.platform === 'linux' && fss.existsSync('/proc/self/fd') ? '/proc/self/fd' : null;
export const O_DIR = fss.constants.O_RDONLY | (fss.constants.O_DIRECTORY ?? 0) | (fss.constants.O_NOFOLLOW ?? 0);
/** O_NONBLOCK: a file swapped for a FIFO after its lstat must not block the open (its fstat then refuses it); no effect on a regular file's reads. */
export const O_FILE = fss.constants.O_RDONLY | (fss.constants.O_NOFOLLOW ?? 0) | (fss.constants.O_NONBLOCK ?? 0);

/** Read failures recorded as not captured (or, for GONE, as absent); any other error fails the scan. */
export const READ_ERRORS = new Set(['EACCES', 'EPERM', 'ENOENT', 'EISDIR', 'ENOTDIR', 'EBUSY', 'ELOOP', 'ESYMLINK', 'ENOTREG', 'ENXIO', 'ECHANGING', 'EMFILE', 'ENFILE', 'EAGAIN']);
/** Gone since it was listed: absent is the truth, so nothing is recorded for it. */
export const GONE = new Set(['ENOENT', 'ENOTDIR']);

export function errCode(err: unknown): string {
  return (err as NodeJS.ErrnoException).code ?? '';
}

export function errInfo(err: unknown, io?: string, abs?: string): { code: string; message: string } {
  const e = err as NodeJS.ErrnoException;
  let message = e.message ?? String(err);
  // Errors name the /proc path the call used; people want the file's own path.
  if (io && abs && io !== abs) message = message.split(io).join(abs);
  return { code: e.code ?? 'EUNKNOWN', message };
}

export function notRegular(rel: string): Error {
  return Object.assign(new Error(`${rel} is no longer a regular file`), { code: 'ENOTREG' });
}

/** Reads of one file, each checked by an fstat after it, before the file counts as changing while read (see stableRead). */
export const READ_ATTEMPTS = 4;

/**
 * Whether two fstats of one descriptor describe the same version of the file: a write
 * between them moves its ctime (and mtime, and maybe size). Linux since 6.13 stamps a
 * change made after a stat finer than the clock tick, so even a write in the same
 * tick shows; coarser kernels can miss one made within the tick of the last.
 */
export function sameVersion(a: StatLike, b: StatLike): boolean {
  return a.ctimeMs === b.ctimeMs && a.mtimeMs === b.mtimeMs && a.size === b.size;
}

/**
 * Whether a file's last change (`st.ctimeMs`) is recent enough that a write could
 * still be copying its data: a write stamps the file when it starts, so one already
 * under way at the fstat before a read leaves both fstats equal while the read sees
 * half of it. Such a file is read a second time and must read the same (see
 * FileReads.readSmall). A whole-second ctime suggests a coarse file system: a wider window.
 */
export function recentlyChanged(st: StatLike, nowMs = Date.now()): boolean {
  return nowMs - st.ctimeMs < (st.ctimeMs % 1000 === 0 ? 3000 : 1000);
}

/** A recently changed file's confirming read comes at least this long after the change began (see confirmPauseMs). */
export const CONFIRM_AFTER_MS = 20;
/** …and at least this long after the first read. */
export const CONFIRM_MIN_PAUSE_MS = 2;

/**
 * How long to wait before a recently changed file's confirming read. A write's
 * ctime is set when it starts, so a writer descheduled in the middle of its copy
 * leaves a file whose fstat does not move while two reads see the same torn bytes.
 * Reading again only once the change is CONFIRM_AFTER_MS old gives such a writer
 * that long to finish (on a loaded machine, a couple of ms was not always enough);
 * a file changed longer ago waits only the minimum.
 */
export function confirmPauseMs(st: StatLike, nowMs = Date.now()): number {
  return Math.min(CONFIRM_AFTER_MS, Math.max(CONFIRM_MIN_PAUSE_MS, st.ctimeMs + CONFIRM_AFTER_MS - nowMs));
}

/** A file rewritten during each of READ_ATTEMPTS reads: recorded as not captured, never stored torn. */
export function changingWhileRead(rel: string): Error {
  return Object.assign(new Error(`${rel} was changing while it was read (${READ_ATTEMPTS} attempts): not captured`), { code: 'ECHANGING' });
}

/**
 * A file name's bytes as text, exactly: valid UTF-8 sequences as they are, every other
 * byte as `\xNN` (a name that is not UTF-8 has no string of its own: Node decodes
 * those bytes to U+FFFD, which names no file and can stand for many).
 */
export function showNameBytes(raw: Buffer): string {
  let out = '';
  for (let i = 0; i < raw.length; ) {
    const b = raw[i]!;
    const n = b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
    const seq = n > 0 && i + n <= raw.length ? raw.subarray(i, i + n) : null;
    // The decoder is the judge of a sequence (overlong forms, surrogates): valid when it round-trips.
    if (seq && Buffer.from(seq.toString('utf8'), 'utf8').equals(seq)) {
      out += seq.toString('utf8');
      i += n;
    } else {
      out += `\\x${b.toString(16).toUpperCase().padStart(2, '0')}`;
      i++;
    }
  }
  return out;
}

/**
 * The entries of the directory reached by `io` whose names are not valid UTF-8, by the
 * name Node's listing gave them (with U+FFFD in it), each with the byte-exact names
 * (showNameBytes) it stands for. Listed again as bytes: only for a directory whose
 * listing has a U+FFFD in a name, which is rare.
 */
export function namesNotUtf8(io: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  let raw: Buffer[];
  try {
    raw = fss.readdirSync(io, { encoding: 'buffer' });
  } catch {
    return out; // gone since it was listed: its entries are gone with it
  }
  for (const r of raw) {
    const lossy = r.toString('utf8');
    if (Buffer.from(lossy, 'utf8').equals(r)) continue;
    const shown = out.get(lossy);
    if (shown) shown.push(showNameBytes(r));
    else out.set(lossy, [showNameBytes(r)]);
  }
  return out;
}

export function isReserved(name: string): boolean {
  // Every reserved name starts with a dot: most names are decided without lowercasing.
  return name.charCodeAt(0) === 46 && RESERVED_DIRS.has(name.toLowerCase());
}

/** Names that are reserved only when folded (`.GIT`, `.Waypoint`): skipped like the real ones, but reported. */
export function isReservedVariant(name: string): boolean {
  return !RESERVED_DIRS.has(name);
}

/** What the walk needs of an lstat: a fs.Stats, or the same fields from a stat worker. */
export type StatLike = Pick<Stats, 'size' | 'mtimeMs' | 'ctimeMs' | 'ino' | 'mode' | 'isFile' | 'isDirectory' | 'isSymbolicLink'>;

/** A stat worker's answer for one path, shaped as the walk reads a Stats. */
export class PooledStat implements StatLike {
  constructor(
    private readonly kind: number,
    readonly size: number,
    readonly mtimeMs: number,
    readonly ino: number,
    readonly mode: number,
    readonly ctimeMs: number,
  ) {}
  isFile(): boolean {
    return this.kind === KIND_FILE;
  }
  isDirectory(): boolean {
    return this.kind === KIND_DIR;
  }
  isSymbolicLink(): boolean {
    return this.kind === KIND_SYMLINK;
  }
}

/** Reads up to `size` bytes (fewer if the file shrank) into `scratch`, which must hold them; returns the view read. */
export function readSyncInto(fd: number, size: number, scratch: Buffer): Buffer {
  let got = 0;
  while (got < size) {
    const n = fss.readSync(fd, scratch, got, size - got, got);
    if (n === 0) break;
    got += n;
  }
  return scratch.subarray(0, got);
}

function readAsync(fd: number, buf: Buffer, at: number): Promise<number> {
  return new Promise((resolve, reject) => fss.read(fd, buf, at, buf.length - at, at, (err, n) => (err ? reject(err) : resolve(n))));
}

/** Reads a file to its end (it may have grown since its fstat), on the thread pool. */
export async function readAllAsync(fd: number, sizeHint: number): Promise<Buffer> {
  let buf = Buffer.allocUnsafeSlow(Math.max(sizeHint, 1));
  let got = 0;
  for (;;) {
    const n = await readAsync(fd, buf, got);
    if (n === 0) break;
    got += n;
    if (got === buf.length) {
      // Full: one small probe read tells whether the file grew, without copying.
      const probe = Buffer.allocUnsafe(64 * 1024);
      const more = await new Promise<number>((resolve, reject) => fss.read(fd, probe, 0, probe.length, got, (err, k) => (err ? reject(err) : resolve(k))));
      if (more === 0) break;
      const bigger = Buffer.allocUnsafeSlow(buf.length * 2 + more);
      buf.copy(bigger, 0, 0, got);
      probe.copy(bigger, got, 0, more);
      buf = bigger;
      got += more;
    }
  }
  return got === buf.length ? buf : buf.subarray(0, got);
}
