/**
 * The team store on a real PostgreSQL (a throwaway cluster, synchronous_commit=on):
 *
 * - appends per second from 20 concurrent agents over 4 workspaces (one PgEventLog
 *   writer per workspace, as one owner per workspace has it; every append awaited
 *   until durable), against plain `pg` INSERTs of the same rows from 20 connections
 *   with the same durability, in the same run. Target ≥ 0.8× the baseline.
 * - p99 of one append's latency (append to durable), target ≤ 20 ms on loopback.
 * - `waypoint tasks --all --json` with 10,000 tasks in the store, target ≤ 200 ms: the
 *   real command (`node dist/cli.js`, a process of its own, as a person runs it), with
 *   its parts beside it — a bare Node start, the query alone in this process — so the
 *   figure says where the time goes.
 *
 * Opt-in (`npm run bench -- --only=postgres`): it needs PostgreSQL installed.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import * as path from 'node:path';
import { Client } from 'pg';
import { PgEventLog, PgProjectionReader } from '../../src/core/store/postgres';
import type { NewEventLike } from '../../src/core/store/eventLog';
import { PgCluster } from '../support/pgCluster';
import { fmtMs, median, percentile, printTable, type Row } from './util';

const ROOT = path.resolve(__dirname, '..', '..');
const AGENTS = 20;
const WORKSPACES = 4;

/** A task of the run: its lease outlasts the run, so `tasks --all` is measured listing, not sweeping tasks whose writers the run closed. */
const startedEvent = (task: string): NewEventLike => ({
  type: 'task.started',
  taskId: task,
  corr: task,
  key: `${task}-start`,
  by: 'bench',
  op: 'task.start',
  result: { taskId: task },
  data: { goal: `goal of ${task}`, title: task, agent: 'bench', plan: [{ id: 'a', title: 'A' }], owner: { id: 'bench' }, leaseTtlMs: 3_600_000 },
});
const beat = (task: string, key: string): NewEventLike => ({ type: 'lease.heartbeat', taskId: task, corr: task, key, by: 'bench', data: {} });

/**
 * The workloads: heartbeats (most of an agent's calls: they move only a task's time and
 * lease), and steps — each call starts a new step or completes it, so each commit also
 * writes a row of the projection's steps table (projectionRows.ts).
 */
type Workload = 'beats' | 'steps';
function callOf(workload: Workload, task: string, i: number): NewEventLike {
  if (workload === 'beats') return beat(task, `${task}-${i}`);
  const stepId = `s${i >> 1}`;
  return i % 2 === 0
    ? { type: 'step.started', taskId: task, corr: task, key: `${task}-${i}`, by: 'bench', data: { stepId, title: `Step ${stepId}`, attempt: 1, taskAttempt: 1, inputs: { n: i }, adhoc: true, dependsOn: [] } }
    : { type: 'step.completed', taskId: task, corr: task, key: `${task}-${i}`, by: 'bench', data: { stepId, outputs: { ok: true }, summary: 'done' } };
}

async function waypointAppends(url: string, ms: number, workload: Workload = 'beats'): Promise<{ perSec: number; p99: number; p50: number; commits: number; events: number }> {
  const logs = await Promise.all(Array.from({ length: WORKSPACES }, (_, i) => PgEventLog.open({ url, workspace: { id: randomUUID(), machine: `bench-${i}`, path: `/bench/${i}` } })));
  const latencies: number[] = [];
  try {
    // Each agent has its task first (not timed).
    const tasks = Array.from({ length: AGENTS }, (_, a) => `a${a}-${randomUUID().slice(0, 6)}`);
    await Promise.all(tasks.map(async (t, a) => (await logs[a % WORKSPACES].append([startedEvent(t)])).durable));
    const end = performance.now() + ms;
    let n = 0;
    const t0 = performance.now();
    await Promise.all(
      tasks.map(async (t, a) => {
        const log = logs[a % WORKSPACES];
        for (let i = 0; performance.now() < end; i++) {
          const s = performance.now();
          await (await log.append([callOf(workload, t, i)])).durable;
          latencies.push(performance.now() - s);
          n++;
        }
      }),
    );
    const secs = (performance.now() - t0) / 1000;
    return {
      perSec: n / secs,
      p99: percentile(latencies, 99),
      p50: percentile(latencies, 50),
      commits: logs.reduce((s, l) => s + l.stats.commits, 0),
      events: logs.reduce((s, l) => s + l.stats.events, 0),
    };
  } finally {
    await Promise.all(logs.map((l) => l.close()));
  }
}

/**
 * The baseline: plain `pg` INSERTs of the same rows (a table like waypoint.events: the
 * same columns, primary key and unique key; the same heartbeat row, key and data),
 * autocommit so each one waits for its own WAL flush (synchronous_commit=on, as the
 * team store's commits do), from the same 20 concurrent agents over 4 workspaces, each
 * agent on a connection of its own (the most a plain client can have in flight).
 */
async function plainInserts(url: string, ms: number, workload: Workload = 'beats'): Promise<{ perSec: number; p99: number }> {
  const setup = new Client({ connectionString: url });
  await setup.connect();
  // LIKE copies columns, NOT NULLs, the primary key and the unique key (not the foreign key: there is no workspace row to check).
  await setup.query('CREATE TABLE IF NOT EXISTS bench_plain (LIKE waypoint.events INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)');
  await setup.end();
  const clients = await Promise.all(
    Array.from({ length: AGENTS }, async () => {
      const c = new Client({ connectionString: url });
      await c.connect();
      return c;
    }),
  );
  const latencies: number[] = [];
  const runId = randomUUID().slice(0, 6);
  const seqs = Array.from({ length: WORKSPACES }, () => 0);
  try {
    const end = performance.now() + ms;
    let n = 0;
    const t0 = performance.now();
    await Promise.all(
      clients.map(async (c, a) => {
        const w = a % WORKSPACES;
        const ws = `${runId}-w${w}`;
        const task = `a${a}-${runId}`;
        for (let i = 0; performance.now() < end; i++) {
          const e = callOf(workload, task, i);
          const s = performance.now();
          await c.query('INSERT INTO bench_plain (workspace_id, seq, ts, type, v, task_id, corr, key, by, data, op, result, epoch) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)', [
            ws,
            ++seqs[w],
            Date.now(),
            e.type,
            1,
            e.taskId,
            e.corr,
            e.key,
            e.by,
            JSON.stringify(e.data),
            null,
            null,
            1,
          ]);
          latencies.push(performance.now() - s);
          n++;
        }
      }),
    );
    return { perSec: n / ((performance.now() - t0) / 1000), p99: percentile(latencies, 99) };
  } finally {
    await Promise.all(clients.map((c) => c.end()));
  }
}

async function tasksAll(url: string, total: number, runs: number): Promise<{ command: number; node: number; query: number; rows: number }> {
  const logs = await Promise.all(Array.from({ length: WORKSPACES }, (_, i) => PgEventLog.open({ url, workspace: { id: randomUUID(), machine: `many-${i}`, path: `/many/${i}` } })));
  try {
    const per = Math.ceil(total / WORKSPACES);
    await Promise.all(
      logs.map(async (log, w) => {
        for (let i = 0; i < per; i += 500) {
          const batch = Array.from({ length: Math.min(500, per - i) }, (_, k) => startedEvent(`m${w}-${i + k}`));
          await (await log.append(batch)).durable;
        }
      }),
    );
  } finally {
    await Promise.all(logs.map((l) => l.close()));
  }
  const reader = await PgProjectionReader.open(url);
  let rows = 0;
  const query: number[] = [];
  try {
    for (let r = 0; r < runs; r++) {
      const t0 = performance.now();
      rows = (await reader.listTasks({ allWorkspaces: true })).length;
      query.push(performance.now() - t0);
    }
  } finally {
    await reader.close();
  }
  // The command as a person runs it: a Node process, the bundle, connect, query, print.
  const cli = path.join(ROOT, 'dist', 'cli.js');
  const env = { ...process.env, WAYPOINT_STORE: url };
  const command: number[] = [];
  const node: number[] = [];
  for (let r = 0; r < runs; r++) {
    let t0 = performance.now();
    const out = spawnSync(process.execPath, [cli, 'tasks', '--all', '--json'], { env, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
    command.push(performance.now() - t0);
    if (out.status !== 0) throw new Error(`tasks --all exited ${out.status}: ${out.stderr}`);
    const listed = (JSON.parse(out.stdout) as unknown[]).length;
    if (listed !== rows) throw new Error(`tasks --all listed ${listed} tasks, the reader ${rows}`);
    t0 = performance.now();
    spawnSync(process.execPath, ['-e', '0']);
    node.push(performance.now() - t0);
  }
  return { command: median(command), node: median(node), query: median(query), rows };
}

export async function main(o: { quick?: boolean } = {}): Promise<void> {
  // `tasks --all` is measured as the built command.
  execFileSync(process.execPath, ['esbuild.js'], { cwd: ROOT, stdio: 'ignore' });
  const cluster = await PgCluster.create();
  try {
    const url = cluster.url();
    const ms = o.quick ? 1000 : 1500;
    const pairs = o.quick ? 2 : 8;
    // Not timed: both tables and both kinds of connection warm.
    await waypointAppends(url, 500);
    await plainInserts(url, 500);
    // The machine is shared and its speed drifts within seconds (other tenants, the
    // server's own background writes), so the two are measured as many short pairs, each
    // pair side by side, the order alternating (ABBA) so that neither always runs on the
    // warmer or the cooler side of a drift; the ratio is the median of the pairs' ratios.
    const measure = async (workload: Workload) => {
      const wp: Awaited<ReturnType<typeof waypointAppends>>[] = [];
      const base: Awaited<ReturnType<typeof plainInserts>>[] = [];
      const ratios: number[] = [];
      for (let r = 0; r < pairs; r++) {
        const first = r % 2 === 0 ? await waypointAppends(url, ms, workload) : null;
        const b = await plainInserts(url, ms, workload);
        const a = first ?? (await waypointAppends(url, ms, workload));
        wp.push(a);
        base.push(b);
        ratios.push(a.perSec / b.perSec);
      }
      return { wp, base, ratios, wpRate: median(wp.map((x) => x.perSec)), baseRate: median(base.map((x) => x.perSec)), ratio: median(ratios), p99: median(wp.map((x) => x.p99)) };
    };
    const beats = await measure('beats');
    const steps = await measure('steps');
    const { wp, base, ratios, wpRate, baseRate, ratio, p99 } = beats;
    const all = await tasksAll(url, 10_000, 5);
    const rows: Row[] = [
      {
        measure: `appends/s, ${AGENTS} agents over ${WORKSPACES} workspaces (durable)`,
        waypoint: wpRate.toFixed(0),
        baseline: `${baseRate.toFixed(0)} (plain INSERTs)`,
        ratio: `${ratio.toFixed(2)}×`,
        target: '≥ 0.80×',
        ok: ratio >= 0.8,
      },
      { measure: 'append latency p99', waypoint: fmtMs(p99), baseline: fmtMs(median(base.map((x) => x.p99))), ratio: '', target: '≤ 20 ms', ok: p99 <= 20 },
      { measure: 'append latency p50', waypoint: fmtMs(median(wp.map((x) => x.p50))), baseline: '', ratio: '', target: '', ok: null },
      {
        measure: '  appends/s that write a step row each (start, complete)',
        waypoint: steps.wpRate.toFixed(0),
        baseline: `${steps.baseRate.toFixed(0)} (plain INSERTs)`,
        ratio: `${steps.ratio.toFixed(2)}×`,
        target: '',
        ok: null,
      },
      { measure: `waypoint tasks --all --json over ${all.rows} tasks`, waypoint: fmtMs(all.command), baseline: `${fmtMs(all.node)} (node -e 0)`, ratio: '', target: '≤ 200 ms', ok: all.command <= 200 },
      { measure: '  of which the query (listTasks, in process)', waypoint: fmtMs(all.query), baseline: '', ratio: '', target: '', ok: null },
    ];
    printTable('PostgreSQL team store (throwaway cluster, synchronous_commit=on)', rows);
    const last = wp[wp.length - 1];
    const sorted = (xs: number[]) => [...xs].sort((x, y) => x - y).map((x) => x.toFixed(2)).join(' ');
    process.stdout.write(`\n(group commit: ${last.events} events in ${last.commits} commits in the last round; the ${pairs} pairs' ratios: ${sorted(ratios)}; with step rows: ${sorted(steps.ratios)})\n`);
  } finally {
    cluster.remove();
  }
}

if (require.main === module) {
  main({ quick: process.argv.includes('--quick') }).catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
