import { TASK_STATES, type TaskState } from '../core/model/schema';
import { WaypointError } from '../core/model/errors';
import { PgProjectionReader } from '../core/store/postgres/pgProjectionReader';
import { machineName } from '../core/store/workspaceIdentity';
import type { TaskListing } from '../core/store/eventLog';
import type { Ctx } from './command';
import { listingJson, listingTable } from './tasksAllFormat';

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
      // A connected client offers the store-wide sweep first, so the listing shows a dead agent's task as interrupted.
      await reader.sweepLeases({ by: `waypoint tasks --all on ${machineName()} (pid ${process.pid})`, machine: machineName() });
      listings = await reader.listTasks({ allWorkspaces: true, states: states as TaskState[] | undefined, limit });
    } finally {
      await reader.close();
    }
  } else {
    const tasks = await (await c.engine()).tasks({ states: states as never, limit });
    const workspace = { id: '', machine: machineName(), path: c.workspace };
    listings = tasks.map((t) => ({ workspace, task: t }));
  }
  c.out(listingTable(listings, !c.teamStore), listingJson(listings));
}
