import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Engine } from '../../src/core/engine/engine';
import { SCAN_CACHE_FILE, loadScanCache, saveScanCache, scanCacheIdentity, type Manifest } from '../../src/core/snapshot';
import { openEngine, tmpDir } from '../support/tmp';

/**
 * The scan cache a fresh process starts its rescan from (scan/scanCache.ts). Each test
 * tries to make it hide a change, and fails if it did: the checkpoint after it must
 * record the change, whatever the cache says.
 */
describe('scan cache between processes', () => {
  let sandbox: ReturnType<typeof tmpDir>;
  let ws: string;
  let engine: Engine | undefined;
  const OLD = new Date(Date.now() - 3600_000);

  beforeEach(() => {
    sandbox = tmpDir('wp-scancache-');
    ws = path.join(sandbox.dir, 'ws');
    fs.mkdirSync(path.join(ws, 'src'), { recursive: true });
    for (let i = 0; i < 30; i++) {
      fs.writeFileSync(path.join(ws, 'src', `f${i}.txt`), `content ${i}\n`);
      fs.utimesSync(path.join(ws, 'src', `f${i}.txt`), OLD, OLD);
    }
  });
  afterEach(async () => {
    await engine?.close();
    engine = undefined;
    sandbox.cleanup();
  });

  const cacheFile = () => path.join(ws, '.waypoint', SCAN_CACHE_FILE);
  /** A new engine on the workspace, as a fresh process opens it. */
  async function fresh(): Promise<Engine> {
    await engine?.close();
    engine = await openEngine(ws);
    return engine;
  }
  async function started(): Promise<string> {
    const e = await fresh();
    const { taskId } = await e.startTask({ goal: 'cache', leaseTtlMs: 3_600_000 });
    await e.checkpoint({ taskId, label: 'one more' });
    return taskId;
  }
  const cacheState = (e: Engine) => e.workspaceSnapshots!.lastScanCache;
  async function contentAt(e: Engine, taskId: string, key: string): Promise<string> {
    const cps = e.queries.checkpoints(taskId);
    const m = await e.workspaceSnapshots!.load(cps.at(-1)!);
    const entry = m.get(key);
    assert.ok(entry?.type === 'file', `${key} is a file in the last checkpoint`);
    return (await e.workspaceSnapshots!.blobs.get(entry.hash)).toString('utf8');
  }

  it('is written 0600 inside .waypoint at close, and a fresh process starts from it and still sees a plain change', async () => {
    const taskId = await started();
    await engine!.close();
    engine = undefined;
    assert.equal(fs.statSync(cacheFile()).mode & 0o777, 0o600);
    fs.writeFileSync(path.join(ws, 'src', 'f3.txt'), 'changed, longer than before\n');
    const e = await fresh();
    const r = await e.checkpoint({ taskId, label: 'after' });
    assert.equal(cacheState(e), 'hit');
    assert.equal(r.filesChanged, 1);
    assert.equal(await contentAt(e, taskId, 'src/f3.txt'), 'changed, longer than before\n');
  });

  it('a file rewritten with the same size and its mtime put back, within the racy window of the cache, is rehashed', async () => {
    // Recent mtime: written just before the checkpoint whose cache is kept.
    const f = path.join(ws, 'src', 'racy.txt');
    fs.writeFileSync(f, 'AAAA\n');
    const taskId = await started();
    const { mtime } = fs.statSync(f);
    await engine!.close();
    engine = undefined;
    fs.writeFileSync(f, 'BBBB\n'); // same size
    fs.utimesSync(f, mtime, mtime); // same mtime: only the racy rule can catch it
    const e = await fresh();
    const r = await e.checkpoint({ taskId, label: 'after' });
    assert.equal(cacheState(e), 'hit');
    assert.equal(r.filesChanged, 1, 'the rewrite is recorded');
    assert.equal(await contentAt(e, taskId, 'src/racy.txt'), 'BBBB\n');
  });

  for (const [name, damage] of [
    ['truncated', (b: Buffer) => b.subarray(0, Math.floor(b.length / 2))],
    ['garbled in the body', (b: Buffer) => Buffer.from(b.map((x, i) => (i === b.length - 40 ? x ^ 0xff : x)))],
    ['garbled in the header', (b: Buffer) => Buffer.concat([Buffer.from('{"format":1}'), b.subarray(b.indexOf(0x0a))])],
    ['empty', () => Buffer.alloc(0)],
  ] as const) {
    it(`a ${name} cache file is ignored whole, and the change is seen from the store's manifest`, async () => {
      const taskId = await started();
      await engine!.close();
      engine = undefined;
      fs.writeFileSync(cacheFile(), damage(fs.readFileSync(cacheFile())));
      fs.writeFileSync(path.join(ws, 'src', 'f7.txt'), 'seven, changed\n');
      const e = await fresh();
      const r = await e.checkpoint({ taskId, label: 'after' });
      assert.equal(cacheState(e), 'damaged');
      assert.equal(r.filesChanged, 1);
      assert.equal(await contentAt(e, taskId, 'src/f7.txt'), 'seven, changed\n');
    });
  }

  it('a cache from another workspace is not used, even for the same manifest', async () => {
    const taskId = await started();
    await engine!.close();
    engine = undefined;
    const last = (await fresh()).queries.checkpoints(taskId).at(-1)!;
    const ref = last.manifestRef!;
    const m = await engine!.workspaceSnapshots!.load(last);
    await engine!.close();
    engine = undefined;
    // Written as another workspace's (another root dir) under this one's .waypoint, claiming f1 unchanged.
    const forged: Manifest = new Map(m);
    const other = scanCacheIdentity({ roots: [{ name: 'ws', dir: path.join(sandbox.dir, 'elsewhere') }], storeDir: path.join(sandbox.dir, 'elsewhere', '.waypoint') });
    saveScanCache(path.join(ws, '.waypoint'), other, ref, 0, forged, Date.now());
    assert.equal(loadScanCache(path.join(ws, '.waypoint'), scanCacheIdentity({ roots: [{ name: 'ws', dir: ws }], storeDir: path.join(ws, '.waypoint') }), ref), 'other_workspace');
    fs.writeFileSync(path.join(ws, 'src', 'f1.txt'), 'one, changed\n');
    const e = await fresh();
    const r = await e.checkpoint({ taskId, label: 'after' });
    assert.equal(cacheState(e), 'other_workspace');
    assert.equal(r.filesChanged, 1);
  });

  it('a file replaced by a new one (new inode), same size, mtime put back, is rehashed', async () => {
    const taskId = await started();
    await engine!.close();
    engine = undefined;
    const f = path.join(ws, 'src', 'f9.txt');
    const before = fs.statSync(f);
    // A new file under the name (a new inode, or a reused one when the filesystem hands it out again).
    fs.rmSync(f);
    const filler = path.join(ws, 'filler.bin');
    fs.writeFileSync(filler, 'x');
    fs.writeFileSync(f, 'content X\n');
    fs.utimesSync(f, before.mtime, before.mtime);
    const after = fs.statSync(f);
    assert.equal(after.size, before.size);
    const e = await fresh();
    const r = await e.checkpoint({ taskId, label: 'after' });
    assert.equal(cacheState(e), 'hit');
    // If the filesystem handed the same inode out again, size + mtime + inode all match:
    // the content check below then fails, which is the point (it must never pass by hiding it).
    assert.equal(await contentAt(e, taskId, 'src/f9.txt'), fs.readFileSync(f, 'utf8'));
    assert.ok(r.filesChanged >= 2, 'the new file and the filler');
  });
});

