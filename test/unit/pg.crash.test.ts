import * as assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import * as path from 'node:path';
import { Client } from 'pg';
import { PgEventLog } from '../../src/core/store/postgres';
import { dumpProjections } from '../../src/core/store/projections';
import { PgCluster } from '../support/pgCluster';

/**
 * The crash matrix's PostgreSQL phase: appenders (separate processes) are SIGKILLed and
 * the server is stopped with `pg_ctl stop -m immediate` in the middle of their bursts,
 * then restarted. Every event an appender was told is durable must be there, each
 * workspace's seqs contiguous, and the task summaries equal to a rebuild from the events.
 */

const CHILD = path.join(__dirname, '..', 'support', 'pgAppendChild.ts');
const ROUNDS = Number(process.env.WAYPOINT_PG_CRASH_ROUNDS ?? 1);

interface Appender {
  proc: ChildProcess;
  acked: string[];
  workspace: string;
}

function startAppender(url: string, workspace: string, task: string): Appender {
  const proc = spawn(process.execPath, ['--import', 'tsx', CHILD, url, workspace, task], { stdio: ['ignore', 'pipe', 'pipe'] });
  const a: Appender = { proc, acked: [], workspace };
  let buf = '';
  proc.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    const lines = buf.split('\n');
    buf = lines.pop()!;
    a.acked.push(...lines.filter(Boolean));
  });
  proc.stderr!.on('data', () => undefined);
  return a;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const until = async (cond: () => boolean, ms: number, what: string) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
};
const killed = (p: ChildProcess) => new Promise<void>((r) => (p.exitCode !== null || p.signalCode !== null ? r() : p.once('exit', () => r())));

describe('PostgreSQL crash phase (real cluster, SIGKILL and pg_ctl stop -m immediate)', function () {
  this.timeout(180_000);
  let cluster: PgCluster;
  before(async () => {
    cluster = await PgCluster.create();
  });
  after(() => cluster?.remove());

  for (let round = 0; round < ROUNDS; round++) {
    it(`round ${round + 1}: 0 acknowledged events lost, summaries equal a rebuild`, async () => {
      const url = cluster.url();
      const workspaces = [randomUUID(), randomUUID()];
      const appenders: Appender[] = [];
      // Two appenders per workspace, one after the other (one writer per workspace at a time, as the owner lock has it).
      for (const w of workspaces) appenders.push(startAppender(url, w, `t-${w.slice(0, 6)}-a`));
      try {
        await until(() => appenders.every((a) => a.acked.length > 20), 60_000, 'appenders to get going');
        // A writer SIGKILLed mid-burst; its successor on the same workspace takes the next epoch.
        appenders[0].proc.kill('SIGKILL');
        await killed(appenders[0].proc);
        appenders.push(startAppender(url, workspaces[0], `t-${workspaces[0].slice(0, 6)}-b`));
        await until(() => appenders[2].acked.length > 10, 60_000, 'the successor');
        // The server crashes under the survivors' bursts, and one of them is killed while it waits.
        cluster.stop('immediate');
        appenders[1].proc.kill('SIGKILL');
        await sleep(300 + Math.random() * 400);
        await cluster.start();
        // The survivor rides out the restart: it goes on acknowledging.
        const before = appenders[2].acked.length;
        await until(() => appenders[2].acked.length > before + 10, 60_000, 'the survivor to continue after the restart');
      } finally {
        for (const a of appenders) a.proc.kill('SIGKILL');
        await Promise.all(appenders.map((a) => killed(a.proc)));
      }
      const c = new Client({ connectionString: url });
      await c.connect();
      try {
        for (const w of workspaces) {
          const rows = (await c.query<{ seq: number; key: string }>('SELECT seq::int AS seq, key FROM waypoint.events WHERE workspace_id = $1 ORDER BY seq', [w])).rows;
          rows.forEach((r, i) => assert.equal(r.seq, i + 1, `workspace ${w}: contiguous seqs`));
          const head = (await c.query<{ h: number }>('SELECT head_seq::int AS h FROM waypoint.workspaces WHERE id = $1', [w])).rows[0].h;
          assert.equal(head, rows.length, 'the head is the last event');
          const have = new Set(rows.map((r) => r.key));
          assert.equal(have.size, rows.length, 'no duplicates');
          const acked = appenders.filter((a) => a.workspace === w).flatMap((a) => a.acked);
          const lost = acked.filter((k) => !have.has(k));
          assert.deepEqual(lost, [], `acknowledged events lost in ${w}`);
          // Projections equal a rebuild: a fresh writer folds the whole log; the summary table must match its tasks.
          const log = await PgEventLog.open({ url, workspace: { id: w, machine: 'check', path: '/check' } });
          try {
            const folded = log.fold.all<Record<string, unknown>>('SELECT id, title, state, attempt, created_at, updated_at FROM tasks ORDER BY id');
            const summary = (await c.query('SELECT id, title, state, attempt, created_at::float8 AS created_at, updated_at::float8 AS updated_at FROM waypoint.tasks WHERE workspace_id = $1 ORDER BY id', [w])).rows;
            assert.deepEqual(summary, folded);
            assert.ok(Object.values(dumpProjections(log.fold)).some((t) => t.length > 0));
          } finally {
            await log.close();
          }
        }
      } finally {
        await c.end();
      }
    });
  }
});
