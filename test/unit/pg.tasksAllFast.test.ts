import * as assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { main } from '../../src/cli/main';
import { fastTasksAll, parseTasksAllArgs } from '../../src/cli/tasksAllFast';
import { queryTaskListings, queryTaskListingsJson } from '../../src/core/store/postgres/taskListing';
import { listingJson } from '../../src/cli/tasksAllFormat';
import { Client } from 'pg';
import { PgEventLog } from '../../src/core/store/postgres';
import { PgCluster } from '../support/pgCluster';
import { started } from '../support/tmp';

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
      assert.equal(fast.output, buf);
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
      await c.query(`UPDATE waypoint.tasks SET listing = NULL WHERE machine <> 'plain "m"'`);
      assert.equal(await queryTaskListingsJson(rows, {}), null);
      const workspaceId = (await c.query(`SELECT id FROM waypoint.workspaces WHERE path = $1`, ['/fast/\u00e9\t2'])).rows[0].id as string;
      const only = await queryTaskListingsJson(rows, { workspaceId });
      assert.ok(only);
      assert.equal(only, JSON.stringify(listingJson(await queryTaskListings(rows, { workspaceId })), null, 2));
      // PostgreSQL's to_json writes these values as JSON.stringify does: built from the columns, the same text.
      await c.query('UPDATE waypoint.tasks SET listing = NULL WHERE workspace_id = $1', [workspaceId]);
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
      const stored = await rows('SELECT id, listing FROM waypoint.tasks WHERE workspace_id = $1 ORDER BY id', [id]);
      assert.equal(stored.length, 3);
      for (const r of stored) assert.ok(String(r.listing).startsWith('  {\n    "id": '), `a listing entry is stored with ${String(r.id)}`);
      // One entry as a summary written before the column had it: built from the columns, the same text.
      const only = async () => queryTaskListingsJson(rows, { workspaceId: id });
      const before = await only();
      await c.query('UPDATE waypoint.tasks SET listing = NULL WHERE workspace_id = $1 AND id = $2', [id, stored[1].id]);
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
      const nulls = await rows('SELECT count(*)::int AS n FROM waypoint.tasks WHERE workspace_id = $1 AND listing IS NULL', [id]);
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
        await c.query(`ALTER TABLE waypoint.tasks DROP COLUMN listing; UPDATE waypoint.meta SET v = '2' WHERE k = 'schema_version'`);
        // The fast path reads only its own version: the full CLI answers (and migrates).
        assert.equal((await fastTasksAll(['tasks', '--all', '--json', '--store', url])).handled, false);
        log = await PgEventLog.open({ url, workspace: { id, machine: 'v2', path: '/v2/1' } });
        await (await log.append([started(403)])).durable;
        await log.close();
        assert.equal((await c.query(`SELECT v FROM waypoint.meta WHERE k = 'schema_version'`)).rows[0].v, '3');
        const n = (await c.query('SELECT count(listing)::int AS stored, count(*)::int AS all FROM waypoint.tasks')).rows[0];
        assert.deepEqual(n, { stored: 1, all: 3 });
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
