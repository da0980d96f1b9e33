import type { Client, Notification } from 'pg';
import { sequenceBatch } from '../sequence';
import { WaypointError, errorMessage } from '../../model/errors';
import type { TaskState, WaypointEvent } from '../../model/schema';
import { Logger, silentLogger } from '../../log';
import type { Db } from '../db';
import type { AppendResult, Disposable, EventLog, NewEventLike, ProjectionCheck, ReadFilter, WorkspaceIdentity } from '../eventLog';
import { SqlProjection } from '../projection';
import { listingEntryParts } from '../taskListingJson';
import { connectClient, isConnectionError, redactUrl, unavailable } from './connection';
import { StoreSweeper, WRITER_BEAT_MS } from './leaseSweeper';
import { ensureSchema } from './schema';
import { toPgText, fromPgText } from './pgText';
import { NOTIFY_CHANNEL, parseNotification, rowToEvent, EVENT_COLUMNS } from './rows';
import { RowCapture, RowChanges, TASK_DETAIL_COLUMNS, compareRows, rowStatementsSql, tablesMask, writeAllRows, type RowParams } from './projectionRows';

/**
 * The team store's EventLog: one workspace's events in PostgreSQL.
 *
 * Ownership. Opening takes the workspace's next fencing epoch (an upsert that bumps
 * `workspaces.epoch`); every commit advances `head_seq` only `WHERE epoch = mine AND
 * head_seq = what I last wrote`, so a writer that another one replaced never commits
 * again: it is refused with `lost_ownership`. Who may open is decided before this
 * (one owner per workspace folder, the `.waypoint/owner.lock` as today); the epoch
 * fences whoever was replaced, on any machine.
 *
 * Appends. `append` sequences and folds the batch synchronously (the one projection
 * code, into this writer's in-memory sql.js database, which refuses a repeated
 * idempotency key before anything is sequenced), resolves at once, and pipelines
 * durability as the embedded journal does: batches queued while a commit is in
 * flight go together in the next one (group commit). A commit is ONE statement (data-
 * modifying CTEs: head, events, task summaries, NOTIFY), so it is one transaction and
 * one round trip, and `durable` settles only after PostgreSQL has flushed it
 * (`synchronous_commit=on`).
 *
 * Failures. A connection that drops (server stopped, restarted, network) is retried
 * until `retryMs` passes. A retry after a drop *during* the commit cannot know whether
 * it committed: the head tells — if it already stands at this group's last seq under
 * this epoch with these keys, the group committed and is not written again; the
 * (workspace, key) unique index backs that up. After `retryMs` the writer fails with
 * `store_unavailable` and is poisoned (its fold holds events that are not durable):
 * nothing that was acknowledged is lost, and the caller reopens.
 */

export interface PgEventLogOptions {
  url: string;
  workspace: WorkspaceIdentity;
  /** Who writes (shown in `waypoint.leases`): e.g. `cli-1234`, an editor session. */
  owner?: string;
  log?: Logger;
  clock?: () => number;
  /** Keep retrying a commit this long while the server is unreachable (ms). */
  retryMs?: number;
  connectTimeoutMs?: number;
  /** The projection to fold into (the engine's); a fresh one when absent. Appends fold into it as they are sequenced. */
  projection?: SqlProjection;
  /** The local owner lock's epoch (see EventLog.ownerEpoch). */
  ownerEpoch?: number;
  /**
   * Given where the team store last saw this workspace id (machine and path), returns a new
   * identity when that shows this folder to be a copy of another that uses the id (see
   * workspaceIdentity.ts), or null to keep it.
   */
  claimIdentity?: (recorded: { machine: string; path: string }) => WorkspaceIdentity | null;
  /** Called when the log closes (the backend releases the workspace's local owner lock). */
  onClose?: () => void | Promise<void>;
  /** Test hook: called after a commit statement returned; throwing simulates the reply lost on the wire. */
  afterCommitForTests?: (group: { first: number; last: number }) => void;
  /** Test hook: called just before a commit statement is sent; throwing simulates the connection gone before it reached the server. */
  beforeCommitForTests?: (group: { first: number; last: number }) => void;
}

interface Pending {
  events: WaypointEvent[];
  /** Task summaries as these events leave them (taken when they were folded: later batches may have changed the fold since). */
  summaries: Map<string, TaskSummary | null>;
  /** The projection rows these events changed, as the fold left them (see projectionRows.ts). */
  rows: RowChanges;
  resolve: () => void;
  reject: (e: unknown) => void;
}

interface TaskSummary {
  id: string;
  title: string;
  goal: string;
  agent: string | null;
  state: string;
  attempt: number;
  created_at: number;
  updated_at: number;
  seq: number;
  /** The task's lease in the fold (null: nobody holds it); its holder's heartbeat time tells a renewal apart. */
  lease_owner: string | null;
  lease_ttl_ms: number | null;
  lease_hb: number | null;
  /** The task's other columns and its lease holder's pid and host (TASK_DETAIL_COLUMNS, lease_pid, lease_host), in that order. */
  detail: unknown[];
}

const DETAIL_SQL = [...TASK_DETAIL_COLUMNS.map((c) => `t.${c}`), 'l.pid', 'l.host'].join(', ');

/** Commits carry at most this many events (one statement's parameters stay small). */
const MAX_GROUP_EVENTS = 2000;

/** Back-to-back commits notify listeners at most this often (each notification carries the latest head). */
const NOTIFY_EVERY_MS = 25;

/**
 * The commit statement (see commitStatement): $1 workspace, $2 epoch, $3 expected head, $4 new head, $5..$15 event columns, $16 machine,
 * $17..$25 task summary columns, $26 deleted task ids, $27 and $28 the tasks' listing entries around their updatedAt (listing_head, listing_tail),
 * $29..$31 the tasks whose summary moved only in time (id, updated_at, seq), $32..$34 and $35..$37 the leases of
 * the first and of the second kind of task (holder, ttl, the holder's heartbeat time), $38 the first kind's other
 * columns (a JSON array each: TASK_DETAIL_COLUMNS, lease pid, lease host), $39 and $40 the other projection rows
 * written and deleted (projectionRows.ts).
 *
 * The workspace's rows are complete up to its head (`rows_seq`) when they were before
 * this commit; a workspace written before schema v6 stays marked incomplete until its
 * rows are written whole (writeAllRows).
 *
 * Most events change nothing in their task's summary but its time (a heartbeat, a step's
 * progress): those tasks get only their updated_at and seq set (`tm`), not the whole
 * row's fields and listing texts again. That halved what a summary cost a commit (the
 * texts were most of the parameters' size, their escaping most of the client's work).
 *
 * A lease's expiry is judged by the server's clock (the store-wide sweep, leaseSweeper.ts):
 * a commit that renews a lease — the holder's heartbeat time changed, or a new holder —
 * stamps `lease_at` with now(); one that does not keeps it.
 *
 * A task that already has its row is UPDATEd, and only a new one INSERTed: `INSERT … ON
 * CONFLICT DO UPDATE` locks the existing row before updating it, and that lock is a
 * WAL record of its own per task per commit.
 */
/** The task columns a commit writes from each task's `detail` (x.d, a JSON array: see TaskSummary.detail), and their values. */
const DETAIL_COLS = [...TASK_DETAIL_COLUMNS, 'lease_pid', 'lease_host'];
const DETAIL_VALS = DETAIL_COLS.map((c, i) => (c === 'lease_pid' ? `(x.d ->> ${i})::bigint` : `x.d ->> ${i}`));
const DETAIL_COLUMNS = DETAIL_COLS.join(', ');
const DETAIL_VALUES = DETAIL_VALS.join(', ');
const DETAIL_SET = DETAIL_COLS.map((c, i) => `${c} = ${DETAIL_VALS[i]}`).join(', ');

const commitSql = (rows: string): string => `WITH head AS (
    UPDATE waypoint.workspaces SET head_seq = $4, rows_seq = CASE WHEN rows_seq = $3 THEN $4 ELSE rows_seq END, updated_at = now()
    WHERE id = $1 AND epoch = $2 AND head_seq = $3 RETURNING id
  ), ev AS (
    INSERT INTO waypoint.events (workspace_id, ${EVENT_COLUMNS}, epoch)
    SELECT head.id, x.seq, x.ts, x.type, x.v, x.task_id, x.corr, x.key, x.by, x.data, x.op, x.result, $2
    FROM head, unnest($5::bigint[], $6::bigint[], $7::text[], $8::int[], $9::text[], $10::text[], $11::text[], $12::text[], $13::json[], $14::text[], $15::json[])
      AS x(seq, ts, type, v, task_id, corr, key, by, data, op, result)
    RETURNING 1
  ), x AS (
    SELECT * FROM unnest($17::text[], $18::text[], $19::text[], $20::text[], $21::text[], $22::int[], $23::bigint[], $24::bigint[], $25::bigint[], $27::text[], $28::text[],
      $32::text[], $33::bigint[], $34::bigint[], $38::json[])
      AS x(id, title, goal, agent, state, attempt, created_at, updated_at, seq, head, tail, lo, lt, lh, d)
  ), up AS (
    UPDATE waypoint.tasks AS t SET machine = $16, title = x.title, goal = x.goal, agent = x.agent, state = x.state, attempt = x.attempt,
      updated_at = x.updated_at, seq = x.seq, listing_head = x.head, listing_tail = x.tail,
      lease_owner = x.lo, lease_ttl_ms = x.lt, lease_hb = x.lh, ${DETAIL_SET},
      lease_at = CASE WHEN x.lh IS NULL THEN NULL WHEN t.lease_hb IS NOT DISTINCT FROM x.lh AND t.lease_owner IS NOT DISTINCT FROM x.lo THEN t.lease_at ELSE now() END
    FROM head, x WHERE t.workspace_id = head.id AND t.id = x.id
    RETURNING t.id
  ), tk AS (
    INSERT INTO waypoint.tasks AS t (workspace_id, id, machine, title, goal, agent, state, attempt, created_at, updated_at, seq, listing_head, listing_tail,
      lease_owner, lease_ttl_ms, lease_hb, lease_at, ${DETAIL_COLUMNS})
    SELECT head.id, x.id, $16, x.title, x.goal, x.agent, x.state, x.attempt, x.created_at, x.updated_at, x.seq, x.head, x.tail,
      x.lo, x.lt, x.lh, CASE WHEN x.lh IS NULL THEN NULL ELSE now() END, ${DETAIL_VALUES}
    FROM head, x WHERE x.id NOT IN (SELECT id FROM up)
    ON CONFLICT (workspace_id, id) DO UPDATE SET machine = excluded.machine, title = excluded.title, goal = excluded.goal, agent = excluded.agent,
      state = excluded.state, attempt = excluded.attempt, updated_at = excluded.updated_at, seq = excluded.seq, listing_head = excluded.listing_head, listing_tail = excluded.listing_tail,
      lease_owner = excluded.lease_owner, lease_ttl_ms = excluded.lease_ttl_ms, lease_hb = excluded.lease_hb, lease_at = excluded.lease_at,
      ${DETAIL_COLS.map((c) => `${c} = excluded.${c}`).join(', ')}
    RETURNING 1
  ), tm AS (
    UPDATE waypoint.tasks AS t SET updated_at = y.updated_at, seq = y.seq, lease_owner = y.lo, lease_ttl_ms = y.lt, lease_hb = y.lh,
      lease_at = CASE WHEN y.lh IS NULL THEN NULL WHEN t.lease_hb IS NOT DISTINCT FROM y.lh AND t.lease_owner IS NOT DISTINCT FROM y.lo THEN t.lease_at ELSE now() END
    FROM head, unnest($29::text[], $30::bigint[], $31::bigint[], $35::text[], $36::bigint[], $37::bigint[]) AS y(id, updated_at, seq, lo, lt, lh)
    WHERE t.workspace_id = head.id AND t.id = y.id
    RETURNING 1
  ), del AS (
    DELETE FROM waypoint.tasks WHERE workspace_id = $1 AND id = ANY($26::text[]) AND EXISTS (SELECT 1 FROM head) RETURNING 1
  )${rows}
  SELECT (SELECT count(*) FROM head)::int AS advanced, (SELECT count(*) FROM ev) AS ev, (SELECT count(*) FROM up) AS up, (SELECT count(*) FROM tk) AS tk,
    (SELECT count(*) FROM tm)::int AS tm, (SELECT count(*) FROM del) AS del`;

/** The commit statement for a batch whose projection rows changed in these tables (its name says which: each is prepared once per connection). */
const commitStatements = new Map<string, { name: string; text: string }>();
function commitStatementFor(p: RowParams): { name: string; text: string } {
  const name = `waypoint_commit_v6_${tablesMask(p.putTables)}_${tablesMask(p.delTables)}`;
  let st = commitStatements.get(name);
  if (!st) {
    const puts = '$39::json';
    const dels = p.putTables.length ? '$40::json' : '$39::json';
    st = { name, text: commitSql(rowStatementsSql(p.putTables, p.delTables, puts, dels)) };
    commitStatements.set(name, st);
  }
  return st;
}

export class PgEventLog implements EventLog {
  readonly backend = 'postgresql' as const;
  private client: Client | null;
  private listenClient: Client | null = null;
  private listening: Promise<void> | null = null;
  private seq: number;
  private durableSeq: number;
  private queue: Pending[] = [];
  private flushing: Promise<void> | null = null;
  private poisoned: WaypointError | null = null;
  private lost: WaypointError | null = null;
  private closed = false;
  private lastNotifyAt = 0;
  /** When a commit or a beat last told the store this writer is alive (see beat). */
  private lastSignAt = Date.now();
  private beatTimer: NodeJS.Timeout | undefined;
  private sweeper: { dispose(): Promise<void> } | undefined;
  /** The durable head listeners were last told of (see notifyListeners). */
  private notifiedHead = 0;
  private readonly listeners = new Set<(events: readonly WaypointEvent[]) => void>();
  private readonly lostListeners = new Set<(e: WaypointError) => void>();
  private readonly log: Logger;
  private readonly clock: () => number;
  private readonly retryMs: number;
  /** Each task's last listing entry parts, and the summary they were made from (see entryParts). */
  private readonly entries = new Map<string, { summary: TaskSummary; head: string; tail: string }>();
  /** Each task's detail as last sent (see TaskSummary.detail): one unchanged needs no rewrite of the task's row. */
  private readonly details = new Map<string, unknown[]>();
  /** Each task's detail as the fold last had it: read again only when the fold wrote it (RowCapture.takeTasks). */
  private readonly folded = new Map<string, unknown[]>();
  /** Notices the rows each fold changes, for the commit that carries its events (projectionRows.ts). */
  private capture!: RowCapture;
  /** Counters for tests and the benchmark: commits and the events they carried. */
  readonly stats = { commits: 0, events: 0, retries: 0 };

  private constructor(
    private readonly opts: PgEventLogOptions,
    client: Client,
    readonly epoch: number,
    head: number,
    /** This writer's projection of the workspace (the one fold code), current to `lastSeq`. */
    readonly projection: SqlProjection,
  ) {
    this.client = client;
    this.seq = head;
    this.durableSeq = head;
    this.log = (opts.log ?? silentLogger).child('store');
    this.clock = opts.clock ?? Date.now;
    this.retryMs = opts.retryMs ?? 15_000;
    this.watchClient(client);
  }

  /** The projection's database (for tests and the rebuild check). */
  get fold(): Db {
    return this.projection.db;
  }

  /** A team store writer is never opened read-only: an unreachable database is an error, not a mode. */
  readonly readOnlyReason: string | null = null;
  readonly warnings: readonly string[] = [];

  /** Throws once this writer is known to be superseded (a commit refused, or the takeover's NOTIFY). */
  assertOwned(): void {
    if (this.lost) throw this.lost;
  }

  get ownerEpoch(): number | undefined {
    return this.opts.ownerEpoch;
  }

  get workspace(): WorkspaceIdentity {
    return this.opts.workspace;
  }

  get lastSeq(): number {
    return this.seq;
  }

  /** Where the store is, without credentials (for messages and `waypoint stats`). */
  get where(): string {
    return redactUrl(this.opts.url);
  }

  /**
   * Opens the workspace's log as its writer: creates the schema if absent, takes the next
   * epoch, and folds every event so far into the projection.
   */
  static async open(opts: PgEventLogOptions): Promise<PgEventLog> {
    const t0 = performance.now();
    const client = await connectClient(opts.url, { connectTimeoutMs: opts.connectTimeoutMs, application: `waypoint ${opts.owner ?? ''}`.trim() });
    try {
      await ensureSchema(client);
      if (opts.claimIdentity) {
        const seen = await client.query<{ machine: string; path: string }>('SELECT machine, path FROM waypoint.workspaces WHERE id = $1', [opts.workspace.id]);
        const renewed = seen.rows[0] ? opts.claimIdentity(seen.rows[0]) : null;
        if (renewed) opts = { ...opts, workspace: renewed };
      }
      const ws = opts.workspace;
      const r = await client.query<{ epoch: number; head_seq: number; rows_seq: number | null }>(
        `WITH before AS (
           SELECT path FROM waypoint.workspaces WHERE id = $1
         ), w AS (
           INSERT INTO waypoint.workspaces AS w (id, machine, path, epoch, rows_seq) VALUES ($1, $2, $3, 1, 0)
           ON CONFLICT (id) DO UPDATE SET epoch = w.epoch + 1, machine = excluded.machine, path = excluded.path, updated_at = now()
           RETURNING id, epoch, head_seq, rows_seq
         ), l AS (
           INSERT INTO waypoint.leases AS l (workspace_id, epoch, owner, machine, pid)
           SELECT id, epoch, $4, $2, $5 FROM w
           ON CONFLICT (workspace_id) DO UPDATE SET epoch = excluded.epoch, owner = excluded.owner, machine = excluded.machine, pid = excluded.pid, acquired_at = now(), heartbeat_at = now()
           RETURNING 1
         ), n AS (
           SELECT pg_notify('${NOTIFY_CHANNEL}', json_build_object('w', id, 'e', epoch, 'h', head_seq)::text) FROM w
         ), moved AS (
           -- The tasks' listing entries name the workspace's path: a workspace opened at a new path lists them from the columns until each is written again.
           UPDATE waypoint.tasks SET listing_head = NULL, listing_tail = NULL WHERE workspace_id = $1 AND (listing_head IS NOT NULL OR listing_tail IS NOT NULL) AND EXISTS (SELECT 1 FROM before WHERE before.path <> $3) RETURNING 1
         )
         SELECT epoch, head_seq, rows_seq FROM w, (SELECT count(*) FROM l) AS lc, (SELECT count(*) FROM n) AS nc, (SELECT count(*) FROM moved) AS mc`,
        [ws.id, toPgText(ws.machine), toPgText(ws.path), toPgText(opts.owner ?? `pid-${process.pid}`), process.pid],
      );
      const { epoch, head_seq: head, rows_seq: rowsSeq } = r.rows[0];
      const projection = opts.projection ?? (await SqlProjection.empty());
      const log = new PgEventLog(opts, client, epoch, 0, projection);
      // Everything so far, into the projection, in pages (a long history is not one result set).
      for (let after = 0; after < head; ) {
        const page = await log.readRange(after, head, undefined, 5000);
        if (!page.length) throw new WaypointError('corrupt', `The team store's log for workspace ${ws.id} ends at event ${after}, but its head says ${head}.`, { after, head });
        // A gap or a repeated seq is refused by the projection (corrupt): it would fold a history that never was.
        projection.apply(page);
        after = page[page.length - 1].seq;
      }
      log.capture = RowCapture.install(projection.db);
      if (rowsSeq !== head) await log.writeAllRows(client, head);
      log.seq = head;
      log.durableSeq = head;
      log.notifiedHead = head;
      log.startLiveness();
      log.log.info(`opened workspace ${ws.id} (${ws.machine}) in the team store at ${redactUrl(opts.url)}: epoch ${epoch}, ${head} events, in ${(performance.now() - t0).toFixed(1)} ms`);
      return log;
    } catch (e) {
      await client.end().catch(() => undefined);
      throw isConnectionError(e) ? unavailable(e, opts.url) : e;
    }
  }

  /**
   * A workspace last written before schema v6 (or whose rows a failed resync left
   * incomplete) gets its projection rows written whole from this writer's fold, once,
   * under its epoch: a writer that was replaced meanwhile writes nothing.
   */
  private async writeAllRows(client: Client, head: number): Promise<void> {
    const t0 = performance.now();
    await client.query('BEGIN');
    try {
      const w = await client.query<{ epoch: number; head_seq: number }>('SELECT epoch, head_seq FROM waypoint.workspaces WHERE id = $1 FOR UPDATE', [this.opts.workspace.id]);
      if (w.rows[0]?.epoch !== this.epoch || w.rows[0]?.head_seq !== head) throw this.loseOwnership(w.rows[0]?.epoch ?? this.epoch + 1);
      await writeAllRows(client, this.opts.workspace, this.fold, head);
      await client.query('COMMIT');
    } catch (e) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw e;
    }
    this.log.info(`wrote the projection rows of workspace ${this.opts.workspace.id} whole (events up to ${head}) in ${(performance.now() - t0).toFixed(1)} ms`);
  }

  /**
   * This writer's sign of life for the store-wide sweep (leaseSweeper.ts), which leaves a
   * workspace alone while its writer is alive: every commit is one, and an idle writer
   * beats every WRITER_BEAT_MS. The beat also notices a takeover without LISTEN: when
   * the leases row is at another epoch, this writer was replaced. And this process
   * offers to sweep the store (one sweeper per process and store, shared).
   */
  private startLiveness(): void {
    this.beatTimer = setInterval(() => void this.beat(), WRITER_BEAT_MS);
    this.beatTimer.unref();
    const ws = this.opts.workspace;
    this.sweeper = StoreSweeper.acquire(
      this.opts.url,
      { by: `${this.opts.owner ?? 'waypoint'} on ${ws.machine} (pid ${process.pid})`, machine: ws.machine, log: this.opts.log },
    );
  }

  private async beat(): Promise<void> {
    // Skipped when a commit spoke for the writer within half a period: signs of life stay at most 1.5 periods apart.
    if (this.closed || this.lost || this.poisoned || this.flushing || Date.now() - this.lastSignAt < WRITER_BEAT_MS / 2) return;
    const ws = this.opts.workspace;
    try {
      const client = await this.writer();
      const r = await client.query<{ epoch: number }>({
        name: 'waypoint_beat_v1',
        text: `WITH b AS (UPDATE waypoint.leases SET heartbeat_at = now() WHERE workspace_id = $1 AND epoch = $2 RETURNING 1)
               SELECT (SELECT count(*) FROM b)::int AS beat, (SELECT epoch FROM waypoint.workspaces WHERE id = $1) AS epoch`,
        values: [ws.id, this.epoch],
      });
      const row = r.rows[0] as { beat: number; epoch: number };
      if (row.beat === 1) this.lastSignAt = Date.now();
      else if (row.epoch > this.epoch) this.loseOwnership(row.epoch);
    } catch (e) {
      // The next commit reconnects (and reports an unreachable store); a missed beat only makes this writer look idle.
      if (isConnectionError(e)) this.dropClient();
      this.log.debug(`writer beat failed: ${errorMessage(e)}`);
    }
  }

  private watchClient(client: Client): void {
    // A connection error on an idle client: forget it, the next use reconnects.
    client.on('error', (e) => {
      this.log.warn(`team store connection lost: ${unavailable(e, this.opts.url).message}`);
      if (this.client === client) this.client = null;
    });
  }

  private async writer(): Promise<Client> {
    if (this.client) return this.client;
    const c = await connectClient(this.opts.url, { connectTimeoutMs: this.opts.connectTimeoutMs, application: `waypoint ${this.opts.owner ?? ''}`.trim() });
    this.watchClient(c);
    this.client = c;
    return c;
  }

  private dropClient(): void {
    const c = this.client;
    this.client = null;
    c?.end().catch(() => undefined);
  }

  private assertWritable(): void {
    if (this.closed) throw new WaypointError('io', 'The team store log is closed.');
    if (this.lost) throw this.lost;
    if (this.poisoned) throw this.poisoned;
  }

  async append(batch: readonly NewEventLike[]): Promise<AppendResult> {
    return this.appendNow(batch);
  }

  /**
   * Synchronous part of `append`: sequences, folds and queues the batch. The engine may
   * call this inside its serialized runner and await `durable` after it.
   */
  appendNow(batch: readonly NewEventLike[]): AppendResult {
    this.assertWritable();
    if (batch.length === 0) return { events: [], durable: Promise.resolve() };
    const ts = this.clock();
    const events = sequenceBatch(batch, this.seq, ts);
    try {
      this.projection.apply(events);
    } catch (e) {
      // The fold rolled back: nothing was sequenced. A key the workspace already holds is the usual cause.
      if (/UNIQUE constraint failed: events\.key/.test(errorMessage(e))) {
        throw new WaypointError('conflict', `An event with idempotency key '${batch.find((b) => this.hasKey(b.key))?.key ?? '?'}' is already in this workspace's log; it is not recorded twice.`);
      }
      throw e;
    }
    this.seq += events.length;
    const summaries = this.summaries(events);
    const rows = this.capture.take();
    let resolve!: () => void;
    let reject!: (e: unknown) => void;
    const durable = new Promise<void>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    durable.catch(() => undefined);
    this.queue.push({ events, summaries, rows, resolve, reject });
    if (!this.flushing) this.flushing = this.drain();
    return { events, durable };
  }

  private hasKey(key: string): boolean {
    return !!this.fold.get('SELECT 1 AS x FROM events WHERE key = ?', [key]);
  }

  /**
   * The team store's projection rows against this writer's fold (projectionRows.ts), once
   * every event folded so far is committed; compared again if events came meanwhile.
   */
  async verifyStoreProjection(): Promise<ProjectionCheck['differences']> {
    for (let round = 0; ; round++) {
      const at = this.seq;
      await this.waitDurable(at);
      this.assertWritable();
      // A connection of its own: the writer's carries commits, one query at a time.
      const client = await connectClient(this.opts.url, { connectTimeoutMs: this.opts.connectTimeoutMs, application: 'waypoint verify' });
      try {
        const differences = await compareRows(client, this.opts.workspace.id, this.fold);
        if (this.seq === at || round >= 4) return differences;
      } finally {
        await client.end().catch(() => undefined);
      }
    }
  }

  /** Resolves once every event up to `seq` is durable (answering a repeated call). */
  async waitDurable(seq: number): Promise<void> {
    while (seq > this.durableSeq) {
      if (this.poisoned || this.lost) throw this.poisoned ?? this.lost;
      if (!this.flushing) return;
      await this.flushing.catch(() => undefined);
    }
  }

  /**
   * Commits queued groups until the queue is empty. Clears `flushing` itself, in the same
   * synchronous run as its last look at the queue, so an append that comes right after
   * either finds the queue being drained or starts a new drain (never neither, never two).
   */
  private async drain(): Promise<void> {
    for (;;) {
      // One turn of the event loop before a group is formed: the callers whose appends
      // the last commit just answered run their continuations (microtasks) and append
      // again in this turn, so their events go together in the next commit instead of
      // the first alone and the rest one commit later (a commit is one WAL flush: the
      // fewer, fuller ones, the more appends per second, and no one waits two commits).
      await new Promise<void>((r) => setImmediate(r));
      // Listeners hear of the last commits when nothing follows them at once, or at least every NOTIFY_EVERY_MS.
      if (this.notifiedHead < this.durableSeq && !this.poisoned && (!this.queue.length || Date.now() - this.lastNotifyAt >= NOTIFY_EVERY_MS)) {
        await this.notifyListeners();
        continue;
      }
      // Checked and cleared in one synchronous run (see flush): no await between them.
      if (!this.queue.length || this.poisoned) {
        this.flushing = null;
        return;
      }
      const group: Pending[] = [];
      let n = 0;
      while (this.queue.length && (n === 0 || n + this.queue[0].events.length <= MAX_GROUP_EVENTS)) {
        const p = this.queue.shift()!;
        group.push(p);
        n += p.events.length;
      }
      const events = group.flatMap((p) => p.events);
      // A later batch's summary of a task supersedes an earlier one's.
      const summaries = new Map<string, TaskSummary | null>();
      for (const p of group) for (const [id, s] of p.summaries) summaries.set(id, s);
      const rows = group.length === 1 ? group[0].rows : new RowChanges();
      if (group.length > 1) for (const p of group) rows.merge(p.rows);
      try {
        await this.commitGroup(events, summaries, rows);
      } catch (e) {
        const err = e instanceof WaypointError ? e : new WaypointError('io', `Team store commit failed; the store must be reopened: ${errorMessage(e)}`);
        this.poisoned = err;
        for (const p of [...group, ...this.queue.splice(0)]) p.reject(err);
        this.log.error(err.message);
        continue;
      }
      this.durableSeq = events[events.length - 1].seq;
      this.lastSignAt = Date.now();
      this.stats.commits++;
      this.stats.events += events.length;
      for (const p of group) p.resolve();
      this.emit(events);
    }
  }

  private emit(events: readonly WaypointEvent[]): void {
    for (const l of this.listeners) {
      try {
        l(events);
      } catch (e) {
        this.log.error(`change listener failed: ${errorMessage(e)}`);
      }
    }
  }

  /** Commits one group, retrying across dropped connections until `retryMs` passes. */
  private async commitGroup(events: WaypointEvent[], summaries: Map<string, TaskSummary | null>, rows: RowChanges): Promise<void> {
    const first = events[0].seq;
    const last = events[events.length - 1].seq;
    const deadline = Date.now() + this.retryMs;
    let delay = 50;
    for (;;) {
      try {
        const client = await this.writer();
        const advanced = await this.commitStatement(client, events, summaries, rows, first, last);
        if (advanced) {
          this.opts.afterCommitForTests?.({ first, last });
          return;
        }
        // The head did not move: replaced, or (a retry after a drop mid-commit) already committed.
        if (await this.alreadyCommitted(client, events, first, last)) {
          this.log.info(`events ${first}..${last} were committed before the connection dropped; not written again`);
          return;
        }
      } catch (e) {
        // The attempt may not have committed, but it already took these tasks' new listing
        // entries as written (entryParts): forgotten, so the retry writes their rows whole. Else
        // a retry took a state change (running → waiting_review) for a change of time only and
        // left the old state in the summary `tasks --all` lists (found by the fleet soak).
        for (const id of summaries.keys()) {
          this.entries.delete(id);
          this.details.delete(id);
        }
        // A reconnect that failed (store_unavailable) is retried like a dropped connection.
        const retryable = (e instanceof WaypointError && e.code === 'store_unavailable') || (!(e instanceof WaypointError) && isConnectionError(e));
        if (!retryable) throw e instanceof WaypointError ? e : this.describeRefusal(e);
        this.dropClient();
        this.stats.retries++;
        if (Date.now() >= deadline) throw unavailable(e, this.opts.url, `commit events ${first}..${last} to`);
        this.log.warn(`team store unreachable (${unavailable(e, this.opts.url).message}); retrying in ${delay} ms`);
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 1000);
      }
    }
  }

  private describeRefusal(e: unknown): WaypointError {
    const code = (e as { code?: string })?.code;
    if (code === '23505') return new WaypointError('conflict', `The team store refused a duplicate event (an idempotency key already in this workspace's log); nothing of this group was recorded.`);
    return new WaypointError('io', `The team store refused a commit; the store must be reopened: ${unavailable(e, this.opts.url, 'write').message}`);
  }

  /**
   * One statement, so one transaction and one round trip: the head moves under my epoch,
   * the events and task summaries go in. Prepared once per connection (a named
   * statement: parsed and planned once, not per commit).
   *
   * Rows travel as one array per column (`unnest`), not as one JSON document: `data` and
   * `result` go as `json[]` and are stored as written, so a NUL or a lone surrogate in
   * them (JSON escapes) survives, where `json_to_recordset` would unescape them and
   * fail; text columns go through `toPgText` (see pgText.ts).
   *
   * No NOTIFY in here: PostgreSQL serializes every notifying transaction's commit,
   * WAL flush included, behind one database-wide lock, so a NOTIFY per commit made
   * every workspace's commits wait for each other's fsync. Listeners are told after
   * the commit instead (`notifyListeners`).
   */
  private async commitStatement(client: Client, events: WaypointEvent[], summaries: Map<string, TaskSummary | null>, rows: RowChanges, first: number, last: number): Promise<boolean> {
    const ws = this.opts.workspace;
    const upserts: TaskSummary[] = [];
    const parts: { head: string; tail: string }[] = [];
    const times: TaskSummary[] = [];
    const deleted: string[] = [];
    for (const [id, t] of summaries) {
      if (t === null) {
        this.entries.delete(id);
        this.details.delete(id);
        deleted.push(toPgText(id));
        continue;
      }
      const known = this.entries.get(id);
      const p = this.entryParts(t);
      const sent = this.details.get(id);
      if (known === p && sent && (sent === t.detail || sameValues(sent, t.detail))) times.push(t);
      else {
        this.details.set(id, t.detail);
        upserts.push(t);
        parts.push(p);
      }
    }
    const n = events.length;
    const col = <T>(f: (e: WaypointEvent) => T): T[] => {
      const out = new Array<T>(n);
      for (let i = 0; i < n; i++) out[i] = f(events[i]);
      return out;
    };
    const changed = rows.params();
    const statement = commitStatementFor(changed);
    this.opts.beforeCommitForTests?.({ first, last });
    const r = await client.query<{ advanced: number; tm: number }>({
      ...statement,
      values: [
        ws.id,
        this.epoch,
        first - 1,
        last,
        col((e) => e.seq),
        col((e) => e.ts),
        col((e) => toPgText(e.type)),
        col((e) => e.v),
        col((e) => toPgText(e.taskId)),
        col((e) => toPgText(e.corr)),
        col((e) => toPgText(e.key)),
        col((e) => toPgText(e.by)),
        col((e) => JSON.stringify(e.data ?? null)),
        col((e) => toPgText(e.op ?? null)),
        col((e) => (e.op !== undefined ? JSON.stringify(e.result ?? null) : null)),
        toPgText(ws.machine),
        upserts.map((t) => toPgText(t.id)),
        upserts.map((t) => toPgText(t.title)),
        upserts.map((t) => toPgText(t.goal)),
        upserts.map((t) => toPgText(t.agent)),
        upserts.map((t) => toPgText(t.state)),
        upserts.map((t) => t.attempt),
        upserts.map((t) => t.created_at),
        upserts.map((t) => t.updated_at),
        upserts.map((t) => t.seq),
        deleted,
        parts.map((p) => p.head),
        parts.map((p) => p.tail),
        times.map((t) => toPgText(t.id)),
        times.map((t) => t.updated_at),
        times.map((t) => t.seq),
        upserts.map((t) => toPgText(t.lease_owner)),
        upserts.map((t) => t.lease_ttl_ms),
        upserts.map((t) => t.lease_hb),
        times.map((t) => toPgText(t.lease_owner)),
        times.map((t) => t.lease_ttl_ms),
        times.map((t) => t.lease_hb),
        upserts.map((t) => JSON.stringify(t.detail.map((v) => (typeof v === 'string' ? toPgText(v) : v)))),
        // Only the parameters the statement's row CTEs use (PostgreSQL refuses one that nothing uses).
        ...(changed.putTables.length ? [changed.puts] : []),
        ...(changed.delTables.length ? [changed.dels] : []),
      ],
    });
    const row = r.rows[0];
    if (row.advanced === 1 && row.tm < times.length) {
      // A row this writer wrote is gone (removed outside Waypoint): its task's next event writes it whole again.
      for (const t of times) {
        this.entries.delete(t.id);
        this.details.delete(t.id);
      }
      this.log.warn(`${times.length - row.tm} task summaries were missing from the team store; they are written again with their tasks' next events`);
    }
    return row.advanced === 1;
  }

  /**
   * Tells listeners (LISTEN waypoint_events) this writer's durable head, after its commits,
   * in a transaction of its own that writes no WAL (so it holds the notify lock only for
   * an instant, never across a flush). Called by the drain between commits, on the
   * writer's connection (one query at a time on it). Coalesced: while commits follow
   * each other back to back, one notification per NOTIFY_EVERY_MS carries the latest
   * head — a listener reads every event up to the head it is told, so none is missed
   * for a notification skipped. A crash between a commit and its notification delays
   * the news until the next commit; it loses nothing (the events are durable and the
   * head says where they end).
   */
  private async notifyListeners(): Promise<void> {
    const head = this.durableSeq;
    // Marked told even if telling fails: the next commit's notification carries a later head anyway.
    this.notifiedHead = head;
    this.lastNotifyAt = Date.now();
    const client = this.client;
    if (!client || this.lost) return;
    const ws = this.opts.workspace;
    try {
      await client.query({ name: 'waypoint_notify_v2', text: `SELECT pg_notify('${NOTIFY_CHANNEL}', $1)`, values: [JSON.stringify({ w: ws.id, e: this.epoch, h: head })] });
    } catch (e) {
      // The next commit reconnects and its notification carries this head too.
      this.log.warn(`cannot tell listeners of events up to ${head}: ${unavailable(e, this.opts.url, 'notify').message}`);
    }
  }

  /** After a commit that moved nothing: was it this group, committed before the connection dropped? Else why not. */
  private async alreadyCommitted(client: Client, events: WaypointEvent[], first: number, last: number): Promise<boolean> {
    const ws = this.opts.workspace;
    const r = await client.query<{ epoch: number; head_seq: number }>('SELECT epoch, head_seq FROM waypoint.workspaces WHERE id = $1', [ws.id]);
    const row = r.rows[0];
    if (!row) throw new WaypointError('corrupt', `Workspace ${ws.id} is no longer in the team store.`);
    if (row.epoch !== this.epoch) throw this.loseOwnership(row.epoch);
    if (row.head_seq >= last) {
      const k = await client.query<{ seq: number; key: string }>('SELECT seq, key FROM waypoint.events WHERE workspace_id = $1 AND seq BETWEEN $2 AND $3 ORDER BY seq', [ws.id, first, last]);
      const same = k.rows.length === events.length && k.rows.every((row, i) => fromPgText(row.key) === events[i].key);
      if (same) return true;
    }
    throw new WaypointError('corrupt', `The team store's head for workspace ${ws.id} is at ${row.head_seq} under this writer's epoch ${this.epoch}, but this writer expected ${first - 1}; it holds events this writer did not write. Reopen the store.`);
  }

  /**
   * A task's listing entry, in its two stored parts. Most events change nothing in it but
   * the time (which is not in either part), so the last parts per task are kept and
   * reused while the fields they show are unchanged: no JSON built for a heartbeat, and
   * the same entry returned means the task's row (written by this writer, which alone
   * writes its workspace's rows) needs only its time (see commitSql's `tm`).
   */
  private entryParts(t: TaskSummary): { head: string; tail: string } {
    const last = this.entries.get(t.id);
    const s = last?.summary;
    if (last && s && s.title === t.title && s.goal === t.goal && s.agent === t.agent && s.state === t.state && s.attempt === t.attempt && s.created_at === t.created_at) return last;
    const ws = this.opts.workspace;
    const parts = listingEntryParts({
      workspace: ws,
      task: { id: t.id, title: t.title, goal: t.goal, agent: t.agent, state: t.state as TaskState, attempt: t.attempt, createdAt: t.created_at, updatedAt: t.updated_at },
    });
    const entry = { summary: t, ...parts };
    this.entries.set(t.id, entry);
    return entry;
  }

  /**
   * The task summary rows these events leave, read from the fold that has just taken them
   * (null: the task was deleted), for the tasks they name and any whose other columns the
   * fold wrote. A task's detail is read only when the fold wrote it (most events do not).
   */
  private summaries(events: readonly WaypointEvent[]): Map<string, TaskSummary | null> {
    const last = new Map<string, number>();
    for (const e of events) if (e.taskId) last.set(e.taskId, e.seq);
    const changed = this.capture.takeTasks();
    for (const id of changed) if (!last.has(id)) last.set(id, this.seq);
    for (const id of changed) this.folded.delete(id);
    const out = new Map<string, TaskSummary | null>();
    for (const [id, seq] of last) {
      const t = this.fold.get<Omit<TaskSummary, 'seq' | 'detail'>>(
        'SELECT t.id, t.title, t.goal, t.agent, t.state, t.attempt, t.created_at, t.updated_at, l.owner AS lease_owner, l.ttl_ms AS lease_ttl_ms, l.heartbeat_at AS lease_hb FROM tasks t LEFT JOIN leases l ON l.task_id = t.id WHERE t.id = ?',
        [id],
      );
      if (!t) {
        this.folded.delete(id);
        out.set(id, null);
        continue;
      }
      let detail = this.folded.get(id);
      if (!detail) {
        const d = this.fold.get<{ d: string }>(`SELECT json_array(${DETAIL_SQL}) AS d FROM tasks t LEFT JOIN leases l ON l.task_id = t.id WHERE t.id = ?`, [id])!;
        detail = JSON.parse(d.d) as unknown[];
        this.folded.set(id, detail);
      }
      out.set(id, { ...t, seq, detail });
    }
    return out;
  }

  private loseOwnership(newEpoch: number): WaypointError {
    if (this.lost) return this.lost;
    const ws = this.opts.workspace;
    this.lost = new WaypointError(
      'lost_ownership',
      `This process no longer writes workspace ${ws.id} (${ws.machine}) in the team store: another writer took it (epoch ${newEpoch} > ${this.epoch}). It accepts no more writes; talk to the current owner instead.`,
      { epoch: this.epoch, newEpoch, workspace: ws.id },
    );
    this.log.error(this.lost.message);
    for (const l of this.lostListeners) {
      try {
        l(this.lost);
      } catch (e) {
        this.log.error(`ownership listener failed: ${errorMessage(e)}`);
      }
    }
    return this.lost;
  }

  async read(filter: ReadFilter = {}): Promise<WaypointEvent[]> {
    return this.readRange(filter.afterSeq ?? 0, Infinity, filter.taskId, filter.limit);
  }

  private async readRange(after: number, upTo: number, taskId: string | undefined, limit: number | undefined): Promise<WaypointEvent[]> {
    const params: unknown[] = [this.opts.workspace.id, after];
    let sql = `SELECT ${EVENT_COLUMNS} FROM waypoint.events WHERE workspace_id = $1 AND seq > $2`;
    if (upTo !== Infinity) sql += ` AND seq <= $${params.push(upTo)}`;
    if (taskId !== undefined) sql += ` AND task_id = $${params.push(toPgText(taskId))}`;
    sql += ' ORDER BY seq';
    if (limit !== undefined && limit >= 0) sql += ` LIMIT $${params.push(limit)}`;
    const r = await this.query(sql, params);
    const out = r.map(rowToEvent);
    if (out.length) this.seq = Math.max(this.seq, out[out.length - 1].seq);
    return out;
  }

  /** A read through the writer's connection, reconnecting across a drop (until retryMs). */
  private async query(sql: string, params: unknown[]): Promise<Record<string, unknown>[]> {
    const deadline = Date.now() + this.retryMs;
    for (;;) {
      try {
        return (await (await this.writer()).query(sql, params)).rows;
      } catch (e) {
        if (!isConnectionError(e) && !(e instanceof WaypointError && e.code === 'store_unavailable')) throw e;
        this.dropClient();
        if (Date.now() >= deadline) throw e instanceof WaypointError ? e : unavailable(e, this.opts.url, 'read from');
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  subscribe(listener: (events: readonly WaypointEvent[]) => void): Disposable {
    this.listeners.add(listener);
    this.listen();
    return { dispose: () => this.listeners.delete(listener) };
  }

  onDidLoseOwnership(listener: (e: WaypointError) => void): Disposable {
    this.lostListeners.add(listener);
    this.listen();
    return { dispose: () => this.lostListeners.delete(listener) };
  }

  /**
   * LISTEN on a connection of its own (a connection in LISTEN cannot be the writer's,
   * which is busy committing): another writer's epoch means this one was replaced;
   * another writer's head means events to pass on to subscribers.
   */
  private listen(): void {
    if (this.listening || this.closed) return;
    this.listening = (async () => {
      try {
        const c = await connectClient(this.opts.url, { connectTimeoutMs: this.opts.connectTimeoutMs, application: 'waypoint listen' });
        if (this.closed) {
          await c.end();
          return;
        }
        c.on('error', () => {
          // The server went away: listen again when it is back (the next notification is the catch-up).
          this.listenClient = null;
          this.listening = null;
          if (!this.closed) setTimeout(() => this.listen(), 500).unref();
        });
        c.on('notification', (n) => this.onNotification(n));
        await c.query(`LISTEN ${NOTIFY_CHANNEL}`);
        this.listenClient = c;
      } catch (e) {
        this.log.warn(`cannot listen for team store changes: ${unavailable(e, this.opts.url).message}`);
        this.listening = null;
        if (!this.closed) setTimeout(() => this.listen(), 1000).unref();
      }
    })();
  }

  private onNotification(n: Notification): void {
    const m = parseNotification(n.payload);
    if (!m || m.w !== this.opts.workspace.id || m.e === this.epoch) return;
    if (m.e > this.epoch && !this.lost) this.loseOwnership(m.e);
    // Another writer's events (this one is read-only now): pass them on in order.
    if (m.h > this.durableSeq) {
      const from = this.durableSeq;
      this.readRange(from, m.h, undefined, undefined)
        .then((events) => {
          const fresh = events.filter((e) => e.seq > this.durableSeq);
          if (!fresh.length) return;
          this.durableSeq = fresh[fresh.length - 1].seq;
          this.emit(fresh);
        })
        .catch((e) => this.log.warn(`cannot read another writer's events: ${errorMessage(e)}`));
    }
  }

  /** Waits for every queued append to be durable (or to fail), then closes the connections. */
  async close(): Promise<void> {
    if (this.closed) return;
    await this.flushing?.catch(() => undefined);
    this.closed = true;
    clearInterval(this.beatTimer);
    await this.sweeper?.dispose();
    await this.listening?.catch(() => undefined);
    await this.listenClient?.end().catch(() => undefined);
    await this.client?.end().catch(() => undefined);
    this.client = null;
    await this.opts.onClose?.();
  }
}

function sameValues(a: readonly unknown[], b: readonly unknown[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
