import type { Pool } from 'pg';
import { ACTIVE_TASK_STATES } from '../../model/stateMachine';

/**
 * When a lease is due for the store-wide sweep (leaseSweeper.ts), kept apart from the
 * sweep itself so that `waypoint tasks --all`'s fast path can ask without loading the
 * fold code (sql.js, the engine's queries).
 */

/** An idle writer tells the store it is alive this often (see PgEventLog's beat). */
export const WRITER_BEAT_MS = 3_000;
/** A writer not heard of (no commit, no beat) for this long is gone: its workspace's expired leases are swept store-wide. */
export const WRITER_STALE_MS = 10_000;
/** At most one sweep store-wide per this period. */
export const SWEEP_EVERY_MS = 3_000;

const ACTIVE_SQL = ACTIVE_TASK_STATES.map((s) => `'${s}'`).join(', ');

/** Expired by the server's clock, in a workspace whose writer is gone ($1: the writer staleness in ms). */
export const EXPIRED = `t.state IN (${ACTIVE_SQL})
    AND t.lease_at IS NOT NULL AND t.lease_at + t.lease_ttl_ms * interval '1 millisecond' < now()
    AND greatest(w.updated_at, l.heartbeat_at) < now() - $1::bigint * interval '1 millisecond'`;

export const FROM_EXPIRED = `FROM waypoint.tasks t JOIN waypoint.workspaces w ON w.id = t.workspace_id LEFT JOIN waypoint.leases l ON l.workspace_id = t.workspace_id`;

type Queryable = Pick<Pool, 'query'>;

/** Whether any lease is due for the store-wide sweep: one cheap read, for callers that sweep only when there is work (the CLI's listing). */
export async function hasExpiredLeases(q: Queryable, writerStaleMs = WRITER_STALE_MS): Promise<boolean> {
  const r = await q.query<{ due: boolean }>(`SELECT EXISTS (SELECT 1 ${FROM_EXPIRED} WHERE ${EXPIRED}) AS due`, [writerStaleMs]);
  return r.rows[0]?.due === true;
}

