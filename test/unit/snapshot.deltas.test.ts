import assert from 'node:assert/strict';
import fss from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { BlobStore, CorruptBlobError } from '../../src/core/snapshot/blobStore.js';
import { COMPACT_QUALITY, HEADER_DELTA, MAX_DELTA_DEPTH, encodeBody } from '../../src/core/snapshot/compressPool.js';
import { readPackIndex, readPackObject } from '../../src/core/snapshot/packFile.js';
import { TempDirs } from './snapshot.helpers.js';

/** Source-like text from a seed: lines a family of files shares, so its members are similar. */
function family(seed: number, lines: number): string[] {
  let x = seed * 2654435761 + 1;
  const next = () => (x = (x * 1103515245 + 12345) % 2147483648);
  return Array.from({ length: lines }, (_, i) => `export function f${seed}_${i}(a, b) { return a * ${next() % 997} + b - ${next() % 113}; } // ${next().toString(36)}\n`);
}

/** A member of a family: a few lines changed, one added. */
function variant(lines: string[], v: number): Buffer {
  const out = lines.map((l, i) => ((i * 7 + v) % 23 === 0 ? `// variant ${v} changed line ${i}\n` : l));
  out.splice(v % out.length, 0, `const variant${v} = ${v};\n`);
  return Buffer.from(out.join(''));
}

interface StoredObject {
  pack: string;
  hash: string;
  header: number;
  base: string | null;
}

/** Every object in the store's packs, with its header and (for a delta) its base. */
function packObjects(dir: string): StoredObject[] {
  const packDir = path.join(dir, 'pack');
  const out: StoredObject[] = [];
  for (const name of fss.readdirSync(packDir).filter((n) => n.endsWith('.pack') && n.startsWith('pack-'))) {
    const file = path.join(packDir, name);
    for (const e of readPackIndex(file)) {
      const raw = readPackObject(file, e);
      out.push({ pack: name, hash: e.hash, header: raw[0]!, base: raw[0] === HEADER_DELTA ? raw.toString('hex', 1, 33) : null });
    }
  }
  return out;
}

/** Each delta's base is in its own pack, and no chain is longer than compaction writes. */
function assertSelfContained(objects: StoredObject[]): void {
  const byPack = new Map<string, Map<string, StoredObject>>();
  for (const o of objects) {
    if (!byPack.has(o.pack)) byPack.set(o.pack, new Map());
    byPack.get(o.pack)!.set(o.hash, o);
  }
  for (const o of objects) {
    let depth = 0;
    for (let cur = o; cur.base !== null; depth++) {
      const base = byPack.get(cur.pack)!.get(cur.base);
      assert.ok(base, `${cur.hash} is a delta of ${cur.base}, which is not in its pack ${cur.pack}`);
      cur = base;
    }
    assert.ok(depth <= MAX_DELTA_DEPTH + 2, `${o.hash}: a chain of ${depth}`);
  }
}

async function storeRaw(blobs: BlobStore, files: { name: string; content: Buffer }[]): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  for (const f of files) names.set((await blobs.put(f.content, { defer: true })).hash, f.name);
  await blobs.flush();
  return names;
}

describe('snapshot blob store: deltas between similar objects', () => {
  const tmp = new TempDirs();
  afterEach(() => tmp.cleanup());

  it('compaction stores similar objects as deltas of one another in the same pack, far smaller, and every blob reads back', async () => {
    const dir = path.join(await tmp.make(), 'objects');
    const blobs = new BlobStore(dir, { durability: 'deferred' });
    const files: { name: string; content: Buffer }[] = [];
    // Three libraries, each copied into eight folders with small changes (node_modules does this: cjs/esm builds, nested versions).
    for (let lib = 0; lib < 3; lib++) {
      const lines = family(lib + 1, 150);
      for (let copy = 0; copy < 8; copy++) files.push({ name: `copy${copy}/lib${lib}/index.js`, content: variant(lines, copy) });
    }
    files.push({ name: 'README.md', content: Buffer.from('# a project\n'.repeat(40)) });
    const names = await storeRaw(blobs, files);
    const whole = files.reduce((n, f) => n + 1 + encodeBody(f.content, COMPACT_QUALITY).body.length, 0);

    const r = await blobs.compact({ nameOf: (h) => names.get(h) });
    assert.equal(r.objects, files.length);
    const objects = packObjects(dir);
    const deltas = objects.filter((o) => o.header === HEADER_DELTA);
    assert.ok(deltas.length >= 15, `${deltas.length} deltas of ${objects.length} objects`);
    assert.ok(r.bytesAfter < whole / 2, `with deltas ${r.bytesAfter} bytes, each compressed alone ${whole}`);
    assertSelfContained(objects);

    const batch = blobs.batchReader();
    try {
      for (const reader of [blobs, new BlobStore(dir)]) {
        for (const f of files) {
          const hash = [...names].find(([, n]) => n === f.name)![0];
          assert.deepEqual(reader.getSync(hash), f.content, f.name);
          assert.deepEqual(batch.get(hash, f.content.length), f.content, `${f.name} (batch reader)`);
          assert.equal(reader.status(hash), 'ok');
        }
      }
    } finally {
      batch.close();
    }
  });

  it('deleting the base of deltas keeps the deltas readable: they are stored whole, in the rewritten pack, before the old one goes', async () => {
    const dir = path.join(await tmp.make(), 'objects');
    const blobs = new BlobStore(dir, { durability: 'deferred' });
    const lines = family(7, 200);
    const files = Array.from({ length: 10 }, (_, v) => ({ name: `v${v}/main.ts`, content: variant(lines, v) }));
    const names = await storeRaw(blobs, files);
    await blobs.compact({ nameOf: (h) => names.get(h) });
    const before = packObjects(dir);
    const bases = new Set(before.flatMap((o) => (o.base ? [o.base] : [])));
    assert.ok(bases.size > 0, 'some objects are deltas');
    const hashOf = new Map([...names].map(([h, n]) => [n, h]));
    const doomed = [...bases].slice(0, 2);
    await blobs.deleteMany(doomed);

    const after = packObjects(dir);
    assertSelfContained(after);
    for (const h of doomed) assert.equal(after.some((o) => o.hash === h), false, `${h} is gone`);
    for (const reader of [blobs, new BlobStore(dir)]) {
      for (const f of files) {
        const h = hashOf.get(f.name)!;
        if (doomed.includes(h)) assert.equal(reader.hasSync(h), false);
        else assert.deepEqual(reader.getSync(h), f.content, f.name);
      }
    }
  });

  it('a damaged base makes its deltas read as corrupt, not missing', async () => {
    const dir = path.join(await tmp.make(), 'objects');
    const blobs = new BlobStore(dir, { durability: 'deferred' });
    const lines = family(3, 120);
    const files = Array.from({ length: 4 }, (_, v) => ({ name: `v${v}/a.js`, content: variant(lines, v) }));
    const names = await storeRaw(blobs, files);
    await blobs.compact({ nameOf: (h) => names.get(h) });
    const objects = packObjects(dir);
    const delta = objects.find((o) => o.header === HEADER_DELTA && objects.find((b) => b.hash === o.base)!.header !== HEADER_DELTA);
    assert.ok(delta, 'a delta whose base is stored whole');
    // Flip bytes inside the base's body.
    const file = path.join(dir, 'pack', delta.pack);
    const entry = readPackIndex(file).find((e) => e.hash === delta.base)!;
    const fd = fss.openSync(file, 'r+');
    try {
      fss.writeSync(fd, Buffer.from('garbage!'), 0, 8, entry.offset + Math.floor(entry.length / 2));
    } finally {
      fss.closeSync(fd);
    }
    const fresh = new BlobStore(dir);
    assert.equal(fresh.status(delta.base!), 'corrupt');
    assert.equal(fresh.status(delta.hash), 'corrupt');
    assert.throws(() => fresh.getSync(delta.hash), CorruptBlobError);
  });

  it('property: after compactions and deletions in any order, every live blob reads back exactly and every pack holds its deltas\' bases', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ fam: fc.integer({ min: 0, max: 3 }), v: fc.integer({ min: 0, max: 40 }), dir: fc.constantFrom('a', 'b', 'c') }), { minLength: 2, maxLength: 24 }),
        fc.array(fc.oneof(fc.record({ op: fc.constant('delete' as const), pick: fc.array(fc.nat(), { maxLength: 4 }) }), fc.record({ op: fc.constant('add' as const), fam: fc.integer({ min: 0, max: 3 }), v: fc.integer({ min: 41, max: 60 }) })), { maxLength: 5 }),
        fc.boolean(),
        async (initial, steps, named) => {
          const dir = path.join(await tmp.make(), 'objects');
          const blobs = new BlobStore(dir, { durability: 'deferred' });
          const fams = [0, 1, 2, 3].map((f) => family(f + 11, 60 + f * 30));
          const live = new Map<string, Buffer>();
          const names = new Map<string, string>();
          const add = async (fam: number, v: number, d: string) => {
            const content = variant(fams[fam]!, v);
            const h = (await blobs.put(content, { defer: true })).hash;
            live.set(h, content);
            names.set(h, `${d}/f${fam}.js`);
          };
          for (const f of initial) await add(f.fam, f.v, f.dir);
          await blobs.flush();
          await blobs.compact(named ? { nameOf: (h) => names.get(h) } : {});
          for (const s of steps) {
            if (s.op === 'delete') {
              const hs = [...live.keys()];
              if (hs.length === 0) continue;
              const doomed = [...new Set(s.pick.map((i) => hs[i % hs.length]!))];
              await blobs.deleteMany(doomed);
              for (const h of doomed) live.delete(h);
            } else {
              await add(s.fam, s.v, 'later');
              await blobs.flush();
              await blobs.compact({ nameOf: (h) => names.get(h) });
            }
          }
          assertSelfContained(packObjects(dir));
          for (const reader of [blobs, new BlobStore(dir)]) for (const [h, content] of live) assert.deepEqual(reader.getSync(h), content);
          await tmp.cleanup();
        },
      ),
      { numRuns: 25 },
    );
  });
});
