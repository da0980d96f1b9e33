import * as assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { PgEventLog, PgProjectionReader, redactUrl, watchTeamStore } from '../../src/core/store/postgres';
import { redactIn } from '../../src/core/store/postgres/connection';
import { isWaypointError } from '../../src/core/model/errors';
import type { WorkspaceIdentity } from '../../src/core/store/eventLog';
import { PgCluster } from '../support/pgCluster';
import { started } from '../support/tmp';

/**
 * PgEventLog and PgProjectionReader against a real, throwaway PostgreSQL cluster
 * (test/support/pgCluster.ts). No mock: when PostgreSQL is not installed, `before`
 * fails and says so.
 */

const ws = (machine = 'm1'): WorkspaceIdentity => ({ id: randomUUID(), machine, path: `/work/${machine}/${randomUUID().slice(0, 6)}` });

/** A step.completed-free event for a task already started: a heartbeat (keyed). */
const beat = (task: string, key: string) => ({ type: 'lease.heartbeat' as const, taskId: task, corr: task, key, by: 'test', data: {} });

describe('PostgreSQL event log (real cluster)', function () {
  this.timeout(60_000);
  let cluster: PgCluster;
  let url: string;
  const open: PgEventLog[] = [];
  const openLog = async (w: WorkspaceIdentity, extra: Partial<Parameters<typeof PgEventLog.open>[0]> = {}): Promise<PgEventLog> => {
    const l = await PgEventLog.open({ url, workspace: w, retryMs: 5000, ...extra });
    open.push(l);
    return l;
  };
  const q = async <T = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<T[]> => {
    const c = new Client({ connectionString: url });
    await c.connect();
    try {
      return (await c.query(sql, params)).rows as T[];
    } finally {
      await c.end();
    }
  };

  before(async () => {
    cluster = await PgCluster.create();
    url = cluster.url();
  });
  afterEach(async () => {
    for (const l of open.splice(0)) await l.close().catch(() => undefined);
  });
  after(() => {
    if (process.env.WP_PG_LOG) console.error(cluster?.serverLog().slice(-3000));
    cluster?.remove();
  });

  it('appends in order under its epoch, durable before it answers, with a task summary naming workspace and machine', async () => {
    const w = ws("laptop");
    const log = await openLog(w);
    assert.equal(log.epoch, 1);
    const r = await log.append([started(1)]);
    assert.deepEqual(
      r.events.map((e) => e.seq),
      [1],
    );
    await r.durable;
    const r2 = await log.append([beat('t1', 'hb1'), beat('t1', 'hb2')]);
    await r2.durable;
    assert.equal(log.lastSeq, 3);
    // Seen from another connection: committed, not just sent.
    const rows = await q<{ seq: number; key: string }>('SELECT seq::int AS seq, key FROM waypoint.events WHERE workspace_id = $1 ORDER BY seq', [w.id]);
    assert.deepEqual(
      rows.map((x) => [x.seq, x.key]),
      [
        [1, 'k1'],
        [2, 'hb1'],
        [3, 'hb2'],
      ],
    );
    const t = await q('SELECT machine, state, title FROM waypoint.tasks WHERE workspace_id = $1', [w.id]);
    assert.deepEqual(t, [{ machine: 'laptop', state: 'running', title: 'task 1' }]);
    const read = await log.read({ afterSeq: 1 });
    assert.deepEqual(
      read.map((e) => e.key),
      ['hb1', 'hb2'],
    );
    assert.equal((await log.read({ taskId: 't1', limit: 1 }))[0].type, 'task.started');
  });

  it('a task summary is updated in place (heap-only) as its events come: no index holds updated_at', async () => {
    const w = ws('hot');
    const log = await openLog(w);
    await (await log.append([started(1)])).durable;
    const before = (await q<{ hot: number; upd: number }>(`SELECT n_tup_hot_upd::int AS hot, n_tup_upd::int AS upd FROM pg_stat_user_tables WHERE relid = 'waypoint.tasks'::regclass`))[0];
    for (let i = 0; i < 50; i++) await (await log.append([beat('t1', `hot-${i}`)])).durable;
    // A backend reports its statistics when it ends (or after seconds idle): the writer's connection is closed first.
    await log.close();
    let after = before;
    for (let i = 0; i < 50 && after.upd - before.upd < 50; i++) {
      await new Promise((r) => setTimeout(r, 100));
      after = (await q<{ hot: number; upd: number }>(`SELECT pg_stat_clear_snapshot(), n_tup_hot_upd::int AS hot, n_tup_upd::int AS upd FROM pg_stat_user_tables WHERE relid = 'waypoint.tasks'::regclass`))[0];
    }
    assert.equal(after.upd - before.upd, 50, 'each commit updated the summary once');
    // Nearly all heap-only: the first update on a full page may move the tuple.
    assert.ok(after.hot - before.hot >= 45, `heap-only updates: ${after.hot - before.hot} of 50`);
    const idx = await q<{ indexname: string }>(`SELECT indexname FROM pg_indexes WHERE schemaname = 'waypoint' AND tablename = 'tasks' ORDER BY indexname`);
    // tasks_active (the lease sweep's) is keyed by workspace_id over the active states: a heartbeat changes neither.
    assert.deepEqual(idx.map((r) => r.indexname), ['tasks_active', 'tasks_id', 'tasks_pkey']);
  });

  it('reopening folds the whole history and takes the next epoch; the replaced writer is refused (lost_ownership) and nothing of it is recorded', async () => {
    const w = ws();
    const a = await openLog(w);
    await (await a.append([started(1)])).durable;
    let lostSeen: string | null = null;
    a.onDidLoseOwnership((e) => (lostSeen = e.code));
    const b = await openLog(w);
    assert.equal(b.epoch, a.epoch + 1);
    assert.equal(b.lastSeq, 1);
    // A appends: refused at commit (or at once, if the takeover's NOTIFY reached it first).
    await assert.rejects(
      a.append([beat('t1', 'late')]).then((r) => r.durable),
      (e: unknown) => isWaypointError(e) && e.code === 'lost_ownership',
    );
    await assert.rejects(a.append([beat('t1', 'later')]), (e: unknown) => isWaypointError(e) && e.code === 'lost_ownership');
    await (await b.append([beat('t1', 'b1')])).durable;
    const keys = (await q<{ key: string }>('SELECT key FROM waypoint.events WHERE workspace_id = $1 ORDER BY seq', [w.id])).map((r) => r.key);
    assert.deepEqual(keys, ['k1', 'b1']);
    // The takeover's NOTIFY reached A's listener too.
    for (let i = 0; i < 50 && !lostSeen; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(lostSeen, 'lost_ownership');
  });

  it('refuses a repeated idempotency key before sequencing anything', async () => {
    const log = await openLog(ws());
    await (await log.append([started(1)])).durable;
    await assert.rejects(log.append([beat('t1', 'k1')]), (e: unknown) => isWaypointError(e) && e.code === 'conflict');
    assert.equal(log.lastSeq, 1);
    await (await log.append([beat('t1', 'fresh')])).durable;
    assert.equal(log.lastSeq, 2);
  });

  it('a retry after the reply was lost mid-commit is idempotent: the group is not written twice', async () => {
    const w = ws();
    let drops = 0;
    const log = await openLog(w, {
      afterCommitForTests: () => {
        if (drops++ === 0) throw Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
      },
    });
    const r = await log.append([started(1), beat('t1', 'x')]);
    await r.durable;
    assert.equal(log.stats.retries, 1);
    const n = await q<{ n: number }>('SELECT count(*)::int AS n FROM waypoint.events WHERE workspace_id = $1', [w.id]);
    assert.equal(n[0].n, 2);
    await (await log.append([beat('t1', 'y')])).durable;
    assert.deepEqual(
      (await log.read()).map((e) => e.seq),
      [1, 2, 3],
    );
  });

  it("a state change whose first commit attempt never reached the server is written whole by the retry (the summary does not keep the old state)", async () => {
    const w = ws();
    let drops = 0;
    const log = await openLog(w, {
      beforeCommitForTests: ({ first }) => {
        if (first === 2 && drops++ === 0) throw Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
      },
    });
    await (await log.append([started(1)])).durable;
    await (await log.append([{ type: 'task.interrupted', taskId: 't1', corr: 'c1', key: 'int-1', by: null, data: { reason: 'test', class: 'recoverable', stepId: null } }])).durable;
    assert.equal(log.stats.retries, 1);
    const row = await q<{ state: string; seq: number }>('SELECT state, seq::int AS seq FROM waypoint.tasks WHERE workspace_id = $1 AND id = $2', [w.id, 't1']);
    assert.equal(log.fold.get<{ state: string }>('SELECT state FROM tasks WHERE id = ?', ['t1'])?.state, 'interrupted');
    // Before the fix: state 'running' at seq 2 (the retry wrote only the time and seq).
    assert.deepEqual(row[0], { state: 'interrupted', seq: 2 });
  });

  it('a connection killed by the server is reopened and the commit goes through', async () => {
    const w = ws();
    const log = await openLog(w, { owner: 'victim' });
    await (await log.append([started(1)])).durable;
    await q("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'waypoint victim'");
    await (await log.append([beat('t1', 'after-kill')])).durable;
    assert.equal((await q('SELECT 1 FROM waypoint.events WHERE workspace_id = $1', [w.id])).length, 2);
  });

  it('many appenders over several workspaces: per-workspace order, nothing lost, nothing duplicated', async () => {
    const workspaces = [ws('a'), ws('b'), ws('c'), ws('d')];
    const logs = await Promise.all(workspaces.map((w) => openLog(w)));
    const perAgent = 25;
    const acked = new Map<string, string[]>();
    await Promise.all(
      logs.flatMap((log, wi) =>
        [0, 1, 2, 3, 4].map(async (agent) => {
          const task = `w${wi}a${agent}`;
          const first = { ...started(0), taskId: task, corr: task, key: `${task}-start` };
          await (await log.append([first])).durable;
          const keys = [first.key];
          for (let i = 0; i < perAgent; i++) {
            const key = `${task}-${i}`;
            await (await log.append([beat(task, key)])).durable;
            keys.push(key);
          }
          acked.set(task, keys);
        }),
      ),
    );
    for (const [wi, w] of workspaces.entries()) {
      const rows = await q<{ seq: number; key: string; task_id: string }>('SELECT seq::int AS seq, key, task_id FROM waypoint.events WHERE workspace_id = $1 ORDER BY seq', [w.id]);
      assert.equal(rows.length, 5 * (perAgent + 1));
      rows.forEach((r, i) => assert.equal(r.seq, i + 1, 'contiguous seqs'));
      assert.equal(new Set(rows.map((r) => r.key)).size, rows.length, 'no duplicates');
      for (let agent = 0; agent < 5; agent++) {
        const task = `w${wi}a${agent}`;
        // Each agent's events in the order it acknowledged them.
        assert.deepEqual(
          rows.filter((r) => r.task_id === task).map((r) => r.key),
          acked.get(task),
        );
      }
      assert.equal(logs[wi].stats.events, rows.length);
    }
    // Group commit: fewer transactions than appends.
    assert.ok(logs.every((l) => l.stats.commits < l.stats.events), `commits ${logs.map((l) => l.stats.commits)} events ${logs.map((l) => l.stats.events)}`);
  });

  it('a database that is down fails with store_unavailable (no password in it) and loses nothing acknowledged', async () => {
    const w = ws();
    const log = await openLog(w, { retryMs: 600 });
    await (await log.append([started(1)])).durable;
    cluster.stop('immediate');
    try {
      const r = await log.append([beat('t1', 'while-down')]);
      await assert.rejects(r.durable, (e: unknown) => {
        assert.ok(isWaypointError(e) && e.code === 'store_unavailable', String(e));
        assert.ok(!e.message.includes(cluster.password), e.message);
        assert.match(e.message, /127\.0\.0\.1/);
        return true;
      });
      // The writer is poisoned (its fold holds an event that is not durable): it refuses more.
      await assert.rejects(log.append([beat('t1', 'next')]), (e: unknown) => isWaypointError(e) && e.code === 'store_unavailable');
      await assert.rejects(PgEventLog.open({ url, workspace: w, connectTimeoutMs: 1000 }), (e: unknown) => isWaypointError(e) && e.code === 'store_unavailable' && !e.message.includes(cluster.password));
    } finally {
      await cluster.start();
    }
    const again = await openLog(w);
    assert.equal(again.lastSeq, 1, 'the acknowledged event is there, the unacknowledged one is not');
    assert.equal((await again.read())[0].key, 'k1');
  });

  it('commits that wait out a restart are durable once answered', async () => {
    const w = ws();
    const log = await openLog(w, { retryMs: 30_000 });
    await (await log.append([started(1)])).durable;
    cluster.stop('immediate');
    const pending = await log.append([beat('t1', 'during-restart')]);
    setTimeout(() => void cluster.start(), 300);
    await pending.durable;
    assert.equal((await q('SELECT 1 FROM waypoint.events WHERE workspace_id = $1', [w.id])).length, 2);
  });

  it('subscribers see their writer\'s events once durable, and the store watcher sees every workspace\'s commits', async () => {
    const w = ws();
    const log = await openLog(w);
    const seen: number[] = [];
    log.subscribe((evs) => seen.push(...evs.map((e) => e.seq)));
    const notes: string[] = [];
    const watch = await watchTeamStore(url, (n) => notes.push(`${n.w}:${n.h}`));
    try {
      await (await log.append([started(1)])).durable;
      await (await log.append([beat('t1', 'z')])).durable;
      assert.deepEqual(seen, [1, 2]);
      for (let i = 0; i < 50 && !notes.includes(`${w.id}:2`); i++) await new Promise((r) => setTimeout(r, 20));
      assert.ok(notes.includes(`${w.id}:2`), notes.join(','));
    } finally {
      watch.dispose();
    }
  });

  it('the projection reader lists every workspace\'s tasks with workspace and machine, and replays one task\'s detail', async () => {
    const w1 = ws('alpha');
    const w2 = ws('beta');
    const [l1, l2] = [await openLog(w1), await openLog(w2)];
    const t1 = { ...started(1), taskId: 'rt1', corr: 'rt1', key: 'rt1' };
    const t2 = { ...started(2), taskId: 'rt2', corr: 'rt2', key: 'rt2' };
    await (await l1.append([t1])).durable;
    await (await l2.append([t2])).durable;
    const reader = await PgProjectionReader.open(url);
    try {
      const all = await reader.listTasks({ allWorkspaces: true });
      const mine = all.filter((x) => x.task.id === 'rt1' || x.task.id === 'rt2').map((x) => [x.task.id, x.workspace.machine, x.workspace.id, x.task.state]);
      assert.deepEqual(mine.sort(), [
        ['rt1', 'alpha', w1.id, 'running'],
        ['rt2', 'beta', w2.id, 'running'],
      ]);
      const task = await reader.getTask('rt1');
      assert.equal(task?.title, 'task 1');
      assert.equal(task?.lease?.owner, 'test');
      assert.equal(await reader.getTask('nope'), null);
      assert.equal((await reader.taskEvents('rt2'))[0].type, 'task.started');
      await assert.rejects(reader.listTasks({ allWorkspaces: true, states: ['bogus' as never] }), /Unknown task state/);
      await assert.rejects(reader.listTasks({}), /not scoped/);
    } finally {
      await reader.close();
    }
    const scoped = await PgProjectionReader.open(url, { workspaceId: w2.id });
    try {
      assert.deepEqual(
        (await scoped.listTasks()).map((x) => x.task.id),
        ['rt2'],
      );
      assert.equal(await scoped.getTask('rt1'), null);
    } finally {
      await scoped.close();
    }
  });

  it('redacts credentials from URLs and from messages that quote them', () => {
    const u = 'postgresql://alice:s3cr3t-pw@db.example:5432/team?sslmode=verify-full&sslrootcert=/etc/ca.pem&password=other';
    const r = redactUrl(u);
    assert.ok(!r.includes('s3cr3t-pw') && !r.includes('other'), r);
    assert.match(r, /sslmode=verify-full/);
    assert.match(r, /alice:\*\*\*@db\.example/);
    assert.ok(!redactIn(`failed: ${u} said s3cr3t-pw`, u).includes('s3cr3t-pw'));
  });
});
