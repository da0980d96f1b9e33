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
export const O_FILE = fss.constants.O_RDONLY | (fss.constants.O_NOFOLLOW ?? 0);

/** Read failures recorded as not captured (or, for GONE, as absent); any other error fails the scan. */
export const READ_ERRORS = new Set(['EACCES', 'EPERM', 'ENOENT', 'EISDIR', 'ENOTDIR', 'EBUSY', 'ELOOP', 'ESYMLINK', 'ENOTREG', 'EMFILE', 'ENFILE', 'EAGAIN']);
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
