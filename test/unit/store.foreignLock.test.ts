import * as assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { isAbsurdLease, isStale } from '../../src/core/store/lockFile';
import { readLock } from '../../src/core/store/ownerLock';
import { readDiscovery } from '../../src/ownership/discovery';
import { bundleScript } from '../support/bundle';
import { embeddedStore } from '../support/embedded';
import { buildCli, cli, isAlive, serve, waitExit, waitFor, type Served } from '../support/mcp';
import { openEngine, tmpDir } from '../support/tmp';

/**
 * An owner.lock that nothing here can prove alive — another machine's (a cloned or
 * copied folder, a synced drive), one with an impossible lease (a clock years off), a
 * hung process's — never locks a store out for good: it is explained, an impossible
 * lease counts as expired, and `waypoint unlock` frees the store unless its owner runs
 * here and answers. Real files, the shipped CLI, real owner processes.
 */
describe('foreign and impossible owner locks; waypoint unlock', function () {
  this.timeout(90_000);
  let t: ReturnType<typeof tmpDir>;
  let dir: string;
  let served: Served | undefined;
  let child: ChildProcess | undefined;
  before(() => buildCli());
  beforeEach(() => {
    t = tmpDir('wp-foreign-');
    dir = path.join(t.dir, '.waypoint');
    const init = cli(['init', '--workspace', t.dir]);
    assert.equal(init.status, 0, init.stderr);
  });
  afterEach(async () => {
    if (served) await served.stop();
    served = undefined;
    if (child?.pid && isAlive(child.pid)) {
      child.kill('SIGKILL');
      await waitExit(child.pid);
    }
    child = undefined;
    t.cleanup();
  });

  const lockFile = (): string => path.join(dir, 'owner.lock');
  function writeLock(fields: Record<string, unknown>): string {
    const text = JSON.stringify({ ownerId: 'waypoint-serve:elsewhere', pid: 4242, host: 'other-laptop', startedAt: Date.now(), leaseExpiresAt: Date.now() + 25_000, leaseMs: 30_000, epoch: 7, ...fields });
    fs.writeFileSync(lockFile(), text, { mode: 0o600 });
    return text;
  }
  const goals = (): string[] => {
    const r = cli(['tasks', '--workspace', t.dir, '--json']);
    assert.equal(r.status, 0, r.stderr);
    return (JSON.parse(r.stdout) as { goal: string }[]).map((x) => x.goal).sort();
  };

  it("names another machine's lock as such and offers unlock; unlock frees the store and the next owner fences it", async () => {
    const text = writeLock({});
    const r = cli(['tasks', '--workspace', t.dir, '--lock-wait', '300']);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /pid 4242 on other-laptop \(another machine/);
    assert.match(r.stderr, /waypoint unlock/);
    assert.equal(fs.readFileSync(lockFile(), 'utf8'), text, 'a refused command changes nothing');

    const u = cli(['unlock', '--workspace', t.dir]);
    assert.equal(u.status, 0, u.stderr);
    assert.match(u.stdout, /removed the lock of pid 4242 on other-laptop .*owner waypoint-serve:elsewhere, epoch 7/);
    assert.match(u.stdout, /held from another machine/);
    const started = cli(['task', 'start', '--goal', 'after unlock', '--workspace', t.dir]);
    assert.equal(started.status, 0, started.stderr);
    assert.deepEqual(goals(), ['after unlock']);

    const e = await openEngine(t.dir);
    try {
      assert.ok(embeddedStore(e).lock.epoch > 7, 'ownership after the unlock is a new epoch');
    } finally {
      await e.close();
    }
    const again = cli(['unlock', '--workspace', t.dir, '--json']);
    assert.equal(again.status, 0, again.stderr);
    assert.equal((JSON.parse(again.stdout) as { unlocked: unknown }).unlocked, null);
  });

  it('treats a lease far beyond its length as expired, from another machine or this one', async () => {
    writeLock({ leaseExpiresAt: Date.UTC(2286, 10, 20) });
    const t0 = Date.now();
    const a = cli(['task', 'start', '--goal', 'over a lease until 2286', '--workspace', t.dir]);
    assert.equal(a.status, 0, a.stderr);
    assert.ok(Date.now() - t0 < 15_000);
    // This machine, a live pid (this test's) that renews nothing, a lease a year out.
    writeLock({ host: os.hostname(), pid: process.pid, leaseExpiresAt: Date.now() + 365 * 86_400_000 });
    const b = cli(['task', 'start', '--goal', 'over a lease a year out', '--workspace', t.dir]);
    assert.equal(b.status, 0, b.stderr);
    assert.deepEqual(goals(), ['over a lease a year out', 'over a lease until 2286']);

    // Where the line is: a lease within its length (and a clock a few minutes ahead) is honoured.
    const now = Date.now();
    const seen = (leaseExpiresAt: number, leaseMs?: number) => ({ info: { pid: 4242, host: 'other-laptop', leaseExpiresAt, ...(leaseMs ? { leaseMs } : {}) } });
    assert.equal(isStale(seen(now + 30_000, 30_000), now), false);
    assert.equal(isStale(seen(now + 30_000 + 4 * 60_000, 30_000), now), false);
    assert.equal(isAbsurdLease(seen(now + 30_000 + 6 * 60_000, 30_000), now), true);
    assert.equal(isAbsurdLease(seen(now + 10 * 86_400_000, 1e15), now), true, 'a lease length claimed in the lock is capped');
    assert.equal(isStale(seen(now + 20_000), now), false, 'an older lock without leaseMs');
  });

  it('refuses to unlock while the owner runs here and answers; the owner keeps working', async () => {
    served = await serve(t.dir);
    const before = readLock(dir).text;
    const u = cli(['unlock', '--workspace', t.dir]);
    assert.equal(u.status, 1);
    assert.match(u.stderr, /running and answering at http:\/\/127\.0\.0\.1:\d+\/mcp/);
    assert.match(u.stderr, /Nothing was changed/);
    assert.equal(readLock(dir).text, before);
    const started = cli(['task', 'start', '--goal', 'through the owner', '--workspace', t.dir]);
    assert.equal(started.status, 0, started.stderr);
    assert.deepEqual(goals(), ['through the owner']);
  });

  it('unlocks a store held by a dead process, and one held by a hung owner here, which is fenced when it wakes', async () => {
    writeLock({ host: os.hostname(), pid: 2 ** 22 + 12345 });
    const dead = cli(['unlock', '--workspace', t.dir]);
    assert.equal(dead.status, 0, dead.stderr);
    assert.match(dead.stdout, /no longer running/);

    // A real owner with the default 30 s lease, its main thread blocked reading a FIFO.
    const fifo = path.join(t.dir, '..', `${path.basename(t.dir)}.fifo`);
    execFileSync('mkfifo', [fifo]);
    try {
      const script = bundleScript(path.join(__dirname, '..', 'support', 'ownerChild.ts'));
      child = spawn(process.execPath, [script, t.dir, '30000', fifo], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
      await waitFor(`the owner child to be ready (${out})`, () => out.includes('ready'), 20_000);
      const d = readDiscovery(dir)!;
      child.kill('SIGUSR2');
      await waitFor(`the owner to block (${out})`, () => out.includes('blocking'), 10_000);

      const u = cli(['unlock', '--workspace', t.dir]);
      assert.equal(u.status, 0, u.stderr);
      assert.match(u.stdout, /still runs here but did not answer/);
      const started = cli(['task', 'start', '--goal', 'after unlocking a hung owner', '--workspace', t.dir]);
      assert.equal(started.status, 0, started.stderr);

      fs.writeFileSync(fifo, 'wake');
      await waitFor(`the owner to wake (${out})`, () => out.includes('woke'), 10_000);
      const res = await fetch(new URL('/rpc', d.url), {
        method: 'POST',
        headers: { authorization: `Bearer ${d.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ method: 'startTask', arg: { goal: 'sent to the woken owner' } }),
        signal: AbortSignal.timeout(10_000),
      });
      const write = (await res.json()) as { ok: boolean; error?: { code: string } };
      assert.equal(write.ok, false, JSON.stringify(write));
      assert.equal(write.error?.code, 'lost_ownership');
      child.kill('SIGTERM');
      await waitExit(child.pid!);
      assert.deepEqual(goals(), ['after unlocking a hung owner']);
    } finally {
      fs.rmSync(fifo, { force: true });
    }
  });
});
