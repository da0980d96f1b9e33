import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import fc from 'fast-check';
import { BlobStore, ManifestStore, SpareCopy, diffManifests, pathKeyProblem, scan, type Manifest } from '../../src/core/snapshot/index.js';
import { ListingCache } from '../../src/core/snapshot/scanner.js';
import { TempDirs, ageTree, newStore, writeTree } from './snapshot.helpers.js';

const keys = (m: Manifest) => [...m.keys()].sort();

describe('snapshot scanner', () => {
  const tmp = new TempDirs();
  afterEach(() => tmp.cleanup());

  it('honours nested .gitignore with negation, info/exclude and the exclude list', async () => {
    const ws = await tmp.make();
    await writeTree(ws, {
      '.gitignore': '*.log\n!keep.log\nbuild/\n/rootonly.txt\n',
      'a.log': 'x',
      'keep.log': 'x',
      'rootonly.txt': 'x',
      'build/out.js': 'x',
      'src/rootonly.txt': 'kept: the pattern is anchored to the root',
      'src/.gitignore': '!important.log\ngen/\n*.tmp\n',
      'src/important.log': 'x',
      'src/other.log': 'x',
      'src/gen/g.ts': 'x',
      'src/a.tmp': 'x',
      'src/deep/.gitignore': '!*.tmp\n',
      'src/deep/b.tmp': 'x',
      'secret/notes.md': 'x',
      'private.env': 'x',
      'docs/readme.md': 'x',
      '.git/info/exclude': 'private.env\n',
      '.git/HEAD': 'ref: refs/heads/main\n',
      '.waypoint/db': 'x',
      'vendor/lib/.git/HEAD': 'nested repo internals',
      'vendor/lib/.git/info/exclude': 'local.txt\n',
      'vendor/lib/local.txt': 'excluded by the nested repo',
      'vendor/lib/code.ts': 'x',
    });
    const r = await scan({ roots: [{ name: 'w', dir: ws }], excludes: ['secret/'], blobs: await newStore(tmp) });
    assert.deepEqual(keys(r.manifest), [
      '.gitignore',
      'docs/readme.md',
      'keep.log',
      'src/.gitignore',
      'src/deep/.gitignore',
      'src/deep/b.tmp',
      'src/important.log',
      'src/rootonly.txt',
      'vendor/lib/code.ts',
    ]);
    assert.deepEqual(r.unreadable, []);
    // The nested repository's .git is read for its excludes, never recorded or touched.
    assert.equal(await fs.readFile(path.join(ws, 'vendor/lib/.git/HEAD'), 'utf8'), 'nested repo internals');
  });

  it('a bulk first scan (past the 4 MB at which compression moves to worker threads) stores every file byte for byte', async () => {
    const ws = await tmp.make();
    const files: Record<string, string | Buffer> = {};
    let bytes = 0;
    for (let i = 0; bytes < 6 * 1024 * 1024; i++) {
      // Source-like text (compressible), some incompressible bytes, and duplicates across directories.
      const body = i % 7 === 0 ? Buffer.from(Array.from({ length: 40_000 }, (_, k) => (k * 2654435761 + i) & 0xff)) : `// file ${i}\n${`export const v${i} = ${i} * 2; // padding\n`.repeat(1500)}`;
      files[`d${i % 5}/f${i}.${i % 7 === 0 ? 'bin' : 'ts'}`] = body;
      if (i % 11 === 0) files[`copies/f${i}.ts`] = body;
      bytes += body.length;
    }
    await writeTree(ws, files);
    const blobs = await newStore(tmp);
    const r = await scan({ roots: [{ name: 'ws', dir: ws }], blobs });
    assert.equal(r.manifest.size, Object.keys(files).length);
    assert.ok(r.stats.bytesStoredNew < bytes / 2, `compressed and deduplicated: ${r.stats.bytesStoredNew} of ${bytes} bytes`);
    // Read back through a fresh store, as the next process would.
    const cold = new BlobStore(blobs.dir, { durability: 'deferred' });
    for (const [rel, body] of Object.entries(files)) {
      const e = r.manifest.get(rel);
      assert.ok(e && e.type === 'file', rel);
      assert.ok((await cold.get(e.hash)).equals(Buffer.from(body)), `${rel} reads back byte for byte`);
    }
  });

  for (const defer of [false, true]) it(`a first scan past 256 new files reads them on worker threads${defer ? ', which write raw packs that compaction compresses,' : ''} with the same manifest as the walk on the main thread`, async () => {
    const ws = await tmp.make();
    const files: Record<string, string | Buffer> = {};
    for (let i = 0; i < 700; i++) {
      const body = i % 50 === 0 ? Buffer.from(Array.from({ length: 200_000 }, (_, k) => (k * 2654435761 + i) & 0xff)) : `// ${i}\n${'line of source\n'.repeat(i % 40)}`;
      files[`d${i % 9}/sub${i % 4}/f${i}.txt`] = body;
      if (i % 97 === 0) files[`dup/f${i}.txt`] = body; // same content twice: stored once
    }
    files['empty.txt'] = '';
    files['big/too-large.bin'] = Buffer.alloc(3_000_000, 7);
    // Past the worker's 1 MB read buffer and its 512 KB output arena: raw (incompressible) and compressed.
    files['zz/large-raw.bin'] = Buffer.from(Array.from({ length: 1_500_000 }, (_, k) => (k * 2654435761) >>> 24));
    files['zz/large-text.ts'] = 'export const large = "source";\n'.repeat(60_000);
    await writeTree(ws, files);
    await fs.chmod(path.join(ws, 'd1/sub1/f1.txt'), 0o755);
    await fs.symlink('d0', path.join(ws, 'link-to-dir'));
    execFileSync('mkfifo', [path.join(ws, 'd2/pipe')]);
    const maxFileBytes = 2_500_000;

    const blobs = await newStore(tmp);
    const onWorkers = await scan({ roots: [{ name: 'ws', dir: ws }], blobs, maxFileBytes, deferCompression: defer });
    assert.ok(onWorkers.stats.filesReadOnWorkers > 400, `files read on workers: ${onWorkers.stats.filesReadOnWorkers}`);
    // Test hooks keep every read on this thread: the reference walk.
    const reference = await scan({ roots: [{ name: 'ws', dir: ws }], blobs: await newStore(tmp), maxFileBytes, hooks: {} });
    assert.equal(reference.stats.filesReadOnWorkers, 0);

    assert.deepEqual(keys(onWorkers.manifest), keys(reference.manifest));
    const content = (e: unknown) => {
      const { mtimeMs: _m, ino: _i, racy: _r, ...rest } = e as Record<string, unknown>;
      return rest;
    };
    for (const [k, e] of reference.manifest) assert.deepEqual(content(onWorkers.manifest.get(k)), content(e), k);
    assert.equal((onWorkers.manifest.get('d1/sub1/f1.txt') as { mode: number }).mode, 0o755);
    assert.equal(onWorkers.manifest.get('big/too-large.bin')?.type, 'skipped');
    assert.deepEqual(onWorkers.skipped, [{ path: 'big/too-large.bin', size: 3_000_000, reason: 'too_large' }]);
    assert.deepEqual(onWorkers.unreadable.map((u) => [u.path, u.code]), [['d2/pipe', 'ENOTREG']]);
    // Every blob reads back byte for byte through a fresh store, as the next process would.
    const cold = new BlobStore(blobs.dir, { durability: 'deferred' });
    for (const [rel, body] of Object.entries(files)) {
      const e = onWorkers.manifest.get(rel);
      if (rel === 'big/too-large.bin') continue;
      assert.ok(e && e.type === 'file', rel);
      assert.ok((await cold.get(e.hash)).equals(Buffer.from(body)), `${rel} reads back byte for byte`);
    }
    if (!defer) {
      assert.deepEqual(blobs.uncompactedPacks(), []);
      return;
    }
    // The workers' packs (and the main thread's, once in bulk mode) hold raw content until compaction.
    assert.ok(blobs.uncompactedPacks().length >= 2, `raw packs: ${blobs.uncompactedPacks().join(', ')}`);
    const text = onWorkers.manifest.get('zz/large-text.ts') as { hash: string; size: number };
    assert.equal(await blobs.sizeOf(text.hash), text.size + 1, 'stored raw before compaction');
    const done = await blobs.compact();
    assert.ok(done.packs >= 2 && done.bytesAfter < done.bytesBefore / 2, JSON.stringify(done));
    assert.deepEqual(blobs.uncompactedPacks(), []);
    assert.ok((await blobs.sizeOf(text.hash))! < text.size / 10, 'compressed by compaction');
    assert.deepEqual(await blobs.compact(), { packs: 0, objects: 0, bytesBefore: 0, bytesAfter: 0 }, 'nothing left to compact');
    const after = new BlobStore(blobs.dir, { durability: 'deferred' });
    for (const [rel, body] of Object.entries(files)) {
      const e = onWorkers.manifest.get(rel);
      if (e?.type !== 'file') continue;
      assert.ok((await after.get(e.hash)).equals(Buffer.from(body)), `${rel} reads back byte for byte after compaction`);
      assert.ok((await blobs.get(e.hash)).equals(Buffer.from(body)), `${rel} reads back through the compacting instance`);
    }
  });

  it('a bulk scan whose workers cannot write their packs fails cleanly: no descriptor left open, nothing pending, the store still flushes', async function () {
    if (process.platform !== 'linux') this.skip();
    const ws = await tmp.make();
    const files: Record<string, string> = {};
    for (let i = 0; i < 400; i++) files[`d${i % 5}/f${i}.ts`] = `export const v${i} = ${i};\n`.repeat(20);
    await writeTree(ws, files);
    const blobs = await newStore(tmp);
    await fs.mkdir(blobs.dir, { recursive: true });
    await fs.writeFile(path.join(blobs.dir, 'pack'), 'not a directory'); // every pack open fails (ENOTDIR), root or not
    const fdsBefore = (await fs.readdir('/proc/self/fd')).length;
    await assert.rejects(scan({ roots: [{ name: 'ws', dir: ws }], blobs, deferCompression: true }), /ENOTDIR|not a directory/);
    assert.equal((await fs.readdir('/proc/self/fd')).length, fdsBefore, 'no descriptor left open');
    assert.equal(blobs.pendingCount, 0, 'nothing pending from the failed scan');
    await blobs.flush();
  });

  for (const [label, statWorkersFrom] of [['lstat here', Infinity], ['lstat on stat workers', 0]] as const) it(`listing cache (${label}): an unchanged directory is not listed again; edits in place, new entries and a directory swapped for a symlink are all seen`, async function () {
    if (process.platform !== 'linux') this.skip(); // the cache is used where directories are read through /proc
    const ws = await tmp.make();
    const outside = await tmp.make('wp-outside-');
    await writeTree(ws, { 'a/one.txt': '1', 'a/deep/two.txt': '2', 'b/three.txt': '3' });
    await writeTree(outside, { 'one.txt': 'outside: never read', 'deep/two.txt': 'outside' });
    const roots = [{ name: 'w', dir: ws }];
    const blobs = await newStore(tmp);
    const listings = new ListingCache(statWorkersFrom);
    after(() => listings.close());
    await new Promise((r) => setTimeout(r, 60)); // past the racy window: listings are kept
    const listedDirs: string[] = [];
    const hooks = { beforeList: (_abs: string, rel: string) => void listedDirs.push(rel) };
    const first = await scan({ roots, blobs, listings });
    assert.deepEqual([...listings.dirs.keys()].map((k) => k.split('\0')[1]).sort(), ['', 'a', 'a/deep', 'b']);

    // In place: no directory changes, the file does.
    await fs.appendFile(path.join(ws, 'a/deep/two.txt'), ' more');
    await new Promise((r) => setTimeout(r, 60));
    const second = await scan({ roots, blobs, previous: first.manifest, listings, hooks });
    assert.deepEqual(second.changed.changes.map((c) => [c.path, c.status]), [['a/deep/two.txt', 'modified']]);
    const e = second.manifest.get('a/deep/two.txt');
    assert.ok(e?.type === 'file' && (await blobs.get(e.hash)).toString() === '2 more');
    assert.equal(listedDirs.length, 4, 'beforeList runs for every directory, cached or not');

    // A new entry changes its directory: relisted. A directory swapped for a symlink to outside: recorded as a link, not followed.
    await fs.writeFile(path.join(ws, 'b/new.txt'), 'new');
    await fs.rename(path.join(ws, 'a'), path.join(outside, 'moved-a'));
    await fs.symlink(path.join(outside, 'moved-a'), path.join(ws, 'a'));
    await fs.appendFile(path.join(outside, 'moved-a/one.txt'), ' changed outside');
    await new Promise((r) => setTimeout(r, 60));
    const third = await scan({ roots, blobs, previous: second.manifest, listings });
    const fresh = await scan({ roots, blobs: await newStore(tmp) });
    assert.deepEqual(keys(third.manifest), ['a', 'b/new.txt', 'b/three.txt']);
    assert.deepEqual(diffManifests(fresh.manifest, third.manifest), []);
    assert.equal(third.manifest.get('a')?.type, 'symlink');
    assert.deepEqual([...listings.dirs.keys()].map((k) => k.split('\0')[1]).sort(), ['', 'b'], 'listings of directories gone are dropped');
  });

  it('directory plans: reused under an unchanged .gitignore, rebuilt after an in-place edit of it (same size, listing unchanged), equal to a fresh scan throughout', async function () {
    if (process.platform !== 'linux') this.skip(); // listings (and so plans) are kept where directories are read through /proc
    this.timeout(20_000);
    const ws = await tmp.make();
    await writeTree(ws, { '.gitignore': '*.log\n', 'src/.gitignore': '!keep.log\n', 'src/a.ts': 'a', 'src/keep.log': 'k', 'src/x.log': 'x', 'src/sub/b.ts': 'b', 'src/sub/c.txt': 'c', 'd.txt': 'd' });
    // Rule levels are kept only for ignore files older than two seconds (an edit within their mtime's tick could go unseen).
    await new Promise((r) => setTimeout(r, 2100));
    const roots = [{ name: 'w', dir: ws }];
    const blobs = await newStore(tmp);
    const listings = new ListingCache(0);
    after(() => listings.close());
    const fresh = async () => (await scan({ roots, blobs: await newStore(tmp) })).manifest;
    let prev = (await scan({ roots, blobs, listings })).manifest;
    const rescan = async () => {
      const r = await scan({ roots, blobs, previous: prev, listings });
      assert.deepEqual(diffManifests(await fresh(), r.manifest), []);
      prev = r.manifest;
      return r;
    };
    await rescan(); // makes the plans
    const reused = await rescan();
    assert.equal(reused.stats.dirsPlanned, 3, 'the root, src and src/sub from their plans');
    assert.deepEqual(keys(reused.manifest), ['.gitignore', 'd.txt', 'src/.gitignore', 'src/a.ts', 'src/keep.log', 'src/sub/b.ts', 'src/sub/c.txt']);
    // Same size, written in place: no directory's listing changes, the rules do.
    await fs.writeFile(path.join(ws, '.gitignore'), '*.txt\n');
    await new Promise((r) => setTimeout(r, 60));
    const edited = await rescan();
    assert.equal(edited.stats.dirsPlanned, 0, 'every directory is under the edited rules: none may use its plan');
    assert.deepEqual(keys(edited.manifest), ['.gitignore', 'src/.gitignore', 'src/a.ts', 'src/keep.log', 'src/sub/b.ts', 'src/x.log']);
  });

  it('every key a scan records is a safe path key (what lets save skip re-checking a scan\'s manifest); names that are not are reported', async () => {
    const ws = await tmp.make();
    const names = ['plain.ts', 'back\\slash.txt', 'new\nline.txt', 'colon:name.txt', 'Cafe\u0301.txt', 'ctl\u0007.txt', 'ok dir/inner.txt', '\u00e9t\u00e9.md'];
    const files: Record<string, string> = {};
    for (const n of names) files[n] = `content of ${JSON.stringify(n)}\n`;
    await writeTree(ws, files);
    const blobs = await newStore(tmp);
    const r = await scan({ roots: [{ name: 'ws', dir: ws }], blobs });
    for (const k of r.manifest.keys()) assert.equal(pathKeyProblem(k), null, `recorded key ${JSON.stringify(k)}`);
    const unsafe = r.unreadable.filter((u) => u.code === 'EUNSAFEPATH').map((u) => u.path).sort();
    assert.deepEqual(unsafe, ['Cafe\u0301.txt', 'back\\slash.txt', 'ctl\u0007.txt', 'new\nline.txt'].sort());
    assert.ok(r.manifest.has('plain.ts') && r.manifest.has('ok dir/inner.txt') && r.manifest.has('\u00e9t\u00e9.md') && r.manifest.has('colon:name.txt'));
    // Saved without re-checking, loaded (which checks) back the same.
    const manifests = new ManifestStore(blobs);
    const ref = await manifests.save(r.manifest, null, undefined, undefined, { keysChecked: true });
    assert.deepEqual([...(await new ManifestStore(new BlobStore(blobs.dir, { durability: 'deferred' })).load(ref)).keys()].sort(), [...r.manifest.keys()].sort());
  });

  it('records symlinks without following them, keeps the exec bit, skips large files', async () => {
    const ws = await tmp.make();
    const outside = await tmp.make('wp-outside-');
    await writeTree(ws, { 'bin/run.sh': '#!/bin/sh\necho hi\n', 'big.bin': Buffer.alloc(2048, 1), 'dir/f.txt': 'x' });
    await writeTree(outside, { 'secret.txt': 'do not read' });
    await fs.chmod(path.join(ws, 'bin/run.sh'), 0o755);
    await fs.symlink(outside, path.join(ws, 'escape'));
    await fs.symlink('dir', path.join(ws, 'dirlink'));
    await fs.symlink('missing-target', path.join(ws, 'dangling'));
    const r = await scan({ roots: [{ name: 'w', dir: ws }], maxFileBytes: 1024, blobs: await newStore(tmp) });
    assert.deepEqual(keys(r.manifest), ['big.bin', 'bin/run.sh', 'dangling', 'dir/f.txt', 'dirlink', 'escape']);
    assert.deepEqual(r.manifest.get('escape'), { type: 'symlink', target: outside, mtimeMs: (r.manifest.get('escape') as { mtimeMs: number }).mtimeMs, ino: (r.manifest.get('escape') as { ino: number }).ino });
    assert.equal(r.manifest.get('dirlink')?.type, 'symlink');
    assert.equal(r.manifest.get('dangling')?.type, 'symlink');
    const run = r.manifest.get('bin/run.sh');
    assert.ok(run?.type === 'file' && run.mode === 0o755);
    const f = r.manifest.get('dir/f.txt');
    assert.ok(f?.type === 'file' && f.mode === 0o644);
    assert.deepEqual({ ...r.manifest.get('big.bin'), mtimeMs: 0 }, { type: 'skipped', size: 2048, mtimeMs: 0, reason: 'too_large' });
    assert.deepEqual(r.skipped, [{ path: 'big.bin', size: 2048, reason: 'too_large' }]);
  });

  it('reports unreadable files instead of failing', async function () {
    const ws = await tmp.make();
    await writeTree(ws, { 'ok.txt': 'x', 'locked.txt': 'x' });
    // A FIFO is never opened (it would block); it is reported.
    execFileSync('mkfifo', [path.join(ws, 'pipe')]);
    const isRoot = process.getuid?.() === 0;
    // chmod 000 does not stop root from reading, so that case only runs unprivileged.
    if (!isRoot) await fs.chmod(path.join(ws, 'locked.txt'), 0o000);
    const r = await scan({ roots: [{ name: 'w', dir: ws }], blobs: await newStore(tmp) });
    const codes = Object.fromEntries(r.unreadable.map((u) => [u.path, u.code]));
    assert.equal(codes['pipe'], 'ENOTREG');
    if (!isRoot) assert.equal(codes['locked.txt'], 'EACCES');
    assert.ok(r.manifest.has('ok.txt'));
    // Met and not read: recorded as not captured (never as absent), so no rollback removes it.
    assert.deepEqual(r.manifest.get('pipe'), { type: 'uncaptured', code: 'ENOTREG' });
  });

  it('reads only changed files when given the previous manifest (stat cache)', async () => {
    const ws = await tmp.make();
    await writeTree(ws, { 'a.txt': 'a', 'b.txt': 'b', 'c/d.txt': 'd' });
    await ageTree(ws);
    const blobs = await newStore(tmp);
    const first = await scan({ roots: [{ name: 'w', dir: ws }], blobs });
    assert.equal(first.stats.filesHashed, 3);
    const again = await scan({ roots: [{ name: 'w', dir: ws }], blobs, previous: first.manifest });
    assert.equal(again.stats.filesHashed, 0);
    assert.equal(again.changed.changes.length, 0);
    // A dirty hint that names nothing examines nothing: the manifest is the previous one itself.
    const nothing = await scan({ roots: [{ name: 'w', dir: ws }], blobs, previous: again.manifest, dirty: [] });
    assert.equal(nothing.manifest, again.manifest);
    assert.deepEqual([...(nothing.touched ?? ['not reported'])], []);
    await fs.writeFile(path.join(ws, 'b.txt'), 'bb');
    const third = await scan({ roots: [{ name: 'w', dir: ws }], blobs, previous: again.manifest });
    assert.equal(third.stats.filesHashed, 1);
    assert.deepEqual(third.changed.changes.map((c) => [c.path, c.status]), [['b.txt', 'modified']]);
  });

  it('rehashes racily clean files (same size and mtime, edited right after a scan)', async () => {
    const ws = await tmp.make();
    await writeTree(ws, { 'a.txt': 'one' });
    const blobs = await newStore(tmp);
    // A write that lands as the scan starts: its mtime is not before the scan began. (Set
    // ahead of the clock: "just now" is 50 ms, and a loaded machine can take longer than
    // that between the write and the scan.)
    const soon = new Date(Date.now() + 10_000);
    await fs.utimes(path.join(ws, 'a.txt'), soon, soon);
    const first = await scan({ roots: [{ name: 'w', dir: ws }], blobs });
    const e = first.manifest.get('a.txt');
    assert.ok(e?.type === 'file' && e.racy === true, 'a file written as the scan starts is racy');
    await fs.writeFile(path.join(ws, 'a.txt'), 'two');
    const t = new Date(e.mtimeMs);
    await fs.utimes(path.join(ws, 'a.txt'), t, t);
    const second = await scan({ roots: [{ name: 'w', dir: ws }], blobs, previous: first.manifest });
    assert.deepEqual(second.changed.changes.map((c) => c.status), ['modified']);
  });

  it('reads again a file whose inode changed (ctime) since the previous scan began, even with size, mtime and inode unchanged; trusts it otherwise (main thread and stat workers)', async () => {
    const ws = await tmp.make();
    await writeTree(ws, { 'a.txt': 'one', 'b.txt': 'two', 'c/d.txt': 'three' });
    await ageTree(ws);
    const blobs = await newStore(tmp);
    const first = await scan({ roots: [{ name: 'w', dir: ws }], blobs });
    // A previous manifest that claims other content for a.txt under its exact stat: only reading the file tells.
    const real = first.manifest.get('a.txt');
    assert.ok(real?.type === 'file');
    const other = (await blobs.put(Buffer.from('not a.txt'))).hash;
    const forged: Manifest = new Map(first.manifest);
    forged.set('a.txt', { ...real, hash: other });
    const ctime = (await fs.lstat(path.join(ws, 'a.txt'))).ctimeMs;
    for (const listings of [undefined, new ListingCache(0)]) {
      const how = listings ? 'stat workers' : 'main thread';
      const trusted = await scan({ roots: [{ name: 'w', dir: ws }], blobs, listings, previous: forged, previousVerifiedAtMs: ctime + 10_000 });
      assert.equal((trusted.manifest.get('a.txt') as { hash: string }).hash, other, `${how}: an inode unchanged since the scan began is vouched for by its stat`);
      assert.equal(trusted.stats.filesHashed, 0, how);
      const changed = await scan({ roots: [{ name: 'w', dir: ws }], blobs, listings, previous: forged, previousVerifiedAtMs: ctime - 1 });
      assert.equal((changed.manifest.get('a.txt') as { hash: string }).hash, real.hash, `${how}: an inode changed after the scan began is read again`);
      assert.deepEqual(changed.changed.changes.map((c) => [c.path, c.status]), [['a.txt', 'modified']], how);
      await listings?.statPool().close();
    }
  });

  it('prefixes keys with the root name only when there are several roots', async () => {
    const a = await tmp.make();
    const b = await tmp.make();
    await writeTree(a, { 'x.txt': 'a' });
    await writeTree(b, { 'y.txt': 'b', '.gitignore': 'z.txt\n', 'z.txt': 'z' });
    const blobs = await newStore(tmp);
    const r = await scan({ roots: [{ name: 'app', dir: a }, { name: 'lib', dir: b }], blobs });
    assert.deepEqual(keys(r.manifest), ['app/x.txt', 'lib/.gitignore', 'lib/y.txt']);
    await fs.writeFile(path.join(b, 'y.txt'), 'changed');
    const d = await scan({ roots: [{ name: 'app', dir: a }, { name: 'lib', dir: b }], blobs, previous: r.manifest, dirty: [path.join(b, 'y.txt')] });
    assert.deepEqual(d.changed.changes.map((c) => [c.path, c.status]), [['lib/y.txt', 'modified']]);
  });

  it('dirty hint over many small files stores each file under its own name (one shared read buffer, many targets in flight)', async () => {
    const ws = await tmp.make();
    const tree: Record<string, string> = {};
    for (let i = 0; i < 40; i++) tree[`d${i % 4}/f${i}.txt`] = `first ${i}`;
    await writeTree(ws, tree);
    const blobs = await newStore(tmp);
    const first = await scan({ roots: [{ name: 'w', dir: ws }], blobs });
    for (let i = 0; i < 40; i++) await fs.writeFile(path.join(ws, `d${i % 4}/f${i}.txt`), `second ${i} ${'y'.repeat(i)}`);
    // Both an old write (read once) and a fresh one (read twice, a moment apart) are exact.
    for (const aged of [true, false]) {
      if (aged) await ageTree(ws);
      const dirty = Object.keys(tree).map((k) => path.join(ws, k));
      const d = await scan({ roots: [{ name: 'w', dir: ws }], blobs, previous: first.manifest, dirty });
      for (let i = 0; i < 40; i++) {
        const e = d.manifest.get(`w/d${i % 4}/f${i}.txt`) ?? d.manifest.get(`d${i % 4}/f${i}.txt`);
        assert.ok(e && e.type === 'file', `f${i} recorded`);
        assert.equal(blobs.getSync(e.hash).toString(), `second ${i} ${'y'.repeat(i)}`, `f${i}'s content`);
      }
      for (let i = 0; i < 40; i++) await fs.writeFile(path.join(ws, `d${i % 4}/f${i}.txt`), `second ${i} ${'y'.repeat(i)}`);
    }
  });

  it('dirty hint: .gitignore edits rescan their directory; deleted dirs drop their subtree', async () => {
    const ws = await tmp.make();
    await writeTree(ws, { 'src/a.ts': 'a', 'src/b.gen.ts': 'b', 'old/x/y.txt': 'y', 'old/z.txt': 'z' });
    const blobs = await newStore(tmp);
    const first = await scan({ roots: [{ name: 'w', dir: ws }], blobs });
    await fs.writeFile(path.join(ws, 'src/.gitignore'), '*.gen.ts\n');
    await fs.rm(path.join(ws, 'old'), { recursive: true });
    const d = await scan({ roots: [{ name: 'w', dir: ws }], blobs, previous: first.manifest, dirty: ['src/.gitignore', 'old'] });
    const full = await scan({ roots: [{ name: 'w', dir: ws }], blobs });
    assert.deepEqual(keys(d.manifest), keys(full.manifest));
    assert.deepEqual(keys(d.manifest), ['src/.gitignore', 'src/a.ts']);
  });

  /**
   * Small files are read into one shared buffer; a read that crossed an await before it
   * was stored let another file's read refill the buffer, and a file was stored with
   * another's content. Only for files changed over a second before the scan (a recently
   * changed file is re-read after a pause, out of the shared buffer): the checkpoint of a
   * long-lived owner a while after the edits, never a test that scans right after writing.
   */
  async function changedAWhileAgo(ws: string, n: number): Promise<{ names: string[]; changed: string[] }> {
    const files: Record<string, string> = {};
    const names: string[] = [];
    for (let i = 0; i < n; i++) {
      const name = `d${i % 7}/f${i}.txt`;
      names.push(name);
      // Sizes on either side of the 64 KiB at which a file is read on the thread pool instead.
      files[name] = `file ${i} `.repeat(i % 9 === 0 ? 7000 + i : 3 + i * 5);
    }
    await writeTree(ws, files);
    return { names, changed: names.filter((_, i) => i % 4 === 1) };
  }
  async function editAndAge(ws: string, changed: string[]): Promise<void> {
    // Swapped contents in pairs, and a same-size edit: no size tells the versions apart.
    for (let i = 0; i + 1 < changed.length; i += 2) {
      const [a, b] = [path.join(ws, changed[i]!), path.join(ws, changed[i + 1]!)];
      const [ca, cb] = [await fs.readFile(a), await fs.readFile(b)];
      await fs.writeFile(a, cb);
      await fs.writeFile(b, ca);
    }
    const last = path.join(ws, changed[changed.length - 1]!);
    await fs.writeFile(last, (await fs.readFile(last)).fill('edited '));
    // Past the second within which a change counts as recent (recentlyChanged in scan/fsAccess.ts).
    await new Promise((r) => setTimeout(r, 1100));
  }
  async function assertStoredAsOnDisk(ws: string, m: Manifest, blobs: BlobStore): Promise<void> {
    for (const [k, e] of m) {
      if (e.type !== 'file') continue;
      assert.equal(blobs.getSync(e.hash).toString(), await fs.readFile(path.join(ws, k), 'utf8'), `${k} stored with another file's content`);
    }
  }

  it('dirty hint: files changed a while before the scan are each stored with their own content (shared read buffer)', async function () {
    this.timeout(20_000);
    const ws = await tmp.make();
    const { changed } = await changedAWhileAgo(ws, 60);
    const blobs = await newStore(tmp);
    const first = await scan({ roots: [{ name: 'w', dir: ws }], blobs });
    await editAndAge(ws, changed);
    const hinted = await scan({ roots: [{ name: 'w', dir: ws }], blobs, previous: first.manifest, dirty: changed });
    await assertStoredAsOnDisk(ws, hinted.manifest, blobs);
    assert.deepEqual(diffManifests((await scan({ roots: [{ name: 'w', dir: ws }], blobs })).manifest, hinted.manifest), []);
  });

  it('rescan on the stat workers: files changed a while before the scan are each stored with their own content (shared read buffer)', async function () {
    this.timeout(20_000);
    const ws = await tmp.make();
    const { changed } = await changedAWhileAgo(ws, 60);
    const blobs = await newStore(tmp);
    // Stat workers from the first file: each directory's changed files come back from a worker while the walk goes on.
    const listings = new ListingCache(1);
    try {
      const first = await scan({ roots: [{ name: 'w', dir: ws }], blobs, listings });
      await ageTree(ws); // the first scan's entries are vouched for by the stat cache; only the edits below are read
      const aged = await scan({ roots: [{ name: 'w', dir: ws }], blobs, listings, previous: first.manifest });
      await editAndAge(ws, changed);
      const rescan = await scan({ roots: [{ name: 'w', dir: ws }], blobs, listings, previous: aged.manifest });
      assert.equal(rescan.stats.filesHashed, changed.length);
      await assertStoredAsOnDisk(ws, rescan.manifest, blobs);
    } finally {
      await listings.close();
    }
  });

  it('property: incremental, dirty-hint, listing-cache and fresh scans agree over random edit sequences', async function () {
    this.timeout(120_000);
    const names = ['a.txt', 'b.ts', 'd1/c.txt', 'd1/e.log', 'd1/d2/f.txt', 'd2/g.txt'];
    const op = fc.oneof(
      fc.record({ k: fc.constant('write' as const), p: fc.constantFrom(...names), c: fc.string({ maxLength: 6 }) }),
      // In place: the directory's listing (and mtime) stay as they were, only the file changes.
      fc.record({ k: fc.constant('append' as const), p: fc.constantFrom(...names), c: fc.string({ minLength: 1, maxLength: 6 }) }),
      fc.record({ k: fc.constant('rm' as const), p: fc.constantFrom(...names, 'd1', 'd2', 'd1/d2') }),
      fc.record({ k: fc.constant('chmod' as const), p: fc.constantFrom(...names), x: fc.boolean() }),
      fc.record({ k: fc.constant('link' as const), p: fc.constantFrom('l1', 'd1/l2'), t: fc.constantFrom('a.txt', '../x', '/etc') }),
      fc.record({ k: fc.constant('ignore' as const), p: fc.constantFrom('.gitignore', 'd1/.gitignore'), c: fc.constantFrom('*.log\n', '!e.log\n', 'd2/\n', '') }),
    );
    const ws = await tmp.make();
    const blobs = await newStore(tmp);
    const roots = [{ name: 'w', dir: ws }];
    /** Directories whose files a rescan sent to the workers from its plan (see DirPlan), over all runs: the path must be taken. */
    let planned = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(op, { maxLength: 5 }), { minLength: 1, maxLength: 3 }), async (rounds) => {
        await fs.rm(ws, { recursive: true, force: true });
        await fs.mkdir(ws);
        await writeTree(ws, { 'a.txt': 'a', 'd1/c.txt': 'c', 'd1/e.log': 'e', 'd2/g.txt': 'g' });
        // 0: every rescan lstats its files on the stat workers, whatever the workspace's size.
        const listings = new ListingCache(0);
        let prevFull = (await scan({ roots, blobs, listings })).manifest;
        let prevDirty = prevFull;
        let prevCached = prevFull;
        // As the engine does: dirty-hint checkpoints and full rescans alternate on one chain, with one listing cache.
        const mixedListings = new ListingCache(0);
        const spare = new SpareCopy(0);
        let prevMixed = (await scan({ roots, blobs, listings: mixedListings })).manifest;
        prevMixed = (await scan({ roots, blobs, previous: prevMixed, listings: mixedListings })).manifest;
        for (const ops of rounds) {
          const dirty: string[] = [];
          for (const o of ops) {
            const abs = path.join(ws, o.p);
            dirty.push(o.p);
            if (o.k === 'write' || o.k === 'ignore') {
              await fs.rm(abs, { recursive: true, force: true });
              await fs.mkdir(path.dirname(abs), { recursive: true }).catch(() => {});
              await fs.writeFile(abs, o.c).catch(() => {}); // parent may be a file: the edit just fails
            } else if (o.k === 'append') {
              await fs.appendFile(abs, o.c).catch(() => {}); // creates it if missing; fails if a directory
            } else if (o.k === 'rm') {
              await fs.rm(abs, { recursive: true, force: true });
            } else if (o.k === 'chmod') {
              await fs.chmod(abs, o.x ? 0o755 : 0o644).catch(() => {});
            } else {
              await fs.rm(abs, { recursive: true, force: true });
              await fs.mkdir(path.dirname(abs), { recursive: true }).catch(() => {});
              await fs.symlink(o.t, abs).catch(() => {});
            }
          }
          // Past the racy window, so the listings of directories edited this round are kept for the next.
          await new Promise((r) => setTimeout(r, 60));
          const fresh = (await scan({ roots, blobs })).manifest;
          const cachedScan = await scan({ roots, blobs, previous: prevCached, listings });
          const cached = cachedScan.manifest;
          assert.deepEqual(keys(cached), keys(fresh));
          assert.deepEqual(diffManifests(fresh, cached), []);
          // What ManifestStore.save relies on: every key outside `touched` holds the previous entry itself.
          const touched = cachedScan.touched;
          assert.ok(touched, 'a rescan on stat workers reports the keys it touched');
          for (const k of new Set([...prevCached.keys(), ...cached.keys()])) if (!touched.has(k)) assert.equal(cached.get(k), prevCached.get(k), k);
          assert.deepEqual(
            cachedScan.changed.changes.map((c) => [c.path, c.status]),
            diffManifests(prevCached, cached).map((c) => [c.path, c.status]),
          );
          prevCached = cached;
          const incremental = (await scan({ roots, blobs, previous: prevFull })).manifest;
          // The hinted chain starts each scan from a copy made ahead (as an owner's idle time does).
          spare.prepare(prevDirty);
          await new Promise((r) => setTimeout(r, 2));
          assert.ok(spare.holds(prevDirty));
          const hintedScan = await scan({ roots, blobs, previous: prevDirty, dirty, spare });
          const hinted = hintedScan.manifest;
          // (Nothing dirty: the previous manifest itself is the answer, unchanged.)
          if (dirty.length) assert.notEqual(hinted, prevDirty, 'the scan changed the copy, not the previous manifest');
          assert.ok(hintedScan.touched, 'a hinted scan reports the keys it touched');
          for (const k of new Set([...prevDirty.keys(), ...hinted.keys()])) if (!hintedScan.touched.has(k)) assert.equal(hinted.get(k), prevDirty.get(k), k);
          assert.deepEqual(
            hintedScan.changed.changes.map((c) => [c.path, c.status]),
            diffManifests(prevDirty, hinted).map((c) => [c.path, c.status]),
          );
          assert.deepEqual(keys(incremental), keys(fresh));
          assert.deepEqual(diffManifests(fresh, incremental), []);
          assert.deepEqual(keys(hinted), keys(fresh));
          assert.deepEqual(diffManifests(fresh, hinted), []);
          prevFull = incremental;
          prevDirty = hinted;
          const mixedHint = (await scan({ roots, blobs, previous: prevMixed, dirty, listings: mixedListings })).manifest;
          assert.deepEqual(diffManifests(fresh, mixedHint), []);
          // A scan whose result is not kept (a diff against the workspace) comes in between.
          assert.deepEqual(diffManifests(fresh, (await scan({ roots, blobs, previous: mixedHint, listings: mixedListings })).manifest), []);
          const mixedFull = await scan({ roots, blobs, previous: mixedHint, listings: mixedListings });
          assert.deepEqual(keys(mixedFull.manifest), keys(fresh));
          assert.deepEqual(diffManifests(fresh, mixedFull.manifest), []);
          for (const k of new Set([...mixedHint.keys(), ...mixedFull.manifest.keys()])) if (!mixedFull.touched!.has(k)) assert.equal(mixedFull.manifest.get(k), mixedHint.get(k), k);
          // The hint recorded every edit: only entries it marked racy are read again, planned directory or not.
          assert.equal(mixedFull.stats.filesHashed, [...mixedHint.values()].filter((e) => e.type === 'file' && e.racy).length);
          prevMixed = mixedFull.manifest;
          planned += cachedScan.stats.dirsPlanned + mixedFull.stats.dirsPlanned;
        }
        await listings.close();
        await mixedListings.close();
      }),
      { numRuns: 40 },
    );
    assert.ok(planned > 0, 'some rescans walked directories from their plans');
  });
});

describe('spare copy of the last manifest', () => {
  it('hands out the copy made ahead only for the very map it was made of, once; otherwise copies on the spot', async () => {
    const a: Manifest = new Map([['x', { type: 'file', hash: 'a'.repeat(64), size: 1, mode: 0o644, mtimeMs: 1, ino: 1 }]]);
    const b: Manifest = new Map(a);
    const spare = new SpareCopy(0);
    const cold = spare.take(a);
    assert.notEqual(cold, a);
    assert.deepEqual([...cold], [...a]);
    spare.prepare(a);
    assert.equal(spare.holds(a), false, 'made later, not on the caller’s time');
    await new Promise((r) => setTimeout(r, 5));
    assert.equal(spare.holds(a), true);
    assert.equal(spare.holds(b), false);
    const other = spare.take(b);
    assert.notEqual(other, b);
    assert.equal(spare.holds(a), false, 'a take for another map drops the copy');
    spare.prepare(a);
    await new Promise((r) => setTimeout(r, 5));
    const ready = spare.take(a);
    ready.delete('x');
    assert.equal(a.size, 1, 'the copy is the caller’s to change');
    assert.equal(spare.take(a).size, 1, 'taken once: the next take copies again');
    spare.prepare(a);
    spare.clear();
    await new Promise((r) => setTimeout(r, 5));
    assert.equal(spare.holds(a), false, 'cleared before it was made: never made');
  });
});
