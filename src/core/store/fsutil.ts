import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';

/** fsync a directory so a rename or a new file inside it survives a power loss. */
export async function fsyncDir(dir: string): Promise<void> {
  const fh = await fs.promises.open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

export function fsyncDirSync(dir: string): void {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Temp names share one recognisable shape so leftovers of a crash can be swept. */
export const TEMP_MARKER = '.wp-tmp-';

export function tempPathFor(target: string): string {
  return path.join(path.dirname(target), `${path.basename(target)}${TEMP_MARKER}${process.pid}-${randomBytes(4).toString('hex')}`);
}

/**
 * Write a file so that readers see either the old or the new content, never a torn
 * one: write a temp file beside it, fsync it, rename over the target, fsync the dir.
 */
export async function writeFileAtomic(target: string, data: Uint8Array | string, mode = 0o644): Promise<void> {
  const tmp = tempPathFor(target);
  const fh = await fs.promises.open(tmp, 'wx', mode);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } catch (e) {
    await fh.close().catch(() => undefined);
    await fs.promises.rm(tmp, { force: true });
    throw e;
  }
  await fh.close();
  await fs.promises.rename(tmp, target);
  await fsyncDir(path.dirname(target));
}

/**
 * `writeFileAtomic`, synchronously. The temp file is created new (`wx`: O_EXCL never
 * follows a link) and the rename replaces whatever the target is, a link included,
 * without following it. `exactMode` sets the mode past the umask (an executable hook).
 */
export function writeFileAtomicSync(target: string, data: Uint8Array | string, mode = 0o644, o: { exactMode?: boolean } = {}): void {
  const tmp = tempPathFor(target);
  const fd = fs.openSync(tmp, 'wx', mode);
  try {
    fs.writeFileSync(fd, data);
    if (o.exactMode) fs.fchmodSync(fd, mode);
    fs.fsyncSync(fd);
  } catch (e) {
    fs.closeSync(fd);
    fs.rmSync(tmp, { force: true });
    throw e;
  }
  fs.closeSync(fd);
  fs.renameSync(tmp, target);
  fsyncDirSync(path.dirname(target));
}

/** The pid a temp name was made by (`….wp-tmp-<pid>-<hex>`), or null for another shape. */
export function tempFileWriter(name: string): number | null {
  const i = name.lastIndexOf(TEMP_MARKER);
  if (i < 0) return null;
  const m = /^(\d+)-[0-9a-f]+$/.exec(name.slice(i + TEMP_MARKER.length));
  return m ? Number(m[1]) : null;
}

/**
 * Removes temp files a crashed writer left in a directory (not recursive). A temp
 * file of another live process is in use, not left over: a second process starting
 * beside the owner writes `owner.lock.wp-tmp-…` before it link(2)s it, and sweeping
 * that away from under it made its start fail with ENOENT instead of relaying.
 */
export function sweepTempFiles(dir: string): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    if (name.includes(TEMP_MARKER)) {
      const writer = tempFileWriter(name);
      if (writer !== null && writer !== process.pid && isPidAlive(writer)) continue;
      fs.rmSync(path.join(dir, name), { force: true });
      removed.push(name);
    }
  }
  return removed;
}

export function isPidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (e) {
    // EPERM: the process exists but belongs to someone else.
    if ((e as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  return !isZombie(pid);
}

/**
 * A killed process whose parent has not reaped it yet keeps its pid (signal 0 still
 * reaches it) but runs nothing, renews nothing and serves nothing: it is dead.
 * Linux tells us through /proc; elsewhere we cannot know and say no.
 */
function isZombie(pid: number): boolean {
  if (process.platform !== 'linux') return false;
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return false;
  }
  // `pid (comm) S …`: comm may hold spaces and parentheses, the state follows the last ')'.
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state === 'Z' || state === 'X';
}
