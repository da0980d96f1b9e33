import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CLI, buildCli } from '../support/mcp';
import { tmpDir } from '../support/tmp';
import { runTool, TOOLS, type ToolContext } from '../../src/mcp/tools';

/**
 * DESIGN invariant 7 through the shipped CLI, as a person would meet it. Root reads
 * anything, so the CLI runs as `nobody` when the tests run as root.
 */
const NOBODY = 65534;
const asRoot = process.getuid?.() === 0;

function run(ws: string, args: string[]): { status: number | null; stdout: string; stderr: string; json: Record<string, unknown> } {
  const r = spawnSync(process.execPath, [CLI, ...args, '--workspace', ws, '--json'], {
    encoding: 'utf8',
    timeout: 60_000,
    cwd: ws,
    ...(asRoot ? { uid: NOBODY, gid: NOBODY } : {}),
  });
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(r.stdout) as Record<string, unknown>;
  } catch {
    // left empty: the assertions below say what was expected
  }
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, json };
}

function chownR(p: string): void {
  fs.chownSync(p, NOBODY, NOBODY);
  if (fs.lstatSync(p).isDirectory()) for (const n of fs.readdirSync(p)) chownR(path.join(p, n));
}

describe('engine: what a checkpoint could not capture (CLI)', function () {
  this.timeout(120_000);
  before(function () {
    if (process.platform !== 'linux') this.skip();
    buildCli();
  });

  it('a directory unreadable at checkpoint time and a file over --max-file-size-mb are reported, and a rollback to that checkpoint deletes and changes nothing of them', () => {
    const t = tmpDir();
    try {
      const ws = t.dir;
      const files: Record<string, string> = { 'src/a.txt': 'a\n', 'src/sub/b.txt': 'b\n', 'src/sub/c.txt': 'c\n', 'big.bin': 'x'.repeat(2 * 1024 * 1024) };
      for (const [rel, content] of Object.entries(files)) {
        fs.mkdirSync(path.dirname(path.join(ws, rel)), { recursive: true });
        fs.writeFileSync(path.join(ws, rel), content);
      }
      if (asRoot) chownR(ws);
      fs.chmodSync(path.join(ws, 'src/sub'), 0o000);

      const start = run(ws, ['task', 'start', '--goal', 'g', '--max-file-size-mb', '1']);
      assert.equal(start.status, 0, start.stderr);
      assert.match(start.stderr, /did not capture 2 paths/);
      assert.match(start.stderr, /"src\/sub" \(EACCES\)/);
      assert.match(start.stderr, /"big\.bin" \(too_large\)/);
      const listed = (start.json.notCaptured as { path: string; reason: string; code: string }[]).map((n) => [n.path, n.reason, n.code]);
      assert.deepEqual(listed, [
        ['big.bin', 'too_large', 'ETOOLARGE'],
        ['src/sub', 'unreadable', 'EACCES'],
      ]);
      const taskId = start.json.taskId as string;
      const base = start.json.baseCheckpointId as string;

      // Readable again; its files change, one is added, the big file changes, a tracked file changes.
      fs.chmodSync(path.join(ws, 'src/sub'), 0o755);
      fs.writeFileSync(path.join(ws, 'src/sub/b.txt'), 'b changed\n');
      fs.writeFileSync(path.join(ws, 'src/sub/new.txt'), 'new\n');
      fs.writeFileSync(path.join(ws, 'big.bin'), 'y'.repeat(2 * 1024 * 1024));
      fs.writeFileSync(path.join(ws, 'src/a.txt'), 'a changed\n');
      if (asRoot) chownR(ws);
      const cp = run(ws, ['checkpoint', '--task', taskId, '--max-file-size-mb', '1']);
      assert.equal(cp.status, 0, cp.stderr);

      const preview = run(ws, ['rollback', '--task', taskId, '--to', base, '--preview', '--max-file-size-mb', '1']);
      assert.equal(preview.status, 0, preview.stderr);
      const rb = run(ws, ['rollback', '--task', taskId, '--to', base, '--yes', '--max-file-size-mb', '1']);
      assert.equal(rb.status, 0, rb.stderr);
      assert.equal(fs.readFileSync(path.join(ws, 'src/sub/b.txt'), 'utf8'), 'b changed\n');
      assert.equal(fs.readFileSync(path.join(ws, 'src/sub/c.txt'), 'utf8'), 'c\n');
      assert.equal(fs.readFileSync(path.join(ws, 'src/sub/new.txt'), 'utf8'), 'new\n');
      assert.equal(fs.readFileSync(path.join(ws, 'big.bin'), 'utf8').slice(0, 1), 'y');
      assert.equal(fs.readFileSync(path.join(ws, 'src/a.txt'), 'utf8'), 'a\n', 'what the checkpoint did capture is rolled back');
      const kept = new Map((rb.json.kept as { path: string; reason: string }[]).map((k) => [k.path, k.reason]));
      assert.equal(kept.get('src/sub/new.txt'), 'not_captured_in_target');
      assert.equal(kept.get('big.bin'), 'too_large_in_target');
    } finally {
      spawnSync('chmod', ['-R', 'u+rwx', t.dir]);
      t.cleanup();
    }
  });

  it('a file whose name is not UTF-8 is reported by the checkpoint (stderr and JSON) and by a rollback that leaves it as it is', () => {
    const t = tmpDir();
    try {
      const ws = t.dir;
      fs.writeFileSync(path.join(ws, 'a.txt'), 'a\n');
      const odd = Buffer.concat([Buffer.from(`${ws}/caf`), Buffer.from([0xe9]), Buffer.from('.txt')]);
      fs.writeFileSync(odd, 'before\n');
      // chown -R: fs.readdirSync cannot name the file (its name decodes to U+FFFD).
      if (asRoot) assert.equal(spawnSync('chown', ['-R', `${NOBODY}:${NOBODY}`, ws]).status, 0);
      const start = run(ws, ['task', 'start', '--goal', 'g']);
      assert.equal(start.status, 0, start.stderr);
      assert.match(start.stderr, /did not capture 1 path: "caf\\\\xE9\.txt" \(unsafe_name\)/);
      assert.deepEqual((start.json.notCaptured as { path: string; reason: string }[]).map((n) => [n.path, n.reason]), [['caf\\xE9.txt', 'unsafe_name']]);
      const taskId = start.json.taskId as string;
      const base = start.json.baseCheckpointId as string;
      fs.writeFileSync(path.join(ws, 'a.txt'), 'a changed\n');
      fs.writeFileSync(odd, 'after\n');
      const rb = run(ws, ['rollback', '--task', taskId, '--to', base, '--yes']);
      assert.equal(rb.status, 0, rb.stderr);
      assert.equal(fs.readFileSync(path.join(ws, 'a.txt'), 'utf8'), 'a\n');
      // Not rolled back, and not in silence: the rollback's own result and stderr name it.
      assert.equal(fs.readFileSync(odd, 'utf8'), 'after\n');
      assert.match(rb.stderr, /did not capture 1 path: "caf\\\\xE9\.txt" \(unsafe_name\)/);
      assert.equal(rb.json.notCapturedCount, 1);
    } finally {
      t.cleanup();
    }
  });

  it('the MCP checkpoint tools warn in their result when something was not captured', async () => {
    const notCaptured = [{ path: 'src/sub', reason: 'unreadable' as const, code: 'EACCES', message: 'permission denied' }];
    const engine = { checkpoint: async () => ({ taskId: 't1', checkpointId: 'c1', filesChanged: 0, notCaptured, notCapturedCount: 1 }) };
    const ctx = { engine, owner: { id: 'agent' }, agentRollback: 'deny' } as unknown as ToolContext;
    const spec = TOOLS.find((t) => t.name === 'waypoint_checkpoint')!;
    const r = await runTool(spec, ctx, { taskId: 't1' });
    assert.equal(r.isError, undefined);
    const text = (r.content as { type: string; text: string }[]).map((c) => c.text).join('\n');
    assert.match(text, /did not capture 1 path: "src\/sub" \(EACCES\)/);
    assert.deepEqual((r.structuredContent as { notCaptured: unknown }).notCaptured, notCaptured);
  });
});
