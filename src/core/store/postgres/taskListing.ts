import type { TaskState } from '../../model/schema';
import type { TaskListing } from '../eventLog';
import { fromPgText, toPgText } from './pgText';

/**
 * The one query behind `tasks --all` and PgProjectionReader.listTasks: task summaries
 * with their workspace and machine, newest first. Imports nothing heavy (no sql.js, no
 * zod), so the CLI's fast path (src/cli/tasksAllFast.ts) can list without loading the
 * full CLI; states are checked by the callers.
 */
export async function queryTaskListings(
  rows: (sql: string, params: unknown[]) => Promise<Record<string, unknown>[]>,
  o: { workspaceId?: string | null; states?: readonly string[] | null; limit?: number },
): Promise<TaskListing[]> {
  const params: unknown[] = [];
  const where: string[] = [];
  if (o.workspaceId != null) where.push(`t.workspace_id = $${params.push(o.workspaceId)}`);
  if (o.states?.length) where.push(`t.state = ANY($${params.push(o.states.map((s) => toPgText(s)))}::text[])`);
  const limit = o.limit !== undefined && o.limit >= 0 ? ` LIMIT $${params.push(o.limit)}` : '';
  const found = await rows(
    `SELECT t.workspace_id, t.machine, w.path, t.id, t.title, t.goal, t.agent, t.state, t.attempt, t.created_at, t.updated_at
     FROM waypoint.tasks t JOIN waypoint.workspaces w ON w.id = t.workspace_id
     ${where.length ? 'WHERE ' + where.join(' AND ') : ''}
     ORDER BY t.updated_at DESC, t.id${limit}`,
    params,
  );
  return found.map((r) => ({
    workspace: { id: String(r.workspace_id), machine: fromPgText(String(r.machine)), path: fromPgText(String(r.path)) },
    task: {
      id: fromPgText(String(r.id)),
      title: fromPgText(String(r.title)),
      goal: fromPgText(String(r.goal)),
      agent: fromPgText((r.agent as string | null) ?? null),
      state: fromPgText(String(r.state)) as TaskState,
      attempt: Number(r.attempt),
      createdAt: Number(r.created_at),
      updatedAt: Number(r.updated_at),
    },
  }));
}
