import * as fs from 'node:fs';
import * as path from 'node:path';
import { WaypointError } from '../core/model/errors';
import type { CheckpointMeta } from '../core/model/schema';
import { TeamReview, type TeamChanges, type TeamCheckpoint } from '../core/store/postgres/teamReview';
import { PgProjectionReader } from '../core/store/postgres/pgProjectionReader';
import { machineName } from '../core/store/workspaceIdentity';
import type { Ctx } from './command';
import { age } from './format';
import { plural } from '../core/model/plural';

/**
 * Reading a workspace that is not on this machine, from the team store, by the id
 * `waypoint tasks --all --json` lists (`--workspace <id>`): its tasks' checkpoints and
 * changes (`checkpoints`, `diff`). Every other command needs the workspace's files, so
 * it is refused, naming the machine that holds them.
 */

/** A workspace id as `.waypoint/workspace-id.json` holds it (a UUID by default). */
const WORKSPACE_ID_RE = /^[A-Za-z0-9_-]{8,64}$/;

/** `--workspace` names a workspace of the team store by its id (it is not a path here). */
export function isWorkspaceIdArg(value: string | undefined): value is string {
  return value !== undefined && WORKSPACE_ID_RE.test(value) && !fs.existsSync(path.resolve(value));
}

/** The refusal for a command that needs the files of a workspace that is not here. */
export async function notOnThisMachine(url: string | undefined, workspaceId: string, command: string): Promise<WaypointError> {
  if (!url) {
    return new WaypointError('invalid_input', `Workspace ${workspaceId} is not a directory here. To read a workspace of the team store by its id, give --store postgresql://… (or set WAYPOINT_STORE).`);
  }
  const ws = await TeamReview.describe(url, workspaceId);
  if (!ws) return new WaypointError('not_found', `No workspace '${workspaceId}' in the team store, and no such directory here. \`waypoint tasks --all --json\` lists every workspace's tasks with their workspaceId.`);
  const where = ws.machine === machineName() ? `its folder ${ws.path} on this machine (${ws.machine}): run it with --workspace ${ws.path}` : `machine ${ws.machine} (${ws.path}), which holds its files: run it there`;
  return new WaypointError(
    'invalid_input',
    `'waypoint ${command}' needs workspace ${workspaceId}'s files, and they are not here: use ${where}. From here you can review it: waypoint show --task ID --workspace ${workspaceId}, waypoint checkpoints --task ID --workspace ${workspaceId}, waypoint diff --task ID --workspace ${workspaceId} [--patch].`,
    { workspaceId, machine: ws.machine, path: ws.path },
  );
}

async function withReview<T>(c: Ctx, fn: (r: TeamReview) => Promise<T>): Promise<T> {
  if (!c.teamStore || !c.workspaceId) throw new WaypointError('invalid_input', 'Reading another workspace needs the team store (--store or WAYPOINT_STORE) and its id (--workspace ID).');
  const r = await TeamReview.open(c.teamStore, c.workspaceId);
  try {
    return await fn(r);
  } finally {
    await r.close();
  }
}

export function checkpointsTable(list: readonly (CheckpointMeta & Partial<Pick<TeamCheckpoint, 'uploaded' | 'pruned'>>)[], team: boolean): string {
  if (!list.length) return 'No checkpoints yet.';
  const rows = list.map((c) => [
    c.id,
    c.kind,
    age(c.createdAt),
    String(c.files),
    String(c.filesChanged),
    ...(team ? [c.pruned ? 'pruned' : c.damaged ? 'damaged' : c.uploaded ? 'yes' : 'not yet'] : c.damaged ? ['damaged'] : []),
    c.label ?? '',
  ]);
  const head = ['CHECKPOINT', 'KIND', 'TAKEN', 'FILES', 'CHANGED', ...(team ? ['IN STORE'] : []), 'LABEL'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  return [head, ...rows].map((r) => r.map((cell, i) => (i < r.length - 1 ? cell.padEnd(widths[i]!) : cell)).join('  ').trimEnd()).join('\n');
}

export async function teamCheckpoints(c: Ctx, taskId: string): Promise<void> {
  const { list, ws } = await withReview(c, async (r) => ({ list: await r.checkpoints(taskId), ws: r.workspace }));
  const head = `Task ${taskId} in workspace ${ws.id} (${ws.machine}:${ws.path}): ${plural(list.length, 'checkpoint')}`;
  c.out(`${head}\n${checkpointsTable(list, true)}`, { workspace: ws, taskId, checkpoints: list });
}

/** `waypoint show --workspace ID`: the task in detail from the team store's projection rows, as `show` prints a local one. */
export async function teamTaskDetail(c: Ctx, taskId: string): Promise<NonNullable<Awaited<ReturnType<PgProjectionReader['taskDetail']>>>> {
  if (!c.teamStore || !c.workspaceId) throw new WaypointError('invalid_input', 'Reading another workspace needs the team store (--store or WAYPOINT_STORE) and its id (--workspace ID).');
  const reader = await PgProjectionReader.open(c.teamStore, { workspaceId: c.workspaceId });
  try {
    const d = await reader.taskDetail(taskId);
    if (!d) throw new WaypointError('not_found', `No task '${taskId}' in workspace ${c.workspaceId} of the team store. \`waypoint tasks --all --json\` lists every workspace's tasks with their workspaceId.`, { taskId, workspaceId: c.workspaceId });
    return d;
  } finally {
    await reader.close();
  }
}

export async function teamDiff(c: Ctx, req: { taskId: string; from?: string; to?: string; path?: string; patch: boolean }): Promise<void> {
  const r = await withReview(c, (rv) => rv.changes(req));
  c.out(diffText(r, req.patch), jsonOf(r));
}

/** Entries' stat fields (inode, mtime) are another machine's: the JSON keeps what a reviewer needs. */
function jsonOf(r: TeamChanges): unknown {
  return {
    ...r,
    changes: r.changes.map((x) => ({
      path: x.path,
      status: x.status,
      before: x.before ? brief(x.before) : null,
      after: x.after ? brief(x.after) : null,
      lines: x.lines,
      ...(x.patch !== undefined ? { patch: x.patch } : {}),
      ...(x.note ? { note: x.note } : {}),
    })),
  };
}

function brief(e: NonNullable<TeamChanges['changes'][number]['before']>): Record<string, unknown> {
  if (e.type === 'file') return { type: 'file', hash: e.hash, size: e.size, mode: e.mode };
  if (e.type === 'symlink') return { type: 'symlink', target: e.target };
  if (e.type === 'skipped') return { type: 'skipped', size: e.size, reason: e.reason };
  return { type: 'uncaptured', code: e.code };
}

function diffText(r: TeamChanges, patch: boolean): string {
  const head = `Task ${r.taskId} in workspace ${r.workspace.id} (${r.workspace.machine}:${r.workspace.path}), ${r.from} → ${r.to}:`;
  if (!r.changes.length) return `${head}\nNo changes.`;
  const list = r.changes.map((x) => `${x.status.padEnd(12)} ${x.path}${!x.lines ? '' : x.lines.binary ? '  (binary)' : `  +${x.lines.added} -${x.lines.removed}`}`);
  if (!patch) return [head, ...list].join('\n');
  const patches = r.changes.map((x) => x.patch ?? `--- ${x.path}: ${x.note ?? 'no textual diff'}\n`);
  return [head, ...list, '', ...patches].join('\n');
}
