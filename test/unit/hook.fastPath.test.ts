import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { writeStoreRoots } from '../../src/ownership/storeRoots';
import fc from 'fast-check';
import { LockInfo } from '../../src/core/store/ownerLock';
import { Discovery } from '../../src/ownership/discovery';
import { liteDiscovery, liteLock } from '../../src/ownership/findOwnerLite';
import { parseHookArgs } from '../../src/cli/hookFastPath';
import { buildCli, CLI, serve, waitExit, type Served } from '../support/mcp';
import { openEngine, tmpDir } from '../support/tmp';
import { servedStoreOf } from '../support/served';
import { fuzzParams, hostileJson } from '../support/fuzz';

/**
 * The fast hook path (dist/cli.js answering a relayed hook without loading the engine):
 * its hand checks of the lock and discovery file never accept what the zod schemas
 * refuse, it loads no heavy module, and an owner that does not answer loses no event.
 */
describe('hook fast path', function () {
  this.timeout(120_000);

  describe('hand checks are never laxer than the schemas', () => {
    const accepted = { lock: 0, discovery: 0 };
    const num = fc.oneof(fc.integer(), fc.double(), fc.constant(NaN), fc.constant(Infinity), fc.constant(-1), fc.constant(0));
    const lockish = fc.record(
      {
        ownerId: fc.oneof(fc.string(), num),
        pid: num,
        host: fc.oneof(fc.string(), num),
        startedAt: num,
        leaseExpiresAt: num,
        leaseMs: num,
        epoch: num,
        endpoint: fc.oneof(fc.constant(null), fc.record({ url: fc.oneof(fc.string(), num), discoveryFile: fc.string() }, { requiredKeys: [] }), fc.string()),
        extra: fc.string(),
      },
      { requiredKeys: [] },
    );
    // Mostly what an owner writes, with a field off now and then: most cases reach the comparison.
    const nearLock = fc.record(
      {
        ownerId: fc.string(),
        pid: fc.oneof(fc.integer({ min: 1, max: 2 ** 31 }), num),
        host: fc.string(),
        startedAt: fc.oneof(fc.integer(), num),
        leaseExpiresAt: fc.oneof(fc.integer(), num),
        leaseMs: fc.oneof(fc.integer({ min: 1 }), fc.double()),
        epoch: fc.oneof(fc.nat(), num),
        endpoint: fc.oneof(fc.constant(null), fc.record({ url: fc.string() })),
      },
      { requiredKeys: ['ownerId', 'pid', 'host', 'startedAt', 'leaseExpiresAt'] },
    );
    const nearDiscovery = fc.record(
      {
        url: fc.oneof(fc.integer({ min: 1, max: 65535 }).map((p) => `http://127.0.0.1:${p}/mcp`), fc.webUrl()),
        token: fc.string({ minLength: 30, maxLength: 260 }),
        pid: fc.oneof(fc.integer({ min: 1, max: 2 ** 31 }), num),
        startedAt: fc.oneof(fc.integer(), num),
        epoch: fc.oneof(fc.nat(), num),
        store: fc.oneof(
          fc.record({ id: fc.uuid(), dir: fc.string({ maxLength: 20 }).map((d) => `/${d}`), dev: fc.bigInt({ min: 0n, max: 2n ** 64n }).map(String), ino: fc.bigInt({ min: 0n, max: 2n ** 64n }).map(String) }),
          fc.record({ id: fc.string(), dir: fc.string(), dev: fc.oneof(fc.string(), num), ino: fc.string(), extra: fc.string() }, { requiredKeys: [] }),
        ),
      },
      { requiredKeys: ['url', 'token', 'pid', 'startedAt'] },
    );
    const urls = fc.oneof(fc.constant('http://127.0.0.1:4000/mcp'), fc.webUrl(), fc.string(), fc.integer({ min: 0, max: 99999 }).map((p) => `http://127.0.0.1:${p}/mcp`));
    const discoveryish = fc.record(
      { url: urls, token: fc.oneof(fc.string({ minLength: 30, maxLength: 40 }), fc.string()), pid: num, startedAt: num, epoch: num, extra: fc.string() },
      { requiredKeys: [] },
    );

    it('a lock the hand check accepts, zod accepts with the same values', () => {
      fc.assert(
        fc.property(fc.oneof(nearLock, lockish, hostileJson), (v) => {
          const lite = liteLock(v);
          if (!lite) return;
          accepted.lock++;
          const z = LockInfo.safeParse(v);
          assert.ok(z.success, `zod refused what the hand check took: ${JSON.stringify(v)}`);
          for (const k of ['ownerId', 'pid', 'host', 'startedAt', 'leaseExpiresAt', 'leaseMs', 'epoch'] as const) assert.deepEqual(lite[k], z.data[k], k);
          assert.deepEqual(lite.endpoint, z.data.endpoint);
        }),
        fuzzParams(2000),
      );
      assert.ok(accepted.lock > 20, `the property compared enough accepted locks (${accepted.lock})`);
    });

    it('a discovery file the hand check accepts, zod accepts with the same values', () => {
      fc.assert(
        fc.property(fc.oneof(nearDiscovery, discoveryish, hostileJson), (v) => {
          const lite = liteDiscovery(v);
          if (!lite) return;
          accepted.discovery++;
          const z = Discovery.safeParse(v);
          assert.ok(z.success, `zod refused what the hand check took: ${JSON.stringify(v)}`);
          assert.deepEqual(lite, z.data);
        }),
        fuzzParams(2000),
      );
      assert.ok(accepted.discovery > 20, `the property compared enough accepted discovery files (${accepted.discovery})`);
    });

    it('takes what an owner really writes', () => {
      const d = { url: 'http://127.0.0.1:41234/mcp', token: 'x'.repeat(43), pid: 123, startedAt: Date.now(), epoch: 3 };
      assert.deepEqual(liteDiscovery(d), d);
      const l = { ownerId: 'waypoint-serve:abc', pid: 123, host: os.hostname(), startedAt: 1, leaseExpiresAt: 2, leaseMs: 30_000, epoch: 3 };
      assert.deepEqual(liteLock(l), l);
    });

    it('reads only the hook command line it knows; anything else is the full CLI’s', () => {
      assert.deepEqual(parseHookArgs(['hook', 'claude-code', '--workspace', '/w']), { agent: 'claude-code', workspace: '/w' });
      assert.deepEqual(parseHookArgs(['hook', 'claude-code', '--workspace=/w', '--wait', '3']), { agent: 'claude-code', workspace: '/w' });
      assert.equal(parseHookArgs(['hook', 'claude-code', '--json']), null);
      assert.equal(parseHookArgs(['hook', 'nobody']), null);
      assert.equal(parseHookArgs(['tasks']), null);
    });
  });

  describe('the shipped CLI', () => {
    let ws: ReturnType<typeof tmpDir>;
    let served: Served | undefined;
    before(() => buildCli());
    beforeEach(() => {
      ws = tmpDir('wp-hook-fast-');
      fs.writeFileSync(path.join(ws.dir, 'a.txt'), 'a\n');
    });
    afterEach(async () => {
      await served?.stop();
      served = undefined;
      ws.cleanup();
    });
    const prompt = (ws: string, session = 'fast-1') => JSON.stringify({ session_id: session, hook_event_name: 'UserPromptSubmit', cwd: ws, prompt: 'Fix the bug' });
    async function goals(dir: string): Promise<string[]> {
      const engine = await openEngine(dir);
      try {
        return engine.tasks().map((t) => t.goal);
      } finally {
        await engine.close();
      }
    }

    it('a hook relayed to a serving owner loads neither the full CLI nor zod', async () => {
      served = await serve(ws.dir);
      const trace = path.join(ws.dir, 'loaded.txt');
      const preload = path.join(ws.dir, 'trace.cjs');
      fs.writeFileSync(preload, `const M = require('module'); const seen = []; const o = M._load; M._load = function (r, p, m) { seen.push(r); return o.apply(this, arguments); }; process.on('exit', () => require('fs').writeFileSync(${JSON.stringify(trace)}, seen.join('\\n')));`);
      const r = spawnSync(process.execPath, ['--require', preload, CLI, 'hook', 'claude-code', '--workspace', ws.dir], { input: prompt(ws.dir), encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout, '');
      assert.equal(r.stderr, '');
      const loaded = fs.readFileSync(trace, 'utf8');
      assert.doesNotMatch(loaded, /waypoint-cli\.js/);
      assert.doesNotMatch(loaded, /zod|sql\.js|modelcontextprotocol/);
      await served.stop();
      served = undefined;
      assert.deepEqual(await goals(ws.dir), ['Fix the bug'], 'the owner recorded the prompt');
    });

    it('a hook from another folder of a multi-root window reaches the window store’s owner on the fast path', async () => {
      const app = path.join(ws.dir, 'app');
      const lib = path.join(ws.dir, 'lib');
      fs.mkdirSync(app);
      fs.mkdirSync(lib);
      writeStoreRoots(path.join(app, '.waypoint'), [
        { name: 'app', dir: app },
        { name: 'lib', dir: lib },
      ]);
      served = await serve(app);
      const trace = path.join(ws.dir, 'loaded-lib.txt');
      const preload = path.join(ws.dir, 'trace-lib.cjs');
      fs.writeFileSync(preload, `const M = require('module'); const seen = []; const o = M._load; M._load = function (r, p, m) { seen.push(r); return o.apply(this, arguments); }; process.on('exit', () => require('fs').writeFileSync(${JSON.stringify(trace)}, seen.join('\\n')));`);
      const r = spawnSync(process.execPath, ['--require', preload, CLI, 'hook', 'claude-code', '--workspace', lib], { input: prompt(lib, 'fast-lib'), encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stderr, '');
      assert.doesNotMatch(fs.readFileSync(trace, 'utf8'), /waypoint-cli\.js|zod|sql\.js/, 'relayed on the fast path');
      await served.stop();
      served = undefined;
      assert.deepEqual(await goals(app), ['Fix the bug'], 'the window store’s owner recorded it');
      assert.equal(fs.existsSync(path.join(lib, '.waypoint', 'waypoint.db')), false, 'no store of its own in the linked folder');
    });

    it('an owner that cannot be reached loses no event: the full CLI takes the event already read', async () => {
      // An owner that wrote its lock and discovery file, then stopped listening (a lease about
      // to run out, a port nobody holds): the fast path reads the event, cannot deliver it, and
      // hands it to the full CLI, which waits for the lease to lapse and records it itself.
      const holder = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
      try {
        const dir = path.join(ws.dir, '.waypoint');
        fs.mkdirSync(dir, { mode: 0o700 });
        const now = Date.now();
        fs.writeFileSync(path.join(dir, 'owner.lock'), JSON.stringify({ ownerId: 'gone', pid: holder.pid, host: os.hostname(), startedAt: now, leaseExpiresAt: now + 1500, epoch: 1 }), { mode: 0o600 });
        fs.writeFileSync(path.join(dir, 'mcp.json'), JSON.stringify({ url: 'http://127.0.0.1:9/mcp', token: 't'.repeat(43), pid: holder.pid, startedAt: now, epoch: 1, store: servedStoreOf(dir) }), { mode: 0o600 });
        const r = spawnSync(process.execPath, [CLI, 'hook', 'claude-code', '--workspace', ws.dir, '--wait', '15'], { input: prompt(ws.dir, 'fast-2'), encoding: 'utf8', timeout: 60_000 });
        assert.equal(r.status, 0, r.stderr);
        assert.doesNotMatch(r.stderr, /not recorded/);
      } finally {
        holder.kill('SIGKILL');
        await waitExit(holder.pid!);
      }
      assert.deepEqual(await goals(ws.dir), ['Fix the bug']);
    });

    it('with no owner, the full CLI owns the store and records the hook as before', async () => {
      const r = spawnSync(process.execPath, [CLI, 'hook', 'claude-code', '--workspace', ws.dir], { input: prompt(ws.dir, 'fast-3'), encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      assert.deepEqual(await goals(ws.dir), ['Fix the bug']);
    });
  });
});
