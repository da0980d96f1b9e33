import * as assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from 'pg';
import { Engine } from '../../src/core/engine/engine';
import { SqlProjection } from '../../src/core/store/projection';
import { MIGRATIONS } from '../../src/core/store/migrations';
import { Db } from '../../src/core/store/db';
import { loadSqlJs } from '../../src/core/store/sqlite';
import { PgProjectionReader } from '../../src/core/store/postgres';
import { ROW_TABLES, ROW_TABLE_NAMES, TASK_DETAIL_COLUMNS, compareRows } from '../../src/core/store/postgres/projectionRows';
import { rowToEvent, EVENT_COLUMNS } from '../../src/core/store/postgres/rows';
import { CLI, buildCli } from '../support/mcp';
import { PgCluster } from '../support/pgCluster';
import { tmpDir } from '../support/tmp';

/**
 * The team store's projection in PostgreSQL, row for row (projectionRows.ts): after a
 * workload that touches every projection table through a real engine, PostgreSQL's rows
 * equal a fresh fold of the workspace's events; the reader answers a task from them
 * alone; a workspace written before the rows existed gets them from its events; and
 * `verify` notices a row that differs.
 */

/** Drives one task through every kind of event a projection table folds; returns the task ids. */
async function workload(engine: Engine, dir: string): Promise<string[]> {
  const file = (name: string, text: string) => fs.writeFileSync(path.join(dir, name), text);
  file('a.txt', 'a0\n');
  const odd = 'NUL \u0000, lone \ud800, DLE \u0010, and \u202e';
  const { taskId } = await engine.startTask({ goal: `rows ${odd}`, title: 'Rows', plan: [{ id: 'one', title: 'One' }, { id: 'two', title: 'Two', dependsOn: ['one'] }], agent: 'claude-code', leaseTtlMs: 3_600_000, owner: { id: 'agent-1', pid: 42, host: 'box' } });
  await engine.startStep({ taskId, stepId: 'one', inputs: { q: odd } });
  file('a.txt', 'a1\n');
  await engine.beginSideEffect({ taskId, key: 'mail', kind: 'http', description: `send ${odd}`, args: { to: 'x' } });
  await engine.endSideEffect({ taskId, key: 'mail', ok: true, result: { id: 7, note: odd } });
  await engine.beginSideEffect({ taskId, key: 'deploy', kind: 'shell', description: 'deploy' });
  await engine.endSideEffect({ taskId, key: 'deploy', ok: false, error: 'refused' });
  await engine.completeStep({ taskId, stepId: 'one', outputs: { a: odd }, summary: 'one done' });
  await engine.startStep({ taskId, stepId: 'two' });
  await engine.failStep({ taskId, stepId: 'two', error: 'flaky', recoverable: true });
  await engine.startStep({ taskId, stepId: 'adhoc-1', title: 'Ad hoc', wait: true });
  await engine.completeStep({ taskId, stepId: 'adhoc-1' });
  await engine.recordTurn({ taskId, turn: 1, sessionId: 's-1', stepId: 'adhoc-1', prompt: `do ${odd}`, lastMessage: 'ok', tools: { edit: 1, shell: 2, todo: 0, other: 0 }, compactions: 0, startedAt: Date.now() - 1000 });
  await engine.recordTurn({ taskId, turn: 1, sessionId: 's-1', stepId: 'adhoc-1', prompt: 'again', lastMessage: 'ok2', tools: { edit: 2, shell: 2, todo: 0, other: 0 }, compactions: 1, startedAt: Date.now() - 900 });
  await engine.beginCommand({ taskId, commandId: 'cmd-1', commandLine: 'echo b > b.txt', cwd: dir, terminal: 'bash' });
  file('b.txt', 'b\n');
  await engine.endCommand({ taskId, commandId: 'cmd-1', exitCode: 0, dirty: [path.join(dir, 'b.txt')] });
  const cp = await engine.checkpoint({ taskId, label: 'before rollback' });
  file('a.txt', 'a2\n');
  const base = engine.task(taskId).baseCheckpointId!;
  await engine.rollback({ taskId, checkpointId: base });
  await engine.undoRollback({ taskId });
  await engine.requestReview({ taskId, summary: `review ${odd}` });

  const second = await engine.startTask({ goal: 'to delete', leaseTtlMs: 3_600_000 });
  await engine.startStep({ taskId: second.taskId, stepId: 's' });
  await engine.deleteTask({ taskId: second.taskId }).catch(async () => {
    await engine.abandonTask({ taskId: second.taskId });
    await engine.deleteTask({ taskId: second.taskId });
  });

  const fork = await engine.forkTask({ checkpointId: cp.checkpointId, goal: 'forked', leaseTtlMs: 3_600_000 });
  const forkId = (fork as { taskId: string }).taskId;
  await engine.beginSideEffect({ taskId: forkId, key: 'open', kind: 'db', description: 'left open' });
  await engine.interruptTask({ taskId: forkId, reason: 'test' });
  return [taskId, forkId];
}

function runCli(args: string[], cwd: string, env: Record<string, string>): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { cwd, env: { ...process.env, WAYPOINT_STORE: '', WAYPOINT_NO_DAEMON: '1', ...env } }, (e, out, err) => resolve({ code: e ? ((e as { code?: number }).code ?? 1) : 0, out, err }));
  });
}

async function foldOfWorkspace(pg: Client, workspaceId: string): Promise<SqlProjection> {
  const events = (await pg.query(`SELECT ${EVENT_COLUMNS} FROM waypoint.events WHERE workspace_id = $1 ORDER BY seq`, [workspaceId])).rows.map(rowToEvent);
  const fold = await SqlProjection.empty();
  fold.apply(events);
  return fold;
}

describe('team store projection rows (real cluster)', function () {
  this.timeout(120_000);
  let cluster: PgCluster;
  let pg: Client;
  const dirs: { cleanup: () => void }[] = [];
  const workspace = () => {
    const t = tmpDir('wp-pg-rows-');
    dirs.push(t);
    return t.dir;
  };
  before(async () => {
    buildCli();
    cluster = await PgCluster.create();
    pg = new Client({ connectionString: cluster.url() });
    await pg.connect();
  });
  after(async () => {
    await pg?.end().catch(() => undefined);
    for (const d of dirs) d.cleanup();
    cluster?.remove();
  });

  it('every embedded projection column has its PostgreSQL column (a new embedded column needs a team store migration)', async () => {
    const SQL = await loadSqlJs();
    const db = new Db(new SQL.Database());
    try {
      for (const m of MIGRATIONS) db.exec(m.up);
      const pgCols = async (t: string) => (await pg.query<{ c: string }>(`SELECT column_name AS c FROM information_schema.columns WHERE table_schema = 'waypoint' AND table_name = $1`, [t])).rows.map((r) => r.c);
      // A fresh store: the schema is created by the first open.
      const e = await Engine.open({ workspace: workspace(), teamStore: cluster.url() });
      await e.close();
      for (const t of ROW_TABLE_NAMES) {
        const embedded = db.all<{ name: string }>(`PRAGMA table_info(${t})`).map((c) => c.name);
        assert.deepEqual([...ROW_TABLES[t].columns].sort(), [...embedded].sort(), `${t}: ROW_TABLES lists the embedded columns`);
        assert.deepEqual((await pgCols(t)).filter((c) => c !== 'workspace_id' && c !== 'rid').sort(), [...embedded].sort(), `${t}: PostgreSQL has the embedded columns`);
      }
      const taskCols = db.all<{ name: string }>('PRAGMA table_info(tasks)').map((c) => c.name);
      const have = new Set(await pgCols('tasks'));
      for (const c of taskCols) assert.ok(have.has(c), `waypoint.tasks has ${c}`);
      for (const c of TASK_DETAIL_COLUMNS) assert.ok(taskCols.includes(c), `${c} is an embedded tasks column`);
    } finally {
      db.close();
    }
  });

  it('after a workload touching every table, the rows equal a fresh fold of the events; the reader answers from them; verify agrees', async () => {
    const dir = workspace();
    const engine = await Engine.open({ workspace: dir, teamStore: cluster.url() });
    let ids: string[];
    let wsId: string;
    try {
      ids = await workload(engine, dir);
      const v = await engine.verify();
      assert.equal(v.ok, true, JSON.stringify(v.differences));
      wsId = JSON.parse(fs.readFileSync(path.join(dir, '.waypoint', 'workspace-id.json'), 'utf8')).id;
      const counts: Record<string, number> = {};
      for (const t of ['steps', 'side_effects', 'checkpoints', 'rollbacks', 'turns', 'terminal_commands']) counts[t] = Number((await pg.query(`SELECT count(*) AS n FROM waypoint.${t} WHERE workspace_id = $1`, [wsId])).rows[0].n);
      for (const [t, n] of Object.entries(counts)) assert.ok(n > 0, `${t} has rows (${JSON.stringify(counts)})`);
      const reader = await PgProjectionReader.open(cluster.url());
      try {
        for (const id of ids) assert.deepEqual(await reader.getTask(id), engine.task(id), `task ${id} read from the rows`);
        assert.equal((await reader.getTask(ids[1]))?.hold?.cause, 'inconsistent_state', 'the side effect left in doubt holds the interrupted fork');
      } finally {
        await reader.close();
      }
    } finally {
      await engine.close();
    }
    const fold = await foldOfWorkspace(pg, wsId);
    try {
      assert.deepEqual(await compareRows(pg, wsId, fold.db), []);
    } finally {
      fold.close();
    }
  });

  it('`waypoint show --workspace ID` on another machine prints the task from the rows exactly as `show` does where it runs', async () => {
    const dir = workspace();
    const elsewhere = workspace();
    const engine = await Engine.open({ workspace: dir, teamStore: cluster.url() });
    let ids: string[];
    try {
      ids = await workload(engine, dir);
    } finally {
      await engine.close();
    }
    const wsId = JSON.parse(fs.readFileSync(path.join(dir, '.waypoint', 'workspace-id.json'), 'utf8')).id as string;
    for (const id of ids) {
      const here = await runCli(['show', '--task', id, '--json'], dir, { WAYPOINT_STORE: cluster.url() });
      assert.equal(here.code, 0, here.err);
      const there = await runCli(['show', '--task', id, '--workspace', wsId, '--store', cluster.url(), '--json'], elsewhere, { WAYPOINT_MACHINE: 'reviewer-desk' });
      assert.equal(there.code, 0, there.err);
      assert.deepEqual(JSON.parse(there.out), JSON.parse(here.out));
      const hereText = await runCli(['show', '--task', id], dir, { WAYPOINT_STORE: cluster.url() });
      const thereText = await runCli(['show', '--task', id, '--workspace', wsId, '--store', cluster.url()], elsewhere, { WAYPOINT_MACHINE: 'reviewer-desk' });
      // Ages ("9s ago") move on between the two runs.
      const ages = (t: string) => t.replace(/\b\d+(s|m|h|d) ago\b/g, 'N ago');
      assert.equal(ages(thereText.out), ages(hereText.out));
    }
    const none = await runCli(['show', '--task', 't_nope', '--workspace', wsId, '--store', cluster.url()], elsewhere, {});
    assert.notEqual(none.code, 0);
    assert.match(none.err, /No task 't_nope' in workspace/);
  });

  it('a row changed behind the writer is reported by verify', async () => {
    const dir = workspace();
    const engine = await Engine.open({ workspace: dir, teamStore: cluster.url() });
    try {
      const { taskId } = await engine.startTask({ goal: 'g', plan: [{ id: 'a', title: 'A' }] });
      await engine.startStep({ taskId, stepId: 'a' });
      assert.equal((await engine.verify()).ok, true);
      await pg.query(`UPDATE waypoint.steps SET status = 'completed' WHERE task_id = $1`, [taskId]);
      const v = await engine.verify();
      assert.equal(v.ok, false);
      assert.deepEqual(v.differences.map((d) => d.table), ['store: steps']);
    } finally {
      await engine.close();
    }
  });

  it('a workspace written before the rows existed gets them from its events: from the first reader that needs them, and from its writer when it opens', async () => {
    const dir = workspace();
    let engine = await Engine.open({ workspace: dir, teamStore: cluster.url() });
    let ids: string[];
    let expected: unknown[];
    try {
      ids = await workload(engine, dir);
      expected = ids.map((id) => engine.task(id));
    } finally {
      await engine.close();
    }
    const wsId = JSON.parse(fs.readFileSync(path.join(dir, '.waypoint', 'workspace-id.json'), 'utf8')).id as string;
    // As a schema v5 store left it: no rows, no task details, rows_seq NULL.
    const forget = async () => {
      for (const t of ROW_TABLE_NAMES) await pg.query(`DELETE FROM waypoint.${t} WHERE workspace_id = $1`, [wsId]);
      await pg.query(`UPDATE waypoint.tasks SET ${[...TASK_DETAIL_COLUMNS, 'lease_pid', 'lease_host'].map((c) => `${c} = NULL`).join(', ')} WHERE workspace_id = $1`, [wsId]);
      await pg.query('UPDATE waypoint.workspaces SET rows_seq = NULL WHERE id = $1', [wsId]);
    };
    await forget();
    const reader = await PgProjectionReader.open(cluster.url());
    try {
      assert.deepEqual(await Promise.all(ids.map((id) => reader.getTask(id))), expected);
    } finally {
      await reader.close();
    }
    const seqs = (await pg.query('SELECT rows_seq, head_seq FROM waypoint.workspaces WHERE id = $1', [wsId])).rows[0];
    assert.equal(seqs.rows_seq, seqs.head_seq);
    let fold = await foldOfWorkspace(pg, wsId);
    assert.deepEqual(await compareRows(pg, wsId, fold.db), []);
    fold.close();

    await forget();
    engine = await Engine.open({ workspace: dir, teamStore: cluster.url() });
    try {
      assert.equal((await engine.verify()).ok, true);
      await engine.abandonTask({ taskId: ids[0] });
    } finally {
      await engine.close();
    }
    fold = await foldOfWorkspace(pg, wsId);
    try {
      assert.deepEqual(await compareRows(pg, wsId, fold.db), []);
      const after = (await pg.query('SELECT rows_seq, head_seq FROM waypoint.workspaces WHERE id = $1', [wsId])).rows[0];
      assert.equal(after.rows_seq, after.head_seq);
    } finally {
      fold.close();
    }
  });
});
