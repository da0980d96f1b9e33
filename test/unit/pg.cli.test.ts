import * as assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { main } from '../../src/cli/main';
import { PgCluster } from '../support/pgCluster';
import { tmpDir } from '../support/tmp';

/**
 * Issue 16's acceptance, as tests against a real PostgreSQL: the CLI records into the
 * team store through WAYPOINT_STORE / --store, `tasks --all --json` lists every
 * workspace's tasks with workspace and machine, and a burst of `task start` calls
 * while the server is stopped `-m immediate` and restarted loses none it answered.
 */

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

async function cli(argv: string[], env: Record<string, string | undefined> = {}): Promise<{ code: number; out: string; err: string }> {
  const saved: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(env)) {
    saved[k] = process.env[k];
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  const out = sink();
  const err = sink();
  try {
    const code = await main(argv, { stdout: out.stream as never, stderr: err.stream as never });
    return { code, out: out.text(), err: err.text() };
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

describe('CLI on the PostgreSQL team store (real cluster)', function () {
  this.timeout(120_000);
  let cluster: PgCluster;
  const dirs: { cleanup: () => void }[] = [];
  before(async () => {
    cluster = await PgCluster.create();
  });
  after(() => {
    for (const d of dirs) d.cleanup();
    cluster?.remove();
  });
  const workspace = () => {
    const t = tmpDir('wp-pg-cli-');
    dirs.push(t);
    return t.dir;
  };

  it('two workspaces on two machines record into one database; tasks --all --json lists both with workspace and machine', async () => {
    const url = cluster.url();
    const [w1, w2] = [workspace(), workspace()];
    const a = await cli(['task', 'start', '--workspace', w1, '--goal', 'fix the parser', '--json'], { WAYPOINT_STORE: url, WAYPOINT_MACHINE: 'laptop' });
    assert.equal(a.code, 0, a.err);
    const b = await cli(['task', 'start', '--workspace', w2, '--goal', 'write the docs', '--json', '--store', url], { WAYPOINT_STORE: undefined, WAYPOINT_MACHINE: 'ci-runner' });
    assert.equal(b.code, 0, b.err);
    const idA = JSON.parse(a.out).taskId as string;
    const idB = JSON.parse(b.out).taskId as string;
    const all = await cli(['tasks', '--all', '--json', '--workspace', w1], { WAYPOINT_STORE: url });
    assert.equal(all.code, 0, all.err);
    const rows = JSON.parse(all.out) as { id: string; machine: string; workspace: string; state: string }[];
    const pick = (id: string) => rows.find((r) => r.id === id);
    assert.deepEqual([pick(idA)?.machine, pick(idA)?.workspace, pick(idA)?.state], ['laptop', w1, 'running']);
    assert.deepEqual([pick(idB)?.machine, pick(idB)?.workspace], ['ci-runner', w2]);
    // The human table names them too.
    const human = await cli(['tasks', '--all', '--workspace', w1], { WAYPOINT_STORE: url });
    assert.match(human.out, /MACHINE\s+WORKSPACE/);
    assert.match(human.out, /ci-runner/);
    // A plain `tasks` is still this workspace's own.
    const mine = JSON.parse((await cli(['tasks', '--json', '--workspace', w2], { WAYPOINT_STORE: url })).out) as { id: string }[];
    assert.deepEqual(
      mine.map((t) => t.id),
      [idB],
    );
    // Nothing about the store (its URL, its password) is written into the workspace.
    const { spawnSync } = await import('node:child_process');
    const grep = spawnSync('grep', ['-rl', cluster.password, w1, w2], { encoding: 'utf8' });
    assert.equal(grep.status, 1, `grep found the password in: ${grep.stdout}`);
  }).timeout(120_000);

  it('a burst of task start during pg_ctl stop -m immediate and restart: every answered id is present, verify is ok', async () => {
    const url = cluster.url();
    const w = workspace();
    const env = { WAYPOINT_STORE: url, WAYPOINT_MACHINE: 'burst' };
    const answered: string[] = [];
    const failures: string[] = [];
    let crashed = false;
    const crash = (async () => {
      await new Promise((r) => setTimeout(r, 400));
      await cluster.stopAsync('immediate');
      crashed = true;
      await new Promise((r) => setTimeout(r, 500));
      await cluster.startAsync();
    })();
    // Calls before, during and after the crash: until the restarted server has answered a few.
    const end = Date.now() + 60_000;
    let i = 0;
    let afterRestart = 0;
    let restarted = false;
    void crash.then(() => (restarted = true));
    while (Date.now() < end && (!crashed || !restarted || afterRestart < 5)) {
      if (restarted && crashed) afterRestart++;
      const r = await cli(['task', 'start', '--workspace', w, '--goal', `burst ${i++}`, '--json'], env);
      if (r.code === 0) answered.push(JSON.parse(r.out).taskId);
      else {
        failures.push(r.err);
        // A refusal is a clear one, and never shows the password.
        assert.match(r.err, /team store|store_unavailable|Cannot/i);
        assert.ok(!r.err.includes(cluster.password), r.err);
      }
    }
    await crash;
    assert.ok(answered.length > 3, `answered ${answered.length}, failures: ${failures.join(' | ')}`);
    const listed = JSON.parse((await cli(['tasks', '--json', '--workspace', w], env)).out) as { id: string }[];
    const have = new Set(listed.map((t) => t.id));
    assert.deepEqual(
      answered.filter((id) => !have.has(id)),
      [],
      'every answered task id is in the store',
    );
    const v = await cli(['verify', '--json', '--workspace', w], env);
    assert.equal(v.code, 0, v.err + v.out);
    assert.equal(JSON.parse(v.out).ok, true);
  });

  it('a store value that is not a postgresql URL is refused clearly, and no WAYPOINT_STORE is the embedded store', async () => {
    const w = workspace();
    const bad = await cli(['tasks', '--workspace', w, '--store', 'mysql://x'], {});
    assert.equal(bad.code, 1);
    assert.match(bad.err, /--store must be a postgresql:\/\//);
    const local = await cli(['task', 'start', '--workspace', w, '--goal', 'local', '--json'], { WAYPOINT_STORE: undefined });
    assert.equal(local.code, 0, local.err);
    const all = JSON.parse((await cli(['tasks', '--all', '--json', '--workspace', w], { WAYPOINT_STORE: undefined })).out) as { workspace: string }[];
    assert.deepEqual(
      all.map((r) => r.workspace),
      [w],
    );
  });
});
