import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { spawn } from 'node:child_process';
import { tmpDir } from '../support/tmp';
import { cli, json, ownedAfterEach, servingOwner, tree } from '../support/backgroundOwner';

/**
 * dist/waypoint, the bash launcher: `waypoint checkpoint` beside a serving owner is relayed
 * without starting Node; everything else runs Node (dist/cli.js). Each call runs with a
 * `node` first on PATH that notes its arguments (and then runs the real Node, or stops when
 * asked), so a test knows whether the launcher declined and what it handed on.
 */
const LAUNCHER = path.resolve(__dirname, '..', '..', 'dist', 'waypoint');

interface LaunchRun {
  status: number | null;
  stdout: string;
  stderr: string;
  ms: number;
  /** The arguments Node was started with after its own options (dist/cli.js first), or null when the launcher answered alone. */
  node: string[] | null;
  /** Node's own options (before dist/cli.js), or null when Node was not started. */
  nodeFlags: string[] | null;
}

describe('the bash launcher (dist/waypoint)', function () {
  this.timeout(90_000);
  const { cleanups, pids } = ownedAfterEach();

  function launch(args: string[], o: { cwd?: string; env?: Record<string, string>; stopAtNode?: boolean; launcher?: string } = {}): Promise<LaunchRun> {
    const t = tmpDir('wp-fake-node-');
    cleanups.push(t.cleanup);
    const bin = path.join(t.dir, 'bin');
    fs.mkdirSync(bin);
    const noted = path.join(t.dir, 'argv.json');
    fs.writeFileSync(
      path.join(bin, 'node'),
      `#!${process.execPath}\nrequire('fs').writeFileSync(${JSON.stringify(noted)}, JSON.stringify(process.argv.slice(2)));\n` +
        (o.stopAtNode ? 'process.exit(99);\n' : `const r = require('child_process').spawnSync(${JSON.stringify(process.execPath)}, process.argv.slice(2), { stdio: 'inherit' });\nprocess.exit(r.status ?? 1);\n`),
      { mode: 0o755 },
    );
    return new Promise((resolve) => {
      const t0 = Date.now();
      // The unit suite turns background owners off (test/support/noBackgroundOwner.cjs); here they are on unless a test says.
      const env: NodeJS.ProcessEnv = { ...process.env, WAYPOINT_DAEMON: '1', WAYPOINT_DAEMON_IDLE_SECONDS: '60', PATH: `${bin}:${process.env.PATH}` };
      delete env.WAYPOINT_NO_DAEMON;
      Object.assign(env, o.env);
      const child = spawn(o.launcher ?? LAUNCHER, args, { cwd: o.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.once('close', (status) => {
        const all = fs.existsSync(noted) ? (JSON.parse(fs.readFileSync(noted, 'utf8')) as string[]) : null;
        const script = all ? all.findIndex((a) => !a.startsWith('--')) : -1;
        resolve({ status, stdout, stderr, ms: Date.now() - t0, node: all && all.slice(script), nodeFlags: all && all.slice(0, script) });
      });
    });
  }

  async function served(): Promise<{ ws: string; taskId: string; pid: number }> {
    const t = tmpDir('wp-launch-');
    cleanups.push(t.cleanup);
    tree(t.dir, 3, 5);
    const task = await json<{ taskId: string }>(cli(['task', 'start', '--goal', 'launcher', '--json', '-w', t.dir]));
    const s = await servingOwner(t.dir);
    pids.push(s.owner!.pid);
    return { ws: t.dir, taskId: task.taskId, pid: s.owner!.pid };
  }

  const labels = async (ws: string, taskId: string) => (await json<{ checkpoints: { id: string; label: string | null }[] }>(cli(['checkpoints', '--task', taskId, '--json', '-w', ws]))).checkpoints;

  it('answers a plain checkpoint without starting Node, printing what Node prints, from the workspace or a folder in it, through a link', async () => {
    const { ws, taskId } = await served();
    fs.writeFileSync(path.join(ws, 'd0', 'f0.txt'), 'changed\n');
    const plain = await launch(['checkpoint', '--task', taskId, '-w', ws]);
    assert.equal(plain.status, 0, plain.stderr);
    assert.equal(plain.node, null, `Node was started: ${JSON.stringify(plain.node)}`);
    assert.match(plain.stdout, /^Checkpoint c_\w+ \(1 file changed\)\n$/);
    assert.equal(plain.stderr, '');

    // --json, a label with quotes and backslashes, from a folder inside the workspace (found as git finds its root).
    fs.writeFileSync(path.join(ws, 'd1', 'f1.txt'), 'changed\n');
    fs.writeFileSync(path.join(ws, 'd1', 'new.txt'), 'new\n');
    const label = `say "hi" \\ to C:\\dir's {json}`;
    const fast = await launch(['checkpoint', `--task=${taskId}`, '--label', label, '--json'], { cwd: path.join(ws, 'd1') });
    assert.equal(fast.node, null);
    const r = JSON.parse(fast.stdout) as { taskId: string; checkpointId: string; filesChanged: number };
    assert.equal(fast.stdout, `${JSON.stringify(r, null, 2)}\n`, 'formatted as JSON.stringify(…, null, 2)');
    assert.equal(r.taskId, taskId);
    assert.equal(r.filesChanged, 2);
    assert.equal((await labels(ws, taskId)).find((c) => c.id === r.checkpointId)?.label, label, 'the label reached the owner unchanged');

    // Node's own fast path prints the same text for the same answer.
    fs.writeFileSync(path.join(ws, 'd2', 'f2.txt'), 'changed\n');
    const viaNode = await cli(['checkpoint', '--task', taskId, '--json', '-w', ws]);
    const n = JSON.parse(viaNode.stdout) as typeof r;
    assert.deepEqual(Object.keys(n), Object.keys(r));
    fs.writeFileSync(path.join(ws, 'd2', 'f3.txt'), 'changed\n');
    fs.writeFileSync(path.join(ws, 'd2', 'f4.txt'), 'changed\n');
    const nodePlain = await cli(['checkpoint', '--task', taskId, '-w', ws]);
    fs.writeFileSync(path.join(ws, 'd2', 'f3.txt'), 'again\n');
    fs.writeFileSync(path.join(ws, 'd2', 'f4.txt'), 'again\n');
    const bashPlain = await launch(['checkpoint', '-t', taskId, '--workspace', ws]);
    assert.equal(bashPlain.node, null);
    assert.equal(bashPlain.stdout.replace(/c_\w+/, 'C'), nodePlain.stdout.replace(/c_\w+/, 'C'));
    assert.match(bashPlain.stdout, /\(2 files changed\)/);

    // Linked into a bin folder, as npm links a command: it finds dist/cli.js beside its real file.
    const bin = tmpDir('wp-bin-');
    cleanups.push(bin.cleanup);
    fs.symlinkSync(LAUNCHER, path.join(bin.dir, 'waypoint'));
    const linked = await launch(['tasks', '--json', '-w', ws], { launcher: path.join(bin.dir, 'waypoint') });
    assert.equal(linked.status, 0, linked.stderr);
    assert.deepEqual(linked.node?.slice(0, 2), [path.resolve(LAUNCHER, '..', 'cli.js'), 'tasks'], 'every other command runs dist/cli.js');
    assert.deepEqual(linked.nodeFlags, ['--max-semi-space-size=1'], 'a command that ends runs with a small young generation');
    fs.writeFileSync(path.join(ws, 'd0', 'f0.txt'), 'linked\n');
    const linkedCp = await launch(['checkpoint', '--task', taskId], { cwd: ws, launcher: path.join(bin.dir, 'waypoint') });
    assert.equal(linkedCp.node, null);
    assert.match(linkedCp.stdout, /\(1 file changed\)/);
  });

  it('starts Node with a small young generation for commands that end, and with its defaults for those that stay up', async () => {
    const t = tmpDir('wp-launch-flags-');
    cleanups.push(t.cleanup);
    for (const args of [['checkpoint', '--task', 't_1'], ['hook', 'claude-code'], ['task', 'start', '--goal', 'g'], ['status']]) {
      const r = await launch([...args, '-w', t.dir], { stopAtNode: true });
      assert.equal(r.status, 99, `${args[0]}: Node was started`);
      assert.deepEqual(r.nodeFlags, ['--max-semi-space-size=1'], args.join(' '));
      assert.deepEqual(r.node, [path.resolve(LAUNCHER, '..', 'cli.js'), ...args, '-w', t.dir], `${args.join(' ')}: handed on exactly as given`);
    }
    for (const args of [['serve'], ['mcp'], ['background-owner']]) {
      const r = await launch([...args, '-w', t.dir], { stopAtNode: true });
      assert.equal(r.status, 99);
      assert.deepEqual(r.nodeFlags, [], `${args[0]} stays up: V8's defaults`);
      assert.deepEqual(r.node, [path.resolve(LAUNCHER, '..', 'cli.js'), ...args, '-w', t.dir]);
    }
  });

  it('hands anything unusual to Node, which answers as it always has: no owner, a refusal, text it does not send, a team store', async () => {
    // No owner: Node does the work itself (and starts one).
    const t = tmpDir('wp-launch-none-');
    cleanups.push(t.cleanup);
    tree(t.dir, 1, 3);
    const none = await launch(['task', 'start', '--goal', 'no owner yet', '--json', '-w', t.dir], { env: { WAYPOINT_NO_DAEMON: '1' } });
    const noneTask = (JSON.parse(none.stdout) as { taskId: string }).taskId;
    const first = await launch(['checkpoint', '--task', noneTask, '-w', t.dir], { env: { WAYPOINT_NO_DAEMON: '1' } });
    assert.equal(first.status, 0, first.stderr);
    assert.deepEqual(first.node?.slice(1), ['checkpoint', '--task', noneTask, '-w', t.dir], 'no key: nothing reached an owner');

    const { ws, taskId } = await served();
    const unknown = await launch(['checkpoint', '--task', 't_nope', '-w', ws]);
    assert.equal(unknown.status, 1);
    assert.match(unknown.stderr, /^waypoint: Unknown task 't_nope'\./);
    assert.equal(unknown.node?.at(-2), '--key', 'the refused call goes to Node with the key it was sent under');
    assert.match(unknown.node?.at(-1) ?? '', /^checkpoint:[0-9a-f-]{36}$/);

    // A label with a newline or non-ASCII text is Node's to encode; it arrives whole.
    for (const label of ['two\nlines', 'café ☕', 'tab\there']) {
      fs.writeFileSync(path.join(ws, 'd0', 'f0.txt'), label);
      const r = await launch(['checkpoint', '--task', taskId, '--label', label, '--json', '-w', ws]);
      assert.equal(r.status, 0, r.stderr);
      assert.ok(r.node, `Node encodes ${JSON.stringify(label)}`);
      const id = (JSON.parse(r.stdout) as { checkpointId: string }).checkpointId;
      assert.equal((await labels(ws, taskId)).find((c) => c.id === id)?.label, label);
    }
    // Other flags, a flag-like value, `..` in the workspace, a team store: Node's, untouched.
    for (const [args, env] of [
      [['checkpoint', '--task', taskId, '--dirty', 'd0/f0.txt', '-w', ws], {}],
      [['checkpoint', '--task', '--json', '-w', ws], {}],
      [['checkpoint', '--task', taskId, '-w', `${ws}/d0/..`], {}],
      [['checkpoint', '--task', taskId, '-w', ws], { WAYPOINT_STORE: 'postgres://nobody@127.0.0.1:1/x' }],
      [['checkpoint', '--task', taskId, '-w', ws], { WAYPOINT_RPC_TIMEOUT: 'soon' }],
    ] as [string[], Record<string, string>][]) {
      const r = await launch(args, { env, stopAtNode: true });
      assert.equal(r.status, 99, `${args.join(' ')} ${JSON.stringify(env)}: ${r.stdout}${r.stderr}`);
      assert.deepEqual(r.node?.slice(1), args, 'handed on exactly as given');
    }
  });

  it('a copied folder: the copy’s call never reaches the original’s owner, and the original records nothing', async () => {
    const { ws, taskId } = await served();
    const before = (await labels(ws, taskId)).length;
    const copy = `${ws}-copy`;
    cleanups.push(() => fs.rmSync(copy, { recursive: true, force: true }));
    fs.cpSync(ws, copy, { recursive: true, preserveTimestamps: true });
    fs.writeFileSync(path.join(copy, 'd0', 'f0.txt'), 'in the copy\n');
    const r = await launch(['checkpoint', '--task', taskId, '-w', copy], { stopAtNode: true });
    assert.equal(r.status, 99, 'declined to Node');
    assert.deepEqual(r.node?.slice(1), ['checkpoint', '--task', taskId, '-w', copy], 'the copy’s discovery file names another folder: nothing was sent, no key');
    assert.equal((await labels(ws, taskId)).length, before, 'the original has no new checkpoint');
  });

  it('a stopped owner is left to Node within the probe’s 2 s, with nothing sent', async () => {
    const { ws, taskId, pid } = await served();
    process.kill(pid, 'SIGSTOP');
    try {
      const r = await launch(['checkpoint', '--task', taskId, '-w', ws], { stopAtNode: true });
      assert.equal(r.status, 99);
      assert.ok(r.ms < 8_000, `declined after ${r.ms} ms`);
      assert.deepEqual(r.node?.slice(1), ['checkpoint', '--task', taskId, '-w', ws]);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
  });

  it('an answer cut off, or of another shape, after the call was sent: Node repeats it under the key that was sent', async () => {
    const t = tmpDir('wp-launch-peer-');
    cleanups.push(t.cleanup);
    const store = path.join(t.dir, '.waypoint');
    fs.mkdirSync(store);
    fs.writeFileSync(path.join(store, 'identity.json'), JSON.stringify({ version: 1, id: 'abcdefgh-1234', dir: store }, null, 2));
    const st = fs.statSync(store, { bigint: true });
    const token = 'T'.repeat(43);
    for (const mode of ['cut', 'other shape', 'error status']) {
      const seen: { head: string; body: string }[] = [];
      // A peer on the discovery file's port: answers the probe as an owner does, then misbehaves.
      const server = net.createServer((sock) => {
        let buf = '';
        sock.on('data', (d: Buffer) => {
          buf += d.toString();
          const at = buf.indexOf('\r\n\r\n');
          const len = Number(/content-length: (\d+)/i.exec(buf)?.[1] ?? -1);
          if (at < 0 || buf.length < at + 4 + len) return;
          const req = { head: buf.slice(0, at), body: buf.slice(at + 4) };
          seen.push(req);
          const answer = (status: string, body: string) => sock.end(`HTTP/1.1 ${status}\r\ncontent-type: application/json\r\nConnection: close\r\n\r\n${body}`);
          if (req.body.includes('"info"')) return answer('200 OK', '{"ok":true,"result":{"storeDir":"x"}}');
          if (mode === 'cut') return sock.destroy();
          if (mode === 'other shape') return answer('200 OK', '{"ok":true,"result":{"taskId":"t_1","checkpointId":"c_1","filesChanged":1,"notCapturedCount":2}}');
          answer('500 Internal Server Error', '{"ok":false}');
        });
      });
      await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
      const port = (server.address() as net.AddressInfo).port;
      const discovery = { url: `http://127.0.0.1:${port}/mcp`, token, pid: process.pid, startedAt: Date.now(), epoch: 1, store: { id: 'abcdefgh-1234', dir: store, dev: String(st.dev), ino: String(st.ino) } };
      fs.writeFileSync(path.join(store, 'mcp.json'), JSON.stringify(discovery, null, 2));
      try {
        const r = await launch(['checkpoint', '--task', 't_1', '--label', 'x', '-w', t.dir], { stopAtNode: true });
        assert.equal(r.status, 99, `${mode}: declined to Node`);
        assert.equal(seen.length, 2, `${mode}: the probe, then the call`);
        assert.match(seen[0].head, new RegExp(`^POST /rpc HTTP/1.0\r\n`));
        assert.match(seen[0].head, new RegExp(`\r\nAuthorization: Bearer ${token}\r\n`));
        assert.match(seen[0].head, new RegExp(`\r\nx-waypoint-store: abcdefgh-1234:${st.dev}:${st.ino}\r\n`), 'the claim names this folder');
        const sent = JSON.parse(seen[1].body) as { method: string; arg: { taskId: string; label: string; idempotencyKey: string } };
        assert.equal(sent.method, 'checkpoint');
        assert.deepEqual({ ...sent.arg, idempotencyKey: '' }, { taskId: 't_1', label: 'x', idempotencyKey: '' });
        assert.deepEqual(r.node?.slice(1), ['checkpoint', '--task', 't_1', '--label', 'x', '-w', t.dir, '--key', sent.arg.idempotencyKey], `${mode}: Node repeats the call under its key`);
        if (mode !== 'cut') continue;
        // A discovery file of another folder (a copy) or of an owner that is gone: no call at all.
        // And one too large to be a discovery file.
        for (const bad of [{ ...discovery, store: { ...discovery.store, ino: '1' } }, { ...discovery, pid: 2 ** 22 + 1 }]
          .map((d) => JSON.stringify(d, null, 2))
          .concat(JSON.stringify(discovery, null, 2) + ' '.repeat(70_000))) {
          fs.writeFileSync(path.join(store, 'mcp.json'), bad);
          seen.length = 0;
          const b = await launch(['checkpoint', '--task', 't_1', '-w', t.dir], { stopAtNode: true });
          assert.equal(b.status, 99);
          assert.deepEqual(b.node?.slice(1), ['checkpoint', '--task', 't_1', '-w', t.dir]);
          assert.equal(seen.length, 0, 'nothing was sent');
        }
      } finally {
        await new Promise((res) => server.close(res));
      }
    }
  });
});
