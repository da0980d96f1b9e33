/**
 * The scanner's parts on their own (src/core/snapshot/scan): the directory context's
 * descriptor handling, the back-pressure bounds, the dirty-hint targets and a stat
 * rescan's bookkeeping. The whole scanner is covered by snapshot.scanner.test.ts and
 * fuzz.scanner.test.ts; these pin what each part promises the others.
 */
import assert from 'node:assert/strict';
import fss from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { IgnoreRules } from '../../src/core/snapshot/ignoreRules.js';
import type { Manifest } from '../../src/core/snapshot/manifest.js';
import type { SnapshotRoot } from '../../src/core/snapshot/paths.js';
import { Slots, WorkTracker } from '../../src/core/snapshot/scan/backpressure.js';
import { DirContext } from '../../src/core/snapshot/scan/dirContext.js';
import { buildDirPrefixes, dirtyTargets, touchedDirs } from '../../src/core/snapshot/scan/dirtyHint.js';
import { PROC_FD } from '../../src/core/snapshot/scan/fsAccess.js';
import { StatRescan } from '../../src/core/snapshot/scan/statRescan.js';
import type { StatPool } from '../../src/core/snapshot/statPool.js';
import { TempDirs, writeTree } from './snapshot.helpers.js';

const file = (hash: string) => ({ type: 'file' as const, hash, size: 1, mode: 0o644 as const, mtimeMs: 1, ino: 1 });
const isOpen = (fd: number) => {
  try {
    fss.fstatSync(fd);
    return true;
  } catch {
    return false;
  }
};

describe('snapshot scanner parts', () => {
  const tmp = new TempDirs();
  afterEach(() => tmp.cleanup());

  describe('DirContext', () => {
    it('a child is opened through its parent and lists the same entries; the last release closes its descriptor', async function () {
      if (!PROC_FD) this.skip();
      const ws = await tmp.make();
      await writeTree(ws, { 'a/b/one.txt': '1', 'a/b/two.txt': '2' });
      const root: SnapshotRoot = { name: 'ws', dir: ws };
      const top = new DirContext(root, '', '', IgnoreRules.root([]));
      top.open();
      const a = DirContext.child(top, 'a');
      a.open();
      const b = DirContext.child(a, 'a/b');
      b.open();
      assert.equal(b.abs, path.join(ws, 'a', 'b'));
      assert.equal(b.relBase, 'a/b/');
      assert.deepEqual(fss.readdirSync(b.io).sort(), ['one.txt', 'two.txt']);
      assert.equal(fss.readFileSync(b.entryIo('two.txt'), 'utf8'), '2');
      b.refs++; // a stat batch still holds it
      b.release();
      assert.ok(isOpen(b.fd), 'still held by the batch');
      b.release();
      assert.ok(!isOpen(b.fd), 'the last release closes it');
      a.release();
      top.release();
    });

    it('a directory swapped for a symlink is refused (ESYMLINK), not followed', async function () {
      if (!PROC_FD) this.skip();
      const ws = await tmp.make();
      const outside = await tmp.make();
      await writeTree(ws, { 'd/x.txt': 'x' });
      await writeTree(outside, { 'secret.txt': 's' });
      const root: SnapshotRoot = { name: 'ws', dir: ws };
      const top = new DirContext(root, '', '', IgnoreRules.root([]));
      top.open();
      await fs.rm(path.join(ws, 'd'), { recursive: true });
      await fs.symlink(outside, path.join(ws, 'd'));
      const d = DirContext.child(top, 'd');
      assert.throws(() => d.open(), (e: NodeJS.ErrnoException) => e.code === 'ESYMLINK' && e.message.includes('changed into a symlink'));
      assert.equal(d.fd, -1);
      top.release();
    });

    it('a lazily listed directory opens from the root on first need, and only then', async function () {
      if (!PROC_FD) this.skip();
      const ws = await tmp.make();
      await writeTree(ws, { 'p/q/f.txt': 'f' });
      const q = new DirContext({ name: 'ws', dir: ws }, '', 'p/q', IgnoreRules.root([]));
      q.openLazily();
      assert.equal(q.fd, -1);
      assert.equal(fss.readFileSync(q.entryIo('f.txt'), 'utf8'), 'f');
      assert.ok(q.fd >= 0 && !q.lazy);
      q.release();
      assert.ok(!isOpen(q.fd));
    });
  });

  describe('back-pressure', () => {
    it('Slots never holds more than its max, even when a release wakes several waiters', async () => {
      const slots = new Slots(2);
      let held = 0;
      let most = 0;
      const worker = async () => {
        if (!slots.take()) await slots.acquire();
        held++;
        most = Math.max(most, held);
        await new Promise((r) => setImmediate(r));
        held--;
        slots.release();
      };
      await Promise.all(Array.from({ length: 9 }, worker));
      assert.equal(most, 2);
      assert.ok(slots.take() && slots.take() && !slots.take(), 'every slot came back');
    });

    it('WorkTracker.drain waits for work that tracked work starts, then throws the first failure', async () => {
      const work = new WorkTracker();
      const order: string[] = [];
      work.track(
        (async () => {
          await new Promise((r) => setTimeout(r, 5));
          order.push('outer');
          work.track(
            (async () => {
              await new Promise((r) => setTimeout(r, 5));
              order.push('inner');
              throw new Error('first');
            })(),
          );
        })(),
      );
      work.track(
        (async () => {
          await new Promise((r) => setTimeout(r, 40));
          order.push('later');
          throw new Error('second');
        })(),
      );
      await assert.rejects(work.drain(), /first/);
      assert.deepEqual(order, ['outer', 'inner', 'later'], 'drain waited for all of it');
    });
  });

  describe('dirty-hint targets', () => {
    it('widens .gitignore and .git/info/exclude edits to their directory, drops what is outside or covered', async () => {
      const ws = await tmp.make();
      const roots: SnapshotRoot[] = [{ name: 'ws', dir: ws }];
      const previous: Manifest = new Map([['src/a.ts', file('1')]]);
      const rels = (dirty: string[]) => dirtyTargets(roots, previous, dirty).map((t) => t.rel).sort();
      assert.deepEqual(rels(['src/.gitignore']), ['src']);
      assert.deepEqual(rels(['vendor/lib/.git/info/exclude']), ['vendor/lib']);
      assert.deepEqual(rels(['.git/HEAD']), [], 'inside .git: nothing to look at');
      assert.deepEqual(rels(['/somewhere/else.txt', '../up.txt']), [], 'outside the root');
      assert.deepEqual(rels(['src/a.ts', 'src', 'docs/x.md']), ['docs/x.md', 'src'], 'src/a.ts is covered by src');
      assert.deepEqual(rels([path.join(ws, 'src', 'b.ts')]), ['src/b.ts'], 'an absolute path becomes its key');
    });

    it('a path below a directory the previous scan could not list looks at that whole directory again', async () => {
      const ws = await tmp.make();
      const roots: SnapshotRoot[] = [{ name: 'ws', dir: ws }];
      const previous: Manifest = new Map([['locked', { type: 'uncaptured' as const, code: 'EACCES', dir: true as const }]]);
      assert.deepEqual(
        dirtyTargets(roots, previous, ['locked/deep/f.txt']).map((t) => t.rel),
        ['locked'],
      );
    });

    it('directory prefixes and touched directories are named as the walk and the listing cache name them', () => {
      const previous: Manifest = new Map([
        ['a/b/c.txt', file('1')],
        ['a/d.txt', file('2')],
        ['top.txt', file('3')],
      ]);
      assert.deepEqual([...buildDirPrefixes(previous)].sort(), ['a', 'a/b']);
      const roots: SnapshotRoot[] = [
        { name: 'one', dir: '/w/one' },
        { name: 'two', dir: '/w/two' },
      ];
      assert.deepEqual([...touchedDirs(roots, ['one/a/b.txt', 'two/c.txt'])!].sort(), ['/w/one\0a', '/w/two\0']);
      assert.equal(touchedDirs(roots, ['nowhere/x.txt']), null, 'a key no root holds: no plan is carried');
    });
  });

  describe('StatRescan', () => {
    it('drops the previous entries the walk did not meet, and counts them as touched', () => {
      const rescan = new StatRescan({} as StatPool);
      const previous: Manifest = new Map([
        ['kept.txt', file('1')],
        ['gone.txt', file('2')],
      ]);
      const manifest: Manifest = new Map(previous);
      rescan.seenPrev.push('kept.txt');
      rescan.dropUnmet(previous, manifest);
      assert.deepEqual([...manifest.keys()], ['kept.txt']);
      assert.deepEqual([...rescan.touched], ['gone.txt']);
    });
  });
});
