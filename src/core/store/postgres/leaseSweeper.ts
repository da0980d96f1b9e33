import type { Pool, PoolClient } from 'pg';
import { leaseExpiredReason, interruptedEvent } from '../interruption';
import { Queries } from '../queries';
import { errorMessage } from '../../model/errors';
import type { EventDataOf, EventType, Task } from '../../model/schema';
import { ACTIVE_TASK_STATES } from '../../model/stateMachine';
import { Logger, silentLogger } from '../../log';
import { Db } from '../db';
import type { NewEvent } from '../eventLog';
import { migrate } from '../migrations';
import { insertEvent, project } from '../projections';
import { sequenceBatch } from '../sequence';
import { loadSqlJs } from '../sqlite';
import { isConnectionError, sharedPool } from './connection';
import { fromPgText, toPgText } from './pgText';
import { EVENT_COLUMNS, NOTIFY_CHANNEL } from './rows';
import { RowCapture, loadTaskRows, putRowChanges, putTaskRows, taskRowImage } from './projectionRows';
import { fillRowsIfMissing } from './rowsFill';
import { ALERT_CHANNEL, interruptedAlert } from './teamAlerts';
import { EXPIRED, FROM_EXPIRED, SWEEP_EVERY_MS, WRITER_STALE_MS, hasExpiredLeases } from './leaseDue';

export { WRITER_BEAT_MS, WRITER_STALE_MS, SWEEP_EVERY_MS, hasExpiredLeases } from './leaseDue';

/**
 * The store-wide lease sweep: a running task whose agent stopped answering becomes
 * `interrupted` even when nobody opens its workspace again — in a fleet, nobody opens
 * most of them.
 *
 * Who: every process connected to the team store (a writer, the editor's Team Store
 * view, `waypoint tasks --all`) offers to sweep; one does, taking turns by the
 * server's clock (`waypoint.sweeps`: an UPDATE that succeeds for one caller at most
 * every `everyMs` store-wide), so a thousand clients cost the database a cheap read
 * each and one sweep per period.
 *
 * What: tasks in an active state whose lease expired by the server's clock (`lease_at`,
 * stamped by the commit that last renewed it, plus its ttl) in a workspace whose
 * writer is gone too — no commit and no writer heartbeat (WRITER_BEAT_MS) for
 * WRITER_STALE_MS. A workspace with a live writer is left to it: its engine sweeps its
 * own tasks, and taking its log from it would fence a healthy owner.
 *
 * How, once: per workspace, one transaction that locks its row (`FOR UPDATE SKIP
 * LOCKED`: a workspace another sweeper or a reopening writer holds is skipped, not
 * waited for), re-checks everything under the lock, takes the workspace's next fencing
 * epoch (a writer that was only stalled is refused its next commit with
 * `lost_ownership`, as when another machine takes over), appends each task's
 * `task.interrupted` — the same event the engine's own sweep writes, under the same
 * idempotency key, built by the same code from the task's projection rows, folded into
 * them by the one fold code and written back (projectionRows.ts) — and NOTIFYs the
 * change and an alert. Committed whole or not at all.
 */

/** Workspaces swept per turn (the rest wait for the next). */
const MAX_WORKSPACES_PER_SWEEP = 50;

export interface SweepOptions {
  /** Who sweeps, for the leases row and the alert: e.g. `waypoint tasks --all on build-7 (pid 123)`. */
  by: string;
  machine: string;
  log?: Logger;
  everyMs?: number;
  writerStaleMs?: number;
}

export interface SweptTask {
  workspaceId: string;
  machine: string;
  path: string;
  taskId: string;
  title: string;
  reason: string;
  seq: number;
}

export interface SweepResult {
  /** Whether this caller had the turn (false: nothing was due, or another client swept within the period). */
  turn: boolean;
  swept: SweptTask[];
}

/** One turn of the store-wide sweep, if it is this caller's (see the file comment). */
export async function sweepExpiredLeases(pool: Pool, o: SweepOptions): Promise<SweepResult> {
  const log = (o.log ?? silentLogger).child('sweep');
  const stale = o.writerStaleMs ?? WRITER_STALE_MS;
  if (!(await hasExpiredLeases(pool, stale))) return { turn: false, swept: [] };
  const turn = await pool.query(`UPDATE waypoint.sweeps SET at = now(), by = $1 WHERE id = 1 AND at <= now() - $2::bigint * interval '1 millisecond' RETURNING 1`, [
    toPgText(o.by),
    o.everyMs ?? SWEEP_EVERY_MS,
  ]);
  if (!turn.rowCount) return { turn: false, swept: [] };
  const due = await pool.query<{ workspace_id: string }>(`SELECT DISTINCT t.workspace_id ${FROM_EXPIRED} WHERE ${EXPIRED} LIMIT ${MAX_WORKSPACES_PER_SWEEP}`, [stale]);
  const swept: SweptTask[] = [];
  for (const { workspace_id } of due.rows) {
    const client = await pool.connect();
    const ignore = () => undefined;
    client.on('error', ignore);
    let failed: Error | undefined;
    try {
      swept.push(...(await sweepWorkspace(client, workspace_id, o, stale)));
    } catch (e) {
      failed = e as Error;
      await client.query('ROLLBACK').catch(() => undefined);
      // One workspace's failure (a key already there, a malformed row) does not stop the others; the next turn tries again.
      if (isConnectionError(e)) throw e;
      log.warn(`cannot sweep workspace ${workspace_id}: ${errorMessage(e)}`);
    } finally {
      client.off('error', ignore);
      client.release(failed);
    }
  }
  if (swept.length) {
    await pool.query('UPDATE waypoint.sweeps SET swept = swept + $1 WHERE id = 1', [swept.length]).catch(() => undefined);
    for (const t of swept) log.warn(`task ${t.taskId} on ${t.machine} (${t.path}) interrupted store-wide: ${t.reason}`);
  }
  return { turn: true, swept };
}

async function sweepWorkspace(client: PoolClient, workspaceId: string, o: SweepOptions, stale: number): Promise<SweptTask[]> {
  // The task's rows are read and written below: a workspace written before schema v6 gets them first.
  await fillRowsIfMissing(client, workspaceId);
  await client.query('BEGIN');
  const w = await client.query<{ epoch: number; head_seq: number; rows_seq: number | null; machine: string; path: string; now_ms: number }>(
    `SELECT epoch, head_seq, rows_seq, machine, path, (extract(epoch FROM now()) * 1000)::bigint AS now_ms FROM waypoint.workspaces WHERE id = $1 FOR UPDATE SKIP LOCKED`,
    [workspaceId],
  );
  const ws = w.rows[0];
  if (!ws || ws.rows_seq !== ws.head_seq) {
    await client.query('ROLLBACK');
    return [];
  }
  // Under the lock: no commit of this workspace is in flight, and none lands before ours ends.
  const due = await client.query<{ id: string; lease_owner: string; lease_ttl_ms: number; expired_ms: number }>(
    `SELECT t.id, t.lease_owner, t.lease_ttl_ms, (extract(epoch FROM t.lease_at + t.lease_ttl_ms * interval '1 millisecond') * 1000)::bigint AS expired_ms
     ${FROM_EXPIRED} WHERE t.workspace_id = $2 AND ${EXPIRED} ORDER BY t.id`,
    [stale, workspaceId],
  );
  const batch: NewEvent[] = [];
  const reasons = new Map<string, { reason: string; owner: string }>();
  // One fold database for the workspace's due tasks: every row of a task is keyed by its id, so their rows sit side by side.
  let db: Db | undefined;
  try {
    for (const row of due.rows) {
      const taskId = fromPgText(row.id);
      db ??= await emptyFold();
      await loadTaskRows(client, workspaceId, taskId, db);
      const fold = db;
      const queries = new Queries(() => fold);
      const task = queries.findTask(taskId);
      // Its row is gone or no longer active (checked again under the lock): nothing to interrupt.
      if (!task || !ACTIVE_TASK_STATES.includes(task.state)) continue;
      const owner = fromPgText(row.lease_owner);
      const reason = leaseExpiredReason(owner, Number(row.expired_ms), Number(row.lease_ttl_ms));
      const ev = interruptedEvent({ queries, ev: newEvent }, task, reason);
      // As the engine's runner records its sweep's interruption: keyed, so whichever sweep comes second finds it done.
      batch.push({ ...ev, key: `task.interrupt:${task.id}:${task.attempt}`, op: 'task.interrupt', result: null });
      reasons.set(task.id, { reason, owner });
    }
    if (!batch.length) {
      await client.query('ROLLBACK');
      return [];
    }
    const head = Number(ws.head_seq);
    const events = sequenceBatch(batch, head, Number(ws.now_ms));
    const epoch = Number(ws.epoch) + 1;
    const newHead = events[events.length - 1].seq;
    await client.query(
      `INSERT INTO waypoint.events (workspace_id, ${EVENT_COLUMNS}, epoch)
       SELECT $1, x.* , $13 FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::int[], $6::text[], $7::text[], $8::text[], $9::text[], $10::json[], $11::text[], $12::json[])
         AS x(seq, ts, type, v, task_id, corr, key, by, data, op, result)`,
      [
        workspaceId,
        events.map((e) => e.seq),
        events.map((e) => e.ts),
        events.map((e) => toPgText(e.type)),
        events.map((e) => e.v),
        events.map((e) => toPgText(e.taskId)),
        events.map((e) => toPgText(e.corr)),
        events.map((e) => toPgText(e.key)),
        events.map((e) => toPgText(e.by)),
        events.map((e) => JSON.stringify(e.data ?? null)),
        events.map((e) => toPgText(e.op ?? null)),
        events.map((e) => (e.op !== undefined ? JSON.stringify(e.result ?? null) : null)),
        epoch,
      ],
    );
    await client.query('UPDATE waypoint.workspaces SET epoch = $2, head_seq = $3, rows_seq = $3 WHERE id = $1', [workspaceId, epoch, newHead]);
    // The leases row names the sweeper as the last writer; its heartbeat is left as it was, so the workspace still reads as writer-less.
    await client.query('UPDATE waypoint.leases SET epoch = $2, owner = $3, machine = $4, pid = $5 WHERE workspace_id = $1', [workspaceId, epoch, toPgText(o.by), toPgText(o.machine), process.pid]);
    const identity = { id: workspaceId, machine: fromPgText(ws.machine), path: fromPgText(ws.path) };
    const swept: SweptTask[] = [];
    // Each interruption folded into its task's own rows by the one fold code; what it changed goes back (projectionRows.ts).
    const capture = RowCapture.install(db!);
    for (const e of events) {
      const fold = db!;
      fold.transaction(() => {
        insertEvent(fold, e);
        project(fold, e);
      });
      await putRowChanges(client, workspaceId, capture.take());
      const row = taskRowImage(fold, e.taskId!, identity, e.seq)!;
      await putTaskRows(client, workspaceId, [row]);
      const t = { id: e.taskId!, title: String(row.title) };
      const r = reasons.get(t.id)!;
      swept.push({ workspaceId, machine: identity.machine, path: identity.path, taskId: t.id, title: t.title, reason: r.reason, seq: e.seq });
      await client.query(`SELECT pg_notify('${ALERT_CHANNEL}', $1)`, [
        interruptedAlert({ w: workspaceId, machine: identity.machine, path: identity.path, task: t.id, title: t.title, reason: r.reason, owner: r.owner, at: Number(ws.now_ms), by: o.by }),
      ]);
    }
    // Listeners (the Team Store view, a stalled writer that reads its replacement's epoch) hear of it as of any commit.
    await client.query(`SELECT pg_notify('${NOTIFY_CHANNEL}', $1)`, [JSON.stringify({ w: workspaceId, e: epoch, h: newHead })]);
    await client.query('COMMIT');
    return swept;
  } finally {
    db?.close();
  }
}

/** An empty fold database of the current schema, for one task's rows. */
async function emptyFold(): Promise<Db> {
  const SQL = await loadSqlJs();
  const db = new Db(new SQL.Database());
  migrate(db);
  return db;
}

/** EngineCore.ev, which interruptedEvent builds its event with. */
function newEvent<T extends EventType>(type: T, task: Task, by: string | null, data: EventDataOf<T>, key: string): NewEvent {
  return { type, taskId: task.id, corr: task.correlationId, by, data, key } as NewEvent;
}

/**
 * The sweep every connected process offers (see the file comment): one per store URL
 * per process however many logs, views or readers it has open (reference-counted),
 * on the process's shared pool (connection.ts), on an unref'd timer so it never keeps a CLI alive.
 */
export class StoreSweeper {
  private static readonly byUrl = new Map<string, { sweeper: StoreSweeper; refs: number }>();
  private timer: NodeJS.Timeout | undefined;
  private busy: Promise<void> | null = null;
  private readonly pool: Pool;
  private readonly release: () => Promise<void>;
  private readonly log: Logger;

  private constructor(
    url: string,
    private readonly o: SweepOptions & { everyMs: number },
  ) {
    ({ pool: this.pool, release: this.release } = sharedPool(url, { application: 'waypoint sweep' }));
    this.log = (o.log ?? silentLogger).child('sweep');
  }

  /** Starts (or shares) this process's sweeper of the store at `url`; dispose to stop sharing it. */
  static acquire(url: string, o: SweepOptions): { dispose(): Promise<void> } {
    let entry = StoreSweeper.byUrl.get(url);
    if (!entry) {
      entry = { sweeper: new StoreSweeper(url, { ...o, everyMs: o.everyMs ?? SWEEP_EVERY_MS }), refs: 0 };
      StoreSweeper.byUrl.set(url, entry);
      entry.sweeper.start();
    }
    entry.refs++;
    const e = entry;
    let disposed = false;
    return {
      dispose: async () => {
        if (disposed) return;
        disposed = true;
        if (--e.refs > 0) return;
        StoreSweeper.byUrl.delete(url);
        await e.sweeper.stop();
      },
    };
  }

  private start(): void {
    // Jittered, so the clients of a fleet started together do not all ask at the same instant.
    const next = () => {
      this.timer = setTimeout(() => {
        this.busy = this.tick().finally(() => {
          this.busy = null;
          if (this.timer) next();
        });
      }, this.o.everyMs + Math.floor(Math.random() * 1000));
      this.timer.unref();
    };
    next();
  }

  private async tick(): Promise<void> {
    try {
      await sweepExpiredLeases(this.pool, this.o);
    } catch (e) {
      // Unreachable or refusing: the writer and the views report that; the next turn tries again.
      this.log.debug(`store-wide sweep skipped: ${errorMessage(e)}`);
    }
  }

  private async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.busy?.catch(() => undefined);
    await this.release();
  }
}
