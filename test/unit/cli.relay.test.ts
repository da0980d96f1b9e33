import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { bundleScript } from '../support/bundle';
import { buildCli, CLI, waitExit, waitFor } from '../support/mcp';
import { tmpDir } from '../support/tmp';
import { servedStoreOf } from '../support/served';

/**
 * The CLI relays its calls to the store's owner over `/rpc`. Whatever the owner
 * does — drop every connection, stop answering, vanish — a call either prints its
 * answer or exits non-zero with a reason (DESIGN invariant 8), and never hangs.
 */

interface Run {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs the CLI without blocking this process's event loop (the fake owner below lives in it). */
function cliAsync(args: string[], timeoutMs = 90_000): Promise<Run> {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const kill = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('close', (status, signal) => {
      clearTimeout(kill);
      resolve({ status, signal, stdout, stderr, ms: Date.now() - t0 });
    });
  });
}

/** A fake owner: a live pid (ours), a lock and a discovery file naming a TCP server that accepts and drops every connection. */
async function fakeOwner(workspace: string, onSocket: (s: net.Socket) => void): Promise<{ close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    onSocket(s);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/mcp`;
  const dir = path.join(workspace, '.waypoint');
  fs.mkdirSync(dir, { recursive: true });
  const now = Date.now();
  fs.writeFileSync(path.join(dir, 'owner.lock'), JSON.stringify({ ownerId: 'waypoint-serve:fake', pid: process.pid, host: os.hostname(), startedAt: now, leaseExpiresAt: now + 3_600_000, endpoint: { url } }));
  fs.writeFileSync(path.join(dir, 'mcp.json'), JSON.stringify({ url, token: 't'.repeat(43), pid: process.pid, startedAt: now, store: servedStoreOf(dir) }), { mode: 0o600 });
  return {
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const CALLS: string[][] = [
  ['tasks'],
  ['task', 'start', '--goal', 'g'],
  ['verify'],
  ['events'],
  ['step', 'start', '--task', 't_x', '--json'],
  ['effect', 'begin', '--task', 't_x', '--key', 'k', '--kind', 'shell', '--description', 'd', '--json'],
];

describe('cli relay: an owner that drops, stalls or vanishes', function () {
  this.timeout(240_000);
  let ws: ReturnType<typeof tmpDir>;
  before(() => buildCli());
  beforeEach(() => (ws = tmpDir('wp-cli-relay-')));
  afterEach(() => ws.cleanup());

  it('an owner that accepts and drops every connection: every call exits non-zero with a reason, none exits 0 silently', async () => {
    const owner = await fakeOwner(ws.dir, (s) => s.destroy());
    try {
      for (const args of CALLS) {
        const r = await cliAsync([...args, '--workspace', ws.dir]);
        const what = `waypoint ${args.join(' ')}: exit ${r.status} (${r.signal}), stdout ${JSON.stringify(r.stdout)}, stderr ${JSON.stringify(r.stderr)}`;
        assert.equal(r.signal, null, what);
        assert.equal(r.status, 1, what);
        assert.match(r.stderr, /owner/i, what);
        assert.match(r.stderr, new RegExp(`pid ${process.pid}`), what);
        assert.ok(r.ms < 60_000, what);
        if (args.includes('--json')) assert.match(JSON.parse(r.stdout).error.code, /^(io|locked)$/, what);
      }
    } finally {
      await owner.close();
    }
  });

  it('an owner that accepts but never answers (stopped): the call fails within its timeout, naming the owner', async () => {
    // Accept and read, never answer: what the kernel does for a SIGSTOPped owner.
    const owner = await fakeOwner(ws.dir, (s) => s.resume());
    try {
      const r = await cliAsync(['tasks', '--workspace', ws.dir], 120_000);
      assert.equal(r.signal, null, `killed after ${r.ms} ms: ${r.stderr}`);
      assert.equal(r.status, 1, r.stderr);
      assert.match(r.stderr, new RegExp(`pid ${process.pid}.*since \\d{4}-`), r.stderr);
      assert.match(r.stderr, /did not answer/);
      assert.ok(r.ms < 60_000, `took ${r.ms} ms`);
    } finally {
      await owner.close();
    }
  });

  for (const [kind, onSocket] of [
    ['drops every connection', (s: net.Socket) => s.destroy()],
    ['never answers', (s: net.Socket) => void s.resume()],
  ] as const) {
    it(`waypoint mcp (stdio) against an owner that ${kind}: exits non-zero soon, naming the owner`, async () => {
      const owner = await fakeOwner(ws.dir, onSocket);
      try {
        const r = await new Promise<Run>((resolve) => {
          const t0 = Date.now();
          // stdin stays open, as an agent holds it: only a failure to reach the owner may end the server.
          const child = spawn(process.execPath, [CLI, 'mcp', '--wait', '2', '--workspace', ws.dir], { stdio: ['pipe', 'pipe', 'pipe'] });
          let stdout = '';
          let stderr = '';
          child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
          child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
          const kill = setTimeout(() => child.kill('SIGKILL'), 90_000);
          child.once('close', (status, signal) => {
            clearTimeout(kill);
            resolve({ status, signal, stdout, stderr, ms: Date.now() - t0 });
          });
        });
        assert.equal(r.signal, null, `killed after ${r.ms} ms: ${r.stderr}`);
        assert.equal(r.status, 1, r.stderr);
        assert.match(r.stderr, new RegExp(`pid ${process.pid}.*since \\d{4}-`), r.stderr);
        assert.ok(r.ms < 30_000, `took ${r.ms} ms`);
      } finally {
        await owner.close();
      }
    });
  }

  it('an owner that goes away between the probe and the call: the call, never received, is made again and answered', async () => {
    // A pid that is certainly dead: a child that has exited and been reaped.
    const gone = spawn(process.execPath, ['-e', '0']);
    await new Promise((r) => gone.once('exit', r));
    const deadPid = gone.pid!;
    const dir = path.join(ws.dir, '.waypoint');
    const calls: string[] = [];
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        calls.push(JSON.parse(body).method);
        // The owner is gone before its answer to the probe arrives: nothing listens, and its
        // pid is dead. (Closing only after answering let a loaded machine's CLI connect in
        // between, into a backlog the close then reset: a dropped call, not a refused one.)
        server.close();
        const lock = JSON.parse(fs.readFileSync(path.join(dir, 'owner.lock'), 'utf8'));
        fs.writeFileSync(path.join(dir, 'owner.lock'), JSON.stringify({ ...lock, pid: deadPid }));
        res.writeHead(200, { 'content-type': 'application/json', connection: 'close' }).end(JSON.stringify({ ok: true, result: { storeDir: dir, storeId: 'x', events: 0, pid: process.pid, relayed: true } }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/mcp`;
    fs.mkdirSync(dir, { recursive: true });
    const now = Date.now();
    fs.writeFileSync(path.join(dir, 'owner.lock'), JSON.stringify({ ownerId: 'waypoint-serve:fake', pid: process.pid, host: os.hostname(), startedAt: now, leaseExpiresAt: now + 3_600_000, endpoint: { url } }));
    fs.writeFileSync(path.join(dir, 'mcp.json'), JSON.stringify({ url, token: 't'.repeat(43), pid: process.pid, startedAt: now, store: servedStoreOf(dir) }), { mode: 0o600 });
    try {
      const r = await cliAsync(['tasks', '--json', '--workspace', ws.dir]);
      assert.equal(r.status, 0, r.stderr);
      assert.deepEqual(JSON.parse(r.stdout), []);
      assert.deepEqual(calls, ['info']);
    } finally {
      server.close();
    }
  });

  describe('with a real owner in a child process', () => {
    let child: ChildProcess | undefined;
    let script: string;
    before(() => (script = bundleScript(path.join(__dirname, '..', 'support', 'ownerChild.ts'))));
    afterEach(async () => {
      if (child?.pid && child.exitCode === null && child.signalCode === null) {
        child.kill('SIGCONT');
        child.kill('SIGKILL');
        await waitExit(child.pid);
      }
      child = undefined;
    });

    async function startOwner(leaseMs: number): Promise<ChildProcess> {
      const c = spawn(process.execPath, [script, ws.dir, String(leaseMs)], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      c.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      c.stderr!.on('data', (d: Buffer) => (out += d.toString()));
      await waitFor(`the owner child to be ready (${out})`, () => out.includes('ready'));
      return c;
    }

    it('a SIGSTOPped owner: the call fails within its timeout naming the owner (pid, since when)', async () => {
      child = await startOwner(600_000);
      const started = await cliAsync(['task', 'start', '--goal', 'before the stall', '--workspace', ws.dir]);
      assert.equal(started.status, 0, started.stderr);
      child.kill('SIGSTOP');
      const r = await cliAsync(['tasks', '--workspace', ws.dir], 120_000);
      assert.equal(r.signal, null, `killed after ${r.ms} ms: ${r.stderr}`);
      assert.equal(r.status, 1, r.stderr);
      assert.match(r.stderr, new RegExp(`pid ${child.pid}.*since \\d{4}-`), r.stderr);
      assert.ok(r.ms < 60_000, `took ${r.ms} ms`);
    });

    it('an owner SIGKILLed just before the call: the call takes the store over and answers', async () => {
      child = await startOwner(600_000);
      const started = await cliAsync(['task', 'start', '--goal', 'survives the owner', '--json', '--workspace', ws.dir]);
      assert.equal(started.status, 0, started.stderr);
      const taskId = JSON.parse(started.stdout).taskId as string;
      const exited = new Promise((r) => child!.once('exit', r));
      child.kill('SIGKILL');
      await exited;
      const r = await cliAsync(['tasks', '--json', '--workspace', ws.dir]);
      assert.equal(r.status, 0, r.stderr);
      assert.ok((JSON.parse(r.stdout) as { id: string }[]).some((t) => t.id === taskId), r.stdout);
    });

    it('an owner SIGKILLed and not yet reaped by its parent (a zombie) does not hold the store', async () => {
      child = await startOwner(600_000);
      const pid = child.pid!;
      // Stop our event loop from reaping the child: the pid stays, as a zombie, for as long as this blocks.
      const { spawnSync } = await import('node:child_process');
      child.kill('SIGKILL');
      const t0 = Date.now();
      while (Date.now() - t0 < 500) {
        /* the child dies; we do not reap it */
      }
      const r = spawnSync(process.execPath, [CLI, 'tasks', '--json', '--workspace', ws.dir], { encoding: 'utf8', timeout: 60_000 });
      assert.equal(r.status, 0, `${r.stderr} (owner pid ${pid})`);
      assert.deepEqual(JSON.parse(r.stdout), []);
    });
  });
});
