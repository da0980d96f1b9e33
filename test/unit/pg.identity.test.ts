import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { Writable } from 'node:stream';
import { main } from '../../src/cli/main';
import { PgCluster } from '../support/pgCluster';
import { tmpDir } from '../support/tmp';

/**
 * A folder copied with its `.waypoint` (cp -a) is a workspace of its own in the team store
 * too: its own workspace id, its own tasks and checkpoints; `verify --repair` in one never
 * marks the other's checkpoints, and the other's rollback still works. Real PostgreSQL.
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

describe('team store: a copied workspace gets its own identity (real cluster)', function () {
  this.timeout(180_000);
  let cluster: PgCluster;
  let root: ReturnType<typeof tmpDir>;
  before(async () => {
    cluster = await PgCluster.create();
  });
  after(() => cluster?.remove());
  beforeEach(() => (root = tmpDir('wp-pg-identity-')));
  afterEach(() => root.cleanup());

  async function cli(ws: string, argv: string[]): Promise<{ code: number; out: string; err: string }> {
    const saved = process.env.WAYPOINT_STORE;
    process.env.WAYPOINT_STORE = cluster.url();
    const out = sink();
    const err = sink();
    try {
      const code = await main([...argv, '--workspace', ws], { stdout: out.stream as never, stderr: err.stream as never });
      return { code, out: out.text(), err: err.text() };
    } finally {
      if (saved === undefined) delete process.env.WAYPOINT_STORE;
      else process.env.WAYPOINT_STORE = saved;
    }
  }
  async function ok<T>(ws: string, argv: string[]): Promise<T> {
    const r = await cli(ws, [...argv, '--json']);
    assert.equal(r.code, 0, `${argv.join(' ')} in ${path.basename(ws)}: ${r.err}${r.out}`);
    return JSON.parse(r.out) as T;
  }

  it('A and B are two workspaces; verify --repair in A leaves B’s checkpoints healthy and B’s rollback works', async () => {
    const A = path.join(root.dir, 'A');
    const B = path.join(root.dir, 'B');
    fs.mkdirSync(A);
    fs.writeFileSync(path.join(A, 'f.txt'), 'one\n');
    const tA = await ok<{ taskId: string }>(A, ['task', 'start', '--goal', 'in A']);
    fs.writeFileSync(path.join(A, 'f.txt'), 'two\n');
    await ok(A, ['checkpoint', '--task', tA.taskId]);
    execFileSync('cp', ['-a', A, B]);

    // B works on its own: content only B's folder holds.
    fs.writeFileSync(path.join(B, 'f.txt'), 'only in B\n');
    const tB = await ok<{ taskId: string; baseCheckpointId: string }>(B, ['task', 'start', '--goal', 'in B']);
    fs.writeFileSync(path.join(B, 'g.txt'), 'B again\n');
    await ok(B, ['checkpoint', '--task', tB.taskId]);

    const idOf = (ws: string) => (JSON.parse(fs.readFileSync(path.join(ws, '.waypoint', 'workspace-id.json'), 'utf8')) as { id: string }).id;
    assert.notEqual(idOf(A), idOf(B), 'the copy has a workspace id of its own');

    const listedInA = (await ok<{ id: string }[]>(A, ['tasks'])).map((t) => t.id);
    assert.ok(!listedInA.includes(tB.taskId), 'A does not list B’s task');
    assert.ok(listedInA.includes(tA.taskId));
    // A's next task starts (its base does not build on B's checkpoints).
    await ok(A, ['task', 'start', '--goal', 'again in A']);
    const verify = await ok<{ ok: boolean; objects: { damaged: unknown[] } }>(A, ['verify']);
    assert.deepEqual(verify.objects.damaged, []);
    const repair = await ok<{ objects: { markedNow: string[] } }>(A, ['verify', '--repair']);
    assert.deepEqual(repair.objects.markedNow, []);

    const rb = await ok<{ filesWritten: number }>(B, ['rollback', '--task', tB.taskId, '--to', tB.baseCheckpointId, '--yes']);
    assert.ok(rb.filesWritten + (rb as unknown as { filesRemoved: number }).filesRemoved >= 1);
    assert.equal(fs.existsSync(path.join(B, 'g.txt')), false, 'B rolled back');
    assert.equal(fs.readFileSync(path.join(B, 'f.txt'), 'utf8'), 'only in B\n');
    assert.equal(fs.readFileSync(path.join(A, 'f.txt'), 'utf8'), 'two\n', 'A untouched');
    const bVerify = await ok<{ objects: { damaged: unknown[] } }>(B, ['verify']);
    assert.deepEqual(bVerify.objects.damaged, []);
  });

  it('a copy made before folders had identities (no identity record on either side) is found through the team store', async () => {
    const A = path.join(root.dir, 'A');
    const B = path.join(root.dir, 'B');
    fs.mkdirSync(A);
    fs.writeFileSync(path.join(A, 'f.txt'), 'one\n');
    const tA = await ok<{ taskId: string }>(A, ['task', 'start', '--goal', 'in A']);
    execFileSync('cp', ['-a', A, B]);
    for (const ws of [A, B]) fs.rmSync(path.join(ws, '.waypoint', 'identity.json'), { force: true });
    const r = await cli(B, ['task', 'start', '--goal', 'in B', '--json']);
    assert.equal(r.code, 0, r.err);
    assert.match(r.err, /shared its team-store workspace id with .*A, of which it is a copy/);
    const tB = JSON.parse(r.out) as { taskId: string };
    const idOf = (ws: string) => (JSON.parse(fs.readFileSync(path.join(ws, '.waypoint', 'workspace-id.json'), 'utf8')) as { id: string }).id;
    assert.notEqual(idOf(A), idOf(B));
    const listedInA = (await ok<{ id: string }[]>(A, ['tasks'])).map((t) => t.id);
    assert.deepEqual(listedInA, [tA.taskId], 'A lists only its own task');
    // Opened again, each keeps the id it has now.
    const again = await cli(A, ['tasks', '--json']);
    assert.doesNotMatch(again.err, /shared its team-store workspace id/);
    assert.ok((await ok<{ id: string }[]>(B, ['tasks'])).some((t) => t.id === tB.taskId));
  });
});
