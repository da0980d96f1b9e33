import type { TaskState } from '../../model/schema';
import type { TaskListing } from '../eventLog';
import { fromPgText, toPgText } from './pgText';

/**
 * The one query behind `tasks --all` and PgProjectionReader.listTasks: task summaries
 * with their workspace and machine, newest first. Imports nothing heavy (no sql.js, no
 * zod), so the CLI's fast path (src/cli/tasksAllFast.ts) can list without loading the
 * full CLI; states are checked by the callers.
 */

/**
 * Newest first; tasks updated in the same millisecond by id, compared as bytes
 * (COLLATE "C", as SQLite's default BINARY collation orders the embedded store's
 * listing): the same order whatever the database's locale.
 */
const LISTING_ORDER = 'ORDER BY t.updated_at DESC, t.id COLLATE "C"';

function listingWhere(o: { workspaceId?: string | null; states?: readonly string[] | null; limit?: number }): { sql: string; limit: string; params: unknown[] } {
  const params: unknown[] = [];
  const where: string[] = [];
  if (o.workspaceId != null) where.push(`t.workspace_id = $${params.push(o.workspaceId)}`);
  if (o.states?.length) where.push(`t.state = ANY($${params.push(o.states.map((s) => toPgText(s)))}::text[])`);
  const limit = o.limit !== undefined && o.limit >= 0 ? ` LIMIT $${params.push(o.limit)}` : '';
  return { sql: where.length ? 'WHERE ' + where.join(' AND ') : '', limit, params };
}

/**
 * The same listing as `tasks --all --json` prints it (`JSON.stringify(listingJson(…), null, 2)`),
 * written by PostgreSQL as one text value: 10,000 listings cost a cold CLI process more
 * to receive as rows, turn into objects and stringify again (~100 ms, much of it GC)
 * than the query itself. Each task's entry is stored with its summary (`tasks.listing_head`
 * and `listing_tail` around its updatedAt, by listingEntryParts), so the query joins text;
 * an entry written before those columns (or since its workspace moved) is built here
 * from the columns, with `to_json`, which escapes strings as JSON.stringify does (the
 * same characters, lower-case `\u00xx`).
 * Null when a value holds a DLE escape (pgText.ts) that only `fromPgText` can decode:
 * the caller then takes the rows path.
 */
export async function queryTaskListingsJson(
  rows: (sql: string, params: unknown[]) => Promise<Record<string, unknown>[]>,
  o: { workspaceId?: string | null; states?: readonly string[] | null; limit?: number },
): Promise<string | null> {
  const w = listingWhere(o);
  const field = (name: string, value: string, last = false) => `'    "${name}": ' || ${value} || E'${last ? '' : ','}\n'`;
  const j = (v: string) => `coalesce(to_json(${v})::text, 'null')`;
  const built = [
    `E'  {\n'`,
    field('id', j('t.id')),
    field('title', j('t.title')),
    field('goal', j('t.goal')),
    field('agent', j('t.agent')),
    field('state', j('t.state')),
    field('attempt', j('t.attempt')),
    field('createdAt', j('t.created_at')),
    field('updatedAt', j('t.updated_at')),
    field('workspace', j('w.path')),
    field('workspaceId', j(`nullif(t.workspace_id::text, '')`)),
    field('machine', j('t.machine'), true),
    `'  }'`,
  ].join(' || ');
  // The stored parts around the time (schema v4): null when none is stored, and then built.
  const entry = `coalesce(t.listing_head || t.updated_at::text || t.listing_tail, ${built})`;
  // The entries come sorted from a subquery that the planner keeps as it is (LIMIT, or
  // OFFSET 0, stops it being merged into the outer query), and a plain aggregate joins
  // them in the order it reads them. `string_agg(… ORDER BY …)` says the same thing but
  // PostgreSQL sorts inside the aggregate far more slowly: 63 ms against 22 ms over
  // 10,060 tasks. The tests compare this text with the rows path's order.
  const sql = `SELECT coalesce(E'[\\n' || string_agg(l.entry, E',\\n') || E'\\n]', '[]') AS json
     FROM (SELECT ${entry} AS entry
           FROM waypoint.tasks t JOIN waypoint.workspaces w ON w.id = t.workspace_id ${w.sql}
           ${LISTING_ORDER}${w.limit || ' OFFSET 0'}) l`;
  const found = await rows(sql, w.params);
  const text = String(found[0]?.json ?? '[]');
  // A DLE (U+0010) is written by to_json and JSON.stringify as \u0010; a title that holds the six characters "\u0010" as \\u0010. Either way: the rows path decides.
  return text.includes('u0010') ? null : text;
}

export async function queryTaskListings(
  rows: (sql: string, params: unknown[]) => Promise<Record<string, unknown>[]>,
  o: { workspaceId?: string | null; states?: readonly string[] | null; limit?: number },
): Promise<TaskListing[]> {
  const w = listingWhere(o);
  const found = await rows(
    `SELECT t.workspace_id, t.machine, w.path, t.id, t.title, t.goal, t.agent, t.state, t.attempt, t.created_at, t.updated_at
     FROM waypoint.tasks t JOIN waypoint.workspaces w ON w.id = t.workspace_id
     ${w.sql}
     ${LISTING_ORDER}${w.limit}`,
    w.params,
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
