import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fss from 'node:fs';
import path from 'node:path';
import { scan, type Manifest } from '../../src/core/snapshot/index.js';
import { readRegularSync } from '../../src/core/snapshot/noBlockRead.js';
import { TempDirs, ageTree, newStore, writeTree } from './snapshot.helpers.js';

/**
 * Reads of workspace files that never block and never store a lie (DESIGN invariants
 * 7 and 10), on real FIFOs, real non-UTF-8 names and a real concurrent writer:
 * - a file swapped for a FIFO between its listing and its read is reported as not
 *   captured, and the scan goes on (a blocking open would stop the whole thread);
 * - an ignore file that is a FIFO does not stop the scan;
 * - names that are not UTF-8 are reported, byte-exact, never dropped in silence;
 * - a file rewritten in place while it is read is never stored as a mix of versions.
 *
 * A scan that does block is released by an unblocker process that opens the FIFO for
 * writing after UNBLOCK_MS, so such a test fails on its time instead of hanging.
 */
const UNBLOCK_MS = 4000;
/** What a scan of a few files may take on a loaded 2-core machine, well under UNBLOCK_MS. */
const QUICK_MS = 2500;

/** A process that, after `afterMs`, keeps opening `fifos` for writing (non-blocking) until `forMs` has passed, releasing any reader blocked in open. */
function unblocker(fifos: string[], afterMs = UNBLOCK_MS, forMs = 8000): ChildProcess {
  const src = `
const fs = require('fs');
const fifos = ${JSON.stringify(fifos)};
const end = Date.now() + ${afterMs} + ${forMs};
setTimeout(function tick() {
  for (const f of fifos) {
    try { fs.closeSync(fs.openSync(f, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK)); } catch {}
  }
  if (Date.now() < end) setTimeout(tick, 20);
}, ${afterMs});`;
  return spawn(process.execPath, ['-e', src], { stdio: 'ignore' });
}

function mkfifo(p: string): void {
  assert.equal(spawnSync('mkfifo', [p], { stdio: 'ignore' }).status, 0, `mkfifo ${p}`);
}

describe('snapshot: reads that never block and never lie', function () {
  this.timeout(120_000);
  const tmp = new TempDirs();
  const children: ChildProcess[] = [];
  before(function () {
    if (process.platform !== 'linux') this.skip();
  });
  afterEach(async () => {
    for (const c of children.splice(0)) c.kill('SIGKILL');
    await tmp.cleanup();
  });

  it('a file swapped for a FIFO after it was listed is reported as not captured (ENOTREG), quickly, small or large, new or changed', async () => {
    for (const mode of ['new', 'changed'] as const) {
      const ws = await tmp.make();
      const side = await tmp.make('wp-side-');
      await writeTree(ws, { 'small.txt': 'small\n', 'big.bin': Buffer.alloc(200_000, 1), 'keep.txt': 'keep\n' });
      await ageTree(ws);
      const roots = [{ name: 'w', dir: ws }];
      const blobs = await newStore(tmp);
      let previous: Manifest | undefined;
      if (mode === 'changed') {
        previous = (await scan({ roots, blobs })).manifest;
        // Changed since: the stat cache cannot vouch, so both are read again.
        fss.writeFileSync(path.join(ws, 'small.txt'), 'small, changed\n');
        fss.writeFileSync(path.join(ws, 'big.bin'), Buffer.alloc(200_001, 2));
      }
      const fifos = ['small.txt', 'big.bin'].map((n) => path.join(side, n));
      for (const f of fifos) mkfifo(f);
      children.push(unblocker(['small.txt', 'big.bin'].map((n) => path.join(ws, n))));
      const hooks = {
        beforeRead: (abs: string, key: string) => {
          // The racer's move: a FIFO renamed over the file between its listing and its open.
          if (key === 'small.txt' || key === 'big.bin') fss.renameSync(path.join(side, key), abs);
        },
      };
      const t0 = performance.now();
      const r = await scan({ roots, blobs, hooks, ...(previous ? { previous } : {}) });
      const ms = performance.now() - t0;
      assert.ok(ms < QUICK_MS, `${mode}: the scan took ${ms.toFixed(0)} ms: it blocked on a FIFO until the unblocker opened it`);
      for (const key of ['small.txt', 'big.bin']) {
        assert.deepEqual(r.manifest.get(key), { type: 'uncaptured', code: 'ENOTREG' }, `${mode}: ${key} is recorded as not captured, never as absent`);
        assert.ok(r.unreadable.some((u) => u.path === key && u.code === 'ENOTREG'), `${mode}: ${key} is reported: ${JSON.stringify(r.unreadable)}`);
      }
      assert.equal(r.manifest.get('keep.txt')?.type, 'file');
    }
  });

  it('an ignore file that is a FIFO (.gitignore, .git/info/exclude) does not stop the scan', async () => {
    const ws = await tmp.make();
    await writeTree(ws, { 'a.txt': 'a\n', 'sub/b.txt': 'b\n', 'repo/.git/HEAD': 'ref: refs/heads/main\n', 'repo/c.txt': 'c\n' });
    fss.mkdirSync(path.join(ws, 'repo/.git/info'), { recursive: true });
    mkfifo(path.join(ws, 'sub/.gitignore'));
    mkfifo(path.join(ws, 'repo/.git/info/exclude'));
    children.push(unblocker([path.join(ws, 'sub/.gitignore'), path.join(ws, 'repo/.git/info/exclude')]));
    const t0 = performance.now();
    const r = await scan({ roots: [{ name: 'w', dir: ws }], blobs: await newStore(tmp) });
    const ms = performance.now() - t0;
    assert.ok(ms < QUICK_MS, `the scan took ${ms.toFixed(0)} ms: it blocked reading an ignore file that is a FIFO`);
    assert.deepEqual([...r.manifest.keys()].filter((k) => r.manifest.get(k)!.type === 'file').sort(), ['a.txt', 'repo/c.txt', 'sub/b.txt']);
    assert.deepEqual(r.manifest.get('sub/.gitignore'), { type: 'uncaptured', code: 'ENOTREG' });
  });

  it('readRegularSync refuses a FIFO at once, and reads a regular file whole', async () => {
    const dir = await tmp.make();
    mkfifo(path.join(dir, 'pipe'));
    fss.writeFileSync(path.join(dir, 'file'), 'content');
    fss.symlinkSync('file', path.join(dir, 'link'));
    children.push(unblocker([path.join(dir, 'pipe')]));
    const t0 = performance.now();
    assert.equal(readRegularSync(path.join(dir, 'pipe')), null);
    assert.ok(performance.now() - t0 < QUICK_MS);
    assert.equal(readRegularSync(path.join(dir, 'file'))?.bytes.toString(), 'content');
    assert.equal(readRegularSync(path.join(dir, 'link'))?.bytes.toString(), 'content');
    assert.equal(readRegularSync(path.join(dir, 'link'), { follow: false }), null);
    assert.equal(readRegularSync(dir), null);
  });

  it('names that are not UTF-8 are reported byte-exact (bytes as \\xNN), files and directories, never left out in silence', async () => {
    const ws = await tmp.make();
    await writeTree(ws, { 'ok.txt': 'ok\n', 'real\uFFFD.txt': 'a real U+FFFD in a UTF-8 name\n' });
    const b = (s: string | number[]) => (typeof s === 'string' ? Buffer.from(s, 'utf8') : Buffer.from(s));
    const at = (...parts: (string | number[])[]) => Buffer.concat([b(ws + '/'), ...parts.map(b)]);
    fss.writeFileSync(at('caf', [0xe9], '.txt'), 'latin-1 name\n');
    // Two names that decode to the same string ("\uFFFD.txt"): both reported.
    fss.writeFileSync(at([0xff], '.txt'), 'ff\n');
    fss.writeFileSync(at([0xfe], '.txt'), 'fe\n');
    fss.mkdirSync(at('d', [0xe9]));
    fss.writeFileSync(at('d', [0xe9], '/inner.txt'), 'inner\n');
    const roots = [{ name: 'w', dir: ws }];
    const blobs = await newStore(tmp);
    const expected = [
      ['\\xFE.txt', 'EUNSAFEPATH'],
      ['\\xFF.txt', 'EUNSAFEPATH'],
      ['caf\\xE9.txt', 'EUNSAFEPATH'],
      ['d\\xE9', 'EUNSAFEPATH'],
    ];
    const first = await scan({ roots, blobs });
    assert.deepEqual(first.unreadable.map((u) => [u.path, u.code]).sort(), expected);
    assert.ok(first.unreadable.every((u) => /not valid UTF-8/.test(u.message)), JSON.stringify(first.unreadable));
    assert.deepEqual([...first.manifest.keys()].sort(), ['ok.txt', 'real\uFFFD.txt']);
    // A rescan with the stat cache (and the listing cache's reuse) reports them again.
    const again = await scan({ roots, blobs, previous: first.manifest });
    assert.deepEqual(again.unreadable.map((u) => [u.path, u.code]).sort(), expected);
  });

  it('a file rewritten in place by another process while checkpoints run is never stored torn: each stored content is one of the writer\'s versions, or it is reported as changing while read', async function () {
    this.timeout(180_000);
    const ws = await tmp.make();
    const roots = [{ name: 'w', dir: ws }];
    const SIZES = { 'big.bin': 400 * 1024, 'small.bin': 48 * 1024 };
    for (const [n, size] of Object.entries(SIZES)) fss.writeFileSync(path.join(ws, n), Buffer.alloc(size, 0));
    // Enough new files before them that a first scan hands new files to the worker threads.
    for (let i = 0; i < 300; i++) fss.writeFileSync(path.join(ws, `a${String(i).padStart(3, '0')}.txt`), `filler ${i}\n`);
    // Version v of a file is its size in bytes all equal to v % 251 + 1: a mix of two versions has two byte values.
    const writerSrc = `
const fs = require('fs');
const files = ${JSON.stringify(Object.entries(SIZES).map(([n, size]) => [path.join(ws, n), size]))};
const fds = files.map(([f]) => fs.openSync(f, 'r+'));
const bufs = files.map(([, size]) => Buffer.alloc(size));
let v = 0;
const end = Date.now() + 15000;
while (Date.now() < end) {
  v++;
  for (let i = 0; i < files.length; i++) {
    bufs[i].fill(v % 251 + 1);
    // In place, one pwrite per version: the file holds a mix of versions only while the call copies.
    fs.writeSync(fds[i], bufs[i], 0, bufs[i].length, 0);
  }
  if (v % 4 === 0) { const t = Date.now() + 2; while (Date.now() < t); }
}`;
    const writer = spawn(process.execPath, ['-e', writerSrc], { stdio: 'ignore' });
    children.push(writer);
    const exited = new Promise((r) => writer.once('exit', r));
    await new Promise((r) => setTimeout(r, 200));
    const seen = { stored: 0, changing: 0, torn: 0, scans: 0 };
    let previous: Manifest | undefined;
    let running = true;
    void exited.then(() => (running = false));
    while (running && seen.scans < 60) {
      // Alternately a first scan (new files on workers, or read here) and a rescan (changed files read here).
      const blobs = await newStore(tmp);
      const r = await scan({ roots, blobs, ...(previous && seen.scans % 2 === 1 ? { previous } : {}) });
      seen.scans++;
      for (const [n, size] of Object.entries(SIZES)) {
        const e = r.manifest.get(n);
        if (e?.type === 'uncaptured') {
          assert.equal(e.code, 'ECHANGING', `${n}: ${JSON.stringify(e)}`);
          assert.ok(r.unreadable.some((u) => u.path === n && u.code === 'ECHANGING' && /changing while it was read/.test(u.message)), JSON.stringify(r.unreadable));
          seen.changing++;
          continue;
        }
        assert.equal(e?.type, 'file', `${n}: ${JSON.stringify(e)}`);
        if (e?.type !== 'file') continue;
        const bytes = await blobs.get(e.hash);
        assert.equal(bytes.length, size, `${n}: stored ${bytes.length} bytes of ${size}`);
        const values = new Set(bytes);
        if (values.size !== 1) seen.torn++;
        else seen.stored++;
      }
      previous = r.manifest;
    }
    writer.kill('SIGKILL');
    assert.equal(seen.torn, 0, `stored torn (a mix of versions): ${JSON.stringify(seen)}`);
    assert.ok(seen.scans >= 6, JSON.stringify(seen));
    console.log(`      torn-read chaos: ${JSON.stringify(seen)}`);
  });
});
