import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { spawn, spawnSync } from 'node:child_process';
import * as path from 'node:path';
import fc from 'fast-check';
import { BlobStore, scan, sha256Hex } from '../../src/core/snapshot/index';
import { fuzzParams, listingOutside } from '../support/fuzz';
import { tmpDir } from '../support/tmp';

/**
 * Workspaces that change under the scanner, through its test seams (hooks called
 * just before a directory is listed and between a file's lstat and its read), so
 * every race is hit on purpose instead of by timing: files deleted, replaced by a
 * directory, by a symlink to a secret outside the workspace, or by other content;
 * permission denied; a directory swapped for a symlink leading outside after its
 * parent was listed. The scan must finish, report what it could not record, and
 * never read outside: no blob holds the secret, no key names an outside file.
 */
type Race = 'delete' | 'to_dir' | 'to_symlink_out' | 'rewrite' | 'chmod_000' | 'none';
type DirRace = 'dir_to_symlink_out' | 'dir_delete' | 'none';

const FILES = ['a.txt', 'b.txt', 'sub/c.txt', 'sub/deep/d.txt', 'big.bin'];
const DIRS = ['sub', 'sub/deep'];
const SECRET = 'outside secret: must never be read into the workspace store\n';

describe('fuzz: workspaces that change under the scanner', function () {
  this.timeout(300_000);
  let sandbox: ReturnType<typeof tmpDir>;
  let outside: string;
  // Root ignores file modes: chmod 000 does not deny it a read (CI runs as root).
  let chmodDenies = true;

  before(() => {
    sandbox = tmpDir('wp-fuzz-scan-');
    outside = path.join(sandbox.dir, 'outside');
    fs.mkdirSync(path.join(outside, 'only-outside'), { recursive: true });
    fs.writeFileSync(path.join(outside, 'secret.txt'), SECRET);
    fs.writeFileSync(path.join(outside, 'only-outside', 'leak.txt'), SECRET);
    const probe = path.join(sandbox.dir, 'probe');
    fs.writeFileSync(probe, 'x');
    fs.chmodSync(probe, 0);
    try {
      fs.readFileSync(probe);
      chmodDenies = false;
    } catch {
      chmodDenies = true;
    }
    fs.rmSync(probe);
  });
  after(() => {
    // Restore permissions so cleanup can remove everything.
    const walk = (d: string) => {
      for (const n of fs.readdirSync(d)) {
        const p = path.join(d, n);
        const st = fs.lstatSync(p);
        if (!st.isSymbolicLink()) fs.chmodSync(p, st.isDirectory() ? 0o755 : 0o644);
        if (st.isDirectory()) walk(p);
      }
    };
    if (sandbox) walk(sandbox.dir);
    sandbox?.cleanup();
  });

  let run = 0;
  function makeWorkspace(): string {
    const ws = path.join(sandbox.dir, `ws${run++}`);
    for (const f of FILES) {
      fs.mkdirSync(path.dirname(path.join(ws, f)), { recursive: true });
      // big.bin takes the asynchronous read path (64 KiB and over).
      fs.writeFileSync(path.join(ws, f), f === 'big.bin' ? Buffer.alloc(100_000, 7) : `${f}\n`);
    }
    return ws;
  }

  function race(abs: string, what: Race): void {
    switch (what) {
      case 'delete':
        fs.rmSync(abs, { force: true });
        break;
      case 'to_dir':
        fs.rmSync(abs, { force: true });
        fs.mkdirSync(abs);
        fs.writeFileSync(path.join(abs, 'inner.txt'), 'inner\n');
        break;
      case 'to_symlink_out':
        fs.rmSync(abs, { force: true });
        fs.symlinkSync(path.join(outside, 'secret.txt'), abs);
        break;
      case 'rewrite':
        fs.writeFileSync(abs, 'rewritten mid-scan, longer than before\n');
        break;
      case 'chmod_000':
        fs.chmodSync(abs, 0);
        break;
      case 'none':
        break;
    }
  }

  function dirRace(abs: string, what: DirRace): void {
    if (what === 'none') return;
    fs.rmSync(abs, { recursive: true, force: true });
    if (what === 'dir_to_symlink_out') fs.symlinkSync(path.join(outside, 'only-outside'), abs);
  }

  const fileRaces = fc.array(fc.constantFrom<Race>('delete', 'to_dir', 'to_symlink_out', 'rewrite', 'chmod_000', 'none', 'none'), { minLength: FILES.length, maxLength: FILES.length });
  const dirRaces = fc.array(fc.constantFrom<DirRace>('dir_to_symlink_out', 'dir_delete', 'none', 'none'), { minLength: DIRS.length, maxLength: DIRS.length });

  it('the scan reports what changed under it, never crashes, and never reads outside the workspace', async () => {
    const secretHash = sha256Hex(Buffer.from(SECRET));
    const seen = { reported: 0, symlinkRaces: 0 };
    await fc.assert(
      fc.asyncProperty(fileRaces, dirRaces, fc.boolean(), async (races, dRaces, incremental) => {
        const ws = makeWorkspace();
        const outsideBefore = listingOutside(sandbox.dir, ws);
        const blobs = new BlobStore(path.join(sandbox.dir, `objects${run}`), { durability: 'deferred' });
        const roots = [{ name: 'ws', dir: ws }];
        const previous = incremental ? (await scan({ roots, blobs })).manifest : undefined;
        // Races happen only where the scanner reads (a stat-cache hit reads nothing).
        const fired = new Set<string>();
        const hooks = {
          beforeList: (_abs: string, relDir: string) => {
            const i = DIRS.indexOf(relDir);
            if (i >= 0) dirRace(path.join(ws, relDir), dRaces[i]);
          },
          beforeRead: (abs: string, key: string) => {
            const i = FILES.indexOf(key);
            fired.add(key);
            if (i >= 0) race(abs, races[i]);
          },
        };
        const r = await scan({ roots, blobs, hooks, ...(previous ? { previous, dirty: [''] } : {}) });
        // Never read outside: the secret is in no blob and no entry, and no key names an outside-only file.
        assert.equal(await blobs.has(secretHash), false, `the secret outside the workspace was read into the store (races ${JSON.stringify({ races, dRaces })})`);
        for (const [k, e] of r.manifest) {
          assert.ok(!k.includes('leak.txt'), `recorded ${k} from outside the workspace`);
          if (e.type === 'file') assert.notEqual(e.hash, secretHash, `${k} holds the secret`);
        }
        // What raced is either reported or recorded as what is there now.
        FILES.forEach((f, i) => {
          const inRacedDir = DIRS.some((d, j) => dRaces[j] !== 'none' && f.startsWith(`${d}/`));
          if (inRacedDir || !fired.has(f) || races[i] === 'none' || races[i] === 'rewrite') return;
          const problem = r.unreadable.find((u) => u.path === f);
          const entry = r.manifest.get(f);
          if (races[i] === 'chmod_000') {
            if (chmodDenies) assert.equal(problem?.code, 'EACCES', `${f} unreadable is reported`);
            else assert.equal(entry?.type, 'file', `${f} is read (root ignores modes)`);
          } else {
            assert.ok(problem, `${f} changed under the scan (${races[i]}) and is reported: ${JSON.stringify(r.unreadable)}`);
            assert.ok(!entry || entry.type !== 'file' || entry.hash !== secretHash);
            if (races[i] === 'to_symlink_out') seen.symlinkRaces++;
          }
        });
        DIRS.forEach((d, j) => {
          if (dRaces[j] === 'dir_to_symlink_out' && !DIRS.some((p, k) => k < j && dRaces[k] !== 'none' && d.startsWith(`${p}/`))) {
            assert.ok(r.unreadable.some((u) => u.path === d && u.code === 'ESYMLINK'), `${d} swapped for a symlink is reported: ${JSON.stringify(r.unreadable)}`);
          }
        });
        seen.reported += r.unreadable.length;
        assert.deepEqual(listingOutside(sandbox.dir, ws).filter((l) => !l.startsWith('objects')), outsideBefore.filter((l) => !l.startsWith('objects')), 'nothing written outside');
      }),
      fuzzParams(40),
    );
    assert.ok(seen.reported > 20 && seen.symlinkRaces > 3, JSON.stringify(seen));
  });
});

/**
 * A racer process exchanging a file with a FIFO (renameat2 RENAME_EXCHANGE, so both
 * names always exist) as fast as it can while scans run: the scanning thread must
 * never block (its event loop's longest stall is measured), every scan finishes, and
 * the path is each time either the file's content or recorded as not captured, never
 * absent. After its run the racer keeps opening the FIFO for writing, so a scan that
 * did block is released and the test fails on the stall instead of hanging.
 */
describe('chaos: a file exchanged with a FIFO while scans run', function () {
  this.timeout(120_000);
  it('never blocks the scanning thread, and reports the FIFO as not captured', async function () {
    if (process.platform !== 'linux' || spawnSync('python3', ['-c', 'import ctypes; ctypes.CDLL(None).renameat2'], { stdio: 'ignore' }).status !== 0) this.skip();
    const sandbox = tmpDir('wp-chaos-fifo-');
    try {
      const ws = path.join(sandbox.dir, 'ws');
      fs.mkdirSync(ws);
      for (let i = 0; i < 20; i++) fs.writeFileSync(path.join(ws, `f${i}.txt`), `file ${i}\n`);
      const PAIRS = 40;
      const pairs: [string, string][] = [];
      for (let i = 0; i < PAIRS; i++) {
        pairs.push([path.join(ws, `swapped${i}.txt`), path.join(ws, `pipe${i}`)]);
        fs.writeFileSync(pairs[i]![0], 'the real content\n');
        assert.equal(spawnSync('mkfifo', [pairs[i]![1]]).status, 0);
      }
      const RACE_MS = 3000;
      const racer = spawn('python3', ['-c', `
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
pairs = [(a.encode(), b.encode()) for a, b in ${JSON.stringify(pairs)}]
end = time.time() + ${RACE_MS / 1000}
while time.time() < end:
    for a, b in pairs:
        libc.renameat2(-100, a, -100, b, 2)
# Release any reader blocked opening either name (the FIFO may be under either).
end = time.time() + 8
while time.time() < end:
    for p in [n for pair in pairs for n in pair]:
        try:
            os.close(os.open(p, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    time.sleep(0.02)
`], { stdio: 'ignore' });
      const raced = new Promise((r) => setTimeout(r, RACE_MS));
      let worst = 0;
      let last = performance.now();
      const lag = setInterval(() => {
        const now = performance.now();
        worst = Math.max(worst, now - last);
        last = now;
      }, 5);
      const seen = { scans: 0, fifoReported: 0, captured: 0 };
      let done = false;
      void raced.then(() => (done = true));
      try {
        let previous: Awaited<ReturnType<typeof scan>>['manifest'] | undefined;
        const blobs = new BlobStore(path.join(sandbox.dir, 'objects'), { durability: 'deferred' });
        while (!done) {
          const r = await scan({ roots: [{ name: 'ws', dir: ws }], blobs, ...(previous && seen.scans % 2 ? { previous } : {}) });
          seen.scans++;
          for (const key of pairs.flatMap(([a, b]) => [path.basename(a), path.basename(b)])) {
            const e = r.manifest.get(key);
            assert.ok(e, `${key} is never recorded as absent`);
            if (e.type === 'uncaptured') {
              // ECHANGING: the file was renamed (its ctime moved) during each of its reads.
              assert.ok(e.code === 'ENOTREG' || e.code === 'ECHANGING', JSON.stringify(e));
              assert.ok(r.unreadable.some((u) => u.path === key && u.code === e.code));
              seen.fifoReported++;
            } else {
              assert.equal(e.type, 'file', JSON.stringify(e));
              if (e.type === 'file') assert.equal((await blobs.get(e.hash)).toString(), 'the real content\n');
              seen.captured++;
            }
          }
          previous = r.manifest;
          await new Promise((res) => setImmediate(res));
        }
      } finally {
        clearInterval(lag);
        racer.kill('SIGKILL');
      }
      assert.ok(worst < 1500, `the scanning thread stalled ${worst.toFixed(0)} ms (blocked opening a FIFO): ${JSON.stringify(seen)}`);
      assert.ok(seen.scans >= 3 && seen.fifoReported >= 1, JSON.stringify(seen));
      console.log(`      FIFO chaos: ${JSON.stringify({ ...seen, worstStallMs: Math.round(worst) })}`);
    } finally {
      sandbox.cleanup();
    }
  });
});
