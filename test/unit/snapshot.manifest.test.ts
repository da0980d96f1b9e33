import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import fc from 'fast-check';
import { CorruptManifestError, ManifestStore, canonicalJson, fullManifestBytes, diffCheckpoint, diffManifests, lineCounts, manifestsEqual, type Manifest, type ManifestEntry } from '../../src/core/snapshot/index.js';
import { TempDirs, newStore } from './snapshot.helpers.js';

const h = (c: string) => c.repeat(64);
const file = (hash: string, mode: 0o644 | 0o755 = 0o644, mtimeMs = 1): ManifestEntry => ({ type: 'file', hash, size: 1, mode, mtimeMs, ino: 1 });

describe('snapshot manifests and diff', () => {
  const tmp = new TempDirs();
  afterEach(() => tmp.cleanup());

  it('diffManifests gives every status and ignores stat-only changes', () => {
    const a: Manifest = new Map<string, ManifestEntry>([
      ['same', file(h('1'))],
      ['touched', file(h('2'), 0o644, 1)],
      ['mod', file(h('3'))],
      ['chmod', file(h('4'))],
      ['gone', file(h('5'))],
      ['retyped', file(h('6'))],
      ['link', { type: 'symlink', target: 'x', mtimeMs: 1, ino: 2 }],
    ]);
    const b: Manifest = new Map<string, ManifestEntry>([
      ['same', file(h('1'))],
      ['touched', file(h('2'), 0o644, 999)],
      ['mod', file(h('a'))],
      ['chmod', file(h('4'), 0o755)],
      ['retyped', { type: 'symlink', target: 'same', mtimeMs: 1, ino: 3 }],
      ['link', { type: 'symlink', target: 'y', mtimeMs: 1, ino: 2 }],
      ['new', file(h('b'))],
    ]);
    assert.deepEqual(
      diffManifests(a, b).map((c) => [c.path, c.status]),
      [['chmod', 'mode_changed'], ['gone', 'deleted'], ['link', 'modified'], ['mod', 'modified'], ['new', 'added'], ['retyped', 'type_changed']],
    );
  });

  it('lineCounts counts added and removed lines and detects binary content', () => {
    assert.deepEqual(lineCounts(Buffer.from('a\nb\nc\n'), Buffer.from('a\nB\nc\nd\n')), { added: 2, removed: 1, binary: false });
    assert.deepEqual(lineCounts(null, Buffer.from('x\ny')), { added: 2, removed: 0, binary: false });
    assert.deepEqual(lineCounts(Buffer.from('x\n'), null), { added: 0, removed: 1, binary: false });
    assert.deepEqual(lineCounts(Buffer.from([1, 0, 2]), Buffer.from('text')), { added: 0, removed: 0, binary: true });
  });

  it('diffCheckpoint reads blobs for line counts', async () => {
    const blobs = await newStore(tmp);
    const x = await blobs.put(Buffer.from('one\ntwo\n'));
    const y = await blobs.put(Buffer.from('one\n2\nthree\n'));
    const a: Manifest = new Map([['f', file(x.hash)]]);
    const b: Manifest = new Map([['f', file(y.hash)], ['g', file(x.hash)]]);
    const d = await diffCheckpoint(a, b, blobs);
    assert.deepEqual(d.map((c) => [c.path, c.status, c.lines]), [
      ['f', 'modified', { added: 2, removed: 1, binary: false }],
      ['g', 'added', { added: 2, removed: 0, binary: false }],
    ]);
  });

  it('saves deltas with a full manifest every N and round-trips a branching tree', async () => {
    const blobs = await newStore(tmp);
    const store = new ManifestStore(blobs, { fullEvery: 3, cacheSize: 2 });
    const m0: Manifest = new Map([['a', file(h('1'))], ['b', file(h('2'))]]);
    const r0 = await store.save(m0, null);
    const m1 = new Map(m0).set('c', file(h('3')));
    const r1 = await store.save(m1, r0);
    const m2 = new Map(m1);
    m2.delete('a');
    const r2 = await store.save(m2, r1);
    // A rollback to r0 followed by new work branches the tree from r0.
    const m1b = new Map(m0).set('a', file(h('9'), 0o755));
    const r1b = await store.save(m1b, r0);
    const m3 = new Map(m2).set('d', file(h('4')));
    const r3 = await store.save(m3, r2);
    assert.deepEqual([await store.depthOf(r0), await store.depthOf(r1), await store.depthOf(r2), await store.depthOf(r1b), await store.depthOf(r3)], [0, 1, 2, 1, 0]);
    const cold = new ManifestStore(blobs, { fullEvery: 3 });
    for (const [ref, m] of [[r0, m0], [r1, m1], [r2, m2], [r1b, m1b], [r3, m3]] as const) {
      assert.ok(manifestsEqual(await cold.load(ref), m), ref);
    }
    const delta = JSON.parse((await blobs.get(r2)).toString());
    assert.deepEqual({ full: delta.full, parent: delta.parent, del: delta.del, set: Object.keys(delta.set) }, { full: false, parent: r1, del: ['a'], set: [] });
    // Equal manifest + equal parent = equal bytes = equal ref (canonical JSON).
    assert.equal(await store.save(new Map([...m1].reverse()), r0), r1);
  });

  it('property: a delta saved from the touched keys alone equals the one computed over every entry', async () => {
    const blobs = await newStore(tmp);
    const keys = fc.constantFrom(...Array.from({ length: 24 }, (_, i) => `d${i % 3}/f${i}`));
    const entry = fc.tuple(fc.constantFrom('1', '2', '3'), fc.constantFrom(0o644 as const, 0o755 as const), fc.nat(3)).map(([c, m, t]) => file(h(c), m, t));
    const edit = fc.oneof(fc.tuple(fc.constant('set' as const), keys, entry), fc.tuple(fc.constant('del' as const), keys, fc.constant(null)));
    await fc.assert(
      fc.asyncProperty(fc.dictionary(keys, entry, { minKeys: 1 }), fc.array(edit, { maxLength: 12 }), fc.array(keys, { maxLength: 4 }), async (base, edits, extra) => {
        const parent: Manifest = new Map(Object.entries(base));
        const child = new Map(parent);
        const touched = new Set<string>(extra); // a scan may re-examine keys that end up unchanged
        for (const [op, k, v] of edits) {
          touched.add(k);
          if (op === 'set') child.set(k, v!);
          else child.delete(k);
        }
        const a = new ManifestStore(blobs, { fullEvery: 50 });
        const b = new ManifestStore(blobs, { fullEvery: 50 });
        const parentRef = await a.save(parent, null);
        await b.save(parent, null);
        assert.equal(await a.save(new Map(child), parentRef, undefined, touched), await b.save(new Map(child), parentRef));
      }),
      { numRuns: 60 },
    );
  });

  it('refuses corrupt or hostile manifest objects', async () => {
    const blobs = await newStore(tmp);
    const store = new ManifestStore(blobs);
    const bad = async (obj: unknown) => (await blobs.put(Buffer.from(typeof obj === 'string' ? obj : canonicalJson(obj)))).hash;
    const cases = [
      'not json',
      { v: 1, full: true, entries: { '../outside.txt': file(h('1')) } },
      { v: 1, full: true, entries: { '/etc/passwd': file(h('1')) } },
      { v: 1, full: true, entries: { 'a\u0000b': file(h('1')) } },
      { v: 1, full: true, entries: { ok: { ...file(h('1')), hash: '../../x' } } },
      { v: 1, full: true, entries: { ok: { ...file(h('1')), mode: 0o4755 } } },
      { v: 1, full: true, entries: { ok: { ...file(h('1')), extra: 1 } } },
      { v: 1, full: false, parent: h('f'), depth: 1, set: {}, del: ['.git/config'] },
    ];
    for (const c of cases) {
      await assert.rejects(store.load(await bad(c)), CorruptManifestError, JSON.stringify(c));
    }
    // A delta whose parent chain does not descend in depth (a cycle or a forged depth) is refused.
    const full = await bad({ v: 1, full: true, entries: {} });
    const d1 = await bad({ v: 1, full: false, parent: full, depth: 2, set: {}, del: [] });
    await assert.rejects(store.load(d1), /expected a delta at depth 1/);
    await assert.rejects(store.save(new Map([['../x', file(h('1'))]]), null), /unsafe path/);
    // Nothing above changed the files on disk besides the objects we put.
    assert.ok((await fs.readdir(blobs.dir)).length > 0);
  });
  it('property: a full manifest is encoded straight from its map exactly as canonicalJson encodes the object', () => {
    const key = fc.oneof(fc.stringMatching(/^[a-z0-9/._ -]{1,8}$/), fc.constantFrom('10', '2', '0', '__proto__x', 'ü', 'a"b', 'Z'));
    const entry = fc.oneof(
      fc.record({ type: fc.constant('file' as const), hash: fc.constantFrom('a'.repeat(64), 'b'.repeat(64)), size: fc.nat(), mode: fc.constantFrom(0o644 as const, 0o755 as const), mtimeMs: fc.double({ noNaN: true, noDefaultInfinity: true }), ino: fc.nat() }),
      fc.record({ type: fc.constant('symlink' as const), target: fc.string({ minLength: 1 }), mtimeMs: fc.nat(), ino: fc.nat() }),
      fc.record({ type: fc.constant('skipped' as const), size: fc.nat(), mtimeMs: fc.nat(), reason: fc.constant('too_large' as const) }),
    );
    fc.assert(
      fc.property(fc.array(fc.tuple(key, entry), { maxLength: 30 }), (pairs) => {
        const m: Manifest = new Map(pairs as [string, ManifestEntry][]);
        const want = canonicalJson({ v: 1, full: true, entries: Object.fromEntries(m) });
        const bytes = fullManifestBytes(m);
        assert.equal(bytes.toString('utf8'), want);
        assert.ok(bytes.equals(Buffer.from(want, 'utf8')), 'the bytes are its UTF-8 encoding');
      }),
      { numRuns: 500 },
    );
  });

  it('save with adopt keeps the caller\'s map (no copy); a later load is a copy of it', async () => {
    const blobs = await newStore(tmp);
    const store = new ManifestStore(blobs);
    const m: Manifest = new Map([['a.txt', { type: 'file', hash: 'a'.repeat(64), size: 1, mode: 0o644, mtimeMs: 1, ino: 1 } as ManifestEntry]]);
    const ref = await store.save(m, null, undefined, undefined, { adopt: true });
    const loaded = await store.load(ref);
    assert.notEqual(loaded, m, 'load hands out a copy');
    assert.deepEqual([...loaded], [...m]);
    assert.ok(Object.isFrozen(m.get('a.txt')), 'entries are frozen in place');
    // A fresh store reads the same manifest from disk.
    assert.deepEqual([...(await new ManifestStore(blobs).load(ref))], [...m]);
  });

  it('canonicalJson writes manifest entries exactly as the generic sorted-key encoding', () => {
    const reference = (v: unknown): string => {
      if (v === null || typeof v !== 'object') return JSON.stringify(v);
      if (Array.isArray(v)) return `[${v.map(reference).join(',')}]`;
      const o = v as Record<string, unknown>;
      const keys = Object.keys(o).filter((k) => o[k] !== undefined).sort();
      return `{${keys.map((k) => `${JSON.stringify(k)}:${reference(o[k])}`).join(',')}}`;
    };
    const samples: unknown[] = [
      { type: 'file', hash: 'a'.repeat(64), size: 12, mode: 0o644, mtimeMs: 1700000000123.456, ino: 42 },
      { type: 'file', hash: 'b'.repeat(64), size: 0, mode: 0o755, mtimeMs: 0, ino: 0, racy: true },
      { type: 'file', hash: 'c'.repeat(64), size: 1, mode: 0o644, mtimeMs: -0, ino: 7, racy: undefined },
      { type: 'file', hash: 'd'.repeat(64), size: 1, mode: 0o644, mtimeMs: 1, ino: 7, extra: 'kept by the generic path' },
      { type: 'file', hash: 'e'.repeat(64), size: 1, mode: 0o644, mtimeMs: 1 },
      { type: 'symlink', target: '../a "quoted" \u2028 target', mtimeMs: 5.5, ino: 9 },
      { type: 'skipped', size: 99, mtimeMs: 3, reason: 'too_large' },
      { type: 'other', size: 1 },
      { v: 1, full: false, parent: 'f'.repeat(64), depth: 2, set: { 'a/b': { type: 'symlink', target: 'x', mtimeMs: 1, ino: 2 } }, del: ['z', 'y'] },
    ];
    for (const s of samples) assert.equal(canonicalJson(s), reference(s), JSON.stringify(s));
    assert.throws(() => canonicalJson({ type: 'file', hash: 'a', size: 1, mode: 0o644, mtimeMs: Number.NaN, ino: 1 }), /non-finite/);
  });
});
