import * as assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { Client } from 'pg';
import { main } from '../../src/cli/main';
import { Engine } from '../../src/core/engine/engine';
import { PgEventLog, PgProjectionReader } from '../../src/core/store/postgres';
import { fromPgText, toPgText } from '../../src/core/store/postgres/pgText';
import { SqlProjection } from '../../src/core/store/projection';
import type { NewEventLike, WorkspaceIdentity } from '../../src/core/store/eventLog';
import { PgCluster } from '../support/pgCluster';
import { tmpDir } from '../support/tmp';

/**
 * Strings PostgreSQL cannot hold as they are — NUL (no `text` may contain it, no
 * `jsonb` may hold \u0000), lone surrogates (no UTF-8 form: Node would send U+FFFD) —
 * and other hostile ones (the escape character itself, text that looks like an escape,
 * quotes, SQL, controls, very long strings) round-trip exactly through the team store:
 * append → read → the fold a reopened writer rebuilds → the task summaries → a reader's
 * replay → `tasks --all --json`, as the embedded store keeps them.
 *
 * One limit is the projection's, on both backends: sql.js stores a lone surrogate in
 * a table as the three bytes of its (invalid) UTF-8 form and reads it back as three
 * U+FFFD. The events themselves keep it exactly; the projection shows what the
 * embedded store's shows, and the test holds the team store to exactly that.
 */

const LONE = ['lone high \ud800 here', 'lone low \udc00 here', 'reversed \udc00\ud800 pair', 'ends high \udbff'];
const HOSTILE = [
  'a\u0000b',
  '\u0000',
  '\u0000\u0000\u0000',
  '\u0010',
  'fake escape \u00100000 and \u0010d800 and \u00100010',
  'literal \\u0000 backslash-u',
  'emoji 😀 pair, combining e\u0301, RTL \u202e, BOM \ufeff, \uffff',
  `quotes " ' \\ and '); DROP TABLE waypoint.events; --`,
  'controls \u0001\u0007\b\t\n\r\u001b\u007f',
];
/** Exact everywhere, the projection included. */
const LONG = 'x'.repeat(9_000) + HOSTILE.join('|');
/** Exact in the events; in the projection as the embedded store has it (see above). */
const TITLE = HOSTILE[0] + LONE.join('');
/** Hostile strings (lone surrogates too) as object keys and values, and one long value (~200 KB, under the 256 KB JSON bound): JSON text in the projection, so exact there too. */
const hostileJson = (): Record<string, unknown> => ({
  ...Object.fromEntries([...HOSTILE, ...LONE].map((s, i) => [`${s}#${i}`, s])),
  list: [...HOSTILE, ...LONE],
  long: ('\u0000\ud800y'.repeat(10) + 'z'.repeat(1000)).repeat(190),
});

function sink(): { stream: Writable; text: () => string } {
  let buf = '';
  const stream = new Writable({
    write(chunk, _enc, cb) {
      buf += chunk.toString();
      cb();
    },
  });
  return { stream, text: () => buf };
}

describe('PostgreSQL team store: strings it cannot hold as they are (real cluster)', function () {
  this.timeout(120_000);
  let cluster: PgCluster;
  let url: string;
  const dirs: { cleanup: () => void }[] = [];
  before(async () => {
    cluster = await PgCluster.create();
    url = cluster.url();
  });
  after(() => {
    for (const d of dirs) d.cleanup();
    cluster?.remove();
  });

  it('the text codec is verbatim for ordinary strings, exact for every other, and injective', () => {
    for (const s of ['', 'plain', 'ünïcødé 😀', 'a/b:c-d_e.f', 'x'.repeat(10_000)]) assert.equal(toPgText(s), s);
    for (const s of [...HOSTILE, ...LONE]) {
      const enc = toPgText(s);
      assert.ok(!/\u0000/.test(enc), JSON.stringify(enc));
      assert.ok(enc === Buffer.from(enc, 'utf8').toString('utf8'), `${JSON.stringify(enc)} has no exact UTF-8 form`);
      assert.equal(fromPgText(enc), s);
    }
    // Random code units (every surrogate and control included): exact round trip, distinct stay distinct.
    const seen = new Map<string, string>();
    for (let i = 0; i < 3000; i++) {
      const s = String.fromCharCode(...Array.from({ length: 1 + (i % 12) }, (_, k) => ((i * 7919 + k * 104729) * 2654435761) % 0x10000 >>> 0));
      const enc = toPgText(s);
      assert.equal(fromPgText(enc), s);
      assert.ok(enc === Buffer.from(enc, 'utf8').toString('utf8'));
      const other = seen.get(enc);
      assert.ok(other === undefined || other === s, 'two strings encoded alike');
      seen.set(enc, s);
    }
    assert.equal(toPgText(null), null);
    assert.equal(fromPgText(null), null);
  });

  it('events whose goal, title, key, step output and side-effect arguments hold NUL and lone surrogates: append → read → reopen → summaries → replay', async () => {
    const ws: WorkspaceIdentity = { id: randomUUID(), machine: 'm\u0000\ud800', path: `/work/${randomUUID().slice(0, 6)}/\u0010 dir` };
    const task = 'hostile-1';
    const batch: NewEventLike[] = [
      {
        type: 'task.started',
        taskId: task,
        corr: 'corr\u0000\udfff',
        key: 'key\u0000\ud800\u0010',
        by: 'by\u0000',
        op: 'task.start',
        result: { taskId: task, note: HOSTILE },
        data: { goal: LONG, title: TITLE, agent: 'agent\u0000', plan: [{ id: 'a', title: LONE[1] }], owner: { id: 'o\u0000' }, leaseTtlMs: 60_000 },
      },
      { type: 'step.started', taskId: task, corr: task, key: 'k-step', by: 'test', data: { stepId: 'a', title: LONE[2], attempt: 1, taskAttempt: 1, inputs: hostileJson(), adhoc: false, dependsOn: [] } },
      { type: 'step.completed', taskId: task, corr: task, key: 'k-done', by: 'test', data: { stepId: 'a', outputs: hostileJson(), summary: LONG } },
    ];
    const writer = await PgEventLog.open({ url, workspace: ws, retryMs: 5000 });
    let appended;
    try {
      appended = (await writer.append(batch)).events;
      await (await writer.append([])).durable;
      await writer.waitDurable(appended[appended.length - 1].seq);
      assert.deepEqual(await writer.read(), appended, 'read back exactly as appended');
      assert.deepEqual(await writer.read({ taskId: task }), appended);
    } finally {
      await writer.close();
    }
    // Nothing was mangled on the wire: the key column holds the (escaped) lone surrogate, not U+FFFD.
    const c = new Client({ connectionString: url });
    await c.connect();
    try {
      const raw = await c.query<{ key: string }>('SELECT key FROM waypoint.events WHERE workspace_id = $1 ORDER BY seq LIMIT 1', [ws.id]);
      assert.equal(raw.rows[0].key, 'key\u00100000\u0010d800\u00100010');
    } finally {
      await c.end();
    }
    // What the embedded projection makes of the title (sql.js: a lone surrogate reads back as U+FFFD ×3).
    const projected = await (async () => {
      const p = await SqlProjection.empty();
      p.apply(appended);
      return p.db.get<{ title: string }>('SELECT title FROM tasks WHERE id = ?', [task])!.title;
    })();
    // A new writer folds the same history from the database alone.
    const again = await PgEventLog.open({ url, workspace: ws, retryMs: 5000 });
    try {
      assert.deepEqual(await again.read(), appended);
      const folded = again.fold.get<{ goal: string; title: string; agent: string }>('SELECT goal, title, agent FROM tasks WHERE id = ?', [task]);
      assert.deepEqual(folded, { goal: LONG, title: projected, agent: 'agent\u0000' });
      const step = again.fold.get<{ outputs: string }>('SELECT outputs FROM steps WHERE task_id = ? AND id = ?', [task, 'a']);
      assert.deepEqual(JSON.parse(step!.outputs), hostileJson());
    } finally {
      await again.close();
    }
    const reader = await PgProjectionReader.open(url);
    try {
      const row = (await reader.listTasks({ allWorkspaces: true })).find((l) => l.workspace.id === ws.id);
      assert.deepEqual(row?.workspace, ws);
      assert.equal(row?.task.goal, LONG);
      assert.equal(row?.task.title, projected);
      assert.equal(row?.task.agent, 'agent\u0000');
      assert.deepEqual(await reader.taskEvents(task), appended);
      const t = await reader.getTask(task);
      assert.equal(t?.goal, LONG);
      assert.equal(t?.lease?.owner, 'o\u0000');
    } finally {
      await reader.close();
    }
  });

  it('through the engine and the CLI: the team store keeps what the embedded store keeps, and tasks --all --json shows it exactly', async () => {
    const run = async (teamStore: string | undefined) => {
      const t = tmpDir('wp-pg-hostile-');
      dirs.push(t);
      const e = await Engine.open({ workspace: t.dir, teamStore, store: { lock: { waitMs: 200 } } });
      try {
        const { taskId } = await e.startTask({ goal: LONG, title: TITLE, agent: 'agent\u0000', plan: [{ id: 's1', title: LONE[0] }] });
        await e.startStep({ taskId, stepId: 's1', inputs: hostileJson() });
        await e.beginSideEffect({ taskId, stepId: 's1', key: 'effect-1', kind: 'shell\u0000', description: [...HOSTILE, ...LONE].join(' '), args: hostileJson() });
        await e.endSideEffect({ taskId, key: 'effect-1', ok: true, result: { out: HOSTILE } });
        await e.completeStep({ taskId, stepId: 's1', outputs: hostileJson(), summary: LONE[3] });
        const detail = e.taskDetail(taskId);
        return { dir: t.dir, taskId, detail };
      } finally {
        await e.close();
      }
    };
    const strip = (d: Awaited<ReturnType<typeof run>>['detail']) => ({
      goal: d.task.goal,
      title: d.task.title,
      agent: d.task.agent,
      steps: d.steps.map((s) => [s.title, s.inputs, s.outputs, s.summary]),
      effects: d.sideEffects.map((s) => [s.kind, s.description, s.args, s.result]),
    });
    const embedded = await run(undefined);
    const team = await run(url);
    assert.deepEqual(strip(team.detail), strip(embedded.detail));
    assert.equal(team.detail.task.goal, LONG);
    assert.equal(team.detail.task.agent, 'agent\u0000');
    assert.deepEqual(team.detail.steps[0].outputs, hostileJson());
    assert.deepEqual(team.detail.sideEffects[0].args, hostileJson());

    // Reopened from the database alone (another process would do the same), the task is unchanged.
    const e = await Engine.open({ workspace: team.dir, teamStore: url, store: { lock: { waitMs: 200 } } });
    try {
      assert.deepEqual(strip(e.taskDetail(team.taskId)), strip(team.detail));
    } finally {
      await e.close();
    }

    const out = sink();
    const err = sink();
    const saved = process.env.WAYPOINT_STORE;
    process.env.WAYPOINT_STORE = url;
    let code: number;
    try {
      code = await main(['tasks', '--all', '--json', '--workspace', team.dir], { stdout: out.stream as never, stderr: err.stream as never });
    } finally {
      if (saved === undefined) delete process.env.WAYPOINT_STORE;
      else process.env.WAYPOINT_STORE = saved;
    }
    assert.equal(code, 0, err.text());
    const rows = JSON.parse(out.text()) as { id: string; goal: string; title: string; agent: string; workspace: string }[];
    const mine = rows.find((r) => r.id === team.taskId);
    assert.deepEqual([mine?.goal, mine?.title, mine?.agent, mine?.workspace], [LONG, team.detail.task.title, 'agent\u0000', team.dir]);
  });
});
