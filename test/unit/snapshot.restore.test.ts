import assert from 'node:assert/strict';
import fss from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import fc from 'fast-check';
import { RESTORE_TEMP_SUFFIX, UnsafePathError, applyRestore, planRestore, restoreAsideName, restoreTempName, sameContent, scan, sweepRestoreTemps, type BlobStore, type Manifest, type ManifestEntry } from '../../src/core/snapshot/index.js';
import { TempDirs, newStore, readTree, writeTree } from './snapshot.helpers.js';

describe('snapshot restore', () => {
  const tmp = new TempDirs();
  afterEach(() => tmp.cleanup());

  async function workspace(): Promise<{ ws: string; blobs: BlobStore; roots: { name: string; dir: string }[] }> {
    const ws = await tmp.make();
    return { ws, blobs: await newStore(tmp), roots: [{ name: 'w', dir: ws }] };
  }

  it('restores every kind of change byte-identically, leaving ignored files and .git alone', async () => {
    const { ws, blobs, roots } = await workspace();
    await writeTree(ws, {
      '.gitignore': '*.log\n',
      'keep.txt': 'same',
      'mod.txt': 'before\n',
      'bin/tool.sh': '#!/bin/sh\n',
      'gone/deep/file.txt': 'will be deleted, then restored',
      'retype': 'a file that becomes a symlink',
      '.git/HEAD': 'ref: refs/heads/main\n',
    });
    await fs.chmod(path.join(ws, 'bin/tool.sh'), 0o755);
    await fs.symlink('keep.txt', path.join(ws, 'link'));
    const target = (await scan({ roots, blobs })).manifest;
    const before = await readTree(ws);

    await fs.writeFile(path.join(ws, 'mod.txt'), 'after\n');
    await fs.chmod(path.join(ws, 'bin/tool.sh'), 0o644);
    await fs.rm(path.join(ws, 'gone'), { recursive: true });
    await fs.rm(path.join(ws, 'retype'));
    await fs.symlink('mod.txt', path.join(ws, 'retype'));
    await fs.rm(path.join(ws, 'link'));
    await fs.symlink('mod.txt', path.join(ws, 'link'));
    await writeTree(ws, { 'new/sub/added.txt': 'added later', 'debug.log': 'ignored, untracked' });
    const current = (await scan({ roots, blobs })).manifest;

    const plan = planRestore(current, target, { isHeld: () => true });
    assert.deepEqual(plan.writes.map((w) => w.path), ['bin/tool.sh', 'gone/deep/file.txt', 'link', 'mod.txt', 'retype']);
    assert.deepEqual(plan.removes.map((r) => r.path), ['new/sub/added.txt']);
    const res = await applyRestore(plan, roots, blobs);
    assert.deepEqual(res.conflicts, []);
    const after = await readTree(ws);
    after.delete('debug.log');
    assert.deepEqual(after, before);
    assert.equal(await fs.readFile(path.join(ws, 'debug.log'), 'utf8'), 'ignored, untracked');
    await assert.rejects(fs.stat(path.join(ws, 'new')), /ENOENT/, 'emptied directories are removed');
    assert.equal((await fs.stat(path.join(ws, 'bin/tool.sh'))).mode & 0o777, 0o755);
  });

  it('removes a file only when its content is held, never touches too-large files, honours paths', async () => {
    const { ws, blobs, roots } = await workspace();
    await writeTree(ws, { 'a.txt': 'a', 'dir/b.txt': 'b' });
    const target = (await scan({ roots, blobs, maxFileBytes: 100 })).manifest;
    await writeTree(ws, { 'a.txt': 'A', 'dir/b.txt': 'B', 'held.txt': 'h', 'unheld.txt': 'u', 'huge.bin': Buffer.alloc(200) });
    const current = (await scan({ roots, blobs, maxFileBytes: 100 })).manifest;
    const heldHash = (current.get('held.txt') as { hash: string }).hash;
    const plan = planRestore(current, target, { isHeld: (x) => x === heldHash });
    assert.deepEqual(plan.removes.map((r) => r.path), ['held.txt']);
    assert.deepEqual(plan.kept, [
      { path: 'huge.bin', reason: 'too_large_in_current' },
      { path: 'unheld.txt', reason: 'content_not_held' },
    ]);
    const sub = planRestore(current, target, { paths: ['dir'], isHeld: () => true });
    assert.deepEqual([sub.writes.map((w) => w.path), sub.removes.length], [['dir/b.txt'], 0]);
    await applyRestore(sub, roots, blobs);
    assert.equal(await fs.readFile(path.join(ws, 'dir/b.txt'), 'utf8'), 'b');
    assert.equal(await fs.readFile(path.join(ws, 'a.txt'), 'utf8'), 'A');
    await applyRestore(plan, roots, blobs);
    assert.deepEqual([...(await readTree(ws)).keys()].sort(), ['a.txt', 'dir/b.txt', 'huge.bin', 'unheld.txt']);
  });

  it('is idempotent: re-running a partly applied plan converges', async () => {
    const { ws, blobs, roots } = await workspace();
    const files: Record<string, string> = {};
    for (let i = 0; i < 20; i++) files[`d${i % 3}/f${i}.txt`] = `v1 ${i}`;
    await writeTree(ws, files);
    const target = (await scan({ roots, blobs })).manifest;
    const wanted = await readTree(ws);
    for (let i = 0; i < 20; i++) await fs.writeFile(path.join(ws, `d${i % 3}/f${i}.txt`), `v2 ${i}`);
    await writeTree(ws, { 'extra/x.txt': 'x' });
    const current = (await scan({ roots, blobs })).manifest;
    const plan = { ...planRestore(current, target, { isHeld: () => true }), tempTag: '0123456789abcdef' };
    const tempOf = (i: number) => path.join(ws, path.dirname(plan.writes[i]!.path), restoreTempName(plan.tempTag, i));
    // Simulate a crash half-way: only some writes happened, and a temp file was left behind.
    await applyRestore({ ...plan, writes: plan.writes.slice(0, 7), removes: [] }, roots, blobs);
    await fs.writeFile(tempOf(0), 'partial');
    // A crash between unlinking a replaced file and renaming its temp (Linux): the path is absent, its temp beside it.
    const cut = plan.writes[10]!.path;
    await fs.rm(path.join(ws, cut));
    await fs.writeFile(tempOf(10), 'partial');
    const again = await applyRestore(plan, roots, blobs);
    assert.deepEqual(again.conflicts, []);
    // The re-run removed the temps its plan names, also beside a write it found done.
    assert.deepEqual(await readTree(ws), wanted);
    const third = await applyRestore(plan, roots, blobs);
    assert.deepEqual([third.removed, third.conflicts], [[], []]);
    // A sweep removes exactly the plan's temps: not a person's file that merely looks like one.
    await fs.writeFile(tempOf(1), 'partial');
    await fs.writeFile(tempOf(2), 'partial');
    await fs.writeFile(path.join(ws, `d1/f1.txt${RESTORE_TEMP_SUFFIX}`), 'mine');
    assert.equal(await sweepRestoreTemps(plan, roots), 2);
    wanted.set(`d1/f1.txt${RESTORE_TEMP_SUFFIX}`, `- ${Buffer.from('mine').toString('base64')}`);
    assert.deepEqual(await readTree(ws), wanted);
    // A plan recorded before temp tags: its crashed run's temps were `<name>.waypoint-tmp`.
    assert.equal(await sweepRestoreTemps({ ...plan, tempTag: undefined, legacyTemps: true }, roots), 1);
    wanted.delete(`d1/f1.txt${RESTORE_TEMP_SUFFIX}`);
    assert.deepEqual(await readTree(ws), wanted);
  });

  it('a crash with a file moved aside: the re-run gives a free path its file back, drops what the undo point holds, and puts a save back', async function () {
    if (process.platform === 'win32') this.skip(); // no aside step there
    const { ws, blobs, roots } = await workspace();
    await writeTree(ws, { 'a.txt': 'a v1', 'b.txt': 'b v1', 'c.txt': 'c v1', 'gone.txt': 'gone v1' });
    const target = (await scan({ roots, blobs })).manifest;
    await writeTree(ws, { 'a.txt': 'a v2', 'b.txt': 'b v2', 'c.txt': 'c v2', 'new.txt': 'new' });
    await fs.rm(path.join(ws, 'gone.txt'));
    const current = (await scan({ roots, blobs })).manifest;
    const plan = { ...planRestore(current, target, { isHeld: () => true }), tempTag: 'fedcba9876543210' };
    const w = (p: string) => plan.writes.findIndex((x) => x.path === p);
    const aside = (kind: 'w' | 'r', i: number) => path.join(ws, restoreAsideName(plan.tempTag, kind, i));
    // a.txt: crashed after the move, before the new file went in (the path is free).
    await fs.rename(path.join(ws, 'a.txt'), aside('w', w('a.txt')));
    // b.txt: crashed after the new file went in, the moved old one (as planned) still aside.
    await fs.writeFile(aside('w', w('b.txt')), 'b v2');
    await fs.writeFile(path.join(ws, 'b.txt'), 'b v1');
    // c.txt: the moved file was a person's save, and the new file is already in place.
    await fs.writeFile(aside('w', w('c.txt')), 'c saved by the person');
    await fs.writeFile(path.join(ws, 'c.txt'), 'c v1');
    // new.txt: a removal crashed after its move.
    await fs.rename(path.join(ws, 'new.txt'), aside('r', plan.removes.findIndex((x) => x.path === 'new.txt')));
    const res = await applyRestore(plan, roots, blobs);
    assert.deepEqual(res.conflicts.map((c) => c.path), ['c.txt']);
    const tree = await readTree(ws);
    assert.deepEqual([...tree.keys()].sort(), ['a.txt', 'b.txt', 'c.txt', 'gone.txt'], 'no moved file left, new.txt removed');
    assert.equal(await fs.readFile(path.join(ws, 'a.txt'), 'utf8'), 'a v1');
    assert.equal(await fs.readFile(path.join(ws, 'b.txt'), 'utf8'), 'b v1');
    assert.equal(await fs.readFile(path.join(ws, 'c.txt'), 'utf8'), 'c saved by the person');
    // A sweep (recovery when the re-run fails) puts a moved file back on its free path.
    await fs.rename(path.join(ws, 'a.txt'), aside('w', w('a.txt')));
    await sweepRestoreTemps(plan, roots);
    assert.equal(await fs.readFile(path.join(ws, 'a.txt'), 'utf8'), 'a v1');
    assert.deepEqual((await fs.readdir(ws)).filter((n) => n.startsWith('.wp-')), []);
  });

  it('does not overwrite an untracked file in the way, nor delete a file edited since the scan', async () => {
    const { ws, blobs, roots } = await workspace();
    await writeTree(ws, { 'out/gen.js': 'tracked once' });
    const target = (await scan({ roots, blobs })).manifest;
    await fs.rm(path.join(ws, 'out'), { recursive: true });
    await writeTree(ws, { 'new.txt': 'n' });
    const current = (await scan({ roots, blobs })).manifest;
    await writeTree(ws, { 'out/gen.js': 'the person made this since', 'new.txt': 'edited after the scan' });
    const res = await applyRestore(planRestore(current, target, { isHeld: () => true }), roots, blobs);
    assert.deepEqual(res.conflicts.map((c) => c.path), ['new.txt', 'out/gen.js']);
    assert.equal(await fs.readFile(path.join(ws, 'out/gen.js'), 'utf8'), 'the person made this since');
    assert.equal(await fs.readFile(path.join(ws, 'new.txt'), 'utf8'), 'edited after the scan');
  });

  it('property: a plan with any hostile path throws and writes nothing, inside or outside', async function () {
    this.timeout(120_000);
    const { ws, blobs, roots } = await workspace();
    const outside = await tmp.make('wp-outside-');
    await writeTree(ws, { 'a.txt': 'original', 'src/b.txt': 'b' });
    await writeTree(outside, { 'victim.txt': 'outside' });
    await fs.symlink(outside, path.join(ws, 'esc'));
    const current = (await scan({ roots, blobs })).manifest;
    const payload = await blobs.put(Buffer.from('pwned'));
    await blobs.flush();
    const fileEntry: ManifestEntry = { type: 'file', hash: payload.hash, size: 5, mode: 0o644, mtimeMs: 1, ino: 1 };
    const wsBefore = await readTree(ws);
    const outBefore = await readTree(outside);

    const hostileName = fc.oneof(
      fc.constantFrom('../pwn.txt', 'src/../../pwn.txt', '/tmp/pwn.txt', outside + '/victim.txt', 'C:/pwn.txt', 'src\\..\\..\\pwn.txt', 'a\0b', 'caf\u0065\u0301.txt', 'x'.repeat(256), 'y/'.repeat(2100) + 'z', '.git/hooks/pre-commit', 'sub/.waypoint/db', 'esc/victim.txt', 'esc/new.txt', '', './a.txt', 'src//b.txt'),
      fc.tuple(fc.array(fc.constantFrom('a', 'src', '..', '.', ''), { minLength: 1, maxLength: 4 }), fc.constantFrom('pwn.txt', '..')).map(([segs, last]) => [...segs, last].join('/')).filter((p) => p.split('/').some((s) => s === '..' || s === '.' || s === '')),
    );
    const scenario = fc.oneof(
      hostileName.map((p) => ({ kind: 'name' as const, p, extra: [] as [string, ManifestEntry][] })),
      // Case collision on a case-insensitive file system.
      fc.constantFrom(['A.txt', 'a.txt'], ['SRC/x.txt', 'src/y.txt']).map((pair) => ({ kind: 'case' as const, p: pair[0]!, extra: [[pair[1]!, fileEntry]] as [string, ManifestEntry][] })),
      // A symlink planted by the plan itself, then written through.
      fc.constantFrom(outside, '..', '/').map((t) => ({ kind: 'plant' as const, p: 'lnk/victim.txt', extra: [['lnk', { type: 'symlink', target: t, mtimeMs: 1, ino: 1 }]] as [string, ManifestEntry][] })),
    );
    await fc.assert(
      fc.asyncProperty(scenario, fc.boolean(), async (s, withGoodWrites) => {
        const target: Manifest = new Map(current);
        if (withGoodWrites) target.set('src/good.txt', fileEntry).set('a.txt', fileEntry);
        for (const [k, v] of s.extra) target.set(k, v);
        target.set(s.p, fileEntry);
        const plan = planRestore(current, target, { isHeld: () => true });
        await assert.rejects(applyRestore(plan, roots, blobs, { caseInsensitive: s.kind === 'case' }), UnsafePathError);
        assert.deepEqual(await readTree(ws), wsBefore);
        assert.deepEqual(await readTree(outside), outBefore);
      }),
      { numRuns: 150 },
    );
  });

  it('a write failing mid-way leaves the files before it replaced, no temp behind, and a re-run finishes', async () => {
    const { ws, blobs, roots } = await workspace();
    const names = Array.from({ length: 30 }, (_, i) => `f${String(i).padStart(2, '0')}.txt`);
    await writeTree(ws, Object.fromEntries(names.map((n) => [n, `old ${n}\n`.repeat(50)])));
    const current = (await scan({ roots, blobs })).manifest;
    await writeTree(ws, Object.fromEntries(names.map((n) => [n, `new ${n}\n`.repeat(60)])));
    const target = (await scan({ roots, blobs })).manifest;
    await writeTree(ws, Object.fromEntries(names.map((n) => [n, `old ${n}\n`.repeat(50)])));
    const plan = { ...planRestore(current, target), tempTag: 'feedc0de' };
    // The last file's temp name is taken by a non-empty directory: its write throws.
    await writeTree(ws, { [`${restoreTempName(plan.tempTag, 29)}/blocker`]: 'x' });
    await assert.rejects(applyRestore(plan, roots, blobs), /EISDIR|ENOTEMPTY|EEXIST|EPERM|directory/i);
    // Every earlier file is in place, no temp left.
    for (const n of names.slice(0, 29)) assert.equal(fss.readFileSync(path.join(ws, n), 'utf8'), `new ${n}\n`.repeat(60), n);
    assert.deepEqual(fss.readdirSync(ws).sort(), [...names.slice(0, 29), 'f29.txt', restoreTempName(plan.tempTag, 29)].sort());
    assert.equal(fss.readFileSync(path.join(ws, 'f29.txt'), 'utf8'), 'old f29.txt\n'.repeat(50));
    // Once the way is clear the same plan finishes.
    await fs.rm(path.join(ws, restoreTempName(plan.tempTag, 29)), { recursive: true });
    const res = await applyRestore(plan, roots, blobs);
    assert.equal(res.written.length, 30);
    assert.equal(fss.readFileSync(path.join(ws, 'f29.txt'), 'utf8'), 'new f29.txt\n'.repeat(60));
  });

  it('property: planRestore matches a plain two-pass reference on any pair of manifests', () => {
    const reference = (current: Manifest, target: Manifest, paths: string[] | undefined, isHeld: (h: string) => boolean) => {
      const sel = (k: string) => !paths || paths.some((p) => p === '' || k === p || k.startsWith(`${p}/`));
      // A directory gap (an uncaptured entry with `dir`) strictly above the key.
      const gapAbove = (m: Manifest, k: string) => [...m].some(([g, e]) => e.type === 'uncaptured' && e.dir === true && k.startsWith(`${g}/`));
      const plan = { writes: [] as unknown[], removes: [] as unknown[], kept: [] as unknown[], unchanged: 0 };
      for (const [key, want] of target) {
        if (!sel(key)) continue;
        const have = current.get(key);
        if (have && sameContent(have, want)) plan.unchanged++;
        else if (want.type === 'uncaptured') {
          if (have) plan.kept.push({ path: key, reason: 'not_captured_in_target' });
        } else if (have?.type === 'uncaptured' || gapAbove(current, key)) plan.kept.push({ path: key, reason: 'not_captured_in_current' });
        else if (want.type === 'skipped') plan.kept.push({ path: key, reason: 'too_large_in_target' });
        else if (have?.type === 'skipped') plan.kept.push({ path: key, reason: 'too_large_in_current' });
        else plan.writes.push(have ? { path: key, entry: want, expectAbsent: false, was: have } : { path: key, entry: want, expectAbsent: true });
      }
      for (const [key, have] of current) {
        if (target.has(key) || !sel(key)) continue;
        if (gapAbove(target, key)) plan.kept.push({ path: key, reason: 'not_captured_in_target' });
        else if (have.type === 'uncaptured') plan.kept.push({ path: key, reason: 'not_captured_in_current' });
        else if (have.type === 'skipped') plan.kept.push({ path: key, reason: 'too_large_in_current' });
        else if (have.type === 'symlink') plan.removes.push({ path: key, target: have.target });
        else if (isHeld(have.hash)) plan.removes.push({ path: key, hash: have.hash });
        else plan.kept.push({ path: key, reason: 'content_not_held' });
      }
      const byPath = (a: unknown, b: unknown) => ((a as { path: string }).path < (b as { path: string }).path ? -1 : 1);
      plan.writes.sort(byPath);
      plan.removes.sort(byPath);
      plan.kept.sort(byPath);
      return plan;
    };
    const entry: fc.Arbitrary<ManifestEntry> = fc.oneof(
      fc.record({ type: fc.constant('file' as const), hash: fc.constantFrom('a'.repeat(64), 'b'.repeat(64)), size: fc.constant(1), mode: fc.constantFrom(0o644, 0o755), mtimeMs: fc.constant(1), ino: fc.constant(1) }),
      fc.record({ type: fc.constant('symlink' as const), target: fc.constantFrom('x', 'y'), mtimeMs: fc.constant(1), ino: fc.constant(1) }),
      fc.record({ type: fc.constant('skipped' as const), size: fc.constantFrom(1, 2), mtimeMs: fc.constant(1), ino: fc.constant(1), reason: fc.constant('too_large') }) as unknown as fc.Arbitrary<ManifestEntry>,
      fc.constantFrom<ManifestEntry>({ type: 'uncaptured', code: 'EACCES' }, { type: 'uncaptured', code: 'EACCES', dir: true }, { type: 'uncaptured', code: 'EMFILE', dir: true }),
    );
    const manifest = fc.dictionary(fc.constantFrom('a', 'b', 'd/a', 'd/b', 'd/e/f', 'g'), entry).map((o) => new Map(Object.entries(o)) as Manifest);
    fc.assert(
      fc.property(manifest, manifest, fc.option(fc.subarray(['a', 'd', 'd/e', 'g', 'zz']), { nil: undefined }), (current, target, paths) => {
        const isHeld = (h: string) => h.startsWith('a');
        assert.deepEqual(planRestore(current, target, { paths, isHeld }), reference(current, target, paths, isHeld));
      }),
      { numRuns: 500 },
    );
  });

  it('replaces and removes past the cap of files held for freeing; every held descriptor is closed after', async function () {
    if (process.platform !== 'linux') this.skip(); // counts /proc/self/fd
    const { ws, blobs, roots } = await workspace();
    const files: Record<string, string> = {};
    for (let i = 0; i < 300; i++) files[`d/${i}.txt`] = `before ${i}\n`;
    await writeTree(ws, files);
    const before = (await scan({ roots, blobs })).manifest;
    for (let i = 0; i < 300; i++) await fs.writeFile(path.join(ws, `d/${i}.txt`), `after ${i}\n`);
    for (let i = 0; i < 20; i++) await fs.writeFile(path.join(ws, `d/new-${i}.txt`), `new ${i}\n`); // removed by the restore
    const after = (await scan({ roots, blobs, previous: before })).manifest;
    const fds = () => fss.readdirSync('/proc/self/fd').length;
    const baseline = fds();
    // Back to `before`: 300 files replaced (past the cap of 256 held), 20 removed.
    const r = await applyRestore(planRestore(after, before, { isHeld: () => true }), roots, blobs);
    assert.equal(r.written.length, 300);
    assert.equal(r.removed.length, 20);
    assert.equal(fss.readFileSync(path.join(ws, 'd/299.txt'), 'utf8'), 'before 299\n');
    for (let i = 0; i < 50 && fds() > baseline; i++) await new Promise((res) => setTimeout(res, 10));
    assert.equal(fds(), baseline, 'the descriptors held for freeing are closed');
  });

  it('refuses a plan whose blob is missing before writing anything', async () => {
    const { ws, blobs, roots } = await workspace();
    await writeTree(ws, { 'a.txt': 'a' });
    const current = (await scan({ roots, blobs })).manifest;
    const target: Manifest = new Map(current).set('a.txt', { type: 'file', hash: 'f'.repeat(64), size: 1, mode: 0o644, mtimeMs: 1, ino: 1 });
    target.set('b.txt', { ...(current.get('a.txt') as ManifestEntry) });
    await assert.rejects(applyRestore(planRestore(current, target), roots, blobs), /not in the store/);
    assert.deepEqual([...(await readTree(ws)).keys()], ['a.txt']);
  });
});
