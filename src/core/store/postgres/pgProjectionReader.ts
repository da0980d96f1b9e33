import type { Client, Pool } from 'pg';
import { TASK_STATES, type Task, type WaypointEvent } from '../../model/schema';
import { WaypointError } from '../../model/errors';
import { Queries } from '../queries';
import { Db } from '../db';
import type { Disposable, ProjectionReader, TaskListFilter, TaskListing } from '../eventLog';
import { migrate } from '../migrations';
import { insertEvent, project } from '../projections';
import { loadSqlJs } from '../sqlite';
import { connectClient, isConnectionError, sharedPool, unavailable } from './connection';
import { ensurePoolSchema } from './schema';
import { StoreSweeper, sweepExpiredLeases, type SweepOptions, type SweepResult } from './leaseSweeper';
import { ALERT_CHANNEL, parseTeamAlert, type TeamAlert } from './teamAlerts';
import { toPgText } from './pgText';
import { queryTaskListings } from './taskListing';
import { EVENT_COLUMNS, NOTIFY_CHANNEL, parseNotification, rowToEvent, type StoreNotification } from './rows';

/**
 * The team store's read side, for anyone who is not the workspace's writer: the CLI's
 * `tasks --all`, another machine's editor, a dashboard. Listings come from the task
 * summary table (kept in the same transaction as the events, so never ahead of or
 * behind them); one task's detail is its events replayed through the one projection
 * code into a scratch database.
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

  async getTask(taskId: string): Promise<Task | null> {
    const events = await this.taskEvents(taskId);
    if (!events.length) return null;
    // A task's projection is a fold of its own events alone (every row it touches is keyed by its id).
    const SQL = await loadSqlJs();
    const db = new Db(new SQL.Database());
    try {
      migrate(db);
      db.transaction(() => {
        for (const e of events) {
          insertEvent(db, e);
          project(db, e);
        }
      });
      return new Queries(() => db).findTask(taskId);
    } finally {
      db.close();
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
