import assert from 'node:assert/strict';
import fss from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { ListingCache, ManifestStore, applyRestore, planRestore, scan, type Manifest } from '../../src/core/snapshot/index.js';
import { TempDirs, ageTree, newStore, readTree, writeTree } from './snapshot.helpers.js';

/**
 * DESIGN invariant 7: a checkpoint never records as absent a path it could not read;
 * what it did not capture is recorded and reported, and no rollback deletes it.
 * Read errors are injected at the fs boundary the scanner uses (root reads anything,
 * so permissions are tested as a non-root user in engine.notCaptured.test.ts).
 */
describe('snapshot: what a scan could not capture', () => {
  const tmp = new TempDirs();
  let restore: (() => void) | null = null;
  afterEach(async () => {
    restore?.();
    restore = null;
    await tmp.cleanup();
  });

  /** Makes fss.openSync fail with `code` for paths ending in `suffix` while `failing()` says so. */
  function failOpen(suffix: string, code: string, failing: () => boolean): void {
    const real = fss.openSync;
    (fss as { openSync: unknown }).openSync = (p: fss.PathLike, ...rest: unknown[]) => {
      if (typeof p === 'string' && p.endsWith(suffix) && failing()) throw Object.assign(new Error(`${code}: injected, open '${p}'`), { code });
      return (real as (...a: unknown[]) => number)(p, ...rest);
    };
    restore = () => {
      (fss as { openSync: unknown }).openSync = real;
    };
  }

  async function workspace() {
    const ws = await tmp.make();
    await writeTree(ws, { 'a.txt': 'a\n', 'src/sub/b.txt': 'b\n', 'src/sub/c.txt': 'c\n', 'src/keep.txt': 'k\n' });
    await ageTree(ws);
    return { ws, roots: [{ name: 'w', dir: ws }], blobs: await newStore(tmp) };
  }

  it('a directory it cannot open (EMFILE past the retries) is recorded as not captured, and a restore to it deletes and changes nothing below it', async () => {
    const { ws, roots, blobs } = await workspace();
    failOpen('/sub', 'EMFILE', () => true);
    const target = await scan({ roots, blobs });
    restore!();
    assert.deepEqual(target.manifest.get('src/sub'), { type: 'uncaptured', code: 'EMFILE', dir: true });
    assert.deepEqual(target.unreadable.map((u) => [u.path, u.code]), [['src/sub', 'EMFILE']]);
    // Later: the directory is readable, a file in it changed and one added.
    await fs.writeFile(path.join(ws, 'src/sub/b.txt'), 'b changed\n');
    await fs.writeFile(path.join(ws, 'src/sub/new.txt'), 'new\n');
    await fs.writeFile(path.join(ws, 'a.txt'), 'a changed\n');
    const current = (await scan({ roots, blobs })).manifest;
    const before = await readTree(ws);
    const plan = planRestore(current, target.manifest, { isHeld: () => true });
    assert.deepEqual(plan.removes, []);
    assert.deepEqual(plan.writes.map((w) => w.path), ['a.txt']);
    assert.deepEqual(plan.kept, ['src/sub/b.txt', 'src/sub/c.txt', 'src/sub/new.txt'].map((p) => ({ path: p, reason: 'not_captured_in_target' })));
    await applyRestore(plan, roots, blobs);
    const after = await readTree(ws);
    for (const k of ['src/sub/b.txt', 'src/sub/c.txt', 'src/sub/new.txt']) assert.equal(after.get(k), before.get(k), k);
    assert.equal(fss.readFileSync(path.join(ws, 'a.txt'), 'utf8'), 'a\n');
  });

  it('a transient EMFILE is retried and everything is captured', async () => {
    const { roots, blobs } = await workspace();
    let failures = 3;
    failOpen('/sub', 'EMFILE', () => failures-- > 0);
    const r = await scan({ roots, blobs });
    restore!();
    assert.equal(failures, -1, 'the open was retried past its failures');
    assert.deepEqual(r.unreadable, []);
    assert.deepEqual([...r.manifest.keys()].sort(), ['a.txt', 'src/keep.txt', 'src/sub/b.txt', 'src/sub/c.txt']);
  });

  it('a file it cannot open is recorded as not captured, and a restore neither removes nor overwrites it', async () => {
    const { ws, roots, blobs } = await workspace();
    failOpen('/c.txt', 'EACCES', () => true);
    const target = (await scan({ roots, blobs })).manifest;
    restore!();
    assert.deepEqual(target.get('src/sub/c.txt'), { type: 'uncaptured', code: 'EACCES' });
    await fs.writeFile(path.join(ws, 'src/sub/c.txt'), 'c changed\n');
    const current = (await scan({ roots, blobs })).manifest;
    const plan = planRestore(current, target, { isHeld: () => true });
    assert.deepEqual(plan.removes, []);
    assert.deepEqual(plan.writes, []);
    assert.deepEqual(plan.kept, [{ path: 'src/sub/c.txt', reason: 'not_captured_in_target' }]);
    // The other way: the workspace holds what the current scan could not read; the target's content is not written over it.
    const back = planRestore(target, current, { isHeld: () => true });
    assert.deepEqual(back.writes, []);
    assert.deepEqual(back.kept, [{ path: 'src/sub/c.txt', reason: 'not_captured_in_current' }]);
    const gap: Manifest = new Map([['src', { type: 'uncaptured', code: 'EACCES', dir: true }]]);
    const overGap = planRestore(gap, current, { isHeld: () => true });
    assert.deepEqual(overGap.writes.map((w) => w.path), ['a.txt']);
    assert.deepEqual(overGap.kept.map((k) => [k.path, k.reason]), ['src', 'src/keep.txt', 'src/sub/b.txt', 'src/sub/c.txt'].map((p) => [p, 'not_captured_in_current']));
  });

  it('a full rescan on the stat workers records a changed file it cannot open as not captured, and a directory it cannot list as a gap', async function () {
    if (process.platform !== 'linux') this.skip(); // the stat workers run where directories are read through /proc
    const { ws, roots, blobs } = await workspace();
    const listings = new ListingCache(1); // stat workers from the first previous entry
    try {
      const first = await scan({ roots, blobs, listings });
      await fs.writeFile(path.join(ws, 'src/sub/c.txt'), 'c changed, longer\n');
      await fs.writeFile(path.join(ws, 'src/keep.txt'), 'k changed, longer\n');
      failOpen('/c.txt', 'EACCES', () => true);
      const next = await scan({ roots, blobs, listings, previous: first.manifest });
      restore!();
      assert.deepEqual(next.manifest.get('src/sub/c.txt'), { type: 'uncaptured', code: 'EACCES' });
      assert.equal(next.manifest.get('src/keep.txt')?.type, 'file');
      assert.ok(next.touched?.has('src/sub/c.txt'));
      // A new file makes src/sub list again; now it cannot be opened at all.
      await fs.writeFile(path.join(ws, 'src/sub/d.txt'), 'd\n');
      failOpen('/sub', 'EACCES', () => true);
      const third = await scan({ roots, blobs, listings, previous: next.manifest });
      restore!();
      assert.deepEqual(third.manifest.get('src/sub'), { type: 'uncaptured', code: 'EACCES', dir: true });
      assert.deepEqual([...third.manifest.keys()].filter((k) => k.startsWith('src/sub/')), []);
      const plan = planRestore(first.manifest, third.manifest, { isHeld: () => true });
      assert.deepEqual(plan.removes, [], 'nothing below the gap is removed');
    } finally {
      await listings.close();
    }
  });

  it('a dirty path below a directory the previous scan could not list rescans that whole directory', async () => {
    const { roots, blobs } = await workspace();
    failOpen('/sub', 'EACCES', () => true);
    const first = await scan({ roots, blobs });
    restore!();
    assert.equal(first.manifest.get('src/sub')?.type, 'uncaptured');
    const next = await scan({ roots, blobs, previous: first.manifest, dirty: ['src/sub/b.txt'] });
    assert.equal(next.manifest.has('src/sub'), false);
    assert.deepEqual([...next.manifest.keys()].filter((k) => k.startsWith('src/sub')).sort(), ['src/sub/b.txt', 'src/sub/c.txt']);
  });

  it('uncaptured entries survive full and delta manifests', async () => {
    const { roots, blobs } = await workspace();
    const store = new ManifestStore(blobs, { fullEvery: 3 });
    failOpen('/sub', 'EACCES', () => true);
    const m = (await scan({ roots, blobs })).manifest;
    restore!();
    const full = await store.save(m, null);
    const m2 = new Map(m);
    m2.set('src/other', { type: 'uncaptured', code: 'ENOTREG' });
    const delta = await store.save(m2, full);
    const fresh = new ManifestStore(blobs);
    assert.deepEqual((await fresh.load(full)).get('src/sub'), { type: 'uncaptured', code: 'EACCES', dir: true });
    assert.deepEqual((await fresh.load(delta)).get('src/other'), { type: 'uncaptured', code: 'ENOTREG' });
  });

  it('names it cannot record are reported, never silently left out: NFD, backslash, newline, drive prefix, .GIT, .Waypoint', async () => {
    const ws = await tmp.make();
    const names = ['cafe\u0301.txt', 'back\\slash.txt', 'new\nline.txt', 'x:drive.txt'];
    await writeTree(ws, Object.fromEntries([...names.map((n) => [n, 'x']), ['.GIT/config', 'x'], ['.Waypoint/f', 'x'], ['ok.txt', 'ok'], ['.git/HEAD', 'x']]));
    const r = await scan({ roots: [{ name: 'w', dir: ws }], blobs: await newStore(tmp) });
    const codes = new Map(r.unreadable.map((u) => [u.path, u.code]));
    for (const n of names) assert.equal(codes.get(n), 'EUNSAFEPATH', JSON.stringify(n));
    assert.equal(codes.get('.GIT'), 'ERESERVED');
    assert.equal(codes.get('.Waypoint'), 'ERESERVED');
    assert.equal(codes.has('.git'), false, 'the real .git is not worth a word');
    assert.deepEqual([...r.manifest.keys()], ['ok.txt']);
  });
});
