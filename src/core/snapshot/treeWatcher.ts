/**
 * Watches a workspace's folders so that a long-lived owner knows what changed between
 * two checkpoints without walking the tree: the same answer git's fsmonitor daemon or
 * watchman give ("these paths changed since token T"). One non-recursive `fs.watch`
 * per directory that a scan would enter (not `.git`, not the store, not what
 * .gitignore or the person's excludes leave out), added as directories appear.
 *
 * Node's own recursive `fs.watch` is not used on Linux: before Node 22 it polls every
 * file with a stat watcher, which on 50,000 files costs more than the scan it saves.
 *
 * The watcher vouches for a dirty list only while nothing was missed: past the
 * directory cap, when the system runs out of watches (ENOSPC, EMFILE) or a watch
 * fails, it stops, says so once, and every checkpoint scans the whole tree again, as
 * without a watcher. Its memory is bounded by the directory cap and the pending cap
 * (past which the next checkpoint is a full scan instead of a longer list).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../log';
import type { CheckpointMeta } from '../model/schema';
import type { ChangeFeed, ChangeFeedTicket } from '../engine/changeFeed';
import type { Capture } from '../engine/snapshotter';
import { IgnoreRules, levelsForDir } from './ignoreRules';
import type { SnapshotRoot } from './paths';
import { isReserved } from './scan/fsAccess';

export interface TreeWatcherOptions {
  roots: readonly SnapshotRoot[];
  /** The store directory: its own writes are not changes of the workspace. */
  storeDir: string;
  excludes?: readonly string[];
  log: Logger;
  /** Directories watched at most; past it the watcher gives up (fall back to scanning). */
  maxDirs?: number;
  /** Changed paths kept at most between two checkpoints; past it the next one scans everything. */
  maxPending?: number;
  /**
   * Whether checkpoints get the list (else they scan everything, and the watcher only
   * counts). Default true.
   */
  hints?: boolean;
  /** How long a checkpoint waits for the watcher to catch up with the file system (its cookie) before scanning everything instead. */
  syncTimeoutMs?: number;
}

/** Where the watcher drops its cookies: in the store, so the workspace never sees them. */
export const WATCH_COOKIE_DIR = 'watch-cookies';
const DEFAULT_SYNC_TIMEOUT_MS = 2_000;

export const DEFAULT_WATCH_MAX_DIRS = 20_000;
export const DEFAULT_WATCH_MAX_PENDING = 20_000;

export type WatchState = { kind: 'starting' } | { kind: 'watching'; dirs: number } | { kind: 'scanning'; reason: string } | { kind: 'closed' };

export class TreeWatcher implements ChangeFeed {
  private readonly watchers = new Map<string, fs.FSWatcher>();
  private readonly ruleOf = new Map<string, { rules: IgnoreRules; root: SnapshotRoot; rel: string }>();
  private pending = new Set<string>();
  private overflow = false;
  /** The manifest of the last checkpoint captured while watching (undefined: none yet, so no list is vouched for). */
  private lastRef: string | null | undefined = undefined;
  private inFlight = false;
  private stateNow: WatchState = { kind: 'starting' };
  private readonly maxDirs: number;
  private readonly maxPending: number;
  private readonly storeDir: string;
  /** Changes seen since the watcher started (for status). */
  changesSeen = 0;
  /** Checkpoints that looked only at the list this watcher vouched for (for status). */
  hintedCheckpoints = 0;
  private cookieWatch: fs.FSWatcher | null = null;
  private readonly cookieDir: string;
  private cookieCount = 0;
  private readonly cookieWaiters = new Map<string, () => void>();

  constructor(private readonly o: TreeWatcherOptions) {
    this.maxDirs = o.maxDirs ?? DEFAULT_WATCH_MAX_DIRS;
    this.maxPending = o.maxPending ?? DEFAULT_WATCH_MAX_PENDING;
    this.storeDir = path.resolve(o.storeDir);
    this.cookieDir = path.join(this.storeDir, WATCH_COOKIE_DIR);
  }

  get state(): WatchState {
    return this.stateNow;
  }

  get pendingCount(): number {
    return this.pending.size;
  }

  /** Walks the folders and watches each directory; synchronous, so nothing changes unseen between the walk and the first checkpoint it vouches for. */
  start(): void {
    if (this.stateNow.kind !== 'starting') return;
    try {
      this.watchCookies();
      for (const root of this.o.roots) {
        const base = IgnoreRules.root(this.o.excludes ? [...this.o.excludes] : undefined);
        this.watchTree(root, path.resolve(root.dir), '', base);
      }
    } catch (e) {
      this.fallBack(e);
      return;
    }
    if (this.stateNow.kind === 'starting') this.stateNow = { kind: 'watching', dirs: this.watchers.size };
  }

  /**
   * What changed since `previous`. A list is vouched for only once the watcher has
   * caught up with the file system: a file written just before this call may still be
   * an unread inotify event. So it drops a cookie (a file in its cookie folder, watched
   * on the same inotify descriptor as the tree, as watchman does) and waits for the
   * cookie's own event: the kernel queues events in order and libuv delivers them in
   * order, so every change made before the cookie has been noted by then.
   */
  async begin(previous: CheckpointMeta | null): Promise<ChangeFeedTicket> {
    const none: ChangeFeedTicket = { dirty: null, done: () => undefined };
    // A capture already under way (the engine serializes them, but be safe): no claim on this one.
    if (this.stateNow.kind !== 'watching' || this.inFlight) return none;
    this.inFlight = true;
    const candidate = this.o.hints !== false && this.lastRef !== undefined && previous !== null && previous.manifestRef === this.lastRef;
    const synced = candidate ? await this.sync() : false;
    // Closed or fallen back while waiting: nothing here vouches for anything any more.
    if (this.stateNow.kind !== 'watching') {
      this.inFlight = false;
      return none;
    }
    const vouched = candidate && synced && !this.overflow;
    const taken = this.pending;
    this.pending = new Set();
    this.overflow = false;
    return {
      dirty: vouched ? [...taken].sort() : null,
      done: (result: Capture | null) => {
        this.inFlight = false;
        if (result) {
          this.lastRef = result.manifestRef;
          if (vouched) this.hintedCheckpoints++;
          return;
        }
        // Failed: what it was to look at is still to be looked at.
        if (!vouched) this.overflow = true;
        for (const p of taken) this.note(p);
      },
    };
  }

  /**
   * Vouches from `previous` on without a checkpoint (see ChangeFeed.warmUp). Sound
   * because the watches are in place before the scan starts: a change made before the
   * scan reached its path is in the scan's list, one made after it is an event here, and
   * anything in between is in both. The cookie first makes sure no event from before
   * the scan is still unread (it would only be a duplicate, but the order is kept plain).
   */
  async warmUp(previous: CheckpointMeta, changedSince: () => Promise<readonly string[]>): Promise<boolean> {
    if (this.stateNow.kind !== 'watching' || this.inFlight || this.o.hints === false || !previous.manifestRef) return false;
    this.inFlight = true;
    try {
      if (!(await this.sync())) return false;
      const changed = await changedSince();
      if (this.stateNow.kind !== 'watching') return false;
      for (const key of changed) this.note(key);
      this.lastRef = previous.manifestRef;
      return !this.overflow;
    } catch (e) {
      this.o.log.warn(`the watcher's first scan failed (${(e as Error).message}); the next checkpoint scans the whole tree`);
      return false;
    } finally {
      this.inFlight = false;
    }
  }

  /** Drops a cookie and waits for its event (true), or gives up after the timeout (false: the caller scans everything). */
  private async sync(): Promise<boolean> {
    if (!this.cookieWatch) return false;
    const name = `${process.pid}-${++this.cookieCount}`;
    const file = path.join(this.cookieDir, name);
    let timer: NodeJS.Timeout | undefined;
    const seen = new Promise<boolean>((resolve) => {
      this.cookieWaiters.set(name, () => resolve(true));
      timer = setTimeout(() => resolve(false), this.o.syncTimeoutMs ?? DEFAULT_SYNC_TIMEOUT_MS);
    });
    try {
      fs.writeFileSync(file, '', { mode: 0o600 });
      const ok = await seen;
      if (!ok) this.o.log.warn(`the file watcher did not catch up within ${this.o.syncTimeoutMs ?? DEFAULT_SYNC_TIMEOUT_MS} ms; this checkpoint scans the whole tree`);
      return ok;
    } catch (e) {
      this.o.log.warn(`could not drop a watch cookie (${(e as Error).message}); this checkpoint scans the whole tree`);
      return false;
    } finally {
      clearTimeout(timer);
      this.cookieWaiters.delete(name);
      fs.rmSync(file, { force: true });
    }
  }

  private watchCookies(): void {
    fs.mkdirSync(this.cookieDir, { recursive: true, mode: 0o700 });
    // Cookies a crashed watcher left behind.
    for (const old of fs.readdirSync(this.cookieDir)) fs.rmSync(path.join(this.cookieDir, old), { force: true });
    const w = fs.watch(this.cookieDir, { persistent: false }, (_type, name) => {
      if (name !== null) this.cookieWaiters.get(String(name))?.();
    });
    w.on('error', (e) => this.fallBack(e));
    this.cookieWatch = w;
  }

  close(): void {
    this.closeCookies();
    for (const w of this.watchers.values()) w.close();
    this.watchers.clear();
    this.ruleOf.clear();
    this.pending.clear();
    this.stateNow = { kind: 'closed' };
  }

  private note(abs: string): void {
    if (this.overflow) return;
    this.pending.add(abs);
    if (this.pending.size > this.maxPending) {
      // Past the cap a full scan is cheaper than the list (and the memory stays bounded).
      this.pending.clear();
      this.overflow = true;
    }
  }

  private watchTree(root: SnapshotRoot, abs: string, rel: string, parentRules: IgnoreRules): void {
    const stack: { abs: string; rel: string; rules: IgnoreRules }[] = [{ abs, rel, rules: parentRules }];
    while (stack.length) {
      const d = stack.pop()!;
      if (this.watchers.has(d.abs) || d.abs === this.storeDir) continue;
      let entries: fs.Dirent[];
      try {
        entries = fs.readdirSync(d.abs, { withFileTypes: true });
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        // Gone or unreadable: the scan reports it; nothing to watch here.
        if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EACCES' || code === 'EPERM') continue;
        throw e;
      }
      let rules = d.rules;
      const hasGitignore = entries.some((e) => e.name === '.gitignore');
      const hasDotGit = entries.some((e) => e.name === '.git');
      for (const level of levelsForDir(d.abs, d.rel, hasGitignore, hasDotGit)) rules = rules.with(level);
      if (this.watchers.size >= this.maxDirs) {
        throw new Error(`the workspace has more than ${this.maxDirs.toLocaleString('en-US')} directories to watch`);
      }
      this.watchDir(root, d.abs, d.rel, rules);
      for (const e of entries) {
        if (!e.isDirectory() || isReserved(e.name)) continue;
        const childRel = d.rel === '' ? e.name : `${d.rel}/${e.name}`;
        if (rules.ignores(childRel, true)) continue;
        stack.push({ abs: path.join(d.abs, e.name), rel: childRel, rules });
      }
    }
  }

  private watchDir(root: SnapshotRoot, abs: string, rel: string, rules: IgnoreRules): void {
    const w = fs.watch(abs, { persistent: false }, (_type, name) => this.onEvent(abs, name === null ? null : String(name)));
    w.on('error', (e: NodeJS.ErrnoException) => {
      // The directory went away (its parent's watch reported it): drop this watch.
      if (e.code === 'ENOENT' || e.code === 'EPERM') return this.unwatch(abs);
      this.fallBack(e);
    });
    this.watchers.set(abs, w);
    this.ruleOf.set(abs, { rules, root, rel });
  }

  private unwatch(abs: string): void {
    this.watchers.get(abs)?.close();
    this.watchers.delete(abs);
    this.ruleOf.delete(abs);
  }

  private onEvent(dirAbs: string, name: string | null): void {
    if (this.stateNow.kind !== 'watching') return;
    this.changesSeen++;
    const at = this.ruleOf.get(dirAbs);
    if (!at) return;
    if (name === null) {
      // The system did not say which entry: the directory as a whole is looked at again.
      this.note(dirAbs);
      return;
    }
    const abs = path.join(dirAbs, name);
    if (abs === this.storeDir || isReserved(name)) {
      // Only info/exclude matters inside .git, and .git/info is not watched: a directory-level edit is caught by the scan of that directory.
      return;
    }
    this.note(abs);
    const rel = at.rel === '' ? name : `${at.rel}/${name}`;
    if (name === '.gitignore') {
      // The rules below changed: watch what they no longer leave out (and drop nothing; an extra watch costs little).
      this.rewatch(at.root, dirAbs, at.rel);
      return;
    }
    let st: fs.Stats | undefined;
    try {
      st = fs.lstatSync(abs, { throwIfNoEntry: false });
    } catch {
      st = undefined;
    }
    if (!st) {
      // Removed (or renamed away): its watches, if a directory, go with it.
      for (const d of [...this.watchers.keys()]) if (d === abs || d.startsWith(abs + path.sep)) this.unwatch(d);
      return;
    }
    if (st.isDirectory() && !this.watchers.has(abs) && !at.rules.ignores(rel, true)) {
      try {
        this.watchTree(at.root, abs, rel, at.rules);
        if (this.stateNow.kind === 'watching') this.stateNow = { kind: 'watching', dirs: this.watchers.size };
      } catch (e) {
        this.fallBack(e);
      }
    }
  }

  private rewatch(root: SnapshotRoot, dirAbs: string, rel: string): void {
    // Rebuild this directory's rules from its parent's and walk it again; watched directories are skipped.
    const parentAbs = path.dirname(dirAbs);
    const parent = rel === '' ? null : this.ruleOf.get(parentAbs);
    const base = parent?.rules ?? IgnoreRules.root(this.o.excludes ? [...this.o.excludes] : undefined);
    this.unwatch(dirAbs);
    try {
      this.watchTree(root, dirAbs, rel, base);
    } catch (e) {
      this.fallBack(e);
    }
  }

  private closeCookies(): void {
    this.cookieWatch?.close();
    this.cookieWatch = null;
    for (const wake of this.cookieWaiters.values()) wake();
  }

  private fallBack(e: unknown): void {
    if (this.stateNow.kind === 'scanning' || this.stateNow.kind === 'closed') return;
    const err = e as NodeJS.ErrnoException;
    const why =
      err.code === 'ENOSPC'
        ? 'the system ran out of file watches (raise fs.inotify.max_user_watches)'
        : err.code === 'EMFILE'
          ? 'the process ran out of file descriptors for watches'
          : (err.message ?? String(e));
    this.closeCookies();
    for (const w of this.watchers.values()) w.close();
    this.watchers.clear();
    this.ruleOf.clear();
    this.pending.clear();
    this.stateNow = { kind: 'scanning', reason: why };
    // Said once: from now on every checkpoint scans the tree, as without a watcher.
    this.o.log.warn(`not watching the workspace any more: ${why}; every checkpoint scans the whole tree instead`);
  }
}
