import type { ClientBase, Pool } from 'pg';
import { WaypointError } from '../../model/errors';

/**
 * The team store's tables, in their own PostgreSQL schema (`waypoint`), versioned in
 * `waypoint.meta` and created when absent. Numbered like the embedded migrations:
 * never edit a released one, add the next.
 *
 *   workspaces  one row per workspace: identity (id kept in its `.waypoint/`, machine,
 *               path), the fencing epoch of its current writer and its head seq
 *   events      the log: (workspace, seq), the idempotency key unique per workspace
 *   tasks       a summary per task, written in the same transaction as its events,
 *               with workspace and machine, for `tasks --all` across the team
 *   leases      who writes each workspace: owner, machine, pid, epoch, heartbeat
 *   blobs       content-addressed objects, shared by every workspace (one copy each):
 *               checkpoints' file contents and manifest objects (v2: big ones in chunks)
 *   blob_chunks the parts of a chunked blob, in order (v2)
 *   blob_uploads how far each workspace's checkpoints are uploaded (v2: the outbox cursor)
 *
 * v3: tasks.listing, the task's `tasks --all --json` entry as text (see taskListingJson.ts).
 * v4: no index on tasks.updated_at, and a fill factor, so a summary's update is heap-only;
 *     the entry as `listing_head` and `listing_tail`, around the updatedAt value.
 * v5: each task's lease by the server's clock (`lease_at`: when a commit last renewed it),
 *     and `sweeps`, the turn every connected client takes to interrupt expired leases
 *     store-wide (see leaseSweeper.ts).
 * v6: the projection in PostgreSQL, row for row (see projectionRows.ts): each task's
 *     remaining columns and its lease holder's pid and host in `tasks`; steps,
 *     checkpoints, side_effects, rollbacks, review_applies, turns, terminal_commands
 *     as the embedded store has them, per workspace; `workspaces.rows_seq`, the event
 *     the workspace's rows are complete up to (NULL: written before v6).
 */

export const PG_SCHEMA = 'waypoint';

interface PgMigration {
  version: number;
  description: string;
  up: string;
}

export const PG_MIGRATIONS: readonly PgMigration[] = [
  {
    version: 1,
    description: 'workspaces with epoch and head, events, task summaries, writer leases, shared blobs',
    up: `
      CREATE TABLE waypoint.workspaces (
        id text PRIMARY KEY,
        machine text NOT NULL,
        path text NOT NULL,
        epoch bigint NOT NULL,
        head_seq bigint NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE TABLE waypoint.events (
        workspace_id text NOT NULL REFERENCES waypoint.workspaces (id),
        seq bigint NOT NULL,
        ts bigint NOT NULL,
        type text NOT NULL,
        v integer NOT NULL,
        task_id text,
        corr text,
        key text NOT NULL,
        by text,
        data json NOT NULL,
        op text,
        result json,
        epoch bigint NOT NULL,
        PRIMARY KEY (workspace_id, seq),
        UNIQUE (workspace_id, key)
      );
      CREATE INDEX events_task ON waypoint.events (workspace_id, task_id, seq);
      CREATE TABLE waypoint.tasks (
        workspace_id text NOT NULL REFERENCES waypoint.workspaces (id),
        id text NOT NULL,
        machine text NOT NULL,
        title text NOT NULL,
        goal text NOT NULL,
        agent text,
        state text NOT NULL,
        attempt integer NOT NULL,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL,
        seq bigint NOT NULL,
        PRIMARY KEY (workspace_id, id)
      );
      CREATE INDEX tasks_updated ON waypoint.tasks (updated_at DESC);
      CREATE INDEX tasks_id ON waypoint.tasks (id);
      CREATE TABLE waypoint.leases (
        workspace_id text PRIMARY KEY REFERENCES waypoint.workspaces (id),
        epoch bigint NOT NULL,
        owner text NOT NULL,
        machine text NOT NULL,
        pid integer,
        acquired_at timestamptz NOT NULL DEFAULT now(),
        heartbeat_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE TABLE waypoint.blobs (
        hash text PRIMARY KEY,
        size bigint NOT NULL,
        data bytea NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );
    `,
  },
  {
    version: 2,
    description: 'blobs written: chunked big objects, and a per-workspace upload cursor over checkpoint.created',
    up: `
      ALTER TABLE waypoint.blobs ADD COLUMN chunks integer NOT NULL DEFAULT 0;
      CREATE TABLE waypoint.blob_chunks (
        hash text NOT NULL,
        idx integer NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (hash, idx)
      );
      CREATE TABLE waypoint.blob_uploads (
        workspace_id text PRIMARY KEY REFERENCES waypoint.workspaces (id),
        seq bigint NOT NULL DEFAULT 0,
        updated_at timestamptz NOT NULL DEFAULT now()
      );
    `,
  },
  {
    version: 3,
    // Null where a summary was written before it (or its workspace moved since): the listing then builds the entry from the columns.
    description: "each task's `tasks --all --json` entry, written with its summary",
    up: `ALTER TABLE waypoint.tasks ADD COLUMN listing text;`,
  },
  {
    version: 4,
    // Every event moves its task's updated_at, so each commit rewrites its tasks' rows,
    // and that was about a third of the WAL (the write-ahead log every commit flushes).
    // - No index on updated_at: the update is heap-only (HOT) when the page has room,
    //   which the fill factor keeps, instead of a new entry in every index. The listing
    //   sorts (a top-N sort under a limit): 10,000 tasks sort in ~6 ms.
    // - The entry is kept in two parts around its updatedAt value (head || updated_at ||
    //   tail): an event that changes nothing but the time leaves both as they were, and
    //   PostgreSQL logs only the changed bytes of a heap-only update (16, not ~300).
    // A v3 entry is split where its updatedAt value starts and ends; one that does not
    // read as an entry is left null (the listing builds it from the columns).
    description: 'task summaries updated in place: no index on updated_at, room left on each page, the listing entry around its time',
    up: `
      DROP INDEX IF EXISTS waypoint.tasks_updated;
      ALTER TABLE waypoint.tasks SET (fillfactor = 70);
      ALTER TABLE waypoint.tasks RENAME COLUMN listing TO listing_head;
      ALTER TABLE waypoint.tasks ADD COLUMN listing_tail text;
      UPDATE waypoint.tasks SET
        listing_head = CASE WHEN strpos(listing_head, E'\n    "updatedAt": ') > 0 AND strpos(listing_head, E',\n    "workspace": ') > 0
          THEN substr(listing_head, 1, strpos(listing_head, E'\n    "updatedAt": ') + 17) END,
        listing_tail = CASE WHEN strpos(listing_head, E'\n    "updatedAt": ') > 0 AND strpos(listing_head, E',\n    "workspace": ') > 0
          THEN substr(listing_head, strpos(listing_head, E',\n    "workspace": ')) END
      WHERE listing_head IS NOT NULL;
    `,
  },
  {
    version: 5,
    // A lease is renewed by its holder's events; the commit that carries them stamps
    // `lease_at` with the server's now(), so expiry is judged by one clock for the whole
    // fleet (a client's clock may be minutes off). `lease_hb` is the holder's own
    // heartbeat time, kept only to tell a renewal from an event that did not renew.
    // No index on the lease columns (a heartbeat's update stays heap-only); the sweep
    // reads the active tasks through a partial index whose key and predicate change
    // only when a task's state does.
    description: "tasks' leases by the server's clock, and the store-wide sweep's turn",
    up: `
      ALTER TABLE waypoint.tasks ADD COLUMN lease_owner text, ADD COLUMN lease_ttl_ms bigint, ADD COLUMN lease_hb bigint, ADD COLUMN lease_at timestamptz;
      CREATE INDEX tasks_active ON waypoint.tasks (workspace_id) WHERE state IN ('pending', 'planning', 'running', 'waiting_tool');
      CREATE TABLE waypoint.sweeps (
        id integer PRIMARY KEY CHECK (id = 1),
        at timestamptz NOT NULL,
        by text NOT NULL,
        swept bigint NOT NULL DEFAULT 0
      );
      INSERT INTO waypoint.sweeps (id, at, by) VALUES (1, '-infinity', 'none');
    `,
  },
  {
    version: 6,
    // The embedded projection's tables, column for column (text as toPgText writes it,
    // integers as bigint), with the workspace in each key; `rid` is the row's rowid in the
    // writer's fold, which the embedded queries order ties by. The idempotency ledger is
    // the events table itself (its key, op and result), so it is not copied. A
    // workspace written before this version has NULL `rows_seq`: its rows are filled from
    // its events by its writer's next open or by the first reader that needs them. Tables
    // whose rows change after they are written leave room on each page, so an update
    // is heap-only (no new index entry), as task rows' are.
    description: 'the projection row for row: steps, checkpoints, side effects, rollbacks, review applies, turns, terminal commands, and every task column',
    up: `
      ALTER TABLE waypoint.workspaces ADD COLUMN rows_seq bigint;
      ALTER TABLE waypoint.tasks ADD COLUMN correlation_id text, ADD COLUMN base_checkpoint_id text, ADD COLUMN last_checkpoint_id text,
        ADD COLUMN summary text, ADD COLUMN commit_hash text, ADD COLUMN interruption text, ADD COLUMN retry text, ADD COLUMN hold text,
        ADD COLUMN forked_from text, ADD COLUMN reopened text, ADD COLUMN kind text, ADD COLUMN lease_pid bigint, ADD COLUMN lease_host text;
      CREATE TABLE waypoint.steps (
        workspace_id text NOT NULL, rid bigint NOT NULL,
        task_id text NOT NULL, id text NOT NULL, ord bigint NOT NULL, title text NOT NULL, depends_on text NOT NULL, status text NOT NULL,
        attempts bigint NOT NULL, inputs text, outputs text, summary text, error text, started_at bigint, ended_at bigint, adhoc bigint NOT NULL,
        task_attempt bigint, max_attempts bigint NOT NULL, abandoned_from text,
        PRIMARY KEY (workspace_id, task_id, id)
      ) WITH (fillfactor = 80);
      CREATE TABLE waypoint.checkpoints (
        workspace_id text NOT NULL, rid bigint NOT NULL,
        id text NOT NULL, task_id text, step_id text, kind text NOT NULL, label text, parent_id text, created_at bigint NOT NULL,
        manifest_ref text, files bigint NOT NULL, files_changed bigint NOT NULL, bytes bigint NOT NULL, damaged text,
        PRIMARY KEY (workspace_id, id)
      );
      CREATE INDEX checkpoints_task ON waypoint.checkpoints (workspace_id, task_id);
      CREATE TABLE waypoint.side_effects (
        workspace_id text NOT NULL, rid bigint NOT NULL,
        task_id text NOT NULL, key text NOT NULL, step_id text, kind text NOT NULL, description text NOT NULL, args text, status text NOT NULL,
        result text, error text, attempts bigint NOT NULL, intent_at bigint NOT NULL, ended_at bigint, resolved_by text,
        PRIMARY KEY (workspace_id, task_id, key)
      ) WITH (fillfactor = 80);
      CREATE TABLE waypoint.rollbacks (
        workspace_id text NOT NULL, rid bigint NOT NULL,
        id text NOT NULL, task_id text NOT NULL, target_checkpoint_id text NOT NULL, pre_rollback_checkpoint_id text NOT NULL, paths text,
        mode text NOT NULL, plan_ref text, state text NOT NULL, started_at bigint NOT NULL, ended_at bigint, outcome text,
        PRIMARY KEY (workspace_id, id)
      ) WITH (fillfactor = 80);
      CREATE INDEX rollbacks_task ON waypoint.rollbacks (workspace_id, task_id);
      CREATE TABLE waypoint.review_applies (
        workspace_id text NOT NULL, rid bigint NOT NULL,
        apply_id text NOT NULL, task_id text NOT NULL, start_key text NOT NULL, data text NOT NULL, done bigint NOT NULL, recovered bigint,
        PRIMARY KEY (workspace_id, apply_id)
      ) WITH (fillfactor = 80);
      CREATE INDEX review_applies_task ON waypoint.review_applies (workspace_id, task_id);
      CREATE TABLE waypoint.turns (
        workspace_id text NOT NULL, rid bigint NOT NULL,
        task_id text NOT NULL, session_id text NOT NULL, turn bigint NOT NULL, step_id text, prompt text NOT NULL, last_message text,
        tools text NOT NULL, compactions bigint NOT NULL, started_at bigint NOT NULL, ended_at bigint NOT NULL,
        PRIMARY KEY (workspace_id, task_id, session_id, turn)
      );
      CREATE TABLE waypoint.terminal_commands (
        workspace_id text NOT NULL, rid bigint NOT NULL,
        task_id text NOT NULL, id text NOT NULL, command_line text NOT NULL, cwd text, terminal text NOT NULL, owner text NOT NULL, agent text,
        step_id text, started_at bigint NOT NULL, ended_at bigint, exit_code bigint, before_checkpoint_id text, after_checkpoint_id text,
        changed text, created text, deleted text, files_total bigint NOT NULL,
        PRIMARY KEY (workspace_id, task_id, id)
      ) WITH (fillfactor = 80);
    `,
  },
];

export const PG_SCHEMA_VERSION = PG_MIGRATIONS[PG_MIGRATIONS.length - 1].version;

/** Any advisory lock key will do, as long as every Waypoint uses the same one: "wpschema". */
const SCHEMA_LOCK = 0x77707363;

/**
 * Creates or migrates the schema. Runs under a transaction-scoped advisory lock, so
 * many processes opening a new database at once create it exactly once. A database
 * written by a newer Waypoint is refused rather than misread.
 */
export async function ensureSchema(client: ClientBase): Promise<{ from: number; to: number }> {
  // The fast path (no lock, one round trip): already at this version.
  const current = await schemaVersion(client);
  if (current === PG_SCHEMA_VERSION) return { from: current, to: current };
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [SCHEMA_LOCK]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${PG_SCHEMA}`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${PG_SCHEMA}.meta (k text PRIMARY KEY, v text NOT NULL)`);
    const from = await schemaVersion(client);
    if (from > PG_SCHEMA_VERSION) {
      throw new WaypointError('corrupt', `The team store was written by a newer Waypoint (schema version ${from}; this one knows ${PG_SCHEMA_VERSION}). Update Waypoint.`, { from });
    }
    for (const m of PG_MIGRATIONS) {
      if (m.version <= from) continue;
      await client.query(m.up);
    }
    await client.query(`INSERT INTO ${PG_SCHEMA}.meta (k, v) VALUES ('schema_version', $1) ON CONFLICT (k) DO UPDATE SET v = excluded.v`, [String(PG_SCHEMA_VERSION)]);
    await client.query('COMMIT');
    return { from, to: PG_SCHEMA_VERSION };
  } catch (e) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw e;
  }
}

async function schemaVersion(client: ClientBase): Promise<number> {
  // Two statements: a subquery naming a table that does not exist fails at planning, whatever guards it.
  const exists = await client.query<{ t: string | null }>(`SELECT to_regclass('${PG_SCHEMA}.meta')::text AS t`);
  if (!exists.rows[0]?.t) return 0;
  const r = await client.query<{ v: string }>(`SELECT v FROM ${PG_SCHEMA}.meta WHERE k = 'schema_version'`);
  const v = r.rows[0]?.v;
  if (v == null) return 0;
  const n = Number(v);
  if (n > PG_SCHEMA_VERSION) {
    throw new WaypointError('corrupt', `The team store was written by a newer Waypoint (schema version ${n}; this one knows ${PG_SCHEMA_VERSION}). Update Waypoint.`, { from: n });
  }
  return n;
}

/**
 * ensureSchema on a client of `pool`. A checked-out client's own 'error' (the server
 * stopped mid-query) is not the pool's: with no listener it would crash the process,
 * and the query in flight rejects anyway. A client that failed is destroyed, not
 * handed to the next caller.
 */
export async function ensurePoolSchema(pool: Pool): Promise<void> {
  const c = await pool.connect();
  const ignore = () => undefined;
  c.on('error', ignore);
  let failed: Error | undefined;
  try {
    await ensureSchema(c);
  } catch (e) {
    failed = e as Error;
    throw e;
  } finally {
    c.off('error', ignore);
    c.release(failed);
  }
}
