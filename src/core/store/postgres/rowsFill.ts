import type { ClientBase, Pool } from 'pg';
import { WaypointError } from '../../model/errors';
import { SqlProjection } from '../projection';
import { fromPgText } from './pgText';
import { writeAllRows } from './projectionRows';
import { EVENT_COLUMNS, rowToEvent } from './rows';

/**
 * A workspace last written before schema v6 has no projection rows yet (`rows_seq` is
 * NULL): its writer writes them whole when it next opens it, but in a fleet nobody may
 * open it again, and the store-wide sweep and other machines' readers need them now.
 * The first one to need them folds the workspace's events (the one fold code) and
 * writes them, holding the workspace's row so no commit or sweep lands meanwhile.
 *
 * Returns whether the rows are complete (true at once when they already were).
 */
export async function fillRowsIfMissing(client: ClientBase, workspaceId: string): Promise<boolean> {
  const ready = await client.query<{ ok: boolean }>('SELECT rows_seq IS NOT DISTINCT FROM head_seq AS ok FROM waypoint.workspaces WHERE id = $1', [workspaceId]);
  if (!ready.rows[0]) return false;
  if (ready.rows[0].ok) return true;
  await client.query('BEGIN');
  let fold: SqlProjection | undefined;
  try {
    const w = await client.query<{ machine: string; path: string; head_seq: number; rows_seq: number | null }>(
      'SELECT machine, path, head_seq, rows_seq FROM waypoint.workspaces WHERE id = $1 FOR UPDATE',
      [workspaceId],
    );
    const ws = w.rows[0];
    if (ws && ws.rows_seq !== ws.head_seq) {
      fold = await SqlProjection.empty();
      for (let after = 0; after < ws.head_seq; ) {
        const page = (await client.query(`SELECT ${EVENT_COLUMNS} FROM waypoint.events WHERE workspace_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT 5000`, [workspaceId, after, ws.head_seq])).rows.map(rowToEvent);
        if (!page.length) throw new WaypointError('corrupt', `The team store's log for workspace ${workspaceId} ends at event ${after}, but its head says ${ws.head_seq}.`, { after, head: ws.head_seq });
        fold.apply(page);
        after = page[page.length - 1].seq;
      }
      await writeAllRows(client, { id: workspaceId, machine: fromPgText(ws.machine), path: fromPgText(ws.path) }, fold.db, ws.head_seq);
    }
    await client.query('COMMIT');
    return true;
  } catch (e) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw e;
  } finally {
    fold?.close();
  }
}

/** fillRowsIfMissing on a client of `pool`. */
export async function fillPoolRowsIfMissing(pool: Pool, workspaceId: string): Promise<boolean> {
  const c = await pool.connect();
  let failed: Error | undefined;
  try {
    return await fillRowsIfMissing(c, workspaceId);
  } catch (e) {
    failed = e as Error;
    throw e;
  } finally {
    c.release(failed);
  }
}
