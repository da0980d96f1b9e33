import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type * as net from 'node:net';
import * as path from 'node:path';
import { remoteApi } from '../../src/core/engine/api';
import type { Engine } from '../../src/core/engine/engine';
import { readLock } from '../../src/core/store/ownerLock';
import { keepLeases } from '../../src/mcp/leaseKeeper';
import { startOwnerEndpoint, type OwnerEndpoint } from '../../src/mcp/owner';
import type { RollbackHandler } from '../../src/mcp/tools';
import { discoveryPath } from '../../src/ownership/discovery';
import { buildCli, errorText, sc, serve, stdioSession, waitExit, waitFor, type Served, type StdioSession } from '../support/mcp';
import { openEngine, tmpDir } from '../support/tmp';

/**
 * `waypoint mcp` relays over the owner's `/rpc`, the protocol the CLI and relaying windows
 * use (issue 36, item 4): in relay mode it runs its own MCP server over the owner's engine
 * API, so the owner opens no MCP session for it; every call carries the folder's claim;
 * the session keeps its own tasks' leases; an agent's rollback is the owner's to decide.
 */
type Json = Record<string, any>;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Seen {
  path: string;
  claim: string | undefined;
  method: string | undefined;
}

/** A recording proxy in front of the owner's endpoint: what a relay sends, request by request. */
async function recordingProxy(ownerPort: number): Promise<{ port: number; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const sockets = new Set<net.Socket>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      let method: string | undefined;
      try {
        method = (JSON.parse(body.toString('utf8')) as { method?: string; kind?: string }).method ?? (JSON.parse(body.toString('utf8')) as { kind?: string }).kind;
      } catch {
        method = undefined;
      }
      const claim = req.headers['x-waypoint-store'];
      seen.push({ path: new URL(req.url ?? '/', 'http://x').pathname, claim: typeof claim === 'string' ? claim : undefined, method });
      const fwd = http.request({ host: '127.0.0.1', port: ownerPort, path: req.url, method: req.method, headers: { ...req.headers, host: `127.0.0.1:${ownerPort}` }, agent: false }, (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      fwd.on('error', () => res.destroy());
      fwd.end(body);
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    seen,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe('waypoint mcp relays over /rpc', function () {
  this.timeout(120_000);
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine | undefined;
  let endpoint: OwnerEndpoint | undefined;
  let served: Served | undefined;
  let proxy: Awaited<ReturnType<typeof recordingProxy>> | undefined;
  const sessions: StdioSession[] = [];

  before(() => buildCli());
  beforeEach(() => {
    ws = tmpDir('wp-mcp-rpc-relay-');
  });
  afterEach(async () => {
    for (const s of sessions.splice(0)) await s.close();
    await proxy?.close();
    await endpoint?.close();
    await engine?.close();
    await served?.stop();
    proxy = endpoint = engine = served = undefined;
    ws.cleanup();
  });

  it('runs its tools over the owner’s /rpc with the folder’s claim; no MCP session at the owner; the owner decides an agent’s rollback', async () => {
    engine = await openEngine(ws.dir);
    const asked: Parameters<RollbackHandler>[0][] = [];
    // Stands in for a window's modal: the person declines.
    const rollback: RollbackHandler = async (req) => {
      asked.push(req);
      return { rolledBack: false, message: 'The person declined the rollback.' };
    };
    endpoint = await startOwnerEndpoint({ engine, agentRollback: 'ask', rollback });
    proxy = await recordingProxy(endpoint.http.port);
    // The relay finds the owner through the discovery file: send it through the proxy.
    const file = discoveryPath(path.join(ws.dir, '.waypoint'));
    const d = JSON.parse(fs.readFileSync(file, 'utf8')) as Json;
    fs.writeFileSync(file, JSON.stringify({ ...d, url: `http://127.0.0.1:${proxy.port}/mcp` }), { mode: 0o600 });

    // The relay's own flag would refuse every rollback; the owner's setting (ask) is the one that applies.
    const relay = await stdioSession(ws.dir, ['--verbose', '--agent-rollback', 'deny']);
    sessions.push(relay);
    const { taskId, baseCheckpointId } = sc<Json>(await relay.client.callTool({ name: 'waypoint_task_start', arguments: { goal: 'through /rpc', plan: [{ id: 'x', title: 'X' }] } }));
    sc(await relay.client.callTool({ name: 'waypoint_step_start', arguments: { taskId, stepId: 'x' } }));

    // The calls arrived as engine operations, each with this folder's claim; no MCP session was opened.
    assert.equal(endpoint.http.sessionCount(), 0, 'the relay opened no MCP session at the owner');
    assert.ok(proxy.seen.length > 0);
    for (const s of proxy.seen) {
      assert.ok(['/rpc', '/agent-rollback'].includes(s.path), `a relay request to ${s.path}`);
      assert.ok(s.claim, `the ${s.path} ${s.method} request carries the folder's claim`);
    }
    const rpc = proxy.seen.filter((s) => s.path === '/rpc').map((s) => s.method);
    assert.ok(rpc.includes('startTask') && rpc.includes('startStep'), `rpc calls: ${rpc.join(', ')}`);
    assert.match(relay.stderr(), /relaying to the owner .* over \/rpc/);

    // The relay's session is the lease owner, with the relay's pid.
    const lease = engine.queries.findTask(taskId)?.lease;
    assert.match(lease?.owner ?? '', /^mcp:stdio-/);
    assert.equal(lease?.pid, relay.pid);

    // The rollback request reaches the owner's handler, under the owner's setting.
    const r = await relay.client.callTool({ name: 'waypoint_rollback', arguments: { taskId, checkpointId: baseCheckpointId, reason: 'broke the build' } });
    assert.equal(asked.length, 1, `the owner's handler was asked: ${JSON.stringify(r)}`);
    assert.equal(asked[0]!.policy, 'ask');
    assert.equal(asked[0]!.owner.id, lease?.owner);
    assert.equal(asked[0]!.reason, 'broke the build');
    assert.match(JSON.stringify(r), /declined/);
    assert.ok(proxy.seen.some((s) => s.path === '/agent-rollback' && s.method === 'rollback'));

    // A relay that dies leaves its task interrupted: the owner's sweep sees its pid gone.
    process.kill(relay.pid, 'SIGKILL');
    await waitExit(relay.pid);
    assert.deepEqual(await engine.sweep(), [taskId]);
    assert.match(engine.queries.findTask(taskId)?.interruption?.reason ?? '', new RegExp(`owner process ${relay.pid}`));
  });

  it('the owner’s deny refuses a relayed rollback, whatever the relay’s own flag says', async () => {
    engine = await openEngine(ws.dir);
    let asked = 0;
    endpoint = await startOwnerEndpoint({
      engine,
      agentRollback: 'deny',
      rollback: async () => {
        asked++;
        return { rolledBack: true };
      },
    });
    const relay = await stdioSession(ws.dir, ['--agent-rollback', 'allow']);
    sessions.push(relay);
    const { taskId, baseCheckpointId } = sc<Json>(await relay.client.callTool({ name: 'waypoint_task_start', arguments: { goal: 'g' } }));
    const r = await relay.client.callTool({ name: 'waypoint_rollback', arguments: { taskId, checkpointId: baseCheckpointId, reason: 'oops' } });
    assert.match(errorText(r), /agentRollback = deny/);
    assert.equal(asked, 0);
  });

  it('the keeper renews a session’s leases over /rpc while it runs, and not after', async () => {
    const TTL = 1_200;
    engine = await openEngine(ws.dir);
    endpoint = await startOwnerEndpoint({ engine });
    const api = remoteApi({ url: endpoint.http.url, token: endpoint.http.token });
    const owner = { id: 'mcp:stdio-test', pid: process.pid };
    const { taskId } = await api.startTask({ goal: 'silent agent', owner, leaseTtlMs: TTL });
    const keeper = keepLeases({ engine: api, owner, ttlMs: TTL });
    try {
      await sleep(TTL * 3);
      assert.deepEqual(await engine.sweep(), [], 'nothing interrupted while the keeper runs');
      const beats = (await engine.events({ taskId })).filter((e) => e.type === 'lease.heartbeat').length;
      assert.ok(beats >= 2, `renewed over /rpc (${beats} renewals)`);
    } finally {
      keeper.dispose();
    }
    await sleep(TTL * 2);
    assert.deepEqual(await engine.sweep(), [taskId], 'the lease ran out once the keeper stopped');
  });

  it('an owner SIGKILLed while the agent is silent: the relay notices by itself, takes the store over, and its task stays its own', async () => {
    served = await serve(ws.dir);
    const relay = await stdioSession(ws.dir, ['--verbose']);
    sessions.push(relay);
    const { taskId } = sc<Json>(await relay.client.callTool({ name: 'waypoint_task_start', arguments: { goal: 'outlives its owner', plan: [{ id: 'a', title: 'A' }] } }));
    served.child.kill('SIGKILL');
    await served.stop();
    served = undefined;
    // No call in between: the relay's watch finds the owner gone and takes the store over.
    const storeDir = path.join(ws.dir, '.waypoint');
    await waitFor('the relay to own the store', () => readLock(storeDir).info?.pid === relay.pid, 30_000);
    await waitFor('the relay to serve the store', () => fs.existsSync(discoveryPath(storeDir)) && /owning the store/.test(relay.stderr()), 10_000);
    // The same session owns the task on both sides of the switch: it drives it on without a resume.
    sc(await relay.client.callTool({ name: 'waypoint_step_start', arguments: { taskId, stepId: 'a' } }));
  });
});
