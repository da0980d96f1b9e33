import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { buildCli, CLI, serve, stdioSession, sc, type Served } from '../support/mcp';
import { tmpDir } from '../support/tmp';

/**
 * A workspace is its folder (DESIGN invariant 9). A folder copied with its `.waypoint`
 * carries the original's owner lock and discovery file; every command in the copy must
 * act on the copy, never relay to the original's owner. Real `waypoint serve` processes,
 * real `cp -a`, the shipped CLI.
 */

function run(args: string[], cwd: string, input = ''): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd, input, encoding: 'utf8', timeout: 90_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function json<T>(r: { status: number | null; stdout: string; stderr: string }): T {
  assert.equal(r.status, 0, `exit ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

describe('folder identity: a copied folder is a workspace of its own', function () {
  this.timeout(180_000);
  before(() => buildCli());
  let root: ReturnType<typeof tmpDir>;
  let served: Served | undefined;
  let A: string;
  let B: string;
  let task: { taskId: string; baseCheckpointId: string };

  beforeEach(async () => {
    root = tmpDir('wp-identity-');
    A = path.join(root.dir, 'A');
    B = path.join(root.dir, 'B');
    fs.mkdirSync(A);
    fs.writeFileSync(path.join(A, 'f.txt'), 'one\n');
    task = json(run(['task', 'start', '--goal', 'change f', '--json'], A));
    served = await serve(A);
    fs.writeFileSync(path.join(A, 'f.txt'), 'two\n');
  });
  afterEach(async () => {
    await served?.stop();
    served = undefined;
    root.cleanup();
  });

  const copyA = () => execFileSync('cp', ['-a', A, B]);

  it('a rollback in a copy of a served folder rolls the copy back and leaves the original untouched; init names the copy’s store', () => {
    copyA();
    // The copy holds the original's lock and discovery file, as cp -a made them.
    assert.ok(fs.existsSync(path.join(B, '.waypoint', 'owner.lock')) && fs.existsSync(path.join(B, '.waypoint', 'mcp.json')));
    const init = run(['init', '--json'], B);
    const info = json<{ storeDir: string; relayed: boolean }>(init);
    assert.equal(info.storeDir, path.join(B, '.waypoint'), 'init in the copy names the copy’s store');
    assert.equal(info.relayed, false);
    assert.equal(init.stderr.match(/is a copy of/g)?.length, 1, `said once that the folder is a copy: ${init.stderr}`);
    assert.match(init.stderr, new RegExp(`This folder \\(${B.replace(/[/\\]/g, '.')}\\) is a copy of ${A.replace(/[/\\]/g, '.')}; Waypoint gave it its own identity`));
    const rb = run(['rollback', '--task', task.taskId, '--to', task.baseCheckpointId, '--yes'], B);
    assert.equal(rb.status, 0, rb.stderr);
    assert.doesNotMatch(rb.stderr, /is a copy of/, 'said once, not on every command');
    assert.equal(fs.readFileSync(path.join(A, 'f.txt'), 'utf8'), 'two\n', 'the original is untouched');
    assert.equal(fs.readFileSync(path.join(B, 'f.txt'), 'utf8'), 'one\n', 'the copy is rolled back');
    // The copy has its own identity; the original's owner still serves the original.
    const idA = JSON.parse(fs.readFileSync(path.join(A, '.waypoint', 'identity.json'), 'utf8')) as { id: string };
    const idB = JSON.parse(fs.readFileSync(path.join(B, '.waypoint', 'identity.json'), 'utf8')) as { id: string; dir: string };
    assert.notEqual(idA.id, idB.id);
    assert.equal(idB.dir, path.join(B, '.waypoint'));
    assert.equal(served!.child.exitCode, null, 'the original’s owner was not touched');
    const inA = json<{ storeDir: string; relayed: boolean }>(run(['init', '--json'], A));
    assert.deepEqual([inA.storeDir, inA.relayed], [path.join(A, '.waypoint'), true]);
  });

  it('a copy whose identity record is gone: the original’s owner proves it serves another folder, and nothing is relayed to it', () => {
    copyA();
    fs.rmSync(path.join(B, '.waypoint', 'identity.json'), { force: true });
    const rb = run(['rollback', '--task', task.taskId, '--to', task.baseCheckpointId, '--yes', '--json'], B);
    assert.equal(rb.status, 0, rb.stderr);
    assert.equal(fs.readFileSync(path.join(A, 'f.txt'), 'utf8'), 'two\n', 'the original is untouched');
    assert.equal(fs.readFileSync(path.join(B, 'f.txt'), 'utf8'), 'one\n', 'the copy is rolled back');
    assert.match(rb.stderr, /serves the store in .*A.*not this one/);
  });

  it('the original’s owner refuses a call that names another store, before running it', async () => {
    copyA();
    const d = JSON.parse(fs.readFileSync(path.join(B, '.waypoint', 'mcp.json'), 'utf8')) as { url: string; token: string };
    const st = fs.statSync(path.join(B, '.waypoint'), { bigint: true });
    const res = await fetch(new URL('/rpc', d.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${d.token}`, 'content-type': 'application/json', 'x-waypoint-store': `-:${st.dev}:${st.ino}` },
      body: JSON.stringify({ method: 'rollback', arg: { taskId: task.taskId, checkpointId: task.baseCheckpointId } }),
    });
    assert.equal(res.status, 409, await res.text());
    assert.equal(fs.readFileSync(path.join(A, 'f.txt'), 'utf8'), 'two\n', 'nothing was done');
  });

  it('waypoint mcp and an agent’s hook in a copy record into the copy, not the original', async () => {
    copyA();
    const s = await stdioSession(B);
    try {
      const started = sc<{ taskId: string }>(await s.client.callTool({ name: 'waypoint_task_start', arguments: { goal: 'in the copy' } }));
      const inB = json<{ id: string }[]>(run(['tasks', '--json'], B)).map((t) => t.id);
      const inA = json<{ id: string }[]>(run(['tasks', '--json'], A)).map((t) => t.id);
      assert.ok(inB.includes(started.taskId), 'the copy has the task');
      assert.ok(!inA.includes(started.taskId), 'the original does not');
    } finally {
      await s.close();
    }
    const before = json<unknown[]>(run(['events', '--json'], A)).length;
    const hook = run(['hook', 'claude-code'], B, JSON.stringify({ hook_event_name: 'UserPromptSubmit', session_id: 's-copy', cwd: B, prompt: 'from the copy' }));
    assert.equal(hook.status, 0, hook.stderr);
    assert.equal(json<unknown[]>(run(['events', '--json'], A)).length, before, 'the original recorded nothing of the copy’s hook');
  });
});
