import * as assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { Client, Pool } from 'pg';
import { Engine } from '../../src/core/engine';
import * as fs from 'node:fs';
import { PgEventLog, PgProjectionReader, watchTeamAlerts } from '../../src/core/store/postgres';
import { SqlProjection } from '../../src/core/store/projection';
import { compareRows } from '../../src/core/store/postgres/projectionRows';
import { EVENT_COLUMNS, rowToEvent } from '../../src/core/store/postgres/rows';
import { POOL_MAX, sharedPool } from '../../src/core/store/postgres/connection';
import { sweepExpiredLeases } from '../../src/core/store/postgres/leaseSweeper';
import { EXPIRED, FROM_EXPIRED } from '../../src/core/store/postgres/leaseDue';
import { ALERT_CHANNEL, alertNotice, parseTeamAlert, type TeamAlert } from '../../src/core/store/postgres/teamAlerts';
import { CLI, buildCli } from '../support/mcp';
import { PgCluster } from '../support/pgCluster';
import { tmpDir } from '../support/tmp';

/**
 * The store-wide lease sweep against a real PostgreSQL: a task whose agent died is
 * interrupted without anyone opening its workspace, once, however many clients sweep;
 * a live writer's workspace is left to it; the alert reaches a listener.
 */

const AGENT = path.join(__dirname, '..', 'support', 'pgAgentChild.ts');

/** Lease 5 s + a writer gone for 10 s + a sweep turn every ≤ 4 s + the CLI's own start: the stated bound. */
const BOUND_MS = 20_000;

function runCli(args: string[], cwd: string): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { cwd, env: { ...process.env, WAYPOINT_STORE: '' } }, (e, out, err) => resolve({ code: e ? ((e as { code?: number }).code ?? 1) : 0, out, err }));
  });
}

function startAgent(url: string, workspace: string, ttlMs: number): Promise<{ proc: ChildProcess; taskId: string }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', AGENT, url, workspace, String(ttlMs)], { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    proc.stdout!.on('data', (d) => {
      out += d;
      const m = /ready (\S+)\n/.exec(out);
      if (m) resolve({ proc, taskId: m[1] });
    });
    proc.stderr!.on('data', (d) => (err += d));
    proc.on('exit', (code) => reject(new Error(`agent exited ${code}: ${err}`)));
  });
}

describe('store-wide lease sweep (real cluster)', function () {
  this.timeout(120_000);
  let cluster: PgCluster;
  const dirs: { cleanup: () => void }[] = [];
  const workspace = () => {
    const t = tmpDir('wp-pg-sweep-');
    dirs.push(t);
    return t.dir;
  };
  before(async () => {
    buildCli();
    cluster = await PgCluster.create();
  });
  after(() => {
    for (const d of dirs) d.cleanup();
    cluster?.remove();
  });

  it("an agent on A killed: `tasks --all --json` from B shows A's task interrupted within the bound, without anything opening A", async () => {
    const url = cluster.url();
    const a = workspace();
    const b = workspace();
    const { proc, taskId } = await startAgent(url, a, 5_000);
    const first = JSON.parse((await runCli(['tasks', '--all', '--json', '--store', url, '--workspace', b], b)).out) as { id: string; state: string }[];
    assert.equal(first.find((t) => t.id === taskId)?.state, 'running');
    // The agent renews its lease for a while, then dies without a word.
    await new Promise((r) => setTimeout(r, 2_000));
    proc.kill('SIGKILL');
    const killedAt = Date.now();
    await new Promise((r) => proc.once('exit', r));
    let state = 'running';
    let listed: { id: string; state: string; workspace: string }[] = [];
    while (Date.now() - killedAt < BOUND_MS + 10_000) {
      const r = await runCli(['tasks', '--all', '--json', '--store', url, '--workspace', b], b);
      assert.equal(r.code, 0, r.err);
      listed = JSON.parse(r.out);
      state = listed.find((t) => t.id === taskId)?.state ?? 'missing';
      if (state !== 'running') break;
      await new Promise((r) => setTimeout(r, 500));
    }
    const took = Date.now() - killedAt;
    console.log(`      [sweep] task interrupted ${(took / 1000).toFixed(1)} s after its agent was killed (lease 5 s, bound ${BOUND_MS / 1000} s)`);
    assert.equal(state, 'interrupted');
    assert.ok(took <= BOUND_MS, `interrupted after ${took} ms, bound ${BOUND_MS} ms`);
    assert.ok(took >= 5_000 - 2_000, 'not before the lease ran out');

    const pg = new Client({ connectionString: url });
    await pg.connect();
    try {
      const ev = await pg.query(`SELECT type, data, key, by FROM waypoint.events WHERE task_id = $1 AND type = 'task.interrupted'`, [taskId]);
      assert.equal(ev.rows.length, 1, 'interrupted once');
      assert.match(ev.rows[0].data.reason, /^lease of agent-session-7 expired at \S+ \(no call for 5 s\)$/);
      assert.equal(ev.rows[0].data.stepId, 'migrate');
      assert.equal(ev.rows[0].data.class, 'recoverable');
      // The sweep folded its interruption into the task's projection rows in PostgreSQL: they equal a fold of the events, and the reader answers from them.
      const wsId = JSON.parse(fs.readFileSync(path.join(a, '.waypoint', 'workspace-id.json'), 'utf8')).id as string;
      const events = (await pg.query(`SELECT ${EVENT_COLUMNS} FROM waypoint.events WHERE workspace_id = $1 ORDER BY seq`, [wsId])).rows.map(rowToEvent);
      const fold = await SqlProjection.empty();
      try {
        fold.apply(events);
        assert.deepEqual(await compareRows(pg, wsId, fold.db), []);
      } finally {
        fold.close();
      }
      const reader = await PgProjectionReader.open(url);
      try {
        const t = await reader.getTask(taskId);
        assert.equal(t?.state, 'interrupted');
        assert.equal(t?.lease, null);
        assert.match(t?.interruption?.reason ?? '', /^lease of agent-session-7 expired/);
      } finally {
        await reader.close();
      }
    } finally {
      await pg.end();
    }
    // Opening A now finds the same record: the task interrupted, no second interruption, resumable.
    const engine = await Engine.open({ workspace: a, teamStore: url });
    try {
      const t = engine.task(taskId);
      assert.equal(t.state, 'interrupted');
      assert.deepEqual(await engine.sweep(), []);
      const r = await engine.resumeTask({ taskId, owner: { id: 'agent-session-8' } });
      assert.equal(r.resumedFrom, 'interrupted');
      assert.equal(engine.task(taskId).state, 'running');
      assert.equal((await engine.verify()).ok, true);
    } finally {
      await engine.close();
    }
  });

  it('a workspace whose writer is alive is left to it, however long its task stays silent', async () => {
    const url = cluster.url();
    const a = workspace();
    const engine = await Engine.open({ workspace: a, teamStore: url });
    const pool = new Pool({ connectionString: url, max: 2 });
    try {
      const { taskId } = await engine.startTask({ goal: 'quiet', leaseTtlMs: 1_000, owner: { id: 'quiet-agent' } });
      // The task's lease runs out; the writer's signs of life are at most 4.5 s apart (a beat every 3 s unless a commit spoke within 1.5 s): with a staleness of 6 s it never reads as gone.
      await new Promise((r) => setTimeout(r, 7_000));
      // (Other tests' tasks in this store may be due; this one is not.)
      const due = await pool.query(`SELECT t.id ${FROM_EXPIRED} WHERE ${EXPIRED} AND t.id = $2`, [6_000, taskId]);
      assert.deepEqual(due.rows, []);
      const expired = await pool.query(`SELECT t.id FROM waypoint.tasks t WHERE t.id = $1 AND t.lease_at + t.lease_ttl_ms * interval '1 millisecond' < now()`, [taskId]);
      assert.equal(expired.rows.length, 1, 'its lease did run out by the server clock');
      const r = await sweepExpiredLeases(pool, { by: 'test', machine: 'test', everyMs: 0, writerStaleMs: 6_000 });
      assert.ok(!r.swept.some((x) => x.taskId === taskId));
      assert.equal(engine.task(taskId).state, 'running');
      // The writer still writes (it was not fenced).
      await engine.heartbeat({ taskId, owner: { id: 'quiet-agent' } });
    } finally {
      await pool.end();
      await engine.close();
    }
  });

  it('many clients sweeping at once interrupt each task once, take turns by the server clock, and alert listeners', async () => {
    const url = cluster.url();
    const seed = async (prefix: string): Promise<string[]> => {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const log = await PgEventLog.open({ url, workspace: { id: `${prefix}-ws-${i}`, machine: `machine-${i}`, path: `/fleet/${prefix}${i}` }, owner: `agent-${i}` });
        for (let k = 0; k < 4; k++) {
          const task = `${prefix}-${i}-${k}`;
          const r = await log.append([
            {
              type: 'task.started',
              taskId: task,
              corr: task,
              key: `${task}-start`,
              by: `agent-${i}-${k}`,
              op: 'task.start',
              result: { taskId: task },
              data: { goal: 'race', title: `Race ${i}.${k} \u202e`, agent: null, plan: [], owner: { id: `agent-${i}-${k}` }, leaseTtlMs: 1_000 },
            },
          ]);
          await r.durable;
          ids.push(task);
        }
        await log.close();
      }
      return ids;
    };
    const listener = new Client({ connectionString: url });
    await listener.connect();
    const alerts: TeamAlert[] = [];
    listener.on('notification', (n) => {
      if (n.channel !== ALERT_CHANNEL) return;
      const a = parseTeamAlert(n.payload);
      if (a) alerts.push(a);
    });
    await listener.query(`LISTEN ${ALERT_CHANNEL}`);
    const pools = Array.from({ length: 6 }, () => new Pool({ connectionString: url, max: 2 }));
    try {
      // Turn-taking: with a period of a minute, one of six concurrent clients sweeps.
      const turnTasks = await seed('turn');
      await new Promise((r) => setTimeout(r, 1_500));
      await pools[0].query(`UPDATE waypoint.sweeps SET at = '-infinity'`);
      const turns = await Promise.all(pools.map((p, i) => sweepExpiredLeases(p, { by: `client-${i}`, machine: 'm', everyMs: 60_000, writerStaleMs: 0 })));
      assert.equal(turns.filter((t) => t.turn).length, 1);
      const mine = (r: { swept: { taskId: string }[] }[], prefix: string) => r.flatMap((x) => x.swept.map((s) => s.taskId)).filter((id) => id.startsWith(prefix));
      assert.deepEqual(mine(turns, 'turn-').sort(), turnTasks.sort());
      // With no period at all, six clients racing still interrupt each task once (the workspace's row lock and the re-check under it).
      const raceTasks = await seed('race');
      await new Promise((r) => setTimeout(r, 1_500));
      const races = await Promise.all(pools.map((p, i) => sweepExpiredLeases(p, { by: `client-${i}`, machine: 'm', everyMs: 0, writerStaleMs: 0 })));
      const raced = mine(races, 'race-');
      assert.deepEqual([...raced].sort(), raceTasks.sort(), 'every task swept by exactly one client');
      const swept = [...turnTasks, ...raced];
      const ev = await pools[0].query(`SELECT task_id, count(*)::int AS n FROM waypoint.events WHERE type = 'task.interrupted' AND (task_id LIKE 'race-%' OR task_id LIKE 'turn-%') GROUP BY task_id`);
      assert.equal(ev.rows.length, swept.length);
      for (const r of ev.rows) assert.equal(r.n, 1, `${r.task_id} interrupted once`);
      const listing = await pools[0].query(`SELECT id, state, lease_at FROM waypoint.tasks WHERE id LIKE 'race-%' OR id LIKE 'turn-%'`);
      for (const r of listing.rows) {
        assert.equal(r.state, 'interrupted', r.id);
        assert.equal(r.lease_at, null);
      }
      // Every swept workspace reopens at a later epoch, its log whole and folded as the sweep wrote it.
      for (let i = 0; i < 3; i++) {
        const log = await PgEventLog.open({ url, workspace: { id: `race-ws-${i}`, machine: `machine-${i}`, path: `/fleet/race${i}` } });
        try {
          const states = log.fold.all<{ id: string; state: string }>('SELECT id, state FROM tasks');
          assert.ok(states.length === 4 && states.every((s) => s.state === 'interrupted'), JSON.stringify(states));
        } finally {
          await log.close();
        }
      }
      // The alerts: one per interruption, parsed, and worded for a person with the title escaped.
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(alerts.filter((x) => /^(race|turn)-/.test(x.task)).length, swept.length);
      const a = alerts.find((x) => x.task === 'race-1-2')!;
      assert.equal(a.machine, 'machine-1');
      assert.equal(a.path, '/fleet/race1');
      const notice = alertNotice(a, { ownWorkspaces: new Set(), shown: new Set(), muted: false });
      assert.equal(notice?.message, 'Task "Race 1.2 \\u202e" on machine-1 (race1) was interrupted: its agent stopped answering.');
    } finally {
      await listener.end();
      for (const p of pools) await p.end();
    }
  });

  it('a connected window that only listens (no CLI, nothing opening A) sweeps and is alerted of a killed agent', async () => {
    const url = cluster.url();
    const a = workspace();
    const alerts: TeamAlert[] = [];
    // What the editor's TeamAlerts does: listen on the store, which also offers this process's sweep.
    const watch = await watchTeamAlerts(url, (x) => alerts.push(x), { sweeper: { by: 'a window on machine B', machine: 'machine-b' } });
    try {
      const { proc, taskId } = await startAgent(url, a, 5_000);
      await new Promise((r) => setTimeout(r, 1_000));
      proc.kill('SIGKILL');
      const killedAt = Date.now();
      while (!alerts.some((x) => x.task === taskId) && Date.now() - killedAt < BOUND_MS + 5_000) await new Promise((r) => setTimeout(r, 200));
      const took = Date.now() - killedAt;
      console.log(`      [sweep] alert received ${(took / 1000).toFixed(1)} s after the agent was killed`);
      const alert = alerts.find((x) => x.task === taskId);
      assert.ok(alert, 'alerted');
      assert.ok(took <= BOUND_MS, `alerted after ${took} ms`);
      assert.equal(alert.title, 'Billing migration');
      assert.equal(alert.by, 'a window on machine B');
      assert.match(alertNotice(alert, { ownWorkspaces: new Set(), shown: new Set(), muted: false })!.message, /^Task "Billing migration" on .+ was interrupted: its agent stopped answering\.$/);
    } finally {
      watch.dispose();
    }
  });

  it("connections carry the fleet's limits: a bounded shared pool, statement_timeout, idle-in-transaction timeout", async () => {
    const one = sharedPool(cluster.url());
    const two = sharedPool(cluster.url());
    try {
      assert.equal(one.pool, two.pool, 'one pool per process and store');
      assert.equal(one.pool.options.max, POOL_MAX);
      const r = await one.pool.query(`SELECT current_setting('statement_timeout') AS st, current_setting('idle_in_transaction_session_timeout') AS it`);
      assert.deepEqual(r.rows[0], { st: '30s', it: '1min' });
      await assert.rejects(one.pool.query(`SET statement_timeout = 200; SELECT pg_sleep(2)`), /statement timeout/);
    } finally {
      await one.release();
      await two.release();
    }
  });
});
