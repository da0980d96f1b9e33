import * as fs from 'node:fs';
import * as path from 'node:path';
import { WaypointError } from '../model/errors';

/**
 * The store directory comes with the workspace, and a workspace may be a clone of
 * someone else's repository: its `.waypoint` (or `.waypoint/objects`, the journal,
 * the lock…) may be a symbolic link to a directory the attacker chose — another
 * user's, or one the attacker can read. Following it would write the task record
 * and copies of private workspace files there, or read a planted store as ours.
 *
 * So the store refuses any symbolic link in its own tree: `.waypoint` itself, every
 * entry at its top level, and the entries of the directories Waypoint writes into
 * (`objects`, `objects/pack`, `archive`). One readdir per directory with file types
 * (no extra stat per entry), so a store's open stays as fast as before. Files are
 * further created with O_EXCL or O_NOFOLLOW where they are opened for writing, so a
 * link planted after this check is not followed either.
 */

/** Subdirectories of the store whose entries are checked too (their files are opened for writing). */
const CHECKED_SUBDIRS = ['objects', path.join('objects', 'pack'), 'archive'];

/** Private to the user: the store holds the MCP bearer token and copies of workspace files. */
export const STORE_FILE_MODE = 0o600;
export const STORE_DIR_MODE = 0o700;

/** Open flags for appending to a store file without following a symbolic link (creates it 0600). */
export const APPEND_NOFOLLOW = fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT | (fs.constants.O_NOFOLLOW ?? 0);

function refuse(dir: string, rel: string, target: string | null): never {
  const shown = rel ? `${path.basename(dir)}/${rel}` : path.basename(dir);
  throw new WaypointError(
    'unsafe_path',
    `Refusing to use the Waypoint store: ${shown} (${path.join(dir, rel)}) is a symbolic link${target ? ` to ${target}` : ''}. ` +
      `A store is never followed through a link, since a cloned repository could point it at any directory; ` +
      `remove the link (Waypoint then creates a private ${rel ? 'one' : 'store'} in its place).`,
    { path: path.join(dir, rel), target },
  );
}

function linkTarget(p: string): string | null {
  try {
    return fs.readlinkSync(p);
  } catch {
    return null;
  }
}

/**
 * Refuses a store directory that is, or holds, a symbolic link (see above); a store
 * that does not exist yet passes. Throws `unsafe_path`, before anything is written.
 */
export function assertStoreNotLinked(dir: string): void {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw e;
  }
  if (st.isSymbolicLink()) refuse(dir, '', linkTarget(dir));
  if (!st.isDirectory()) throw new WaypointError('unsafe_path', `Refusing to use the Waypoint store: ${dir} is not a directory.`, { path: dir });
  for (const rel of ['', ...CHECKED_SUBDIRS]) {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(path.join(dir, rel), { withFileTypes: true });
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') continue;
      throw e;
    }
    for (const d of entries) {
      // A file system that reports no type (DT_UNKNOWN) gets an lstat.
      const link = d.isSymbolicLink() || (!d.isFile() && !d.isDirectory() && fs.lstatSync(path.join(dir, rel, d.name)).isSymbolicLink());
      if (link) refuse(dir, path.join(rel, d.name), linkTarget(path.join(dir, rel, d.name)));
    }
  }
}

/**
 * Creates the store directory (0700) if needed after refusing links in it; tightens
 * one an older version made wider, when it is ours to tighten.
 */
export function ensurePrivateStoreDir(dir: string): void {
  assertStoreNotLinked(dir);
  fs.mkdirSync(dir, { recursive: true, mode: STORE_DIR_MODE });
  // A link put in place between the check and mkdir (which then finds it "existing"):
  // one more lstat of the directory itself; files inside are created O_EXCL or O_NOFOLLOW.
  const st = fs.lstatSync(dir);
  if (st.isSymbolicLink()) refuse(dir, '', linkTarget(dir));
  try {
    if (st.mode & 0o077 && (process.getuid === undefined || st.uid === process.getuid())) fs.chmodSync(dir, STORE_DIR_MODE);
  } catch {
    // best effort: opening the store must not fail over its directory's mode
  }
}
