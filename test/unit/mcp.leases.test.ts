import * as assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Engine } from '../../src/core/engine/engine';
import { startOwnerEndpoint, type OwnerEndpoint } from '../../src/mcp/owner';
import { CLIENT_PID_HEADER } from '../../src/mcp/http';
import { httpClient, waitExit } from '../support/mcp';
import { openEngine, tmpDir } from '../support/tmp';

/**
 * Leases follow connections (issue 17, item 7): while an agent's MCP connection is open its
 * task keeps its lease however long the agent stays silent; once the connection goes, the
 * lease runs out as before and the sweep interrupts the task.
 */
const TTL = 1_200;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('MCP leases follow the connection', function () {
  this.timeout(60_000);
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine;
  let endpoint: OwnerEndpoint;
  const clients: Client[] = [];
  const children: ChildProcess[] = [];

  beforeEach(async () => {
    ws = tmpDir('wp-leases-');
    engine = await openEngine(ws.dir);
    endpoint = await startOwnerEndpoint({ engine, leaseTtlMs: TTL });
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close().catch(() => undefined);
    for (const ch of children.splice(0)) {
      ch.kill('SIGKILL');
      if (ch.pid) await waitExit(ch.pid);
    }
    await endpoint.close();
    await engine.close();
    ws.cleanup();
  });

  async function startTask(client: Client): Promise<string> {
    const r = (await client.callTool({ name: 'waypoint_task_start', arguments: { goal: 'think for a long time', agent: 'silent-agent' } })) as { structuredContent?: { taskId?: string } };
    const id = r.structuredContent?.taskId;
    assert.ok(id, 'the tool answered with a task id');
    return id;
  }
  const state = (id: string) => engine.queries.findTask(id)?.state;
  const heartbeats = async (id: string) => (await engine.events({ taskId: id })).filter((e) => e.type === 'lease.heartbeat').length;

  it('a direct client holding its event stream keeps the lease while silent; closing it lets the lease run out', async () => {
    const client = await httpClient(endpoint.http.url, endpoint.http.token);
    clients.push(client);
    const id = await startTask(client);
    // Three lease lengths of silence.
    await sleep(TTL * 3);
    assert.deepEqual(await engine.sweep(), [], 'nothing interrupted while the connection is open');
    assert.equal(state(id), 'running');
    const renewed = await heartbeats(id);
    assert.ok(renewed >= 2, `the keeper renewed the lease (${renewed} renewals)`);
    // Renewals only when a third of the lease has passed: a handful, not one per tick.
    assert.ok(renewed <= 8, `renewals stay bounded (${renewed})`);

    await client.close();
    clients.splice(0);
    await sleep(TTL * 2);
    assert.deepEqual(await engine.sweep(), [id], 'the lease ran out once the connection closed');
    assert.equal(state(id), 'interrupted');
  });

  it('a relay on this host keeps the lease while its process lives, and not after', async () => {
    // Stands in for `waypoint mcp` relaying an agent's stdio: the owner knows it by its pid.
    const relay = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    children.push(relay);
    const client = await httpClient(endpoint.http.url, endpoint.http.token, { [CLIENT_PID_HEADER]: String(relay.pid) });
    clients.push(client);
    const id = await startTask(client);
    await sleep(TTL * 3);
    assert.deepEqual(await engine.sweep(), []);
    assert.equal(state(id), 'running');

    relay.kill('SIGKILL');
    await waitExit(relay.pid!);
    children.splice(0);
    assert.deepEqual(await engine.sweep(), [id], 'a dead relay’s task is interrupted at once');
    assert.match(engine.queries.findTask(id)?.interruption?.reason ?? '', /exited/);
  });

  it('a session whose client shows no sign of life between calls gets no renewals', async () => {
    // A client that tells no pid and holds no event stream: an HTTP POST-only client.
    const res = await fetch(endpoint.http.url, {
      method: 'POST',
      headers: { authorization: `Bearer ${endpoint.http.token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'post-only', version: '1' } } }),
    });
    const sid = res.headers.get('mcp-session-id');
    assert.ok(sid);
    const post = (body: unknown) =>
      fetch(endpoint.http.url, {
        method: 'POST',
        headers: { authorization: `Bearer ${endpoint.http.token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sid, 'mcp-protocol-version': '2025-03-26' },
        body: JSON.stringify(body),
      });
    await post({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const call = await (await post({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'waypoint_task_start', arguments: { goal: 'post only' } } })).json();
    const id = (call as { result: { structuredContent: { taskId: string } } }).result.structuredContent.taskId;
    await sleep(TTL * 2);
    assert.equal(await heartbeats(id), 0);
    assert.deepEqual(await engine.sweep(), [id]);
  });
});
