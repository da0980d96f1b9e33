/**
 * The directory being scanned: where it is (root, key prefix, root-relative path,
 * absolute path), how it is reached (its descriptor, opened once without following a
 * symlink), the ignore rules for its entries and its listing-cache record. The walk
 * passes one of these instead of a row of positional parameters; there is one per
 * directory walked, never one per file.
 */
import fss from 'node:fs';
import path from 'node:path';
import type { IgnoreRules } from '../ignoreRules.js';
import type { SnapshotRoot } from '../paths.js';
import { O_DIR, PROC_FD } from './fsAccess.js';
import type { ListedDir } from './listingCache.js';

export class DirContext {
  readonly abs: string;
  /** Prefixes of its entries' root-relative and absolute paths (plain concatenation: path.join showed up in rescan profiles). */
  readonly relBase: string;
  readonly absBase: string;
  /** The name to reach the directory, and its entries by `${io}/${name}`: /proc/self/fd/N once opened; its path without /proc. */
  io = '';
  fd = -1;
  /** Listed from the listing cache and not opened yet: opened from the root (see `ensureOpen`) when first needed. */
  lazy = false;
  /** Holders of `fd`: the walk, plus each stat batch and worker read of its files still using it; the last release closes it. */
  refs = 1;
  /** Its listing-cache record, if it has one now, and (with a cached listing) its entries' root-relative paths. */
  listed: ListedDir | undefined = undefined;
  rels: string[] | undefined = undefined;
  /** The open parent it is opened relative to (one open instead of one per segment); dropped once opened. */
  private openFrom: DirContext | null = null;

  /** @param rules the rules in force for its entries: the parent's, until the walk adds this directory's own. */
  constructor(
    readonly root: SnapshotRoot,
    readonly prefix: string,
    readonly relDir: string,
    public rules: IgnoreRules,
  ) {
    this.abs = relDir === '' ? root.dir : path.join(root.dir, ...relDir.split('/'));
    this.relBase = relDir === '' ? '' : `${relDir}/`;
    this.absBase = this.abs + path.sep;
  }

  /** Subdirectory `rel` (root-relative) of this one, to be opened through this one's descriptor. */
  static child(parent: DirContext, rel: string): DirContext {
    const d = new DirContext(parent.root, parent.prefix, rel, parent.rules);
    d.openFrom = parent;
    return d;
  }

  /**
   * Opens the directory without following a symlink anywhere below the root: relative
   * to its already-open parent, or segment by segment from the root. Without /proc,
   * keeps its path (checked by real path after listing instead).
   */
  open(): void {
    if (!PROC_FD) {
      this.io = this.abs;
      return;
    }
    const parent = this.openFrom;
    const segs = this.relDir === '' ? [] : this.relDir.split('/');
    let fd: number;
    let from = 0;
    if (parent && parent.fd >= 0 && segs.length > 0) {
      from = segs.length - 1;
      fd = parent.fd;
    } else {
      // The root itself may be reached through symlinks (the person's own path to it).
      fd = fss.openSync(this.root.dir, fss.constants.O_RDONLY | (fss.constants.O_DIRECTORY ?? 0));
    }
    for (let i = from; i < segs.length; i++) {
      let next: number;
      try {
        next = fss.openSync(`${PROC_FD}/${fd}/${segs[i]}`, O_DIR);
      } catch (err) {
        if (fd !== parent?.fd) fss.closeSync(fd);
        throw swapped(path.join(this.root.dir, ...segs.slice(0, i + 1)), segs.slice(0, i + 1).join('/'), err);
      }
      if (fd !== parent?.fd) fss.closeSync(fd);
      fd = next;
    }
    this.fd = fd;
    this.io = `${PROC_FD}/${fd}`;
    this.openFrom = null;
  }

  /** Lists it from the listing cache: nothing is opened until an entry must be read (see ensureOpen). */
  openLazily(): void {
    this.lazy = true;
    this.openFrom = null;
  }

  /**
   * The descriptor of a directory listed from the cache, opened on first need from
   * the root, one segment at a time without following a symlink (throws ESYMLINK for
   * a directory swapped for a link).
   */
  ensureOpen(): this {
    if (this.fd >= 0 || !this.lazy) return this;
    this.open();
    this.lazy = false;
    return this;
  }

  /** The name to open entry `name` by: through this directory's descriptor, opened now if it came from the listing cache. */
  entryIo(name: string): string {
    return `${this.ensureOpen().io}/${name}`;
  }

  close(): void {
    if (this.fd >= 0) fss.closeSync(this.fd);
  }

  /** Drops one hold on the descriptor; the last one closes it. */
  release(): void {
    if (--this.refs > 0) return;
    this.close();
  }
}

/** A directory that turned into a symlink (or something else) after it was listed from its parent. */
function swapped(abs: string, rel: string, err: unknown): Error {
  const code = (err as NodeJS.ErrnoException).code;
  if (code !== 'ENOTDIR' && code !== 'ELOOP') return err as Error;
  let target: string | null = null;
  try {
    if (fss.lstatSync(abs).isSymbolicLink()) target = fss.readlinkSync(abs);
  } catch {
    return err as Error;
  }
  if (target === null) return err as Error;
  return Object.assign(new Error(`${rel} changed into a symlink during the scan (it leads to ${target}); not followed`), { code: 'ESYMLINK' });
}

/** Throws (code ESYMLINK) unless `abs` — `rel` under the root whose real path is `realRoot` — resolves to exactly that place. */
export function assertInside(realRoot: string, abs: string, rel: string, real = fss.realpathSync.native(abs)): void {
  const expected = path.join(realRoot, ...rel.split('/'));
  if (real !== expected) {
    throw Object.assign(new Error(`${rel} changed into a symlink during the scan (it leads to ${real}); not followed`), { code: 'ESYMLINK' });
  }
}
