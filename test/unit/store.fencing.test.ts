import * as assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { EventStore } from '../../src/core/store/eventStore';
import { FENCED_DIR, encodeRecord, listChain, listSegments, segmentName } from '../../src/core/store/journal';
import { readLock } from '../../src/core/store/ownerLock';
import { readDiscovery } from '../../src/ownership/discovery';
import { WaypointError } from '../../src/core/model/errors';
import { SCHEMA_VERSION } from '../../src/core/model/schema';
import { bundleScript } from '../support/bundle';
import { buildCli, cli, isAlive, waitExit, waitFor } from '../support/mcp';
import { openEngine, started, tmpDir } from '../support/tmp';
import { embeddedStore } from '../support/embedded';
import { noteProgress } from '../../src/core/liveness';

/**
 * Fencing: an owner stalled past its lease (SIGSTOP, a debugger, a laptop lid) and
 * replaced must never acknowledge another write, and nothing its successor
 * acknowledged may be lost — whatever the stalled owner does when it wakes.
 */

const isLost = (e: unknown): boolean => e instanceof WaypointError && e.code === 'lost_ownership';

/** Stops a store's renewal thread, as a stall would (the process is otherwise free to run). */
async function stallRenewal(s: EventStore): Promise<void> {
  await (s.lock as unknown as { renewer?: { terminate(): Promise<number> } }).renewer?.terminate();
}

describe('fencing: an owner replaced while stalled never acknowledges a write', function () {
  this.timeout(60_000);
  let t: ReturnType<typeof tmpDir>;
  let dir: string;
  beforeEach(() => {
    t = tmpDir('wp-fence-');
    dir = path.join(t.dir, '.waypoint');
  });
  afterEach(() => t.cleanup());

  it('epochs rise with every ownership and a takeover bumps them', async () => {
    const a = await EventStore.open({ dir });
    const e1 = a.lock.epoch;
    await a.close();
    const b = await EventStore.open({ dir, lock: { leaseMs: 300 } });
    assert.ok(b.lock.epoch > e1, `clean reopen: ${b.lock.epoch} > ${e1}`);
    await stallRenewal(b);
    await new Promise((r) => setTimeout(r, 450));
    const c = await EventStore.open({ dir, lock: { waitMs: 2_000 } });
    assert.ok(c.lock.tookOver);
    assert.ok(c.lock.epoch > b.lock.epoch);
    await c.close();
    await b.close();
  });

  it('the check before each acknowledgement answers from one lstat while the lock is unchanged, and still sees any replacement', async () => {
    const a = await EventStore.open({ dir });
    const file = path.join(dir, 'owner.lock');
    const ours = fs.readFileSync(file, 'utf8');
    const reads = { n: 0 };
    // The module object the store's code calls through (this file's import is a read-only namespace).
    const fsModule = createRequire(__filename)('node:fs') as { openSync: typeof fs.openSync };
    const openSync = fsModule.openSync;
    // Counts opens of the lock file (the check's read); the renewal thread has its own fs.
    fsModule.openSync = ((p: fs.PathLike, ...rest: unknown[]) => {
      if (String(p) === file) reads.n++;
      return (openSync as (...a: unknown[]) => number)(p, ...rest);
    }) as typeof fs.openSync;
    try {
      for (let i = 1; i <= 20; i++) await a.commit([started(i)]).durable;
      // ext4/tmpfs here: the first check reads, the others only stat (elsewhere each one reads).
      if (fs.statfsSync(dir).type === 0xef53 || fs.statfsSync(dir).type === 0x01021994) assert.ok(reads.n <= 2, `${reads.n} reads of the lock for 20 writes`);
      // A renewal (its change time moves) is read once more and is still ours.
      const later = new Date(Date.now() + 5_000);
      fs.utimesSync(file, later, later);
      await a.commit([started(21)]).durable;
      // Replaced by a lock of the very same length (a new inode, as a takeover makes it):
      // refused, though nothing but the bytes tells the two apart.
      const theirs = ours.replace(/"ownerId":"(.)/, (_m, c: string) => `"ownerId":"${c === 'x' ? 'y' : 'x'}`);
      assert.equal(theirs.length, ours.length);
      assert.notEqual(theirs, ours);
      fs.writeFileSync(`${file}.new`, theirs);
      fs.renameSync(`${file}.new`, file);
      await assert.rejects(a.commit([started(22)]).durable, isLost);
    } finally {
      fsModule.openSync = openSync;
    }
    const b = await EventStore.open({ dir: path.join(t.dir, '.waypoint-b') });
    const fileB = path.join(t.dir, '.waypoint-b', 'owner.lock');
    await b.commit([started(1)]).durable;
    // Rewritten in place with other bytes of the same length (same inode): refused too.
    const oursB = fs.readFileSync(fileB, 'utf8');
    fs.writeFileSync(fileB, oursB.replace(/"pid":(\d)/, (_m, d: string) => `"pid":${d === '9' ? '8' : '9'}`));
    await assert.rejects(b.commit([started(2)]).durable, isLost);
    await a.close().catch(() => undefined);
    await b.close().catch(() => undefined);
  });

  it('in-process: the replaced owner’s append and export are refused; its late segment and database are never read', async () => {
    const a = await EventStore.open({ dir, lock: { leaseMs: 300 } });
    for (let i = 1; i <= 5; i++) await a.commit([started(i)]).durable;
    await stallRenewal(a);
    await new Promise((r) => setTimeout(r, 450));

    const b = await EventStore.open({ dir, lock: { waitMs: 2_000 } });
    assert.ok(b.lock.tookOver);
    assert.equal(b.lastSeq, 5);
    for (let i = 6; i <= 9; i++) await b.commit([started(i)]).durable;

    // The stale owner wakes and writes: durable in its (orphaned) file, never acknowledged.
    await assert.rejects(a.commit([started(100)]).durable, isLost);
    assert.throws(() => a.commit([started(101)]), isLost);
    await assert.rejects(a.exportNow(), isLost);
    assert.ok(a.lostOwnership);

    // What a stale export that slipped between its check and its renames would leave:
    // a segment of its epoch after the takeover, and its database generation in place.
    const staleSeg = path.join(dir, segmentName(7));
    fs.writeFileSync(
      staleSeg,
      Buffer.concat([
        encodeRecord({ kind: 'header', storeId: a.storeId, baseSeq: 7, v: SCHEMA_VERSION, epoch: a.journalEpoch }),
        encodeRecord({ kind: 'batch', last: 7, events: [{ seq: 7, ts: 1, type: 'task.started', v: SCHEMA_VERSION, taskId: 'stale', corr: null, key: 'stale', by: null, data: started(7).data }] }),
      ]),
    );
    assert.deepEqual(listChain(dir).fenced, [staleSeg]);
    a.db.run("INSERT OR REPLACE INTO meta (k, v) VALUES ('exportEpoch', ?)", [String(a.journalEpoch)]);
    a.db.run("INSERT OR REPLACE INTO meta (k, v) VALUES ('exportedSeq', '6')");
    const staleDb = a.db.export();
    await a.close();
    await b.close();
    fs.renameSync(path.join(dir, 'waypoint.db'), path.join(dir, 'waypoint.db.prev'));
    fs.writeFileSync(path.join(dir, 'waypoint.db'), staleDb);

    const c = await EventStore.open({ dir });
    try {
      assert.equal(c.lastSeq, 9, c.report.warnings.join('\n'));
      const ids = c.events().map((e) => e.taskId);
      assert.deepEqual(ids, ['t1', 't2', 't3', 't4', 't5', 't6', 't7', 't8', 't9']);
      assert.ok(fs.readdirSync(path.join(dir, FENCED_DIR)).length >= 1, 'the stale segment was set aside');
      assert.ok(c.report.warnings.some((w) => /replaced owner/.test(w)), c.report.warnings.join('\n'));
      assert.equal((await c.verify()).ok, true);
    } finally {
      await c.close();
    }
  });

  it('a replaced owner that woke inside an export never removes its successor’s segment (it was checked before the stop)', async () => {
    const a = await EventStore.open({ dir, lock: { leaseMs: 300 } });
    for (let i = 1; i <= 5; i++) await a.commit([started(i)]).durable;
    // An export with no event after it leaves a segment holding only its header; the next
    // export with no event since starts that segment again (the case where a name is reused).
    await a.exportNow();
    const seg = path.join(dir, segmentName(6));
    assert.ok(listSegments(dir).includes(seg));
    await stallRenewal(a);
    await new Promise((r) => setTimeout(r, 450));

    // The successor puts its own copy of the segment under that name (the same size: only its epoch differs).
    const b = await EventStore.open({ dir, lock: { waitMs: 2_000 } });
    assert.ok(b.lock.tookOver);
    // The stale owner exports again: its ownership checks passed before it was stopped (so
    // they pass here), and it runs on from there while its successor owns the store.
    const real = a.lock.assertHeld.bind(a.lock);
    let passedBeforeTheStop = 2;
    a.lock.assertHeld = () => {
      if (passedBeforeTheStop-- > 0) return;
      real();
    };
    await assert.rejects(a.exportNow(), isLost);
    for (let i = 6; i <= 9; i++) await b.commit([started(i)]).durable;
    await b.close();
    await a.close();

    const c = await EventStore.open({ dir });
    try {
      assert.equal(c.lastSeq, 9, c.report.warnings.join('\n'));
      assert.deepEqual(c.events().map((e) => e.taskId), ['t1', 't2', 't3', 't4', 't5', 't6', 't7', 't8', 't9']);
      assert.equal((await c.verify()).ok, true);
    } finally {
      await c.close();
    }
  });

  it('an export never puts an archive segment back over one that changed after it read it (a successor merged into it)', async () => {
    const a = await EventStore.open({ dir, lock: { leaseMs: 30_000 } });
    const archive = path.join(dir, 'archive');
    // Two exports archive the first segment; the third merges the second into it (the case here).
    for (let i = 1; i <= 2; i++) {
      await a.commit([started(i)]).durable;
      await a.exportNow();
    }
    await a.commit([started(3)]).durable;
    const first = path.join(archive, segmentName(1));
    assert.ok(fs.existsSync(first), 'the first segment is archived');
    // As the merged file is about to be written (after the export read the archive segment),
    // a successor's merge replaces that segment: here with the same bytes, as a new file.
    const realOpen = fs.promises.open;
    let successorsIno: number | null = null;
    (fs.promises as { open: typeof fs.promises.open }).open = (async (file: fs.PathLike, ...rest: unknown[]) => {
      if (successorsIno === null && String(file).startsWith(first + '.wp-tmp-')) {
        const copy = `${first}.successor`;
        fs.writeFileSync(copy, fs.readFileSync(first), { mode: 0o600 });
        fs.renameSync(copy, first);
        successorsIno = fs.statSync(first).ino;
      }
      return (realOpen as (...args: unknown[]) => Promise<fs.promises.FileHandle>)(file, ...rest);
    }) as typeof fs.promises.open;
    try {
      await a.exportNow();
    } finally {
      (fs.promises as { open: typeof fs.promises.open }).open = realOpen;
    }
    assert.ok(successorsIno !== null, 'the export merged into the archive segment');
    assert.equal(fs.statSync(first).ino, successorsIno, 'the archive segment the successor wrote is still there');
    await a.close();
    const c = await EventStore.open({ dir });
    try {
      assert.deepEqual(c.events().map((e) => e.taskId), ['t1', 't2', 't3']);
      assert.equal((await c.verify()).ok, true);
    } finally {
      await c.close();
    }
  });

  it('a replaced owner’s gc deletes nothing: a blob its view no longer needs may be one its successor stored again', async () => {
    const ws = t.dir;
    fs.writeFileSync(path.join(ws, 'f.txt'), 'content both owners store\n');
    const a = await openEngine(ws, { store: { lock: { leaseMs: 300 } } });
    const gone = await a.startTask({ goal: 'a task that is then deleted' });
    await a.abandonTask({ taskId: gone.taskId, reason: 'not needed' });
    await a.deleteTask({ taskId: gone.taskId });
    await stallRenewal(a.eventLog as EventStore);
    await new Promise((r) => setTimeout(r, 450));
    // The successor checkpoints the same file: its blob is already in the store, so it is not written again.
    const b = await openEngine(ws, { store: { lock: { waitMs: 2_000 } } });
    try {
      await b.startTask({ goal: 'the successor’s task' });
      await assert.rejects(a.gc(), isLost);
      const report = await b.verify();
      assert.equal(report.ok, true, JSON.stringify(report.objects));
    } finally {
      await b.close();
      await a.close().catch(() => undefined);
    }
  });

  it('a lease is renewed only while the main loop turns: work that yields keeps it, a block past the lease loses it and is fenced', async () => {
    const a = await EventStore.open({ dir, lock: { leaseMs: 900 } });
    // 3 s of synchronous slices of 200 ms, yielding between them: the owner stays.
    for (const until = Date.now() + 3_000; Date.now() < until; ) {
      const slice = Date.now() + 200;
      while (Date.now() < slice) {
        // busy
      }
      await new Promise((r) => setImmediate(r));
    }
    await assert.rejects(EventStore.open({ dir, lock: { waitMs: 100 } }), (e: unknown) => e instanceof WaypointError && e.code === 'locked');
    await a.commit([started(1)]).durable;

    // 2 s without a turn (the renewal thread runs all along): the lease runs out.
    const until = Date.now() + 2_000;
    while (Date.now() < until) {
      // blocked: no timer of this thread can run
    }
    const b = await EventStore.open({ dir, lock: { waitMs: 100 } });
    assert.ok(b.lock.tookOver, 'the stalled owner was taken over');
    await b.commit([started(2)]).durable;
    await assert.rejects(async () => a.commit([started(3)]).durable, isLost);
    await a.close();
    assert.deepEqual(b.events().map((e) => e.taskId), ['t1', 't2']);
    await b.close();
  });

  it('long synchronous work that notes its progress keeps the lease (a rollback writing files in one stretch)', async () => {
    const a = await EventStore.open({ dir, lock: { leaseMs: 900 } });
    // 2.5 s without a turn of the loop, but noting progress between units of work, as restore's write loop does.
    for (const until = Date.now() + 2_500; Date.now() < until; ) {
      const unit = Date.now() + 5;
      while (Date.now() < unit) {
        // one file's worth of work
      }
      noteProgress();
    }
    await assert.rejects(EventStore.open({ dir, lock: { waitMs: 100 } }), (e: unknown) => e instanceof WaypointError && e.code === 'locked');
    await a.commit([started(1)]).durable;
    await a.close();
  });

  describe('real processes: SIGSTOP an owner past its lease, take over, SIGCONT it', () => {
    let child: ChildProcess | undefined;
    afterEach(async () => {
      if (child?.pid && isAlive(child.pid)) {
        child.kill('SIGCONT');
        child.kill('SIGKILL');
        await waitExit(child.pid);
      }
      child = undefined;
    });

    async function rpc(url: string, token: string, method: string, arg?: unknown): Promise<{ ok: boolean; result?: unknown; error?: { code: string; message: string } }> {
      const res = await fetch(new URL('/rpc', url), {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ method, arg }),
        signal: AbortSignal.timeout(10_000),
      });
      return (await res.json()) as { ok: boolean; result?: unknown; error?: { code: string; message: string } };
    }

    for (const successorStays of [true, false]) {
      it(`the woken owner refuses reads and writes with lost_ownership; every acknowledged task survives (successor ${successorStays ? 'still open' : 'closed'})`, async () => {
        const leaseMs = 1_500;
        const script = bundleScript(path.join(__dirname, '..', 'support', 'ownerChild.ts'));
        child = spawn(process.execPath, [script, t.dir, String(leaseMs)], { stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
        child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
        await waitFor(`the owner child to be ready (${out})`, () => out.includes('ready'), 20_000);
        const d = readDiscovery(dir)!;
        const first = await rpc(d.url, d.token, 'startTask', { goal: 'acknowledged by the first owner' });
        assert.equal(first.ok, true);

        child.kill('SIGSTOP');
        await new Promise((r) => setTimeout(r, leaseMs + 1_000));
        const successor = await openEngine(t.dir, { store: { lock: { waitMs: 5_000 } } });
        assert.ok(embeddedStore(successor).lock.tookOver, 'the successor took the stale lock over');
        const second = await successor.startTask({ goal: 'acknowledged by the successor' });
        if (!successorStays) await successor.close();

        child.kill('SIGCONT');
        const write = await rpc(d.url, d.token, 'startTask', { goal: 'sent to the woken owner' });
        const read = await rpc(d.url, d.token, 'tasks', {});
        assert.equal(write.ok, false, `the woken owner must not acknowledge: ${JSON.stringify(write)}`);
        assert.equal(write.error?.code, 'lost_ownership', JSON.stringify(write));
        assert.match(write.error!.message, /no longer owns/);
        assert.equal(read.ok, false);
        assert.equal(read.error?.code, 'lost_ownership');
        child.kill('SIGTERM');
        await waitExit(child.pid!);
        if (successorStays) await successor.close();

        assert.ok(readLock(dir).text === null, 'no lock is left behind');
        for (let round = 0; round < 2; round++) {
          const e = await openEngine(t.dir);
          try {
            const goals = e.tasks({}).map((x) => x.goal).sort();
            assert.deepEqual(goals, ['acknowledged by the first owner', 'acknowledged by the successor']);
            assert.ok(e.tasks({}).some((x) => x.id === second.taskId));
            const v = await e.verify();
            assert.equal(v.ok, true, JSON.stringify(v));
          } finally {
            await e.close();
          }
        }
        assert.ok(listSegments(dir).length >= 1);
      });
    }

    it('an owner whose main thread blocks (a FIFO read) stops being renewed: a CLI call after the lease takes over, and the owner that wakes acknowledges nothing', async () => {
      buildCli();
      const leaseMs = 1_500;
      const fifo = path.join(t.dir, '..', `${path.basename(t.dir)}.fifo`);
      execFileSync('mkfifo', [fifo]);
      try {
        const script = bundleScript(path.join(__dirname, '..', 'support', 'ownerChild.ts'));
        child = spawn(process.execPath, [script, t.dir, String(leaseMs), fifo], { stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
        child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
        await waitFor(`the owner child to be ready (${out})`, () => out.includes('ready'), 20_000);
        const d = readDiscovery(dir)!;
        const first = await rpc(d.url, d.token, 'startTask', { goal: 'acknowledged by the first owner' });
        assert.equal(first.ok, true, JSON.stringify(first));

        child.kill('SIGUSR2');
        await waitFor(`the owner to block (${out})`, () => out.includes('blocking'), 10_000);
        const blockedAt = Date.now();
        await new Promise((r) => setTimeout(r, leaseMs + 500));
        // The owner's process and its renewal thread are alive all along; only its loop is stuck.
        assert.ok(isAlive(child.pid!));
        const cliAt = Date.now();
        const byCli = cli(['task', 'start', '--goal', 'acknowledged by the CLI', '--workspace', t.dir, '--json']);
        assert.equal(byCli.status, 0, `the CLI took the hung owner's store over: ${byCli.stderr}`);
        process.stdout.write(`      (the CLI, started ${cliAt - blockedAt} ms after the owner blocked, took over and answered in ${Date.now() - cliAt} ms; lease ${leaseMs} ms)\n`);
        const listed = cli(['tasks', '--workspace', t.dir, '--json']);
        assert.equal(listed.status, 0, listed.stderr);
        assert.deepEqual((JSON.parse(listed.stdout) as { goal: string }[]).map((x) => x.goal).sort(), ['acknowledged by the CLI', 'acknowledged by the first owner']);
        assert.ok(Date.now() - blockedAt < leaseMs + 500 + 15_000, 'no wait beyond the lease and the CLI itself');

        // Wake the owner: it must refuse everything, reads included.
        fs.writeFileSync(fifo, 'wake');
        await waitFor(`the owner to wake (${out})`, () => out.includes('woke'), 10_000);
        const write = await rpc(d.url, d.token, 'startTask', { goal: 'sent to the woken owner' });
        const read = await rpc(d.url, d.token, 'tasks', {});
        assert.equal(write.ok, false, `the woken owner must not acknowledge: ${JSON.stringify(write)}`);
        assert.equal(write.error?.code, 'lost_ownership', JSON.stringify(write));
        assert.equal(read.ok, false);
        assert.equal(read.error?.code, 'lost_ownership');
        child.kill('SIGTERM');
        await waitExit(child.pid!);

        const e = await openEngine(t.dir);
        try {
          assert.deepEqual(e.tasks({}).map((x) => x.goal).sort(), ['acknowledged by the CLI', 'acknowledged by the first owner']);
          assert.equal((await e.verify()).ok, true);
        } finally {
          await e.close();
        }
      } finally {
        fs.rmSync(fifo, { force: true });
      }
    });
  });
});

describe('fencing: taking over from an owner that may wake, whatever it left', function () {
  this.timeout(30_000);
  let t: ReturnType<typeof tmpDir>;
  let dir: string;
  beforeEach(() => {
    t = tmpDir('wp-fence2-');
    dir = path.join(t.dir, '.waypoint');
  });
  afterEach(() => t.cleanup());

  /** A lock of a live process (this one) whose lease ran out: the takeover fences it. */
  function staleLiveLock(): void {
    fs.writeFileSync(path.join(dir, 'owner.lock'), JSON.stringify({ ownerId: 'stalled', pid: process.pid, host: os.hostname(), startedAt: 0, leaseExpiresAt: Date.now() - 1, epoch: 1 }));
  }

  for (const [what, bytes] of [
    ['an empty newest segment (stopped right after creating it)', 0],
    ['a torn header', 7],
  ] as const) {
    it(`opens over ${what}, keeps every event, and writes on`, async () => {
      const a = await EventStore.open({ dir });
      for (let i = 1; i <= 3; i++) await a.commit([started(i)]).durable;
      await a.exportNow();
      for (let i = 4; i <= 5; i++) await a.commit([started(i)]).durable;
      await a.simulateCrash();
      // The segment an export would have rotated to, created but with no whole header.
      const next = path.join(dir, segmentName(6));
      fs.writeFileSync(next, encodeRecord({ kind: 'header', storeId: a.storeId, baseSeq: 6, v: SCHEMA_VERSION }).subarray(0, bytes));
      staleLiveLock();
      const b = await EventStore.open({ dir, lock: { waitMs: 2_000 } });
      try {
        assert.ok(b.lock.tookOver);
        assert.equal(b.lastSeq, 5);
        await b.commit([started(6)]).durable;
        assert.deepEqual(b.events().map((e) => e.taskId), ['t1', 't2', 't3', 't4', 't5', 't6']);
        assert.equal((await b.verify()).ok, true);
      } finally {
        await b.close();
      }
    });
  }

  it('a lock left by a dead process is taken without fencing (nothing can wake)', async () => {
    const a = await EventStore.open({ dir });
    await a.commit([started(1)]).durable;
    await a.simulateCrash();
    fs.writeFileSync(path.join(dir, 'owner.lock'), JSON.stringify({ ownerId: 'dead', pid: 2 ** 22 + 12345, host: os.hostname(), startedAt: 0, leaseExpiresAt: Date.now() + 60_000, epoch: 1 }));
    const b = await EventStore.open({ dir, lock: { waitMs: 2_000 } });
    assert.equal(b.lock.tookOver, false);
    assert.equal(b.lastSeq, 1);
    await b.close();
  });
});
