/**
 * The directories a restore writes into, reached so that a directory swapped for a
 * symlink while the restore runs cannot redirect a single write.
 *
 * Node has no openat/renameat/unlinkat. On Linux an open directory is reachable as
 * /proc/self/fd/N: the kernel resolves that name to the very directory the
 * descriptor holds, whatever has happened to its path since. So each directory is
 * opened once, component by component from a root descriptor opened once, with
 * O_DIRECTORY|O_NOFOLLOW relative to its parent's descriptor, and every create,
 * rename, chmod, unlink and symlink of the restore names its entry as
 * `/proc/self/fd/<dirfd>/<name>`. The last component is never followed either
 * (lstat, O_NOFOLLOW|O_EXCL opens, rename and unlink act on the link itself). A
 * directory reached this way stays the directory that was inside the workspace when
 * it was opened; an agent that can only write inside the workspace can move it around
 * inside, never make a write land outside.
 *
 * Without /proc/self/fd (macOS, Windows) directories are plain paths, each component
 * checked with lstat (a symlinked parent must resolve inside its root): the check and
 * the write are separate system calls, so a swap in between is not prevented there.
 */
import fss, { constants as fsc } from 'node:fs';
import path from 'node:path';
import { UnsafePathError, isInside, type SnapshotRoot } from './paths.js';

const O_DIR_NOFOLLOW = fsc.O_RDONLY | (fsc.O_DIRECTORY ?? 0) | (fsc.O_NOFOLLOW ?? 0);

/** '/proc/self/fd' where directory descriptors can be used as path prefixes; probed once. */
let procFd: string | null | undefined;
function procFdPrefix(): string | null {
  if (procFd !== undefined) return procFd;
  procFd = null;
  if (process.platform !== 'linux') return procFd;
  try {
    const fd = fss.openSync('/', fsc.O_RDONLY | (fsc.O_DIRECTORY ?? 0));
    try {
      const viaProc = fss.statSync(`/proc/self/fd/${fd}/.`);
      const direct = fss.fstatSync(fd);
      if (viaProc.ino === direct.ino && viaProc.dev === direct.dev) procFd = '/proc/self/fd';
    } finally {
      fss.closeSync(fd);
    }
  } catch {
    // No /proc mounted: paths it is.
  }
  return procFd;
}

/** Whether directory descriptors guard every write (Linux with /proc). */
export function writesThroughDescriptors(): boolean {
  return procFdPrefix() !== null;
}

/** A directory of the workspace, as a restore reaches it. */
export interface WsDir {
  /** What its entries are named under: `/proc/self/fd/N`, or its real path without /proc. */
  io: string;
  /** Its descriptor (-1 without /proc). */
  fd: number;
  /** Index of its root in the roots given. */
  root: number;
  /** Its path from the root, as reached without following links ('' for the root). */
  rel: string;
}

interface RootState {
  real: string;
  dir: WsDir;
}

/** How many symlinked parents one path may pass through before it is refused (loops, races). */
const MAX_LINK_HOPS = 40;

export class WorkspaceDirs {
  private readonly proc = procFdPrefix();
  private readonly rootStates: (RootState | undefined)[];
  /** Opened directories by `root\0rel` (rel as asked, so a symlinked parent's name maps to its real directory too). */
  private readonly dirs = new Map<string, WsDir>();
  private readonly fds: number[] = [];

  constructor(private readonly roots: readonly SnapshotRoot[]) {
    this.rootStates = roots.map(() => undefined);
  }

  /** Whether this instance writes through descriptors (Linux with /proc). */
  get guarded(): boolean {
    return this.proc !== null;
  }

  private root(i: number): RootState {
    let s = this.rootStates[i];
    if (s) return s;
    // The root itself may be reached through symlinks: that is the person's own path to it.
    const real = fss.realpathSync.native(this.roots[i]!.dir);
    let dir: WsDir;
    if (this.proc) {
      const fd = fss.openSync(real, fsc.O_RDONLY | (fsc.O_DIRECTORY ?? 0));
      this.fds.push(fd);
      dir = { io: `${this.proc}/${fd}`, fd, root: i, rel: '' };
    } else {
      dir = { io: real, fd: -1, root: i, rel: '' };
    }
    s = { real, dir };
    this.rootStates[i] = s;
    return s;
  }

  /**
   * Directory `rel` ('' for the root) of root `i`: opened without following links,
   * created (mode 0777 less the umask) where missing if `create`, else null where
   * missing. A symlinked parent is followed only if it resolves inside the root (then
   * its real directory is opened the same way); one leading outside, or dangling, is an
   * UnsafePathError. Something not a directory in the way is an ENOTDIR error (or null
   * without `create`).
   */
  dir(i: number, rel: string, create: boolean, hops = 0): WsDir | null {
    if (rel === '') return this.root(i).dir;
    const memo = `${i}\0${rel}`;
    const hit = this.dirs.get(memo);
    if (hit) return hit;
    const slash = rel.lastIndexOf('/');
    const parent = this.dir(i, slash < 0 ? '' : rel.slice(0, slash), create, hops);
    if (!parent) return null;
    const name = slash < 0 ? rel : rel.slice(slash + 1);
    const childRel = parent.rel === '' ? name : `${parent.rel}/${name}`;
    const got = this.proc ? this.openChild(i, parent, name, childRel, create, rel, hops) : this.pathChild(i, parent, name, childRel, create, rel, hops);
    if (got) this.dirs.set(memo, got);
    return got;
  }

  /** Forgets a directory removed by the restore (and any below it), closing their descriptors. */
  forget(i: number, rel: string): void {
    const prefix = `${i}\0${rel}`;
    for (const [k, d] of this.dirs) {
      if (k === prefix || k.startsWith(`${prefix}/`) || (d.root === i && (d.rel === rel || d.rel.startsWith(`${rel}/`)))) {
        this.dirs.delete(k);
      }
    }
  }

  /** Closes every descriptor opened. */
  close(): void {
    for (const fd of this.fds.splice(0)) {
      try {
        fss.closeSync(fd);
      } catch {
        // Already closed: nothing held.
      }
    }
    this.dirs.clear();
    this.rootStates.fill(undefined);
  }

  private openChild(i: number, parent: WsDir, name: string, childRel: string, create: boolean, asked: string, hops: number): WsDir | null {
    const at = `${parent.io}/${name}`;
    let fd: number;
    try {
      fd = fss.openSync(at, O_DIR_NOFOLLOW);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') {
        if (!create) return null;
        try {
          fss.mkdirSync(at);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
        }
        // Opened (not assumed) after mkdir: whatever is there now is checked like anything else.
        return this.openChild(i, parent, name, childRel, false, asked, hops) ?? this.missing(at);
      }
      if (code === 'ELOOP' || code === 'ENOTDIR') {
        // Swapped back between the open and the lstat: open again (bounded, like links).
        const retry = () => this.openChild(i, parent, name, childRel, create, asked, hops + 1);
        return this.throughLink(i, at, childRel, create, asked, hops, err as Error, retry);
      }
      throw err;
    }
    this.fds.push(fd);
    // Reached from the root descriptor without following a link, so inside at the moment
    // it was opened; a directory moved out of the workspace since (by someone who may
    // write outside it) is refused rather than written into.
    const where = fss.readlinkSync(`${this.proc}/${fd}`);
    const real = this.root(i).real;
    if (!isInside(real, where.replace(/ \(deleted\)$/, ''))) throw new UnsafePathError(asked, `directory ${childRel} is no longer inside the workspace (it is at ${where})`);
    return { io: `${this.proc}/${fd}`, fd, root: i, rel: childRel };
  }

  private pathChild(i: number, parent: WsDir, name: string, childRel: string, create: boolean, asked: string, hops: number): WsDir | null {
    const at = path.join(parent.io, name);
    const st = fss.lstatSync(at, { throwIfNoEntry: false });
    if (!st) {
      if (!create) return null;
      try {
        fss.mkdirSync(at);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
      return this.pathChild(i, parent, name, childRel, false, asked, hops) ?? this.missing(at);
    }
    if (st.isSymbolicLink()) return this.throughLink(i, at, childRel, create, asked, hops, null);
    if (!st.isDirectory()) return this.notDir(at, create);
    return { io: at, fd: -1, root: i, rel: childRel };
  }

  /** A symlink (or a non-directory) where a directory was expected. */
  private throughLink(i: number, at: string, childRel: string, create: boolean, asked: string, hops: number, err: Error | null, retry?: () => WsDir | null): WsDir | null {
    if (hops >= MAX_LINK_HOPS) throw new UnsafePathError(asked, `parent ${childRel} passes through too many symlinks (or keeps changing)`);
    const st = fss.lstatSync(at, { throwIfNoEntry: false });
    // Changed since the open that found a link here: look again rather than guess.
    if (retry && (!st || st.isDirectory())) return retry();
    if (!st) {
      if (err) throw err;
      return this.missing(at);
    }
    if (!st.isSymbolicLink()) return this.notDir(at, create);
    const rootReal = this.root(i).real;
    let real: string;
    try {
      real = fss.realpathSync.native(at);
    } catch {
      throw new UnsafePathError(asked, `parent ${childRel} is a dangling symlink`);
    }
    if (real === rootReal) return this.root(i).dir;
    if (!isInside(rootReal, real)) throw new UnsafePathError(asked, `parent ${childRel} is a symlink leading outside the workspace`);
    // Its real directory, opened the same way from the root (no link on that path unless raced, then this repeats).
    const realRel = path.relative(rootReal, real).split(path.sep).join('/');
    return this.dir(i, realRel, false, hops + 1) ?? this.missing(at);
  }

  private notDir(at: string, create: boolean): null {
    if (!create) return null;
    throw Object.assign(new Error(`ENOTDIR: not a directory, ${at}`), { code: 'ENOTDIR' });
  }

  private missing(at: string): never {
    throw Object.assign(new Error(`ENOENT: directory vanished while it was opened, ${at}`), { code: 'ENOENT' });
  }
}
