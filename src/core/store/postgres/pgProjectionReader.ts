import type { Client, Pool } from 'pg';
import { TASK_STATES, type CheckpointMeta, type SideEffect, type Step, type Task, type WaypointEvent } from '../../model/schema';
import { WaypointError } from '../../model/errors';
import { toCheckpoint, toSideEffect, toStep, toTask } from '../queries';
import type { Disposable, ProjectionReader, TaskListFilter, TaskListing } from '../eventLog';
import { connectClient, isConnectionError, sharedPool, unavailable } from './connection';
import { ensurePoolSchema } from './schema';
import { StoreSweeper, sweepExpiredLeases, type SweepOptions, type SweepResult } from './leaseSweeper';
import { ALERT_CHANNEL, parseTeamAlert, type TeamAlert } from './teamAlerts';
import { toPgText } from './pgText';
import { queryTaskListings } from './taskListing';
import { decodeRow, foldShapes } from './projectionRows';
import { fillPoolRowsIfMissing } from './rowsFill';
import { EVENT_COLUMNS, NOTIFY_CHANNEL, parseNotification, rowToEvent, type StoreNotification } from './rows';

/**
 * The team store's read side, for anyone who is not the workspace's writer: the CLI's
 * `tasks --all`, another machine's editor, a dashboard. Listings come from the task
 * summary table (kept in the same transaction as the events, so never ahead of or
 * behind them); one task's detail from the projection's rows, kept the same way
 * (projectionRows.ts): plain queries, no fold and no sql.js in the reader.
 *
 * Scoped to one workspace (`workspaceId`), or to the whole store when it is null.
 */
export class PgProjectionReader implements ProjectionReader {
  private constructor(
    private readonly pool: Pool,
    private readonly url: string,
    readonly workspaceId: string | null,
    private readonly release: () => Promise<void>,
  ) {}

  static async open(url: string, o: { workspaceId?: string | null; connectTimeoutMs?: number } = {}): Promise<PgProjectionReader> {
    const { pool, release } = sharedPool(url, { connectTimeoutMs: o.connectTimeoutMs });
    const reader = new PgProjectionReader(pool, url, o.workspaceId ?? null, release);
    try {
      await ensurePoolSchema(pool);
    } catch (e) {
      await release();
      throw isConnectionError(e) ? unavailable(e, url) : e;
    }
    return reader;
  }

  private async rows<T>(sql: string, params: unknown[]): Promise<T[]> {
    try {
      return (await this.pool.query(sql, params)).rows as T[];
    } catch (e) {
      throw isConnectionError(e) ? unavailable(e, this.url, 'read from') : e;
    }
  }

  async listTasks(filter: TaskListFilter = {}): Promise<TaskListing[]> {
    const states = filter.states?.length ? [...filter.states] : null;
    for (const s of states ?? []) if (!TASK_STATES.includes(s)) throw new WaypointError('invalid_input', `Unknown task state '${s}'.`);
    if (!filter.allWorkspaces && this.workspaceId === null) throw new WaypointError('invalid_input', 'This reader is not scoped to a workspace: list with allWorkspaces.');
    return queryTaskListings((sql, params) => this.rows(sql, params), { workspaceId: filter.allWorkspaces ? null : this.workspaceId, states, limit: filter.limit });
  }

  /** The workspace a task belongs to (in this reader's scope), or null. */
  private async workspaceOf(taskId: string): Promise<string | null> {
    const params: unknown[] = [toPgText(taskId)];
    const scope = this.workspaceId === null ? '' : ` AND workspace_id = $${params.push(this.workspaceId)}`;
    const r = await this.rows<{ workspace_id: string }>(`SELECT workspace_id FROM waypoint.tasks WHERE id = $1${scope} LIMIT 1`, params);
    return r[0]?.workspace_id ?? null;
  }

  async taskEvents(taskId: string): Promise<WaypointEvent[]> {
    const ws = await this.workspaceOf(taskId);
    if (!ws) return [];
    const rows = await this.rows<Record<string, unknown>>(`SELECT ${EVENT_COLUMNS} FROM waypoint.events WHERE workspace_id = $1 AND task_id = $2 ORDER BY seq`, [ws, toPgText(taskId)]);
    return rows.map(rowToEvent);
  }

  /** The task as the store's projection rows hold it (projectionRows.ts): no events replayed. */
  async getTask(taskId: string): Promise<Task | null> {
    for (let round = 0; round < 2; round++) {
      const params: unknown[] = [toPgText(taskId)];
      const scope = this.workspaceId === null ? '' : ` AND t.workspace_id = $${params.push(this.workspaceId)}`;
      const r = await this.rows<Record<string, unknown>>(
        `SELECT t.*, w.rows_seq IS NOT DISTINCT FROM w.head_seq AS rows_complete,
           (SELECT count(*) FROM waypoint.side_effects x WHERE x.workspace_id = t.workspace_id AND x.task_id = t.id AND x.status = 'in_doubt')::int AS in_doubt
         FROM waypoint.tasks t JOIN waypoint.workspaces w ON w.id = t.workspace_id WHERE t.id = $1${scope} LIMIT 1`,
        params,
      );
      const row = r[0];
      if (!row) return null;
      if (!row.rows_complete) {
        // Written before schema v6 and not opened since: its rows are written from its events once, then read.
        await this.fillRows(String(row.workspace_id));
        continue;
      }
      const { task, lease } = foldShapes(row);
      return toTask({ ...task, in_doubt: row.in_doubt }, lease);
    }
    throw new WaypointError('corrupt', `The team store's rows for task ${taskId} could not be completed from its events.`);
  }

  /**
   * A task in detail — the task, its steps, checkpoints and side effects — from the
   * projection rows, ordered as the embedded queries order them (`waypoint show` on
   * another machine). Null when no such task is in this reader's scope.
   */
  async taskDetail(taskId: string): Promise<{ task: Task; steps: Step[]; checkpoints: CheckpointMeta[]; sideEffects: SideEffect[] } | null> {
    const task = await this.getTask(taskId);
    if (!task) return null;
    const ws = (await this.workspaceOf(taskId))!;
    const of = async <T>(table: string, order: string, map: (r: Record<string, unknown>) => T): Promise<T[]> =>
      (await this.rows<Record<string, unknown>>(`SELECT * FROM waypoint.${table} WHERE workspace_id = $1 AND task_id = $2 ORDER BY ${order}`, [ws, toPgText(taskId)])).map((r) => map(decodeRow(r)));
    return {
      task,
      steps: await of('steps', 'ord', toStep),
      checkpoints: await of('checkpoints', 'created_at, rid', toCheckpoint),
      sideEffects: await of('side_effects', 'intent_at, key COLLATE "C"', toSideEffect),
    };
  }

  private async fillRows(workspaceId: string): Promise<void> {
    try {
      await fillPoolRowsIfMissing(this.pool, workspaceId);
    } catch (e) {
      throw isConnectionError(e) ? unavailable(e, this.url, 'read from') : e;
    }
  }

  /** One turn of the store-wide lease sweep, when one is due and it is this caller's turn (see leaseSweeper.ts). */
  async sweepLeases(o: SweepOptions): Promise<SweepResult> {
    try {
      return await sweepExpiredLeases(this.pool, o);
    } catch (e) {
      throw isConnectionError(e) ? unavailable(e, this.url, 'sweep') : e;
    }
  }

  async close(): Promise<void> {
    await this.release();
  }
}

/**
 * Live changes across the whole store (for the editor's team tree): calls `listener`
 * with each commit's workspace, epoch and head, from LISTEN/NOTIFY. Reconnects after
 * the server goes away. Dispose to stop.
 */
export async function watchTeamStore(url: string, listener: (n: StoreNotification) => void, onError?: (e: WaypointError) => void): Promise<Disposable> {
  return watchChannel(url, NOTIFY_CHANNEL, 'waypoint watch', (payload) => {
    const m = parseNotification(payload);
    if (m) listener(m);
  }, onError);
}

/**
 * The team store's alerts (a task interrupted store-wide, on any machine), parsed; for
 * every window connected to the store. While watching, this process also offers the
 * store-wide lease sweep (leaseSweeper.ts): a window that only relays to its
 * workspace's owner, or shows the Team Store view, is a connected client too.
 */
export async function watchTeamAlerts(url: string, listener: (a: TeamAlert) => void, o: { onError?: (e: WaypointError) => void; sweeper: SweepOptions }): Promise<Disposable> {
  const sweeper = StoreSweeper.acquire(url, o.sweeper);
  const watch = await watchChannel(url, ALERT_CHANNEL, 'waypoint alerts', (payload) => {
    const a = parseTeamAlert(payload);
    if (a) listener(a);
  }, o.onError);
  return {
    dispose: () => {
      watch.dispose();
      void sweeper.dispose();
    },
  };
}

async function watchChannel(url: string, channel: string, application: string, onPayload: (payload: string | undefined) => void, onError?: (e: WaypointError) => void): Promise<Disposable> {
  let client: Client | null = null;
  let stopped = false;
  const connect = async (): Promise<void> => {
    try {
      const c = await connectClient(url, { application });
      if (stopped) {
        await c.end();
        return;
      }
      c.on('notification', (n) => {
        if (n.channel === channel) onPayload(n.payload);
      });
      c.on('error', (e) => {
        client = null;
        onError?.(unavailable(e, url, 'listen to'));
        if (!stopped) setTimeout(() => void connect(), 1000).unref();
      });
      await c.query(`LISTEN ${channel}`);
      client = c;
    } catch (e) {
      onError?.(unavailable(e, url, 'listen to'));
      if (!stopped) setTimeout(() => void connect(), 1000).unref();
    }
  };
  await connect();
  return {
    dispose: () => {
      stopped = true;
      client?.end().catch(() => undefined);
    },
  };
}
