import * as assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { main } from '../../src/cli/main';
import { fastTasksAll, parseTasksAllArgs } from '../../src/cli/tasksAllFast';
import { queryTaskListings, queryTaskListingsJson } from '../../src/core/store/postgres/taskListing';
import { listingJson } from '../../src/cli/tasksAllFormat';
import { Client } from 'pg';
import { PgEventLog, PG_SCHEMA_VERSION } from '../../src/core/store/postgres';
import { ensureSchema } from '../../src/core/store/postgres/schema';
import { PgCluster } from '../support/pgCluster';
import { Logger, memorySink, type LogLevel } from '../../src/core/log';
import { started } from '../support/tmp';


/** What schema v6 added (the projection rows), removed: the first step of taking a store back to an older version. */
const UNDO_V6 = `DROP TABLE waypoint.steps, waypoint.checkpoints, waypoint.side_effects, waypoint.rollbacks, waypoint.review_applies, waypoint.turns, waypoint.terminal_commands;
  ALTER TABLE waypoint.workspaces DROP COLUMN rows_seq;
  ALTER TABLE waypoint.tasks DROP COLUMN correlation_id, DROP COLUMN base_checkpoint_id, DROP COLUMN last_checkpoint_id, DROP COLUMN summary, DROP COLUMN commit_hash,
    DROP COLUMN interruption, DROP COLUMN retry, DROP COLUMN hold, DROP COLUMN forked_from, DROP COLUMN reopened, DROP COLUMN kind, DROP COLUMN lease_pid, DROP COLUMN lease_host;`;

/** The `tasks --all` fast path answers exactly what the full CLI answers, and hands everything else to it. */
describe('tasks --all fast path (real cluster)', function () {
  this.timeout(60_000);
  let cluster: PgCluster;
  before(async () => {
    cluster = await PgCluster.create();
  });
  after(() => cluster?.remove());

  it('takes only tasks --all on a postgresql store, with --json, --store and --workspace', () => {
    const env = { WAYPOINT_STORE: 'postgresql://u@h/db' };
    assert.deepEqual(parseTasksAllArgs(['tasks', '--all', '--json'], env), { store: 'postgresql://u@h/db', json: true });
    assert.deepEqual(parseTasksAllArgs(['tasks', '--all', '--store=postgres://x/y', '-w', '/tmp'], {}), { store: 'postgres://x/y', json: false });
    assert.equal(parseTasksAllArgs(['tasks', '--json'], env), null);
    assert.equal(parseTasksAllArgs(['tasks', '--all', '--state', 'running'], env), null);
    assert.equal(parseTasksAllArgs(['tasks', '--all', '--limit', '3'], env), null);
    assert.equal(parseTasksAllArgs(['tasks', '--all'], {}), null);
    assert.equal(parseTasksAllArgs(['tasks', '--all', '--store', 'sqlite://x'], {}), null);
    assert.equal(parseTasksAllArgs(['task', '--all'], env), null);
  });

  it('prints what the full CLI prints (json and table), and declines a store without the schema or out of reach', async () => {
    const url = cluster.url();
    // A store nobody has opened yet: no schema, so the full CLI (which creates it) answers.
    assert.equal((await fastTasksAll(['tasks', '--all', '--json', '--store', url])).handled, false);
    const log = await PgEventLog.open({ url, workspace: { id: randomUUID(), machine: 'fast\u0000m', path: '/fast/1' } });
    await (await log.append([started(1), started(2)])).durable;
    await log.close();
    for (const flags of [['--json'], []]) {
      const fast = await fastTasksAll(['tasks', '--all', ...flags, '--store', url]);
      assert.ok(fast.handled);
      let buf = '';
      const out = new Writable({
        write(c, _e, cb) {
          buf += c.toString();
          cb();
        },
      });
      const code = await main(['tasks', '--all', ...flags, '--store', url], { stdout: out as never, stderr: new Writable({ write: (_c, _e, cb) => cb() }) as never });
      assert.equal(code, 0);
      // The table's UPDATED column is relative to when each printed ("0s ago" then "1s ago"
      // across a second boundary, or a wider column past 9 s): compared without it.
      const sameMoment = (s: string) => (flags.length ? s : s.replace(/\b\d+[smhd] ago\b/g, 'ago').replace(/ +/g, ' '));
      assert.equal(sameMoment(fast.output!), sameMoment(buf));
    }
    assert.equal((await fastTasksAll(['tasks', '--all', '--store', 'postgresql://nobody@127.0.0.1:1/none'])).handled, false);
  });

  it('prints --json as PostgreSQL joins it only when that is byte for byte what the full CLI prints (quotes, control characters, emoji, U+2028), else from the rows', async () => {
    const url = cluster.url();
    const hard = ['a "quoted" \\ back\\slash', 'tab\tnew\nline\r\u0001\u001f\u007f', 'emoji 🧭 and \u2028 \u2029 é', '</script> & <b>'];
    const log = await PgEventLog.open({ url, workspace: { id: randomUUID(), machine: 'plain "m"', path: '/fast/\u00e9\t2' } });
    await (await log.append(hard.map((t, i) => ({ ...started(100 + i), data: { ...(started(100 + i).data as object), title: t, goal: `${t} goal`, agent: i % 2 ? null : t } }) as never))).durable;
    await log.close();
    const c = new Client({ connectionString: url });
    await c.connect();
    try {
      const rows = async (sql: string, params: unknown[]) => (await c.query(sql, params)).rows as Record<string, unknown>[];
      // The first workspace's machine holds a NUL (a DLE escape in PostgreSQL's column): its stored entries, JSON written by Waypoint, hold it escaped as JSON does.
      assert.equal(await queryTaskListingsJson(rows, {}), JSON.stringify(listingJson(await queryTaskListings(rows, {})), null, 2));
      // Built from the columns instead (entries from before the listing column), the server's text is refused.
      await c.query(`UPDATE waypoint.tasks SET listing_head = NULL WHERE machine <> 'plain "m"'`);
      assert.equal(await queryTaskListingsJson(rows, {}), null);
      const workspaceId = (await c.query(`SELECT id FROM waypoint.workspaces WHERE path = $1`, ['/fast/\u00e9\t2'])).rows[0].id as string;
      const only = await queryTaskListingsJson(rows, { workspaceId });
      assert.ok(only);
      assert.equal(only, JSON.stringify(listingJson(await queryTaskListings(rows, { workspaceId })), null, 2));
      // PostgreSQL's to_json writes these values as JSON.stringify does: built from the columns, the same text.
      await c.query('UPDATE waypoint.tasks SET listing_head = NULL WHERE workspace_id = $1', [workspaceId]);
      assert.equal(await queryTaskListingsJson(rows, { workspaceId }), only);
      const parsed = JSON.parse(only) as { title: string }[];
      assert.deepEqual(parsed.map((r) => r.title).sort(), [...hard].sort());
      assert.equal(await queryTaskListingsJson(rows, { states: ['completed'] }), '[]');
    } finally {
      await c.end();
    }
    // The whole command still equals the full CLI's output (the fallback, because of the NUL).
    const fast = await fastTasksAll(['tasks', '--all', '--json', '--store', url]);
    assert.ok(fast.handled);
    let buf = '';
    const out = new Writable({ write: (ch, _e, cb) => ((buf += ch.toString()), cb()) });
    assert.equal(await main(['tasks', '--all', '--json', '--store', url], { stdout: out as never, stderr: new Writable({ write: (_c, _e, cb) => cb() }) as never }), 0);
    assert.equal(fast.output, buf);
  });

  it('lists the stored entries, entries written before them (no listing column value), and a moved workspace\'s, all as the full CLI prints them', async () => {
    const url = cluster.url();
    const id = randomUUID();
    let log = await PgEventLog.open({ url, workspace: { id, machine: 'stored', path: '/stored/1' } });
    await (await log.append([started(301), started(302), started(303)])).durable;
    await log.close();
    const c = new Client({ connectionString: url });
    await c.connect();
    const fullJson = async () => {
      let buf = '';
      const out = new Writable({ write: (ch, _e, cb) => ((buf += ch.toString()), cb()) });
      assert.equal(await main(['tasks', '--all', '--json', '--store', url], { stdout: out as never, stderr: new Writable({ write: (_c, _e, cb) => cb() }) as never }), 0);
      return buf;
    };
    try {
      const rows = async (sql: string, params: unknown[]) => (await c.query(sql, params)).rows as Record<string, unknown>[];
      const stored = await rows('SELECT id, listing_head || updated_at::text || listing_tail AS listing FROM waypoint.tasks WHERE workspace_id = $1 ORDER BY id', [id]);
      assert.equal(stored.length, 3);
      for (const r of stored) assert.ok(String(r.listing).startsWith('  {\n    "id": '), `a listing entry is stored with ${String(r.id)}`);
      // One entry as a summary written before the column had it: built from the columns, the same text.
      const only = async () => queryTaskListingsJson(rows, { workspaceId: id });
      const before = await only();
      await c.query('UPDATE waypoint.tasks SET listing_head = NULL WHERE workspace_id = $1 AND id = $2', [id, stored[1].id]);
      assert.equal(await only(), before);
      assert.equal(before, JSON.stringify(listingJson(await queryTaskListings(rows, { workspaceId: id })), null, 2));
      // The workspace opened at a new path: its entries say the new path, stored or not.
      log = await PgEventLog.open({ url, workspace: { id, machine: 'stored', path: '/stored/moved' } });
      await log.close();
      const moved = JSON.parse((await only()) ?? 'null') as { workspace: string }[];
      assert.deepEqual(
        moved.map((m) => m.workspace),
        ['/stored/moved', '/stored/moved', '/stored/moved'],
      );
      const nulls = await rows('SELECT count(*)::int AS n FROM waypoint.tasks WHERE workspace_id = $1 AND listing_head IS NULL AND listing_tail IS NULL', [id]);
      assert.equal(nulls[0].n, 3);
    } finally {
      await c.end();
    }
    const fast = await fastTasksAll(['tasks', '--all', '--json', '--store', url]);
    assert.ok(fast.handled);
    assert.equal(fast.output, await fullJson());
  });

  it('migrates a version 2 store (no listing column) in place and lists its old summaries as before', async () => {
    const fresh = await PgCluster.create();
    try {
      const url = fresh.url();
      const id = randomUUID();
      let log = await PgEventLog.open({ url, workspace: { id, machine: 'v2', path: '/v2/1' } });
      await (await log.append([started(401), started(402)])).durable;
      await log.close();
      const c = new Client({ connectionString: url });
      await c.connect();
      try {
        // The store as version 2 left it.
        await c.query(
          `${UNDO_V6} ALTER TABLE waypoint.tasks DROP COLUMN lease_owner, DROP COLUMN lease_ttl_ms, DROP COLUMN lease_hb, DROP COLUMN lease_at; DROP TABLE waypoint.sweeps; DROP INDEX waypoint.tasks_active; ALTER TABLE waypoint.tasks DROP COLUMN listing_head, DROP COLUMN listing_tail; CREATE INDEX tasks_updated ON waypoint.tasks (updated_at DESC); ALTER TABLE waypoint.tasks RESET (fillfactor); UPDATE waypoint.meta SET v = '2' WHERE k = 'schema_version'`,
        );
        // The fast path reads only its own version: the full CLI answers (and migrates).
        assert.equal((await fastTasksAll(['tasks', '--all', '--json', '--store', url])).handled, false);
        log = await PgEventLog.open({ url, workspace: { id, machine: 'v2', path: '/v2/1' } });
        await (await log.append([started(403)])).durable;
        await log.close();
        assert.equal((await c.query(`SELECT v FROM waypoint.meta WHERE k = 'schema_version'`)).rows[0].v, String(PG_SCHEMA_VERSION));
        // v4: no index on updated_at, a fill factor that leaves room for heap-only updates (v5's partial index holds only workspace_id).
        assert.deepEqual((await c.query(`SELECT indexname FROM pg_indexes WHERE schemaname = 'waypoint' AND tablename = 'tasks' ORDER BY indexname`)).rows, [{ indexname: 'tasks_active' }, { indexname: 'tasks_id' }, { indexname: 'tasks_pkey' }]);
        assert.deepEqual((await c.query(`SELECT reloptions FROM pg_class WHERE oid = 'waypoint.tasks'::regclass`)).rows[0].reloptions, ['fillfactor=70']);
        const n = (await c.query('SELECT count(listing_head || listing_tail)::int AS stored, count(*)::int AS all FROM waypoint.tasks')).rows[0];
        // The writer's first open after schema v6 writes every task row whole from its fold (projectionRows.ts), entries included.
        assert.deepEqual(n, { stored: 3, all: 3 });
        const rows = async (sql: string, params: unknown[]) => (await c.query(sql, params)).rows as Record<string, unknown>[];
        const text = await queryTaskListingsJson(rows, {});
        assert.equal(text, JSON.stringify(listingJson(await queryTaskListings(rows, {})), null, 2));
        assert.deepEqual((JSON.parse(text ?? '[]') as { id: string }[]).map((t) => t.id).sort(), ['t401', 't402', 't403']);
      } finally {
        await c.end();
      }
    } finally {
      fresh.remove();
    }
  });

  it('migrates a version 3 store (each entry whole, in one column) to its two parts, and lists it as before', async () => {
    const fresh = await PgCluster.create();
    try {
      const url = fresh.url();
      const id = randomUUID();
      let log = await PgEventLog.open({ url, workspace: { id, machine: 'v3', path: '/v3/1' } });
      await (await log.append([started(501), started(502), started(503)])).durable;
      await log.close();
      const c = new Client({ connectionString: url });
      await c.connect();
      try {
        const rows = async (sql: string, params: unknown[]) => (await c.query(sql, params)).rows as Record<string, unknown>[];
        const listed = await queryTaskListingsJson(rows, {});
        // The store as version 3 left it: the whole entry in `listing`; one entry that does not read as one.
        await c.query(`${UNDO_V6} ALTER TABLE waypoint.tasks DROP COLUMN lease_owner, DROP COLUMN lease_ttl_ms, DROP COLUMN lease_hb, DROP COLUMN lease_at; DROP TABLE waypoint.sweeps; DROP INDEX waypoint.tasks_active; ALTER TABLE waypoint.tasks ADD COLUMN listing text; UPDATE waypoint.tasks SET listing = listing_head || updated_at::text || listing_tail;
          UPDATE waypoint.tasks SET listing = 'not an entry' WHERE id = 't503';
          ALTER TABLE waypoint.tasks DROP COLUMN listing_head, DROP COLUMN listing_tail; CREATE INDEX tasks_updated ON waypoint.tasks (updated_at DESC);
          UPDATE waypoint.meta SET v = '3' WHERE k = 'schema_version'`);
        // The migrations alone (a writer's first open would then write every task row whole: see below).
        await ensureSchema(c);
        const parts = await rows('SELECT id, listing_head AS head, listing_tail AS tail FROM waypoint.tasks ORDER BY id', []);
        assert.ok(String(parts[0].head).endsWith('\n    "updatedAt": ') && String(parts[0].tail).startsWith(',\n    "workspace": '), JSON.stringify(parts[0]));
        assert.equal(parts[2].head, null, 'an entry that does not read as one is dropped (built from the columns)');
        assert.equal(parts[2].tail, null);
        assert.equal(await queryTaskListingsJson(rows, {}), listed);
        log = await PgEventLog.open({ url, workspace: { id, machine: 'v3', path: '/v3/1' } });
        await log.close();
        assert.equal((await rows('SELECT count(listing_head || listing_tail)::int AS n FROM waypoint.tasks', []))[0].n, 3, "the writer's first open wrote every row whole");
        assert.equal(await queryTaskListingsJson(rows, {}), listed);
      } finally {
        await c.end();
      }
    } finally {
      fresh.remove();
    }
  });

  it('keeps an entry\'s parts as they were when an event changes only its time, and rewrites them when a field changes', async () => {
    const url = cluster.url();
    const id = randomUUID();
    let now = 1_000_000;
    const log = await PgEventLog.open({ url, workspace: { id, machine: 'parts', path: '/parts/1' }, clock: () => (now += 1000) });
    try {
      await (await log.append([started(601)])).durable;
      const c = new Client({ connectionString: url });
      await c.connect();
      try {
        const rows = async (sql: string, params: unknown[]) => (await c.query(sql, params)).rows as Record<string, unknown>[];
        const entry = async () => (await rows('SELECT listing_head AS head, listing_tail AS tail, updated_at FROM waypoint.tasks WHERE workspace_id = $1', [id]))[0];
        const first = await entry();
        await (await log.append([{ type: 'lease.heartbeat', taskId: 't601', corr: 't601', key: 'hb-601', by: 'test', data: {} }])).durable;
        const beat = await entry();
        assert.equal(beat.head, first.head);
        assert.equal(beat.tail, first.tail);
        // Only the time moved, and the row says so (the commit set just updated_at and seq).
        assert.equal(Number(beat.updated_at), Number(first.updated_at) + 1000);
        assert.match(await queryTaskListingsJson(rows, { workspaceId: id }) ?? '', new RegExp(`"updatedAt": ${Number(first.updated_at) + 1000},`));
        await (await log.append([{ type: 'task.interrupted', taskId: 't601', corr: 't601', key: 'int-601', by: 'test', data: { reason: 'test', class: 'recoverable', stepId: null } } as never])).durable;
        const stopped = await entry();
        assert.match(String(stopped.head), /"state": "interrupted"/);
        // Every step of the way, the listing is what the rows say.
        assert.equal(await queryTaskListingsJson(rows, { workspaceId: id }), JSON.stringify(listingJson(await queryTaskListings(rows, { workspaceId: id })), null, 2));
      } finally {
        await c.end();
      }
    } finally {
      await log.close();
    }
  });

  it('writes a summary row removed outside Waypoint whole again with its task\'s next event, and says so', async () => {
    const url = cluster.url();
    const id = randomUUID();
    const lines: { level: LogLevel; line: string }[] = [];
    const log = await PgEventLog.open({ url, workspace: { id, machine: 'gone', path: '/gone/1' }, log: new Logger(memorySink(lines)) });
    try {
      await (await log.append([started(701)])).durable;
      cluster.psql(`DELETE FROM waypoint.tasks WHERE workspace_id = '${id}'`);
      await (await log.append([{ type: 'lease.heartbeat', taskId: 't701', corr: 't701', key: 'hb-701', by: 'test', data: {} }])).durable;
      assert.ok(lines.some((l) => l.level === 'warn' && /1 task summaries were missing/.test(l.line)), JSON.stringify(lines));
      await (await log.append([{ type: 'lease.heartbeat', taskId: 't701', corr: 't701', key: 'hb-701b', by: 'test', data: {} }])).durable;
      const back = cluster.psql(`SELECT id, state, listing_head IS NOT NULL FROM waypoint.tasks WHERE workspace_id = '${id}'`).trim();
      assert.equal(back, 't701|running|t');
    } finally {
      await log.close();
    }
  });

  it('lists in the rows path\'s order: newest first, ties by id, across workspaces, with and without a limit', async () => {
    // A store of its own: the other tests leave entries that only the rows path may print.
    const own = await PgCluster.create();
    try {
      await listsInOrder(own.url());
    } finally {
      own.remove();
    }
  });
});

/** Three workspaces' tasks, stamped out of order and with ties: the text's order is the rows path's. */
async function listsInOrder(url: string): Promise<void> {
  // Timestamps out of order and repeated (ties), over three workspaces.
  let n = 0;
  const stamps = [5, 3, 9, 3, 7, 1, 9, 2, 8, 3];
  for (let w = 0; w < 3; w++) {
    const log = await PgEventLog.open({ url, workspace: { id: randomUUID(), machine: `order-${w}`, path: `/order/${w}` }, clock: () => 1_800_000_000_000 + stamps[n++ % stamps.length] * 1000 });
    for (let i = 0; i < 40; i++) await (await log.append([started(1000 + w * 100 + ((i * 37) % 40))])).durable;
    await log.close();
  }
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    const rows = async (sql: string, params: unknown[]) => (await c.query(sql, params)).rows as Record<string, unknown>[];
    for (const o of [{}, { limit: 25 }, { states: ['running'] }]) {
      const text = await queryTaskListingsJson(rows, o);
      assert.ok(text);
      const listed = JSON.parse(text) as { id: string; updatedAt: number; workspaceId: string }[];
      const expected = await queryTaskListings(rows, o);
      assert.deepEqual(
        listed.map((l) => `${l.workspaceId}/${l.id}`),
        expected.map((l) => `${l.workspace.id}/${l.task.id}`),
      );
      for (let i = 1; i < listed.length; i++) assert.ok(listed[i - 1].updatedAt > listed[i].updatedAt || (listed[i - 1].updatedAt === listed[i].updatedAt && listed[i - 1].id <= listed[i].id));
    }
  } finally {
    await c.end();
  }
}
