import type { ClientBase } from 'pg';
import type { Db } from '../db';
import { listingEntryParts } from '../taskListingJson';
import type { WorkspaceIdentity } from '../eventLog';
import type { TaskState } from '../../model/schema';
import { fromPgText, toPgText } from './pgText';

/**
 * The team store's projection, row for row, in PostgreSQL (schema v6).
 *
 * The one fold code (projections.ts) runs in the writer's sql.js database, which the
 * engine validates every operation against synchronously. Each row that fold inserts,
 * updates or deletes is noticed by a trigger (`RowCapture`), read back after the batch
 * and written to PostgreSQL in the same statement as the batch's events (commitSql in pgEventLog.ts),
 * so the store's tables are always exactly a fold of its events, and anyone else —
 * `tasks --all`, another machine's editor, the store-wide lease sweep — reads them
 * with plain queries instead of replaying events.
 *
 * The tasks table holds each task's row and its lease (the listing columns it had
 * before, plus `TASK_DETAIL_COLUMNS` and the holder's pid and host); the other tables
 * below are the embedded ones, keyed by workspace too, with `rid` (the row's rowid in
 * the fold, which the embedded queries order ties by). The idempotency ledger is the
 * events table's key, op and result, so it is not copied.
 */

interface RowTableSpec {
  /** The embedded primary key. */
  key: readonly string[];
  /** Every column, as the embedded migrations leave the table. */
  columns: readonly string[];
}

export const ROW_TABLES = {
  steps: {
    key: ['task_id', 'id'],
    columns: ['task_id', 'id', 'ord', 'title', 'depends_on', 'status', 'attempts', 'inputs', 'outputs', 'summary', 'error', 'started_at', 'ended_at', 'adhoc', 'task_attempt', 'max_attempts', 'abandoned_from'],
  },
  checkpoints: {
    key: ['id'],
    columns: ['id', 'task_id', 'step_id', 'kind', 'label', 'parent_id', 'created_at', 'manifest_ref', 'files', 'files_changed', 'bytes', 'damaged'],
  },
  side_effects: {
    key: ['task_id', 'key'],
    columns: ['task_id', 'key', 'step_id', 'kind', 'description', 'args', 'status', 'result', 'error', 'attempts', 'intent_at', 'ended_at', 'resolved_by'],
  },
  rollbacks: {
    key: ['id'],
    columns: ['id', 'task_id', 'target_checkpoint_id', 'pre_rollback_checkpoint_id', 'paths', 'mode', 'plan_ref', 'state', 'started_at', 'ended_at', 'outcome'],
  },
  review_applies: { key: ['apply_id'], columns: ['apply_id', 'task_id', 'start_key', 'data', 'done', 'recovered'] },
  turns: {
    key: ['task_id', 'session_id', 'turn'],
    columns: ['task_id', 'session_id', 'turn', 'step_id', 'prompt', 'last_message', 'tools', 'compactions', 'started_at', 'ended_at'],
  },
  terminal_commands: {
    key: ['task_id', 'id'],
    columns: [
      'task_id', 'id', 'command_line', 'cwd', 'terminal', 'owner', 'agent', 'step_id', 'started_at', 'ended_at', 'exit_code',
      'before_checkpoint_id', 'after_checkpoint_id', 'changed', 'created', 'deleted', 'files_total',
    ],
  },
} as const satisfies Record<string, RowTableSpec>;

export type RowTable = keyof typeof ROW_TABLES;
export const ROW_TABLE_NAMES = Object.keys(ROW_TABLES) as RowTable[];

/** The embedded tasks columns besides those the listing has always kept (id, title, goal, agent, state, attempt, created_at, updated_at). */
export const TASK_DETAIL_COLUMNS = ['correlation_id', 'base_checkpoint_id', 'last_checkpoint_id', 'summary', 'commit_hash', 'interruption', 'retry', 'hold', 'forked_from', 'reopened', 'kind'] as const;

type SqlRow = Record<string, unknown>;

/** One row's last state in a batch: its image, or null when the batch deleted it. */
interface RowChange {
  table: RowTable;
  key: unknown[];
  row: SqlRow | null;
}

/** A batch's row changes, by table and key; a later change of a row replaces an earlier one. */
export class RowChanges {
  private readonly byKey = new Map<string, RowChange>();

  get size(): number {
    return this.byKey.size;
  }

  set(c: RowChange): void {
    this.byKey.set(`${c.table}\u0000${JSON.stringify(c.key)}`, c);
  }

  /** Adds another batch's changes after these (its rows win). */
  merge(later: RowChanges): void {
    for (const [k, c] of later.byKey) this.byKey.set(k, c);
  }

  /**
   * What a statement needs to apply them (see rowStatementsSql): the tables with rows to
   * write and with keys to delete, and the two as JSON per table. Text goes through
   * toPgText (PostgreSQL text holds no NUL), so the JSON holds only what
   * `json_populate_recordset` reads back as written.
   */
  params(): RowParams {
    const puts: Partial<Record<RowTable, SqlRow[]>> = {};
    const dels: Partial<Record<RowTable, SqlRow[]>> = {};
    for (const c of this.byKey.values()) {
      if (c.row) (puts[c.table] ??= []).push(encodeRow(c.row));
      else (dels[c.table] ??= []).push(encodeRow(Object.fromEntries(ROW_TABLES[c.table].key.map((k, i) => [k, c.key[i]]))));
    }
    const putTables = ROW_TABLE_NAMES.filter((t) => puts[t]);
    const delTables = ROW_TABLE_NAMES.filter((t) => dels[t]);
    return { putTables, delTables, puts: JSON.stringify(puts), dels: JSON.stringify(dels) };
  }
}

export interface RowParams {
  putTables: RowTable[];
  delTables: RowTable[];
  puts: string;
  dels: string;
}

const encodeRow = (r: SqlRow): SqlRow => {
  const out: SqlRow = {};
  for (const k in r) out[k] = typeof r[k] === 'string' ? toPgText(r[k] as string) : r[k];
  return out;
};

/** A row read from PostgreSQL as the fold has it: text decoded, bigint (a string from `pg`) as a number. */
export function decodeRow(r: SqlRow): SqlRow {
  const out: SqlRow = {};
  for (const k in r) {
    const v = r[k];
    out[k] = typeof v === 'string' ? fromPgText(v) : v;
  }
  return out;
}

/**
 * Notices every row the fold changes in the copied tables, through temporary triggers
 * on the writer's database that call back into JavaScript with the row's key (they
 * live and die with the connection). `take` reads the noticed rows back as they now
 * are. A fold that rolls back may leave keys noticed whose rows did not change: their
 * images are sent as they are, which changes nothing.
 */
export class RowCapture {
  private noted = new Map<string, { table: RowTable; key: unknown[] }>();
  /** Tasks whose TASK_DETAIL_COLUMNS or lease holder (owner, pid, host) the fold wrote since they were last taken. */
  private readonly tasks = new Set<string>();

  private constructor(private readonly db: Db) {}

  static install(db: Db): RowCapture {
    const capture = new RowCapture(db);
    db.raw.create_function('wp_row_changed', (table: unknown, key: unknown) => {
      capture.noted.set(`${String(table)}\u0000${String(key)}`, { table: table as RowTable, key: JSON.parse(String(key)) as unknown[] });
      return null;
    });
    db.raw.create_function('wp_task_changed', (id: unknown) => {
      capture.tasks.add(String(id));
      return null;
    });
    // A heartbeat writes only its task's time and its lease's: no trigger here fires for it.
    const ddl: string[] = [
      `CREATE TEMP TRIGGER IF NOT EXISTS wp_tasks_i AFTER INSERT ON main.tasks BEGIN SELECT wp_task_changed(NEW.id); END`,
      `CREATE TEMP TRIGGER IF NOT EXISTS wp_tasks_u AFTER UPDATE OF ${TASK_DETAIL_COLUMNS.join(', ')} ON main.tasks BEGIN SELECT wp_task_changed(NEW.id); END`,
      `CREATE TEMP TRIGGER IF NOT EXISTS wp_leases_i AFTER INSERT ON main.leases BEGIN SELECT wp_task_changed(NEW.task_id); END`,
      `CREATE TEMP TRIGGER IF NOT EXISTS wp_leases_u AFTER UPDATE OF task_id, owner, pid, host ON main.leases BEGIN SELECT wp_task_changed(OLD.task_id); SELECT wp_task_changed(NEW.task_id); END`,
      `CREATE TEMP TRIGGER IF NOT EXISTS wp_leases_d AFTER DELETE ON main.leases BEGIN SELECT wp_task_changed(OLD.task_id); END`,
    ];
    for (const t of ROW_TABLE_NAMES) {
      const note = (row: 'NEW' | 'OLD') => `SELECT wp_row_changed('${t}', json_array(${ROW_TABLES[t].key.map((c) => `${row}.${c}`).join(', ')}));`;
      ddl.push(`CREATE TEMP TRIGGER IF NOT EXISTS wp_${t}_i AFTER INSERT ON main.${t} BEGIN ${note('NEW')} END`);
      ddl.push(`CREATE TEMP TRIGGER IF NOT EXISTS wp_${t}_u AFTER UPDATE ON main.${t} BEGIN ${note('OLD')} ${note('NEW')} END`);
      ddl.push(`CREATE TEMP TRIGGER IF NOT EXISTS wp_${t}_d AFTER DELETE ON main.${t} BEGIN ${note('OLD')} END`);
    }
    db.exec(ddl.join(';\n'));
    return capture;
  }

  /** The tasks whose other columns or lease holder changed since the last call (see `tasks`); forgets them. */
  takeTasks(): string[] {
    if (!this.tasks.size) return [];
    const ids = [...this.tasks];
    this.tasks.clear();
    return ids;
  }

  /** The rows changed since the last take, as they are now (null: deleted). */
  take(): RowChanges {
    const out = new RowChanges();
    if (!this.noted.size) return out;
    const noted = this.noted;
    this.noted = new Map();
    for (const { table, key } of noted.values()) {
      const spec = ROW_TABLES[table];
      const row = this.db.get<SqlRow>(`SELECT rowid AS rid, ${spec.columns.join(', ')} FROM ${table} WHERE ${spec.key.map((c) => `${c} = ?`).join(' AND ')}`, key as never[]);
      out.set({ table, key, row: row ?? null });
    }
    return out;
  }
}

/** Every row of the copied tables, in pages of at most `pageRows` (a workspace's rows written whole: see writeAllRows). */
function* allRows(db: Db, pageRows: number): Generator<RowChanges> {
  let page = new RowChanges();
  for (const t of ROW_TABLE_NAMES) {
    const spec = ROW_TABLES[t];
    for (const row of db.all<SqlRow>(`SELECT rowid AS rid, ${spec.columns.join(', ')} FROM ${t}`)) {
      if (page.size >= pageRows) {
        yield page;
        page = new RowChanges();
      }
      page.set({ table: t, key: spec.key.map((c) => row[c]), row });
    }
  }
  if (page.size) yield page;
}

/**
 * The data-modifying CTEs that apply a batch's row changes, for a statement with a CTE
 * `head` (one row, `id` the workspace, only when the writer's epoch holds): rows of
 * `putTables` from the JSON parameter `puts`, keys of `delTables` from `dels`. Only the
 * tables a batch changed get CTEs (a commit names its statement by them, so each shape
 * is prepared once per connection). A key is either written or deleted in one batch,
 * never both, so the CTEs never touch one row twice.
 *
 * An existing row is UPDATEd and only a new one INSERTed, as task rows are (commitSql in pgEventLog.ts):
 * `INSERT … ON CONFLICT DO UPDATE` locks the row first, a WAL record of its own.
 */
export function rowStatementsSql(putTables: readonly RowTable[], delTables: readonly RowTable[], puts: string, dels: string): string {
  const out: string[] = [];
  for (const t of putTables) {
    const { key, columns } = ROW_TABLES[t];
    const cols = ['rid', ...columns];
    const rest = cols.filter((c) => !(key as readonly string[]).includes(c));
    const sameKey = (a: string, b: string) => key.map((c) => `${a}.${c} = ${b}.${c}`).join(' AND ');
    out.push(`, r_${t} AS (
    SELECT * FROM json_populate_recordset(null::waypoint.${t}, ${puts} -> '${t}')
  ), u_${t} AS (
    UPDATE waypoint.${t} AS d SET ${rest.map((c) => `${c} = r.${c}`).join(', ')} FROM head, r_${t} r
    WHERE d.workspace_id = head.id AND ${sameKey('d', 'r')} RETURNING ${key.map((c) => `d.${c}`).join(', ')}
  ), i_${t} AS (
    INSERT INTO waypoint.${t} (workspace_id, ${cols.join(', ')})
    SELECT head.id, ${cols.map((c) => `r.${c}`).join(', ')} FROM head, r_${t} r WHERE NOT EXISTS (SELECT 1 FROM u_${t} u WHERE ${sameKey('u', 'r')})
    ON CONFLICT (workspace_id, ${key.join(', ')}) DO UPDATE SET ${rest.map((c) => `${c} = excluded.${c}`).join(', ')}
    RETURNING 1
  )`);
  }
  for (const t of delTables) {
    const { key } = ROW_TABLES[t];
    out.push(`, d_${t} AS (
    DELETE FROM waypoint.${t} d USING head, json_populate_recordset(null::waypoint.${t}, ${dels} -> '${t}') k
    WHERE d.workspace_id = head.id AND ${key.map((c) => `d.${c} = k.${c}`).join(' AND ')}
    RETURNING 1
  )`);
  }
  return out.join('');
}

/** A short name for a set of tables (for a prepared statement's name): their indexes in ROW_TABLE_NAMES as bits. */
export function tablesMask(tables: readonly RowTable[]): number {
  return tables.reduce((m, t) => m | (1 << ROW_TABLE_NAMES.indexOf(t)), 0);
}

/** A task's row in `waypoint.tasks`, as the fold has it (null: no such task). */
export function taskRowImage(db: Db, taskId: string, workspace: WorkspaceIdentity, seq: number): SqlRow | null {
  const t = db.get<SqlRow>(
    `SELECT t.*, l.owner AS lease_owner, l.ttl_ms AS lease_ttl_ms, l.heartbeat_at AS lease_hb, l.pid AS lease_pid, l.host AS lease_host
     FROM tasks t LEFT JOIN leases l ON l.task_id = t.id WHERE t.id = ?`,
    [taskId],
  );
  if (!t) return null;
  const parts = listingEntryParts({
    workspace,
    task: { id: String(t.id), title: String(t.title), goal: String(t.goal), agent: (t.agent as string | null) ?? null, state: t.state as TaskState, attempt: Number(t.attempt), createdAt: Number(t.created_at), updatedAt: Number(t.updated_at) },
  });
  const row: SqlRow = { machine: workspace.machine, seq, listing_head: parts.head, listing_tail: parts.tail };
  for (const c of ['id', 'title', 'goal', 'agent', 'state', 'attempt', 'created_at', 'updated_at', 'lease_owner', 'lease_ttl_ms', 'lease_hb', 'lease_pid', 'lease_host', ...TASK_DETAIL_COLUMNS]) row[c] = t[c] ?? null;
  return row;
}

const TASK_ROW_COLUMNS = ['id', 'machine', 'title', 'goal', 'agent', 'state', 'attempt', 'created_at', 'updated_at', 'seq', 'listing_head', 'listing_tail', 'lease_owner', 'lease_ttl_ms', 'lease_hb', 'lease_pid', 'lease_host', ...TASK_DETAIL_COLUMNS];

/**
 * Writes whole task rows (the slow path: a workspace's rows written whole, a sweep's
 * interruption; a commit writes only what changed, see commitSql in pgEventLog.ts). A lease whose holder
 * or heartbeat changed is stamped with the server's now(), as a commit stamps it.
 */
export async function putTaskRows(client: ClientBase, workspaceId: string, rows: readonly SqlRow[]): Promise<void> {
  if (!rows.length) return;
  const set = TASK_ROW_COLUMNS.filter((c) => c !== 'id').map((c) => `${c} = excluded.${c}`);
  await client.query(
    `INSERT INTO waypoint.tasks AS t (workspace_id, ${TASK_ROW_COLUMNS.join(', ')}, lease_at)
     SELECT $1, ${TASK_ROW_COLUMNS.map((c) => `r.${c}`).join(', ')}, CASE WHEN r.lease_hb IS NULL THEN NULL ELSE now() END
     FROM json_populate_recordset(null::waypoint.tasks, $2) r
     ON CONFLICT (workspace_id, id) DO UPDATE SET ${set.join(', ')},
       lease_at = CASE WHEN excluded.lease_hb IS NULL THEN NULL WHEN t.lease_hb IS NOT DISTINCT FROM excluded.lease_hb AND t.lease_owner IS NOT DISTINCT FROM excluded.lease_owner THEN t.lease_at ELSE now() END`,
    [workspaceId, JSON.stringify(rows.map(encodeRow))],
  );
}

/** Applies row changes outside a commit (inside the caller's transaction). */
export async function putRowChanges(client: ClientBase, workspaceId: string, changes: RowChanges): Promise<void> {
  if (!changes.size) return;
  const p = changes.params();
  // Both parameters named in `head`: a parameter no statement uses has no type, and PostgreSQL refuses it.
  await client.query(`WITH head AS (SELECT $1::text AS id, $2::json AS puts, $3::json AS dels)${rowStatementsSql(p.putTables, p.delTables, '$2::json', '$3::json')} SELECT 1`, [workspaceId, p.puts, p.dels]);
}

/** Rows are sent in pages this big (one statement's JSON stays a few megabytes). */
const PAGE_ROWS = 2000;

/**
 * Writes a workspace's whole projection from a fold of all its events (`db`), inside the
 * caller's transaction, and marks its rows complete up to `head`: the first open of a
 * workspace written before schema v6, by its writer or by the first reader that needs it.
 */
export async function writeAllRows(client: ClientBase, workspace: WorkspaceIdentity, db: Db, head: number): Promise<void> {
  for (const t of ROW_TABLE_NAMES) await client.query(`DELETE FROM waypoint.${t} WHERE workspace_id = $1`, [workspace.id]);
  for (const page of allRows(db, PAGE_ROWS)) await putRowChanges(client, workspace.id, page);
  const seqs = new Map(db.all<{ id: string; s: number }>('SELECT task_id AS id, MAX(seq) AS s FROM events WHERE task_id IS NOT NULL GROUP BY task_id').map((r) => [r.id, r.s]));
  const ids = db.all<{ id: string }>('SELECT id FROM tasks').map((r) => r.id);
  for (let i = 0; i < ids.length; i += PAGE_ROWS) {
    await putTaskRows(client, workspace.id, ids.slice(i, i + PAGE_ROWS).map((id) => taskRowImage(db, id, workspace, seqs.get(id) ?? 0)!));
  }
  await client.query(`DELETE FROM waypoint.tasks WHERE workspace_id = $1 AND NOT (id = ANY($2::text[]))`, [workspace.id, ids.map((id) => toPgText(id))]);
  await client.query('UPDATE waypoint.workspaces SET rows_seq = $2 WHERE id = $1', [workspace.id, head]);
}

/** A task row and its lease as `waypoint.tasks` holds them, in the fold's two tables' shapes (decoded). */
export function foldShapes(r: SqlRow): { task: SqlRow; lease: SqlRow | undefined } {
  const d = decodeRow(r);
  const task: SqlRow = {};
  for (const c of TASK_FOLD_COLUMNS) task[c] = d[c] ?? null;
  const lease =
    d.lease_owner == null
      ? undefined
      : { task_id: d.id, owner: d.lease_owner, pid: d.lease_pid ?? null, host: d.lease_host ?? null, ttl_ms: d.lease_ttl_ms, heartbeat_at: d.lease_hb, expires_at: Number(d.lease_hb) + Number(d.lease_ttl_ms) };
  return { task, lease };
}

/** The embedded tasks table's columns, all of which `waypoint.tasks` holds under the same names. */
const TASK_FOLD_COLUMNS = ['id', 'title', 'goal', 'agent', 'state', 'correlation_id', 'created_at', 'updated_at', 'attempt', 'base_checkpoint_id', 'last_checkpoint_id', 'summary', 'commit_hash', 'interruption', 'retry', 'hold', 'forked_from', 'reopened', 'kind'];

/**
 * Compares a workspace's rows in PostgreSQL with a fold of its events (`db`), table by
 * table, as `verify` compares a projection with its rebuild: the tables that differ.
 */
export async function compareRows(client: ClientBase, workspaceId: string, db: Db): Promise<{ table: string; live: number; rebuilt: number; firstDiff: string | null }[]> {
  // Integers as text: a client without Waypoint's int8 parser reads bigint columns as strings.
  const stable = (rows: SqlRow[]) => rows.map((r) => JSON.stringify(Object.keys(r).sort().map((k) => [k, r[k] == null ? null : typeof r[k] === 'number' ? String(r[k]) : r[k]]))).sort();
  const pairs: [string, string[], string[]][] = [];
  const tasks = (await client.query<SqlRow>('SELECT * FROM waypoint.tasks WHERE workspace_id = $1', [workspaceId])).rows.map(foldShapes);
  pairs.push(['tasks', stable(tasks.map((t) => t.task)), stable(db.all<SqlRow>(`SELECT ${TASK_FOLD_COLUMNS.join(', ')} FROM tasks`))]);
  pairs.push(['leases', stable(tasks.flatMap((t) => (t.lease ? [t.lease] : []))), stable(db.all<SqlRow>('SELECT * FROM leases'))]);
  for (const t of ROW_TABLE_NAMES) {
    const cols = ['rid', ...ROW_TABLES[t].columns];
    const live = (await client.query<SqlRow>(`SELECT ${cols.join(', ')} FROM waypoint.${t} WHERE workspace_id = $1`, [workspaceId])).rows.map(decodeRow);
    pairs.push([t, stable(live), stable(db.all<SqlRow>(`SELECT rowid AS rid, ${ROW_TABLES[t].columns.join(', ')} FROM ${t}`))]);
  }
  return pairs
    .map(([table, a, b]) => {
      const i = a.findIndex((row, k) => row !== b[k]);
      const firstDiff = i >= 0 ? a[i] : b.length > a.length ? b[a.length] : null;
      return { table, live: a.length, rebuilt: b.length, firstDiff: a.length === b.length && i < 0 ? null : firstDiff };
    })
    .filter((d) => d.live !== d.rebuilt || d.firstDiff !== null);
}

/**
 * Loads one task's rows from PostgreSQL into a fold database (`db`, migrated and empty
 * of that task): the store-wide sweep folds its interruption into them with the one
 * fold code and writes back what changed. Every row of a task is keyed by its id, so a
 * task's rows alone fold its next event as the whole workspace's would.
 */
export async function loadTaskRows(client: ClientBase, workspaceId: string, taskId: string, db: Db): Promise<boolean> {
  const t = (await client.query<SqlRow>('SELECT * FROM waypoint.tasks WHERE workspace_id = $1 AND id = $2', [workspaceId, toPgText(taskId)])).rows[0];
  if (!t) return false;
  const { task, lease } = foldShapes(t);
  const insert = (table: string, row: SqlRow) => {
    const cols = Object.keys(row);
    db.run(`INSERT INTO ${table} (${cols.map((c) => (c === 'rid' ? 'rowid' : c)).join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`, cols.map((c) => row[c]) as never[]);
  };
  insert('tasks', task);
  if (lease) insert('leases', lease);
  for (const table of ROW_TABLE_NAMES) {
    const cols = ['rid', ...ROW_TABLES[table].columns];
    const rows = await client.query<SqlRow>(`SELECT ${cols.join(', ')} FROM waypoint.${table} WHERE workspace_id = $1 AND task_id = $2 ORDER BY rid`, [workspaceId, toPgText(taskId)]);
    for (const r of rows.rows) insert(table, decodeRow(r));
  }
  return true;
}
