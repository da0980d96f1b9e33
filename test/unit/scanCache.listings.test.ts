import * as assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Engine } from '../../src/core/engine/engine';
import { SCAN_CACHE_FILE, loadScanCache, scanCacheIdentity } from '../../src/core/snapshot';
import { openEngine, tmpDir } from '../support/tmp';

/**
 * The directory listings the scan cache carries between processes (scan/scanCache.ts,
 * ListingCache.seed): a fresh process lists again only the directories whose inode,
 * mtime or ctime moved. Each test tries to make a persisted listing hide a change, and
 * fails if it did: the checkpoint after it must record the change.
 */
describe('scan cache: directory listings between processes', () => {
  let sandbox: ReturnType<typeof tmpDir>;
  let ws: string;
  let engine: Engine | undefined;
  const OLD = new Date(Date.now() - 3600_000);
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  beforeEach(async () => {
    sandbox = tmpDir('wp-scanlist-');
    ws = path.join(sandbox.dir, 'ws');
    for (const d of ['src', 'src/deep', 'lib']) fs.mkdirSync(path.join(ws, d), { recursive: true });
    for (let i = 0; i < 12; i++) for (const d of ['src', 'src/deep', 'lib']) fs.writeFileSync(path.join(ws, d, `f${i}.txt`), `${d} ${i}\n`);
    fs.writeFileSync(path.join(ws, 'src', 'a.log'), 'a log\n');
    fs.writeFileSync(path.join(ws, '.gitignore'), '*.log\n');
    for (const d of ['src', 'src/deep', 'lib']) for (let i = 0; i < 12; i++) fs.utimesSync(path.join(ws, d, `f${i}.txt`), OLD, OLD);
    // Whole-millisecond mtimes, so a test can put one back exactly (utimes takes milliseconds).
    for (const d of ['src/deep', 'src', 'lib']) fs.utimesSync(path.join(ws, d), OLD, OLD);
    // Past the racy window of the first scan (ctime cannot be set back): its listings are kept.
    await sleep(150);
  });
  afterEach(async () => {
    await engine?.close();
    engine = undefined;
    sandbox.cleanup();
  });

  const storeDir = () => path.join(ws, '.waypoint');
  const identity = () => scanCacheIdentity({ roots: [{ name: path.basename(ws), dir: ws }], storeDir: storeDir() });
  async function fresh(): Promise<Engine> {
    await engine?.close();
    engine = await openEngine(ws);
    return engine;
  }
  /** A task with its base and one more checkpoint, then the process "exits" (the cache is written at close). */
  async function started(): Promise<string> {
    const e = await fresh();
    const { taskId } = await e.startTask({ goal: 'listings', leaseTtlMs: 3_600_000 });
    // Past the racy window of the root, whose mtime moved when .waypoint was created.
    await sleep(150);
    await e.checkpoint({ taskId, label: 'one more' });
    await e.close();
    engine = undefined;
    return taskId;
  }
  async function lastManifest(e: Engine, taskId: string) {
    return e.workspaceSnapshots!.load(e.queries.checkpoints(taskId).at(-1)!);
  }
  async function contentAt(e: Engine, taskId: string, key: string): Promise<string> {
    const entry = (await lastManifest(e, taskId)).get(key);
    assert.ok(entry?.type === 'file', `${key} is a file in the last checkpoint`);
    return (await e.workspaceSnapshots!.blobs.get(entry.hash)).toString('utf8');
  }
  const stats = (e: Engine) => e.workspaceSnapshots!.lastScanStats!;

  it('carries every directory listing the walk took, and a fresh process lists none of an unchanged tree again', async () => {
    const taskId = await started();
    const ref = (await fresh()).queries.checkpoints(taskId).at(-1)!.manifestRef!;
    await engine!.close();
    engine = undefined;
    const c = loadScanCache(storeDir(), identity(), ref);
    assert.ok(typeof c !== 'string', `the cache loads (${String(c)})`);
    assert.deepEqual([...c.listings.keys()].map((k) => k.split('\0')[1]).sort(), ['', 'lib', 'src', 'src/deep']);
    const src = c.listings.get(`${ws}\0src`)!;
    assert.equal(src.ino, fs.statSync(path.join(ws, 'src')).ino);
    assert.ok(src.dirents.some((d) => d.name === 'deep' && d.isDirectory()));
    assert.ok(src.dirents.some((d) => d.name === 'a.log' && d.isFile()), 'ignored names are listed too: the rules are applied on every walk');
    const e = await fresh();
    const r = await e.checkpoint({ taskId, label: 'unchanged' });
    assert.equal(e.workspaceSnapshots!.lastScanCache, 'hit');
    assert.equal(r.filesChanged, 0);
    assert.equal(stats(e).dirsListed, 0);
    assert.equal(stats(e).dirsFromCache, 4);
  });

  it('a file added to a directory whose mtime is put back is seen (its ctime moved)', async () => {
    const taskId = await started();
    const dir = path.join(ws, 'src', 'deep');
    const before = fs.statSync(dir);
    fs.writeFileSync(path.join(dir, 'new.txt'), 'new\n');
    fs.utimesSync(dir, OLD, OLD);
    assert.equal(fs.statSync(dir).mtimeMs, before.mtimeMs);
    const e = await fresh();
    const r = await e.checkpoint({ taskId, label: 'after' });
    assert.equal(e.workspaceSnapshots!.lastScanCache, 'hit');
    assert.equal(r.filesChanged, 1);
    assert.equal(await contentAt(e, taskId, 'src/deep/new.txt'), 'new\n');
    assert.equal(stats(e).dirsListed, 1, 'only that directory is listed again');
  });

  it('a file removed from a directory whose times look unchanged is recorded as deleted', async () => {
    const taskId = await started();
    const dir = path.join(ws, 'lib');
    const before = fs.statSync(dir);
    fs.rmSync(path.join(dir, 'f3.txt'));
    fs.utimesSync(dir, OLD, OLD);
    assert.equal(fs.statSync(dir).mtimeMs, before.mtimeMs);
    const e = await fresh();
    await e.checkpoint({ taskId, label: 'after' });
    assert.equal((await lastManifest(e, taskId)).has('lib/f3.txt'), false);
  });

  it('a directory replaced by another (same name, same mtime) is listed afresh', async () => {
    const taskId = await started();
    const dir = path.join(ws, 'lib');
    const before = fs.statSync(dir);
    fs.rmSync(dir, { recursive: true });
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, 'other.txt'), 'other\n');
    fs.utimesSync(dir, OLD, OLD);
    assert.equal(fs.statSync(dir).mtimeMs, before.mtimeMs);
    const root = fs.statSync(ws);
    fs.utimesSync(ws, root.atime, root.mtime);
    const e = await fresh();
    await e.checkpoint({ taskId, label: 'after' });
    const m = await lastManifest(e, taskId);
    assert.equal(await contentAt(e, taskId, 'lib/other.txt'), 'other\n');
    assert.equal([...m.keys()].filter((k) => k.startsWith('lib/f')).length, 0, 'the old directory`s files are gone');
  });

  it('a directory replaced by a symlink to a copy of it outside is not followed', async () => {
    const taskId = await started();
    const outside = path.join(sandbox.dir, 'outside');
    fs.cpSync(path.join(ws, 'lib'), outside, { recursive: true, preserveTimestamps: true });
    fs.writeFileSync(path.join(outside, 'secret.txt'), 'outside\n');
    fs.rmSync(path.join(ws, 'lib'), { recursive: true });
    fs.symlinkSync(outside, path.join(ws, 'lib'));
    const e = await fresh();
    await e.checkpoint({ taskId, label: 'after' });
    const m = await lastManifest(e, taskId);
    assert.equal(m.get('lib')?.type, 'symlink');
    assert.equal([...m.keys()].filter((k) => k.startsWith('lib/')).length, 0);
  });

  it('a .gitignore edited is applied to names taken from a persisted listing', async () => {
    const taskId = await started();
    assert.equal((await lastManifest((await fresh())!, taskId)).has('src/a.log'), false, 'ignored at first');
    await engine!.close();
    engine = undefined;
    // Same size, so only its content says the rules changed; the listing of src is unchanged.
    fs.writeFileSync(path.join(ws, '.gitignore'), '*.tmp\n');
    const e = await fresh();
    await e.checkpoint({ taskId, label: 'after' });
    assert.equal(stats(e).dirsFromCache >= 3, true, 'src, src/deep and lib came from the cache');
    assert.equal(await contentAt(e, taskId, 'src/a.log'), 'a log\n');
  });

  it('a directory whose mtime is within the racy window of the scan (or after it) is not persisted', async () => {
    const taskId = await started();
    const e = await fresh();
    // Changed "as the scan began": its times cannot vouch for a listing (a later change in the same tick would not move them).
    fs.writeFileSync(path.join(ws, 'lib', 'late.txt'), 'late\n');
    const soon = new Date(Date.now() + 10_000);
    fs.utimesSync(path.join(ws, 'lib'), soon, soon);
    await e.checkpoint({ taskId, label: 'racy' });
    const ref = e.queries.checkpoints(taskId).at(-1)!.manifestRef!;
    await e.close();
    engine = undefined;
    const c = loadScanCache(storeDir(), identity(), ref);
    assert.ok(typeof c !== 'string');
    assert.equal(c.listings.has(`${ws}\0lib`), false);
    assert.equal(c.listings.has(`${ws}\0src`), true);
  });

  /** Rewrites the cache's listing section with `edit` and a checksum that matches, as damage a checksum cannot see would. */
  function forgeListings(edit: (dirs: unknown[][]) => void): void {
    const bytes = fs.readFileSync(path.join(storeDir(), SCAN_CACHE_FILE));
    const nl = bytes.indexOf(0x0a);
    const header = JSON.parse(bytes.subarray(0, nl).toString('utf8')) as { sha256: string };
    const body = bytes.subarray(nl + 1);
    const nFiles = body.readUInt32LE(0);
    const tailAt = 8 + body.readUInt32LE(4) + nFiles * 64;
    const tail = JSON.parse(body.toString('utf8', tailAt)) as [unknown[], unknown[][]];
    edit(tail[1]);
    const next = Buffer.concat([body.subarray(0, tailAt), Buffer.from(JSON.stringify(tail), 'utf8')]);
    header.sha256 = createHash('sha256').update(next).digest('hex');
    fs.writeFileSync(path.join(storeDir(), SCAN_CACHE_FILE), Buffer.concat([Buffer.from(`${JSON.stringify(header)}\n`), next]));
  }

  for (const [name, edit] of [
    ['a name with a slash in it', (dirs: unknown[][]) => (dirs[0]![4] = `${String(dirs[0]![4])}/../x`)],
    ['a kind that is no kind', (dirs: unknown[][]) => (dirs[0]![5] = String(dirs[0]![5]).replace(/.$/, '7'))],
    ['names and kinds of different counts', (dirs: unknown[][]) => (dirs[0]![5] = `${String(dirs[0]![5])}1`)],
    ['a relative root', (dirs: unknown[][]) => (dirs[0]![0] = 'ws\0src')],
    ['a directory twice', (dirs: unknown[][]) => dirs.push(dirs[0]!)],
    ['a negative inode', (dirs: unknown[][]) => (dirs[0]![1] = -1)],
  ] as const) {
    it(`a listing with ${name} (checksum intact) refuses the cache whole, and the change is seen`, async () => {
      const taskId = await started();
      forgeListings(edit);
      fs.writeFileSync(path.join(ws, 'src', 'f5.txt'), 'five, changed\n');
      const e = await fresh();
      const r = await e.checkpoint({ taskId, label: 'after' });
      assert.equal(e.workspaceSnapshots!.lastScanCache, 'damaged');
      assert.equal(r.filesChanged, 1);
      assert.equal(await contentAt(e, taskId, 'src/f5.txt'), 'five, changed\n');
    });
  }
});
