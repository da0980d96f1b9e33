import { TASK_STATES, type TaskState } from '../core/model/schema';
import { WaypointError } from '../core/model/errors';
import { PgProjectionReader } from '../core/store/postgres/pgProjectionReader';
import { machineName } from '../core/store/workspaceIdentity';
import type { TaskListing } from '../core/store/eventLog';
import type { Ctx } from './command';
import { age } from './format';

/**
 * `waypoint tasks --all`: every workspace's tasks in the team store, each with its
 * workspace and machine, read from the store's task summaries (no workspace is
 * opened, no owner lock taken). Without a team store there is one workspace: this
 * one's tasks, with the same columns, and a note saying where the others would be.
 */
export async function listAllTasks(c: Ctx, states: string[] | undefined, limit: number | undefined): Promise<void> {
  for (const st of states ?? []) if (!TASK_STATES.includes(st as TaskState)) throw new WaypointError('invalid_input', `Unknown task state '${st}'. States: ${TASK_STATES.join(', ')}.`);
  let listings: TaskListing[];
  if (c.teamStore) {
    const reader = await PgProjectionReader.open(c.teamStore);
    try {
      listings = await reader.listTasks({ allWorkspaces: true, states: states as TaskState[] | undefined, limit });
    } finally {
      await reader.close();
    }
  } else {
    const tasks = await (await c.engine()).tasks({ states: states as never, limit });
    const workspace = { id: '', machine: machineName(), path: c.workspace };
    listings = tasks.map((t) => ({ workspace, task: t }));
  }
  const json = listings.map((l) => ({
    id: l.task.id,
    title: l.task.title,
    goal: l.task.goal,
    agent: l.task.agent,
    state: l.task.state,
    attempt: l.task.attempt,
    createdAt: l.task.createdAt,
    updatedAt: l.task.updatedAt,
    workspace: l.workspace.path,
    workspaceId: l.workspace.id || null,
    machine: l.workspace.machine,
  }));
  c.out(table(listings, !c.teamStore), json);
}

function table(listings: TaskListing[], embedded: boolean): string {
  const note = embedded ? '\n(No team store: this workspace only. Set WAYPOINT_STORE=postgresql://… or pass --store to list every workspace.)' : '';
  if (!listings.length) return `No tasks in ${embedded ? 'this workspace' : 'the team store'} yet.${note}`;
  const rows = listings.map((l) => [l.workspace.machine, l.workspace.path, l.task.id, l.task.state, age(l.task.updatedAt), l.task.title]);
  const head = ['MACHINE', 'WORKSPACE', 'TASK', 'STATE', 'UPDATED', 'TITLE'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  return [head, ...rows].map((r) => r.map((cell, i) => (i < head.length - 1 ? cell.padEnd(widths[i]) : cell)).join('  ')).join('\n') + note;
}
