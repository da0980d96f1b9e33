import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { WaypointError, errorMessage } from '../model/errors';
import type { WorkspaceIdentity } from './eventLog';
import { STORE_FILE_MODE, ensurePrivateStoreDir } from './storeDir';

/**
 * A workspace's identity in a shared store: a random id kept in its `.waypoint/`
 * (so it survives renaming or moving the folder, and two clones are two workspaces)
 * plus the machine's name and the folder's real path; a copied folder is a new workspace. Only the id is written; nothing about the store (its URL,
 * its credentials) is ever written into the workspace.
 */

const ID_FILE = 'workspace-id.json';
const IdFile = z.strictObject({ id: z.string().regex(/^[A-Za-z0-9_-]{8,64}$/), createdAt: z.number().int().nonnegative() });

/** The machine name: WAYPOINT_MACHINE when set (containers and CI have meaningless host names), else the host name. */
export function machineName(env: NodeJS.ProcessEnv = process.env): string {
  const m = env.WAYPOINT_MACHINE?.trim();
  if (m) {
    if (m.length > 200 || /[\u0000-\u001f]/.test(m)) throw new WaypointError('invalid_input', 'WAYPOINT_MACHINE must be a printable name of at most 200 characters.');
    return m;
  }
  return os.hostname();
}

function realPath(p: string): string {
  try {
    return fs.realpathSync.native(p);
  } catch {
    return path.resolve(p);
  }
}

/** The id a folder's own store holds, or null. */
function idHeldBy(folder: string): string | null {
  try {
    return IdFile.parse(JSON.parse(fs.readFileSync(path.join(folder, '.waypoint', ID_FILE), 'utf8'))).id;
  } catch {
    return null;
  }
}

/**
 * Whether `ours` is a copy of the workspace the team store last saw at `recorded`: the same
 * id last used on this machine from another folder that still exists and still holds it.
 * (A folder copied since folders have identities gets a new id when it is opened — see
 * folderIdentity.ts; this catches copies made before.)
 */
export function copyOfWorkspaceAt(recorded: { machine: string; path: string }, ours: WorkspaceIdentity): boolean {
  if (recorded.machine !== ours.machine || recorded.path === ours.path || realPath(recorded.path) === realPath(ours.path)) return false;
  return idHeldBy(recorded.path) === ours.id;
}

/** Gives this workspace a new id (its folder was found to be a copy of another using the old one). */
export function renewWorkspaceIdentity(storeDir: string, workspacePath: string, env: NodeJS.ProcessEnv = process.env): WorkspaceIdentity {
  fs.rmSync(path.join(storeDir, ID_FILE), { force: true });
  return workspaceIdentity(storeDir, workspacePath, env);
}

/**
 * Reads (or, the first time, creates) the identity of the workspace whose store directory is
 * `storeDir`: (id, machine, real path). A folder copied with its `.waypoint` carries the id
 * file too; opening the copy drops it (folderIdentity.ts), so the copy is created a new one here.
 */
export function workspaceIdentity(storeDir: string, workspacePathGiven: string, env: NodeJS.ProcessEnv = process.env): WorkspaceIdentity {
  const file = path.join(storeDir, ID_FILE);
  const machine = machineName(env);
  const workspacePath = realPath(workspacePathGiven);
  const read = (): string | null => {
    let raw: string;
    try {
      raw = fs.readFileSync(file, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw e;
    }
    try {
      return IdFile.parse(JSON.parse(raw)).id;
    } catch (e) {
      throw new WaypointError('corrupt', `${file} is not a valid workspace id file (${errorMessage(e)}). Move it aside to give this workspace a new identity in the team store.`, { file });
    }
  };
  const existing = read();
  if (existing) return { id: existing, machine, path: workspacePath };
  ensurePrivateStoreDir(storeDir);
  const gi = path.join(storeDir, '.gitignore');
  try {
    fs.writeFileSync(gi, '*\n', { flag: 'wx', mode: STORE_FILE_MODE });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  const id = randomUUID();
  // Written whole to a temp file, then linked into place: link() fails if the name exists,
  // so two processes creating it at once agree (the loser reads the winner's), and a
  // crash never leaves a half-written id.
  const tmp = `${file}.${process.pid}.${randomUUID().slice(0, 8)}.wp-tmp`;
  const fd = fs.openSync(tmp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | (fs.constants.O_NOFOLLOW ?? 0), STORE_FILE_MODE);
  try {
    fs.writeSync(fd, JSON.stringify({ id, createdAt: Date.now() }) + '\n');
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  try {
    fs.linkSync(tmp, file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    return { id: read()!, machine, path: workspacePath };
  } finally {
    fs.rmSync(tmp, { force: true });
  }
  return { id, machine, path: workspacePath };
}
