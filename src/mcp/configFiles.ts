/**
 * Reading and merging an agent's configuration files safely: never through a symbolic
 * link, only regular files, JSON objects merged key by key. Shared by `waypoint connect`
 * (connect.ts) and the hook configurations it writes (connectHooks.ts).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { WaypointError, errorMessage } from '../core/model/errors';

/** Where Waypoint writes its launcher, relative to the project (see connect.ts for why a launcher). */
export const LAUNCHER_REL = '.waypoint/bin/waypoint.cjs';

export interface FileChange {
  file: string;
  /** The content after the merge. */
  content: string;
  changed: boolean;
  /** Machine-local: not for committing (git ignores it, or the agent's convention keeps it local). */
  local: boolean;
  /** Written executable (Cline runs hook files as programs). */
  executable?: boolean;
}

export type Json = Record<string, unknown>;

const O_READ_NOFOLLOW = fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0) | (fs.constants.O_NONBLOCK ?? 0);

/**
 * A config file's text, or null where there is none. Never through a symbolic link and
 * only a regular file (a FIFO would block, a link may lead to the user's global config):
 * either is refused, naming it.
 */
function readConfig(file: string): string | null {
  let fd: number;
  try {
    fd = fs.openSync(file, O_READ_NOFOLLOW);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    if (code === 'ELOOP' || fs.lstatSync(file, { throwIfNoEntry: false })?.isSymbolicLink()) throw linkRefused(file);
    throw new WaypointError('io', `Cannot read ${file}: ${errorMessage(e)}`);
  }
  try {
    if (!fs.fstatSync(fd).isFile()) throw new WaypointError('unsafe_path', `${file} is not a regular file; Waypoint left it untouched.`, { path: file });
    return fs.readFileSync(fd, 'utf8');
  } finally {
    fs.closeSync(fd);
  }
}

export function linkRefused(at: string, target?: string): WaypointError {
  let to = target;
  try {
    to ??= fs.readlinkSync(at);
  } catch {
    // Gone since: the message names the path alone.
  }
  return new WaypointError(
    'unsafe_path',
    `${at} is a symbolic link${to ? ` (to ${to})` : ''}. Waypoint writes agent configuration only into real folders of the workspace, never through a link (a cloned repository could point one at your home folder's global config). Replace the link with a folder, or add Waypoint to that configuration by hand. Nothing was written.`,
    { path: at, target: to ?? null },
  );
}

/**
 * Refuses a config path with a symbolic link anywhere between the workspace and the file
 * (the file included): `.cursor -> ~/.cursor` would merge into the user's global config.
 */
export function refuseLinkedConfig(workspace: string, file: string): void {
  const rel = path.relative(workspace, file);
  if (!rel || rel.startsWith('..') || path.isAbsolute(rel)) throw new WaypointError('unsafe_path', `${file} is outside the workspace ${workspace}; nothing was written.`, { path: file });
  let at = workspace;
  for (const part of rel.split(path.sep)) {
    at = path.join(at, part);
    const st = fs.lstatSync(at, { throwIfNoEntry: false });
    if (!st) return;
    if (st.isSymbolicLink()) throw linkRefused(at);
  }
}

export function readJsonObject(file: string): Json {
  const text = readConfig(file);
  if (text === null || !text.trim()) return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new WaypointError('invalid_input', `${file} is not valid JSON (${errorMessage(e)}). Fix or remove it; Waypoint left it untouched.`);
  }
  if (!isObject(value)) throw new WaypointError('invalid_input', `${file} does not hold a JSON object. Fix or remove it; Waypoint left it untouched.`);
  return value;
}

export function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function objectField(file: string, obj: Json, key: string): Json {
  const v = obj[key];
  if (v === undefined) return {};
  if (!isObject(v)) throw new WaypointError('invalid_input', `${file}: "${key}" is not an object. Fix it; Waypoint left the file untouched.`);
  return v;
}

export function readText(file: string): string | null {
  return readConfig(file);
}

export function change(file: string, before: Json, after: Json, local: boolean): FileChange {
  const content = JSON.stringify(after, null, 2) + '\n';
  const old = readText(file);
  return { file, content, changed: old === null || JSON.stringify(before) !== JSON.stringify(after), local };
}
