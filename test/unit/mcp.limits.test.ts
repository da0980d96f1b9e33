import * as assert from 'node:assert/strict';
import * as net from 'node:net';
import * as path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Engine } from '../../src/core/engine/engine';
import { startOwnerEndpoint, type OwnerEndpoint } from '../../src/mcp/owner';
import { bundleScript } from '../support/bundle';
import { httpClient, sc, waitExit, waitFor } from '../support/mcp';
import { openEngine, tmpDir } from '../support/tmp';

/**
 * What hostile or careless clients may cost the owner: a flood of connections that
 * never present the token must not take its file descriptors (an agent's session keeps
 * working through it), and sessions whose client died must not fill the session table.
 */

/** Opens `n` TCP connections to the port; each sends `prefix` (nothing, or half a request) and then idles. */
async function flood(port: number, n: number, prefix = ''): Promise<net.Socket[]> {
  const sockets: net.Socket[] = [];
  const batch = 100;
  for (let i = 0; i < n; i += batch) {
    await Promise.all(
      Array.from({ length: Math.min(batch, n - i) }, () =>
        new Promise<void>((resolve) => {
          const s = net.connect(port, '127.0.0.1', () => {
            if (prefix) s.write(prefix);
            resolve();
          });
          s.on('error', () => resolve());
          s.on('close', () => resolve());
          sockets.push(s);
        }),
      ),
    );
  }
  return sockets;
}

const open = (sockets: net.Socket[]) => sockets.filter((s) => !s.destroyed && s.readyState === 'open').length;

describe('mcp http limits: connection floods and dead sessions', function () {
  this.timeout(120_000);
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine;
  let endpoint: OwnerEndpoint | undefined;
  const clients: Client[] = [];
  const sockets: net.Socket[] = [];

  beforeEach(async () => {
    ws = tmpDir('wp-mcp-limits-');
    engine = await openEngine(ws.dir);
  });
  afterEach(async () => {
    for (const s of sockets.splice(0)) s.destroy();
    for (const c of clients.splice(0)) await c.close().catch(() => undefined);
    await endpoint?.close();
    endpoint = undefined;
    await engine.close();
    ws.cleanup();
  });

  it('a flood of idle and slow-header connections without the token is capped and dropped; an agent’s MCP session still works', async () => {
    const cap = 40;
    endpoint = await startOwnerEndpoint({ engine, limits: { maxConnections: cap, unauthenticatedTimeoutMs: 1_500 } });
    const port = endpoint.http.port;
    // An agent's session opened before the flood keeps working through it.
    const before = await httpClient(endpoint.http.url, endpoint.http.token);
    clients.push(before);
    sockets.push(...(await flood(port, 400)));
    sockets.push(...(await flood(port, 200, 'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n')));
    // The server holds at most its cap of connections: the flood's oldest were dropped as new ones came.
    await waitFor('the flood to be cut down to the cap', () => open(sockets) <= cap, 10_000);
    const during = await httpClient(endpoint.http.url, endpoint.http.token);
    clients.push(during);
    const a = sc<{ taskId: string }>(await before.callTool({ name: 'waypoint_task_start', arguments: { goal: 'through the flood' } }));
    const b = sc<{ taskId: string }>(await during.callTool({ name: 'waypoint_task_start', arguments: { goal: 'opened in the flood' } }));
    assert.ok(engine.task(a.taskId) && engine.task(b.taskId));
    // The rest of the flood does not linger: unauthenticated connections are dropped after their deadline.
    await waitFor('every flood connection to be dropped', () => open(sockets) === 0, 10_000);
    assert.ok(endpoint.http.connectionCount() <= 2 + clients.length, `open connections: ${endpoint.http.connectionCount()}`);
  });

  it('a wrong token gets its 401 and loses the connection at once', async () => {
    endpoint = await startOwnerEndpoint({ engine });
    const port = endpoint.http.port;
    const s = net.connect(port, '127.0.0.1');
    sockets.push(s);
    let answer = '';
    s.on('data', (d: Buffer) => (answer += d.toString()));
    const closed = new Promise<void>((r) => s.once('close', () => r()));
    const body = '{"jsonrpc":"2.0","id":1,"method":"initialize"}';
    // Keep-alive asked for, and the body announced but never sent: the server must not wait for it.
    s.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer wrong\r\nContent-Type: application/json\r\nConnection: keep-alive\r\nContent-Length: ${body.length + 1000}\r\n\r\n${body}`);
    const t0 = Date.now();
    await closed;
    assert.match(answer, /^HTTP\/1\.1 401/);
    assert.ok(Date.now() - t0 < 1_000, `closed after ${Date.now() - t0} ms`);
  });

  describe('sessions of relays that were SIGKILLed', () => {
    let script: string;
    const children: ChildProcess[] = [];
    before(() => (script = bundleScript(path.join(__dirname, '..', 'support', 'relayChild.ts'))));
    afterEach(async () => {
      for (const c of children.splice(0)) {
        if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
        if (c.pid) await waitExit(c.pid);
      }
    });

    function relayChild(): Promise<ChildProcess> {
      const c = spawn(process.execPath, [script, ws.dir], { stdio: ['ignore', 'pipe', 'pipe'] });
      children.push(c);
      let out = '';
      c.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      c.stderr!.on('data', (d: Buffer) => (out += d.toString()));
      return waitFor(`a relay child to open its session (${out})`, () => out.includes('ready') && c, 30_000);
    }

    it('are reaped: the 65th session works after 64 sessions whose relays were SIGKILLed', async () => {
      endpoint = await startOwnerEndpoint({ engine });
      const relays: ChildProcess[] = [];
      for (let i = 0; i < 4; i++) relays.push(await relayChild());
      // The other 60: sessions that name a relay's pid (as a relay does) over in-process clients,
      // cheaper than 60 more processes; that relay is SIGKILLed with the others.
      const named = relays[0].pid!;
      for (let i = 4; i < 64; i++) clients.push(await httpClient(endpoint.http.url, endpoint.http.token, { 'x-waypoint-client-pid': String(named) }));
      assert.equal(endpoint.http.sessionCount(), 64);
      await Promise.all(
        relays.map((c) => {
          const gone = new Promise((r) => c.once('exit', r));
          c.kill('SIGKILL');
          return gone;
        }),
      );
      // The 65th session: refused with "Too many MCP sessions (64)" while dead relays held the table.
      const next = await httpClient(endpoint.http.url, endpoint.http.token);
      clients.push(next);
      sc(await next.callTool({ name: 'waypoint_task_start', arguments: { goal: 'after the relays died' } }));
      await waitFor('the dead relays’ sessions to be reaped', () => endpoint!.http.sessionCount() === 1, 10_000);
    });

    it('are reaped without waiting for a newcomer, as soon as their connections close', async () => {
      endpoint = await startOwnerEndpoint({ engine });
      const c = await relayChild();
      assert.equal(endpoint.http.sessionCount(), 1);
      c.kill('SIGKILL');
      await waitFor('the killed relay’s session to be reaped', () => endpoint!.http.sessionCount() === 0, 10_000);
    });

    it('a live client’s session that rested past the idle limit is closed; the client can open a new one', async () => {
      endpoint = await startOwnerEndpoint({ engine, limits: { sessionIdleMs: 300, reapIntervalMs: 100 } });
      const client = await httpClient(endpoint.http.url, endpoint.http.token);
      clients.push(client);
      assert.equal(endpoint.http.sessionCount(), 1);
      await waitFor('the idle session to be closed', () => endpoint!.http.sessionCount() === 0, 10_000);
      const again = await httpClient(endpoint.http.url, endpoint.http.token);
      clients.push(again);
      sc(await again.callTool({ name: 'waypoint_task_start', arguments: { goal: 'a new session' } }));
    });
  });
});
