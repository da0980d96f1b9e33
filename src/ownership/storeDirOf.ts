import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * Where a folder's store is (no schema library here: the fast hook path loads this).
 *
 * A folder's store is its own `.waypoint`, unless the folder belongs to a multi-root
 * VS Code window: that window keeps one store, in its first folder, and writes
 * `.waypoint/link.json` (`{"store": "<that store's directory>"}`) into each other
 * folder, so an agent's CLI or MCP server started inside any of them finds the same
 * store and owner. A link is followed only when the store it names lists this very
 * folder among its roots (`roots.json`, which the window writes): a cloned
 * repository can ship a `link.json`, but not the other store's consent, so it can
 * send nobody's records anywhere. Anything doubtful (unreadable, malformed, a
 * symbolic link, no mention of this folder) falls back to the folder's own store.
 */
export const DISCOVERY_FILE_NAME = 'mcp.json';
export const LINK_FILE_NAME = 'link.json';
export const ROOTS_FILE_NAME = 'roots.json';
export const STORE_DIR_NAME = '.waypoint';

/** A folder's own store directory, before any link is followed. */
export function ownStoreDirOf(folder: string): string {
  return path.join(path.resolve(folder), STORE_DIR_NAME);
}

export function storeDirOf(workspace: string): string {
  const own = ownStoreDirOf(workspace);
  const linked = linkedStoreOf(own);
  return linked !== null && storeListsFolder(linked, workspace) ? linked : own;
}

/** Reads a file without following a symbolic link at its own name; null when absent or unreadable. */
export function readNoFollow(file: string, maxBytes = 1 << 20): string | null {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0));
  } catch {
    return null;
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile() || st.size > maxBytes) return null;
    return fs.readFileSync(fd, 'utf8');
  } catch {
    return null;
  } finally {
    fs.closeSync(fd);
  }
}

function parse(text: string | null): unknown {
  if (text === null) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The store directory a folder's `link.json` names, or null (no link, or not a plain absolute path). */
export function linkedStoreOf(ownStoreDir: string): string | null {
  const v = parse(readNoFollow(path.join(ownStoreDir, LINK_FILE_NAME), 64 * 1024));
  if (!isObj(v) || typeof v.store !== 'string' || !path.isAbsolute(v.store) || v.store.length > 4096 || v.store.includes('\0')) return null;
  return path.resolve(v.store);
}

/** The root directories a store's `roots.json` lists (hand-checked; storeRoots.ts validates it fully before opening). */
export function listedRootDirs(storeDir: string): string[] | null {
  const v = parse(readNoFollow(path.join(storeDir, ROOTS_FILE_NAME)));
  if (!isObj(v) || !Array.isArray(v.roots)) return null;
  const dirs: string[] = [];
  for (const r of v.roots) {
    if (!isObj(r) || typeof r.dir !== 'string' || !path.isAbsolute(r.dir)) return null;
    dirs.push(r.dir);
  }
  return dirs;
}

/** The same directory, through symbolic links: a folder opened by a linked path is still that folder. */
export function sameDir(a: string, b: string): boolean {
  const real = (p: string) => {
    try {
      return fs.realpathSync.native(p);
    } catch {
      return path.resolve(p);
    }
  };
  return path.resolve(a) === path.resolve(b) || real(a) === real(b);
}

export function storeListsFolder(storeDir: string, folder: string): boolean {
  return listedRootDirs(storeDir)?.some((d) => sameDir(d, folder)) ?? false;
}

/** Names only a Waypoint store holds: a `.waypoint` without any of them (a person's own folder of that name) is not taken for one. */
const STORE_MARKERS = ['waypoint.db', 'identity.json', 'workspace-id.json', LINK_FILE_NAME, 'owner.lock', 'journal-000000000001.wal'];

/** Whether `folder` holds a Waypoint store of its own (a real directory, not a link, that looks like one). */
export function holdsStore(folder: string): boolean {
  const dir = ownStoreDirOf(folder);
  try {
    if (!fs.lstatSync(dir).isDirectory()) return false;
    return fs.readdirSync(dir).some((n) => STORE_MARKERS.includes(n) || /^journal-\d+\.wal$/.test(n));
  } catch {
    return false;
  }
}

/**
 * The workspace a command started in `start` works on, found as git finds its repository:
 * the nearest folder at or above `start` that holds a Waypoint store; else the root of the
 * git repository `start` is in (the folder with `.git`); else `start` itself. The walk
 * stops at a repository's root: a store above the repository is another workspace's.
 */
export function findWorkspace(start: string): string {
  const from = path.resolve(start);
  for (let dir = from; ; ) {
    if (holdsStore(dir)) return dir;
    if (fs.existsSync(path.join(dir, '.git'))) return dir;
    const up = path.dirname(dir);
    if (up === dir) return from;
    dir = up;
  }
}
