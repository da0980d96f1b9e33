import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Engine } from '../../src/core/engine/engine';
import { RPC_PATH } from '../../src/core/engine/api';
import { HOOK_ROUTES } from '../../src/mcp/hookRoutes';
const HOOK_ROUTE = HOOK_ROUTES['claude-code'];
import { readDiscovery, writeDiscovery } from '../../src/ownership/discovery';
import { startOwnerEndpoint, type OwnerEndpoint } from '../../src/mcp/owner';
import { openEngine, tmpDir } from '../support/tmp';

/**
 * Every door of the owner's HTTP endpoint, beyond what mcp.http.test.ts covers (the
 * 401/403/413 basics on /mcp): the listening socket is on loopback only and cannot
 * be reached through this machine's other addresses; the /rpc and hook routes sit
 * behind the same token and Host/Origin checks; an oversized body without a
 * Content-Length (chunked) is cut off too; and a refused request changes nothing.
 * Plus the store's files: the discovery file stays 0600 whatever was there before,
 * and the store directory is private to the user.
 */

function raw(
  port: number,
  opts: { headers?: Record<string, string>; body?: string | Buffer | Buffer[]; method?: string; path?: string },
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: opts.path ?? '/mcp', method: opts.method ?? 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...opts.headers } },
      (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    if (Array.isArray(opts.body)) {
      // Written in pieces with no Content-Length: Node sends it chunked.
      for (const b of opts.body) req.write(b);
      req.end();
    } else req.end(opts.body);
  });
}

const INIT = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });

/** This machine's addresses other than loopback (empty on a machine with none). */
function otherAddresses(): string[] {
  return Object.values(os.networkInterfaces())
    .flat()
    .filter((a): a is os.NetworkInterfaceInfo => !!a && !a.internal && !(a.family === 'IPv6' && a.address.startsWith('fe80')))
    .map((a) => a.address);
}

function tryConnect(host: string, port: number): Promise<'connected' | string> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port, timeout: 3000 });
    s.once('connect', () => {
      s.destroy();
      resolve('connected');
    });
    s.once('timeout', () => {
      s.destroy();
      resolve('timeout');
    });
    s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
  });
}

/** Local addresses of the sockets listening on a TCP port, from the kernel's own table (Linux). */
function listeningAddresses(port: number): string[] | null {
  const out: string[] = [];
  for (const [file, v6] of [
    ['/proc/net/tcp', false],
    ['/proc/net/tcp6', true],
  ] as const) {
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch {
      if (!v6) return null;
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 4 || cols[3] !== '0A') continue; // 0A = LISTEN
      const [hexAddr, hexPort] = cols[1].split(':');
      if (parseInt(hexPort, 16) !== port) continue;
      if (!v6) {
        const b = Buffer.from(hexAddr, 'hex');
        out.push(`${b[3]}.${b[2]}.${b[1]}.${b[0]}`);
      } else out.push(`[${hexAddr}]`);
    }
  }
  return out;
}

describe('security: the owner’s HTTP endpoint and store files', function () {
  this.timeout(60_000);
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine;
  let endpoint: OwnerEndpoint;
  let auth: Record<string, string>;

  beforeEach(async () => {
    ws = tmpDir('wp-sec-');
    engine = await openEngine(ws.dir);
    endpoint = await startOwnerEndpoint({ engine, maxBodyBytes: 64 * 1024 });
    auth = { authorization: `Bearer ${endpoint.http.token}`, host: `127.0.0.1:${endpoint.http.port}` };
  });
  afterEach(async () => {
    await endpoint.close();
    await engine.close();
    ws.cleanup();
  });

  it('listens on 127.0.0.1 only, and is unreachable through the machine’s other addresses', async () => {
    const port = endpoint.http.port;
    const listening = listeningAddresses(port);
    if (listening !== null) assert.deepEqual(listening, ['127.0.0.1'], 'the kernel lists one listening socket, on loopback');
    assert.equal(await tryConnect('127.0.0.1', port), 'connected');
    const others = otherAddresses();
    process.stdout.write(`      other addresses of this machine: ${others.join(', ') || '(none)'}\n`);
    for (const addr of others) {
      const r = await tryConnect(addr, port);
      assert.notEqual(r, 'connected', `reached the endpoint through ${addr}`);
    }
  });

  it('the /rpc and hook routes require the token and a local Host/Origin, like /mcp; a refused call changes nothing', async () => {
    const port = endpoint.http.port;
    const before = engine.eventLog.lastSeq;
    const startTask = JSON.stringify({ method: 'startTask', arg: { goal: 'smuggled in' } });
    const hook = JSON.stringify({ hook_event_name: 'UserPromptSubmit', session_id: 's1', prompt: 'smuggled', cwd: ws.dir });
    for (const p of [RPC_PATH, HOOK_ROUTE]) {
      const body = p === RPC_PATH ? startTask : hook;
      assert.equal((await raw(port, { path: p, headers: { host: auth.host }, body })).status, 401, `${p} without a token`);
      assert.equal((await raw(port, { path: p, headers: { ...auth, authorization: 'Bearer nope' }, body })).status, 401, `${p} with a wrong token`);
      assert.equal((await raw(port, { path: p, headers: { ...auth, host: `attacker.example:${port}` }, body })).status, 403, `${p} with a foreign Host`);
      assert.equal((await raw(port, { path: p, headers: { ...auth, origin: 'null' }, body })).status, 403, `${p} from an opaque (sandboxed) Origin`);
      assert.equal((await raw(port, { path: p, headers: { ...auth, origin: `http://127.0.0.1.attacker.example:${port}` }, body })).status, 403, `${p} from a look-alike Origin`);
    }
    assert.equal((await raw(port, { method: 'GET', headers: { host: auth.host } })).status, 401, 'GET /mcp without a token');
    assert.equal((await raw(port, { method: 'DELETE', headers: { host: auth.host, 'mcp-session-id': 'x' } })).status, 401, 'DELETE /mcp without a token');
    assert.equal(engine.eventLog.lastSeq, before, 'no refused request wrote anything');
    assert.equal(engine.tasks().length, 0);
    // The same /rpc call with the token and a local Host does work, so the refusals were the checks' doing.
    const ok = await raw(port, { path: RPC_PATH, headers: auth, body: startTask });
    assert.equal(ok.status, 200, ok.body);
    assert.equal(engine.tasks().length, 1);
  });

  it('cuts off an oversized body sent without a Content-Length (chunked) with 413, and keeps serving', async () => {
    const port = endpoint.http.port;
    const before = engine.eventLog.lastSeq;
    const chunk = Buffer.alloc(16 * 1024, 'x');
    const pieces = [Buffer.from('{"method":"startTask","arg":{"goal":"'), ...Array.from({ length: 8 }, () => chunk), Buffer.from('"}}')];
    for (const p of ['/mcp', RPC_PATH]) {
      const r = await raw(port, { path: p, headers: auth, body: pieces }).catch((e: Error) => ({ status: -1, body: e.message }));
      // The server may close the socket before the client finishes writing; a 413 or a reset both refuse it.
      assert.ok(r.status === 413 || /ECONNRESET|EPIPE|socket hang up/.test(r.body), `${p}: ${r.status} ${r.body}`);
    }
    assert.equal(engine.eventLog.lastSeq, before, 'nothing of the oversized call was recorded');
    assert.equal((await raw(port, { headers: auth, body: INIT })).status, 200, 'still serving');
  });

  it('the discovery file is 0600 even over a wider file left before, and the store directory is private', () => {
    const dir = path.join(ws.dir, '.waypoint');
    const file = path.join(dir, 'mcp.json');
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    // A leftover world-readable file is replaced, never reused with its mode.
    fs.chmodSync(file, 0o666);
    const d = readDiscovery(dir)!;
    const old = process.umask(0);
    try {
      writeDiscovery(dir, d);
    } finally {
      process.umask(old);
    }
    assert.equal(fs.statSync(file).mode & 0o777, 0o600, 'rewritten 0600 even with umask 0');
    const st = fs.statSync(dir);
    assert.equal(st.mode & 0o077, 0, `the store directory is ${(st.mode & 0o777).toString(8)}: others must not read the token, the database or the copies of workspace files`);
  });
});
