/**
 * The team store on a real PostgreSQL (a throwaway cluster, synchronous_commit=on):
 *
 * - appends per second from 20 concurrent agents over 4 workspaces (one PgEventLog
 *   writer per workspace, as one owner per workspace has it; every append awaited
 *   until durable), against plain `pg` INSERTs of the same rows from 20 connections
 *   with the same durability, in the same run. Target ≥ 0.8× the baseline.
 * - p99 of one append's latency (append to durable), target ≤ 20 ms on loopback.
 * - `tasks --all` (PgProjectionReader.listTasks over every workspace) with 10,000
 *   tasks in the store, target ≤ 200 ms.
 *
 * Opt-in (`npm run bench -- --only=postgres`): it needs PostgreSQL installed.
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { PgEventLog, PgProjectionReader } from '../../src/core/store/postgres';
import type { NewEventLike } from '../../src/core/store/eventLog';
import { PgCluster } from '../support/pgCluster';
import { fmtMs, median, percentile, printTable, type Row } from './util';

const AGENTS = 20;
const WORKSPACES = 4;

const startedEvent = (task: string): NewEventLike => ({
  type: 'task.started',
  taskId: task,
  corr: task,
  key: `${task}-start`,
  by: 'bench',
  op: 'task.start',
  result: { taskId: task },
  data: { goal: `goal of ${task}`, title: task, agent: 'bench', plan: [{ id: 'a', title: 'A' }], owner: { id: 'bench' }, leaseTtlMs: 60_000 },
});
const beat = (task: string, key: string): NewEventLike => ({ type: 'lease.heartbeat', taskId: task, corr: task, key, by: 'bench', data: {} });

async function waypointAppends(url: string, ms: number): Promise<{ perSec: number; p99: number; p50: number; commits: number; events: number }> {
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
          await (await log.append([beat(t, `${t}-${i}`)])).durable;
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

/** The baseline: the same rows, plain INSERTs (autocommit, so each one waits for its WAL flush) from 20 connections. */
async function plainInserts(url: string, ms: number): Promise<{ perSec: number; p99: number }> {
  const setup = new Client({ connectionString: url });
  await setup.connect();
  await setup.query('CREATE TABLE IF NOT EXISTS bench_plain (workspace_id text, seq bigserial, ts bigint, type text, task_id text, key text, by text, data json, PRIMARY KEY (workspace_id, seq), UNIQUE (workspace_id, key))');
  await setup.end();
  const clients = await Promise.all(
    Array.from({ length: AGENTS }, async () => {
      const c = new Client({ connectionString: url });
      await c.connect();
      return c;
    }),
  );
  const latencies: number[] = [];
  try {
    const end = performance.now() + ms;
    let n = 0;
    const t0 = performance.now();
    await Promise.all(
      clients.map(async (c, a) => {
        const ws = `w${a % WORKSPACES}`;
        for (let i = 0; performance.now() < end; i++) {
          const s = performance.now();
          await c.query('INSERT INTO bench_plain (workspace_id, ts, type, task_id, key, by, data) VALUES ($1, $2, $3, $4, $5, $6, $7)', [ws, Date.now(), 'lease.heartbeat', `a${a}`, `${a}-${i}-${randomUUID().slice(0, 4)}`, 'bench', '{}']);
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

async function tasksAll(url: string, total: number, runs: number): Promise<{ ms: number; rows: number }> {
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
  try {
    const times: number[] = [];
    let rows = 0;
    for (let r = 0; r < runs; r++) {
      const t0 = performance.now();
      rows = (await reader.listTasks({ allWorkspaces: true })).length;
      times.push(performance.now() - t0);
    }
    return { ms: median(times), rows };
  } finally {
    await reader.close();
  }
}

export async function main(o: { quick?: boolean } = {}): Promise<void> {
  const cluster = await PgCluster.create();
  try {
    const url = cluster.url();
    const ms = o.quick ? 1500 : 4000;
    const rounds = o.quick ? 1 : 3;
    const wp: Awaited<ReturnType<typeof waypointAppends>>[] = [];
    const base: Awaited<ReturnType<typeof plainInserts>>[] = [];
    // Interleaved rounds, medians: the machine is shared and noisy.
    for (let r = 0; r < rounds; r++) {
      wp.push(await waypointAppends(url, ms));
      base.push(await plainInserts(url, ms));
    }
    const wpRate = median(wp.map((x) => x.perSec));
    const baseRate = median(base.map((x) => x.perSec));
    const p99 = median(wp.map((x) => x.p99));
    const all = await tasksAll(url, 10_000, 5);
    const rows: Row[] = [
      {
        measure: `appends/s, ${AGENTS} agents over ${WORKSPACES} workspaces (durable)`,
        waypoint: wpRate.toFixed(0),
        baseline: `${baseRate.toFixed(0)} (plain INSERTs)`,
        ratio: `${(wpRate / baseRate).toFixed(2)}×`,
        target: '≥ 0.80×',
        ok: wpRate / baseRate >= 0.8,
      },
      { measure: 'append latency p99', waypoint: fmtMs(p99), baseline: fmtMs(median(base.map((x) => x.p99))), ratio: '', target: '≤ 20 ms', ok: p99 <= 20 },
      { measure: 'append latency p50', waypoint: fmtMs(median(wp.map((x) => x.p50))), baseline: '', ratio: '', target: '', ok: null },
      { measure: `tasks --all over ${all.rows} tasks`, waypoint: fmtMs(all.ms), baseline: '', ratio: '', target: '≤ 200 ms', ok: all.ms <= 200 },
    ];
    printTable('PostgreSQL team store (throwaway cluster, synchronous_commit=on)', rows);
    const last = wp[wp.length - 1];
    process.stdout.write(`\n(group commit: ${last.events} events in ${last.commits} commits in the last round)\n`);
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
