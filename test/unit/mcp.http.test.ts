import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Engine } from '../../src/core/engine/engine';
import { readLock } from '../../src/core/store/ownerLock';
import { findOwner, readDiscovery } from '../../src/ownership/discovery';
import { startOwnerEndpoint, type OwnerEndpoint } from '../../src/mcp/owner';
import { buildCli, cli, httpClient, isAlive, sc, serve, stdioSession, type Served, type StdioSession } from '../support/mcp';
import { openEngine, tmpDir } from '../support/tmp';

type Json = Record<string, any>;

/** A raw request, so tests control Host, Origin and the body exactly. */
function raw(port: number, opts: { headers?: Record<string, string>; body?: string | Buffer; method?: string; path?: string }): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: opts.path ?? '/mcp', method: opts.method ?? 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...opts.headers } }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

const INIT = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });

describe('mcp over streamable HTTP (owner endpoint)', function () {
  this.timeout(60_000);
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine;
  let endpoint: OwnerEndpoint;
  const clients: Client[] = [];

  beforeEach(async () => {
    ws = tmpDir('wp-mcp-http-');
    engine = await openEngine(ws.dir);
    endpoint = await startOwnerEndpoint({ engine });
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close().catch(() => undefined);
    await endpoint.close();
    await engine.close();
    ws.cleanup();
  });

  it('binds loopback, writes a 0600 discovery file naming the owner lock’s pid and epoch', () => {
    const u = new URL(endpoint.http.url);
    assert.equal(u.hostname, '127.0.0.1');
    assert.ok(Number(u.port) > 0);
    const file = path.join(ws.dir, '.waypoint', 'mcp.json');
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    const d = readDiscovery(path.join(ws.dir, '.waypoint'))!;
    assert.deepEqual([d.url, d.token, d.pid], [endpoint.http.url, endpoint.http.token, process.pid]);
    assert.ok(d.token.length >= 40);
    const lock = readLock(path.join(ws.dir, '.waypoint')).info!;
    assert.ok(lock.epoch >= 1);
    assert.deepEqual([d.pid, d.epoch], [lock.pid, lock.epoch]);
    const owner = findOwner(path.join(ws.dir, '.waypoint'));
    assert.equal(owner.kind, 'serving');
  });

  it('serves the tools to an SDK client with the token; calls are attributed to the session', async () => {
    const client = await httpClient(endpoint.http.url, endpoint.http.token);
    clients.push(client);
    const { tools } = await client.listTools();
    assert.equal(tools.length, 12);
    const { taskId } = sc<Json>(await client.callTool({ name: 'waypoint_task_start', arguments: { goal: 'over http' } }));
    const task = engine.task(taskId);
    assert.match(task.lease!.owner, /^mcp:[0-9a-f-]{36}$/);
    // No client pid header: the session lives at most as long as this process.
    assert.equal(task.lease!.pid, process.pid);
    assert.equal(endpoint.http.sessionCount(), 1);
  });

  it('refuses a missing or wrong token with 401, before any MCP handling', async () => {
    const port = endpoint.http.port;
    const host = { host: `127.0.0.1:${port}` };
    assert.equal((await raw(port, { headers: host, body: INIT })).status, 401);
    assert.equal((await raw(port, { headers: { ...host, authorization: 'Bearer wrong' }, body: INIT })).status, 401);
    assert.equal((await raw(port, { headers: { ...host, authorization: endpoint.http.token }, body: INIT })).status, 401, 'the scheme is required');
    await assert.rejects(httpClient(endpoint.http.url, 'not-the-token'), /Missing or wrong bearer token/);
    // The right token through the same raw path works, so the 401s are the token's doing.
    const ok = await raw(port, { headers: { ...host, authorization: `Bearer ${endpoint.http.token}` }, body: INIT });
    assert.equal(ok.status, 200, ok.body);
  });

  it('refuses a foreign Host or Origin with 403, even with the token', async () => {
    const port = endpoint.http.port;
    const auth = { authorization: `Bearer ${endpoint.http.token}` };
    assert.equal((await raw(port, { headers: { ...auth, host: `evil.example:${port}` }, body: INIT })).status, 403);
    assert.equal((await raw(port, { headers: { ...auth, host: `127.0.0.1:${port + 1}` }, body: INIT })).status, 403, 'another port is another server');
    assert.equal((await raw(port, { headers: { ...auth, host: `localhost:${port}`, origin: 'https://evil.example' }, body: INIT })).status, 403);
    assert.equal((await raw(port, { headers: { ...auth, host: `localhost:${port}`, origin: `http://localhost:${port}` }, body: INIT })).status, 200);
  });

  it('refuses an oversized body with 413 and keeps serving', async () => {
    const port = endpoint.http.port;
    const headers = { authorization: `Bearer ${endpoint.http.token}`, host: `127.0.0.1:${port}` };
    const big = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { pad: 'x'.repeat(2 * 1024 * 1024) } });
    const r = await raw(port, { headers, body: big }).catch((e: Error) => ({ status: -1, body: e.message }));
    assert.equal(r.status, 413, r.body);
    assert.equal((await raw(port, { headers, body: INIT })).status, 200);
  });
});

describe('relay: waypoint mcp (stdio) with waypoint serve running', function () {
  this.timeout(120_000);
  let ws: ReturnType<typeof tmpDir>;
  let served: Served | undefined;
  const sessions: StdioSession[] = [];
  const clients: Client[] = [];

  before(() => buildCli());
  beforeEach(() => {
    ws = tmpDir('wp-mcp-relay-');
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close().catch(() => undefined);
    for (const s of sessions.splice(0)) await s.close();
    await served?.stop();
    served = undefined;
    ws.cleanup();
  });

  it('relays: the stdio server sees the owner’s tasks and its writes land in the owner’s store', async () => {
    served = await serve(ws.dir);
    const owner = await httpClient(served.url, served.token);
    clients.push(owner);
    const a = sc<Json>(await owner.callTool({ name: 'waypoint_task_start', arguments: { goal: 'started at the owner' } }));

    const relay = await stdioSession(ws.dir, ['--verbose']);
    sessions.push(relay);
    const listed = sc<Json>(await relay.client.callTool({ name: 'waypoint_task_status', arguments: {} }));
    assert.deepEqual(
      listed.tasks.map((t: Json) => t.id),
      [a.taskId],
    );
    const b = sc<Json>(await relay.client.callTool({ name: 'waypoint_task_start', arguments: { goal: 'started through the relay', plan: [{ id: 'x', title: 'X' }] } }));
    sc(await relay.client.callTool({ name: 'waypoint_step_start', arguments: { taskId: b.taskId, stepId: 'x' } }));
    assert.match(relay.stderr(), /relaying to the owner/);
    assert.ok(fs.existsSync(path.join(ws.dir, '.waypoint', 'owner.lock')));

    const seen = sc<Json>(await owner.callTool({ name: 'waypoint_task_status', arguments: { taskId: b.taskId } }));
    assert.equal(seen.task.goal, 'started through the relay');
    assert.deepEqual(
      seen.steps.map((s: Json) => [s.id, s.status]),
      [['x', 'in_progress']],
    );
    // The relay's session is the lease owner, with the relay's own pid.
    assert.match(seen.task.leaseOwner, /^mcp:/);

    // A relay that dies leaves its task interrupted (the owner's sweep sees its pid gone).
    process.kill(relay.pid, 'SIGKILL');
    const interrupted = await waitForAsync(async () => {
      const st = sc<Json>(await owner.callTool({ name: 'waypoint_task_status', arguments: { taskId: b.taskId } }));
      return st.task.state === 'interrupted' ? st : null;
    });
    assert.match(interrupted.interruption.reason, new RegExp(`owner process ${relay.pid}`));
    assert.equal(sc<Json>(await owner.callTool({ name: 'waypoint_task_status', arguments: { taskId: a.taskId } })).task.state, 'running', 'the owner’s own session is alive');
  });

  it('when the owner goes away the relay takes the store over and keeps serving the same data', async () => {
    served = await serve(ws.dir);
    const relay = await stdioSession(ws.dir, ['--verbose']);
    sessions.push(relay);
    const { taskId } = sc<Json>(await relay.client.callTool({ name: 'waypoint_task_start', arguments: { goal: 'survives the owner' } }));
    assert.equal(await served.stop(), 0);
    served = undefined;
    // The first call after the owner left may be answered with an error while the relay switches over.
    const st = await waitForAsync(async () => {
      const r = (await relay.client.callTool({ name: 'waypoint_task_status', arguments: { taskId } })) as { isError?: boolean; structuredContent?: Json };
      return r.isError ? null : r.structuredContent!;
    });
    assert.equal(st.task.goal, 'survives the owner');
    assert.match(relay.stderr(), /owning the store/);
    assert.equal(findOwner(path.join(ws.dir, '.waypoint')).kind, 'serving', 'the new owner serves HTTP for the next relay');
  });

  it('serve stops cleanly on SIGTERM: exit 0, discovery file and lock removed; a CLI command then opens the store', async () => {
    served = await serve(ws.dir);
    const c = await httpClient(served.url, served.token);
    sc(await c.callTool({ name: 'waypoint_task_start', arguments: { goal: 'before stop' } }));
    await c.close();
    const code = await served.stop();
    served = undefined;
    assert.equal(code, 0);
    assert.ok(!fs.existsSync(path.join(ws.dir, '.waypoint', 'mcp.json')));
    assert.ok(!fs.existsSync(path.join(ws.dir, '.waypoint', 'owner.lock')));
    const r = cli(['tasks', '--workspace', ws.dir, '--json']);
    assert.equal(r.status, 0, r.stderr);
    assert.equal((JSON.parse(r.stdout) as Json[])[0].goal, 'before stop');
  });

  it('a store held by a process without an endpoint: waypoint mcp waits, then fails clearly', async () => {
    // A live process (this test's) holds the lock without serving anything.
    const engine = await openEngine(ws.dir);
    try {
      const r = cli(['mcp', '--workspace', ws.dir, '--wait', '1']);
      assert.equal(r.status, 1);
      assert.match(r.stderr, /serves no endpoint/);
      assert.equal(r.stdout, '', 'nothing but MCP frames on stdout');
    } finally {
      await engine.close();
    }
    assert.ok(isAlive(process.pid));
  });
});

async function waitForAsync<T>(fn: () => Promise<T | null>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 200));
  }
}
