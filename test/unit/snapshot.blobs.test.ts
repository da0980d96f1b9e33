import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import fss from 'node:fs';
import { BlobNotFoundError, BlobStore, CompactionStopped, sha256Hex } from '../../src/core/snapshot/index.js';
import { CompressPool, decodeObject } from '../../src/core/snapshot/compressPool.js';
import { KIND_DIR, KIND_FILE, KIND_SYMLINK, PREV_CACHEABLE, STAT_FIELDS, StatPool } from '../../src/core/snapshot/statPool.js';
import { TempDirs } from './snapshot.helpers.js';

describe('snapshot blob store', () => {
  const tmp = new TempDirs();
  afterEach(() => tmp.cleanup());

  it('stores content-addressed, deduplicated, fanned out', async () => {
    const dir = path.join(await tmp.make(), 'objects');
    const blobs = new BlobStore(dir);
    const text = Buffer.from('const x = 1;\n'.repeat(500));
    const a = await blobs.put(text);
    assert.equal(a.hash, sha256Hex(text));
    assert.equal(a.isNew, true);
    assert.ok(a.storedBytes < text.length / 5, 'repetitive text is compressed');
    const b = await blobs.put(Buffer.from(text));
    assert.deepEqual(b, { hash: a.hash, storedBytes: a.storedBytes, isNew: false });
    assert.ok((await fs.stat(path.join(dir, a.hash.slice(0, 2), a.hash.slice(2)))).isFile());
    assert.deepEqual(await blobs.get(a.hash), text);
    assert.equal(await blobs.verify(a.hash), true);
    assert.deepEqual([...(await collect(blobs.list()))], [a.hash]);
  });

  it('a pool worker reads a file through its directory descriptor: hashed, encoded, never through a symlink or into a FIFO', async function () {
    if (process.platform !== 'linux') this.skip(); // /proc/self/fd
    const dir = await tmp.make();
    const text = 'export const x = 1;\n'.repeat(500);
    await fs.writeFile(path.join(dir, 'a.ts'), text);
    await fs.writeFile(path.join(dir, 'big.bin'), Buffer.alloc(5000, 1));
    await fs.symlink('a.ts', path.join(dir, 'link'));
    execFileSync('mkfifo', [path.join(dir, 'fifo')]);
    const fd = fss.openSync(dir, fss.constants.O_RDONLY | fss.constants.O_DIRECTORY);
    const pool = new CompressPool(1, 1);
    try {
      const io = (name: string) => `/proc/self/fd/${fd}/${name}`;
      const a = await pool.readFile(io('a.ts'), 4096 * 4);
      assert.ok(a.kind === 'read' && a.encoded);
      assert.equal(a.hash, sha256Hex(Buffer.from(text)));
      assert.equal(a.length, text.length);
      assert.ok(a.encoded.body.length < text.length / 4, 'compressed');
      assert.equal(decodeObject(Buffer.concat([Buffer.of(a.encoded.header), a.encoded.body])).toString(), text);
      const big = await pool.readFile(io('big.bin'), 4096);
      assert.deepEqual({ kind: big.kind, size: big.kind === 'skipped' ? big.size : -1 }, { kind: 'skipped', size: 5000 });
      const link = await pool.readFile(io('link'), 1 << 20);
      assert.deepEqual(link.kind === 'error' && link.code, 'ELOOP');
      const fifo = await pool.readFile(io('fifo'), 1 << 20); // O_NONBLOCK: returns, does not hang
      assert.deepEqual(fifo.kind === 'error' && fifo.code, 'ENOTREG');
      const gone = await pool.readFile(io('missing'), 1 << 20);
      assert.deepEqual(gone.kind === 'error' && gone.code, 'ENOENT');
    } finally {
      await pool.close();
      fss.closeSync(fd);
    }
  });

  it('stat workers answer each directory with exactly the entries whose lstat differs from the previous entry', async () => {
    const dir = await tmp.make();
    await fs.mkdir(path.join(dir, 'a'));
    await fs.mkdir(path.join(dir, 'b'));
    for (const n of ['same.txt', 'grown.txt', 'exec.sh', 'big.bin', 'new.txt']) await fs.writeFile(path.join(dir, 'a', n), 'x'.repeat(n === 'big.bin' ? 50 : 10));
    await fs.writeFile(path.join(dir, 'b', 'kept.txt'), 'kept');
    await fs.symlink('kept.txt', path.join(dir, 'b', 'link'));
    const prevOf = (rel: string, over: Partial<{ size: number; exec: number }> = {}) => {
      const st = fss.lstatSync(path.join(dir, rel));
      return [PREV_CACHEABLE, over.size ?? st.size, st.mtimeMs, st.ino, over.exec ?? (st.mode & 0o111 ? 1 : 0)];
    };
    const pool = new StatPool(2);
    const check = (base: string, names: string[], prev: number[], maxBytes: number) => pool.check(base, names.join('\0'), names.length, new Float64Array(prev), maxBytes);
    try {
      // Three calls in one turn share a message; each gets its own answer back.
      const [a, b, c] = await Promise.all([
        check(`${dir}/a/`, ['same.txt', 'grown.txt', 'exec.sh', 'big.bin', 'new.txt', 'gone.txt'], [
          ...prevOf('a/same.txt'),
          ...prevOf('a/grown.txt', { size: 3 }),
          ...prevOf('a/exec.sh', { exec: 1 }),
          ...prevOf('a/big.bin'),
          0, 0, 0, 0, 0, // no previous entry: always reported
          PREV_CACHEABLE, 1, 1, 1, 0,
        ], 20),
        check(`${dir}/b/`, ['kept.txt', 'link'], [...prevOf('b/kept.txt'), 0, 0, 0, 0, 0], 20),
        check(`${dir}/`, ['a'], [0, 0, 0, 0, 0], 20),
      ]);
      assert.deepEqual([...a.idx], [1, 2, 3, 4], 'grown, exec bit, over the size limit, new; not the unchanged one');
      assert.equal(a.values[0], KIND_FILE);
      assert.equal(a.values[1], 10, 'the current size comes back');
      assert.deepEqual([...a.errors].map(([i, e]) => [i, e.code]), [[5, 'ENOENT']]);
      assert.deepEqual([...b.idx], [1]);
      assert.equal(b.values[0], KIND_SYMLINK, 'lstat: the link itself');
      assert.equal(b.errors.size, 0);
      assert.deepEqual([...c.idx], [0]);
      assert.equal(c.values[0], KIND_DIR);
      assert.equal(c.values.length, STAT_FIELDS);
    } finally {
      await pool.close();
    }
  });

  it('stores incompressible content raw (1-byte header only)', async () => {
    const blobs = new BlobStore(path.join(await tmp.make(), 'objects'));
    const noise = randomBytes(10_000);
    const r = await blobs.put(noise);
    assert.equal(r.storedBytes, noise.length + 1);
    assert.deepEqual(await blobs.get(r.hash), noise);
    const empty = await blobs.put(Buffer.alloc(0));
    assert.deepEqual(await blobs.get(empty.hash), Buffer.alloc(0));
  });

  it('detects corruption, refuses hostile hashes, deletes idempotently', async () => {
    const blobs = new BlobStore(path.join(await tmp.make(), 'objects'));
    const r = await blobs.put(Buffer.from('hello world, hello world, hello world, hello world, hello world'));
    await fs.chmod(blobs.pathOf(r.hash), 0o644);
    await fs.writeFile(blobs.pathOf(r.hash), Buffer.from([0, 1, 2, 3]));
    assert.equal(await blobs.verify(r.hash), false);
    for (const bad of ['../../etc/passwd', 'A'.repeat(64), 'ab', `${'a'.repeat(63)}/`]) {
      await assert.rejects(blobs.get(bad), /invalid blob hash/);
      assert.throws(() => blobs.pathOf(bad), /invalid blob hash/);
    }
    await blobs.delete(r.hash);
    await blobs.delete(r.hash);
    await assert.rejects(blobs.get(r.hash), BlobNotFoundError);
  });

  it('deferred mode names blobs only at flush; a crash before it leaves only temp files, swept later', async () => {
    const dir = path.join(await tmp.make(), 'objects');
    const blobs = new BlobStore(dir, { durability: 'deferred' });
    const puts = [];
    for (let i = 0; i < 40; i++) puts.push(await blobs.put(Buffer.from(`blob ${i}`)));
    assert.equal((await blobs.put(Buffer.from('blob 3'))).isNew, false, 'dedup within a pending batch');
    assert.deepEqual(await blobs.get(puts[7]!.hash), Buffer.from('blob 7'), 'pending blobs are readable');
    // "Crash": another instance sees no named blob, only temp files.
    const other = new BlobStore(dir);
    assert.equal(await other.has(puts[0]!.hash), false);
    assert.equal((await collect(other.list())).length, 0);
    assert.equal(await blobs.sweepTemp(), 0, "an instance never sweeps its own pending temps");
    await blobs.flush();
    assert.equal(blobs.pendingCount, 0);
    assert.equal((await collect(other.list())).length, 40);
    assert.deepEqual(await other.get(puts[7]!.hash), Buffer.from('blob 7'));
    await fs.writeFile(path.join(dir, 'tmp-deadbeef'), 'partial');
    assert.equal(await other.sweepTemp(), 1);
    assert.deepEqual((await fs.readdir(dir)).filter((n) => n.startsWith('tmp-')), []);
  });

  it('deferred mode writes a batch as one pack: one file, no fan-out directories, readable by another instance', async () => {
    const dir = path.join(await tmp.make(), 'objects');
    const blobs = new BlobStore(dir, { durability: 'deferred' });
    const contents = Array.from({ length: 300 }, (_, i) => Buffer.from(`export const v${i} = ${'"x", '.repeat(i % 50)}null;\n`));
    const puts = [];
    for (const c of contents) puts.push(await blobs.put(c));
    await blobs.flush();
    assert.deepEqual((await fs.readdir(dir)).sort(), ['pack']);
    const packs = await fs.readdir(path.join(dir, 'pack'));
    assert.equal(packs.length, 1);
    assert.match(packs[0]!, /^pack-[0-9a-f]{16}\.pack$/);
    const other = new BlobStore(dir);
    for (let i = 0; i < contents.length; i += 37) {
      assert.deepEqual(await other.get(puts[i]!.hash), contents[i]);
      assert.deepEqual(other.getSync(puts[i]!.hash), contents[i]);
      assert.equal(await other.sizeOf(puts[i]!.hash), puts[i]!.storedBytes);
    }
    assert.equal(await other.verify(puts[5]!.hash), true);
    assert.equal((await other.put(contents[9]!)).isNew, false, 'dedup against packed blobs');
    assert.equal((await collect(other.list())).length, 300);
  });

  it('a fresh instance dedups its first puts against the raw pack indexes, as it would against loaded ones, and loads them for a bulk put', async () => {
    const dir = path.join(await tmp.make(), 'objects');
    const a = new BlobStore(dir, { durability: 'deferred' });
    const contents = Array.from({ length: 200 }, (_, i) => Buffer.from(`export const w${i} = ${'[1], '.repeat(i % 40)}0;\n`));
    for (const c of contents.slice(0, 120)) await a.put(c);
    await a.flush();
    for (const c of contents.slice(120)) await a.put(c);
    await a.flush();
    const loaded = (b: BlobStore) => (b as unknown as { packsLoaded: Set<string> }).packsLoaded.size;
    const b = new BlobStore(dir, { durability: 'deferred' });
    // First, middle and last entries of both packs; then content no pack holds.
    for (const i of [0, 61, 119, 120, 150, 199]) {
      const r = await b.put(contents[i]!);
      assert.equal(r.isNew, false, `content ${i} is found in its pack`);
      assert.equal(r.storedBytes, await new BlobStore(dir).sizeOf(r.hash));
    }
    const fresh = Buffer.from('content no pack holds');
    assert.equal((await b.put(fresh)).isNew, true);
    assert.equal(loaded(b), 0, 'no index was decoded for seven lookups');
    await b.flush();
    assert.deepEqual(await new BlobStore(dir).get(sha256Hex(fresh)), fresh);
    // A bulk put: past the probes, the indexes are loaded and answer the same.
    const c = new BlobStore(dir, { durability: 'deferred' });
    for (let k = 0; k < 100; k++) assert.equal((await c.put(contents[(k * 7) % 200]!)).isNew, false);
    assert.equal(loaded(c), 3, "the two packs and the one b wrote");
  });

  it('loadIndexes (a long-lived owner, once warm): every pack index in memory at once; dedup answers from it, the same as before', async () => {
    const dir = path.join(await tmp.make(), 'objects');
    const a = new BlobStore(dir, { durability: 'deferred' });
    const contents = Array.from({ length: 50 }, (_, i) => Buffer.from(`const v${i} = ${i};\n`));
    for (const c of contents.slice(0, 30)) await a.put(c);
    await a.flush();
    for (const c of contents.slice(30)) await a.put(c);
    await a.flush();
    const b = new BlobStore(dir, { durability: 'deferred' });
    assert.equal(b.indexesLoaded, false, 'a fresh instance loads nothing until asked');
    b.loadIndexes();
    assert.equal(b.indexesLoaded, true);
    assert.equal((b as unknown as { packsLoaded: Set<string> }).packsLoaded.size, 2, 'both packs');
    // Answered from memory: the raw indexes are not read again (the packs' directory is away meanwhile).
    const packs = path.join(dir, 'pack');
    await fs.rename(packs, `${packs}.away`);
    try {
      for (const i of [0, 29, 30, 49]) assert.equal((await b.put(contents[i]!)).isNew, false, `content ${i} is known`);
    } finally {
      await fs.rename(`${packs}.away`, packs);
    }
    const fresh = Buffer.from('new after loading');
    assert.equal((await b.put(fresh)).isNew, true);
    await b.flush();
    assert.equal((await b.put(fresh)).isNew, false, 'its own new pack is known too');
    assert.deepEqual(await new BlobStore(dir).get(sha256Hex(fresh)), fresh);
    // A store with no pack yet: nothing to load, and nothing breaks.
    const empty = new BlobStore(path.join(await tmp.make(), 'objects'), { durability: 'deferred' });
    empty.loadIndexes();
    assert.equal((await empty.put(fresh)).isNew, true);
  });

  it('a fresh instance does not dedup against a damaged pack: the content is stored afresh', async () => {
    const dir = path.join(await tmp.make(), 'objects');
    const a = new BlobStore(dir, { durability: 'deferred' });
    const content = Buffer.from('in a pack whose index will be damaged');
    await a.put(content);
    await a.flush();
    const packDir = path.join(dir, 'pack');
    const [name] = await fs.readdir(packDir);
    const file = path.join(packDir, name!);
    const bytes = await fs.readFile(file);
    // One byte of the index (after the objects, before the 16-byte trailer): its CRC no longer holds.
    bytes[bytes.length - 16 - 40 + 3]! ^= 0xff;
    await fs.writeFile(file, bytes);
    const b = new BlobStore(dir, { durability: 'deferred' });
    assert.equal((await b.put(content)).isNew, true);
    await b.flush();
    assert.deepEqual(await new BlobStore(dir).get(sha256Hex(content)), content);
  });

  it('deleting packed blobs rewrites their pack once: the rest stay readable and the bytes are freed', async () => {
    const dir = path.join(await tmp.make(), 'objects');
    const blobs = new BlobStore(dir, { durability: 'deferred' });
    const contents = Array.from({ length: 40 }, () => randomBytes(2000));
    const hashes = [];
    for (const c of contents) hashes.push((await blobs.put(c)).hash);
    await blobs.flush();
    const packBytes = async () => {
      let n = 0;
      for (const f of await fs.readdir(path.join(dir, 'pack'))) n += (await fs.stat(path.join(dir, 'pack', f))).size;
      return n;
    };
    const before = await packBytes();
    const reader = new BlobStore(dir); // saw the old pack first
    assert.deepEqual(await reader.get(hashes[0]!), contents[0]);
    await blobs.deleteMany(hashes.slice(0, 30));
    assert.ok((await packBytes()) < before / 3, 'three quarters of the content is gone from disk');
    assert.equal((await fs.readdir(path.join(dir, 'pack'))).length, 1);
    for (let i = 0; i < 40; i++) {
      if (i < 30) await assert.rejects(blobs.get(hashes[i]!), BlobNotFoundError);
      else assert.deepEqual(await reader.get(hashes[i]!), contents[i], 'a reader follows the rewritten pack');
    }
    assert.equal(await blobs.has(hashes[3]!), false);
    assert.equal((await collect(new BlobStore(dir).list())).length, 10);
    await blobs.delete(hashes[35]!);
    await blobs.delete(hashes[35]!);
    assert.equal((await collect(new BlobStore(dir).list())).length, 9);
  });

  it('a compaction asked to stop ends at its next batch: no partial pack, the raw packs and their content as they were, done whole by the next one', async () => {
    const dir = path.join(await tmp.make(), 'objects');
    const blobs = new BlobStore(dir, { durability: 'deferred' });
    // Several message-sized batches (COMPACT_MESSAGE_BYTES): a stop can come between them.
    const contents = Array.from({ length: 160 }, (_, i) => Buffer.from(`// ${i}\n${randomBytes(6_000).toString('hex')}\n`));
    const hashes: string[] = [];
    for (const c of contents) hashes.push((await blobs.put(c, { defer: true })).hash);
    await blobs.flush();
    const raw = blobs.uncompactedPacks();
    assert.equal(raw.length, 1);
    let asked = 0;
    await assert.rejects(
      blobs.compact({ shouldStop: () => ++asked > 1 }),
      (e: unknown) => e instanceof CompactionStopped,
    );
    assert.ok(asked > 1, 'asked between batches');
    const packDir = path.join(dir, 'pack');
    assert.deepEqual(blobs.uncompactedPacks(), raw, 'the raw pack stays');
    assert.deepEqual((await fs.readdir(packDir)).filter((n) => !n.endsWith('-u.pack') && !n.endsWith('.idx')), [], 'no partial or temporary pack left');
    for (const reader of [blobs, new BlobStore(dir)]) for (let i = 0; i < contents.length; i += 37) assert.deepEqual(await reader.get(hashes[i]!), contents[i]);
    const r = await blobs.compact();
    assert.deepEqual([r.packs, r.objects], [1, 160]);
    assert.deepEqual(blobs.uncompactedPacks(), []);
    for (const reader of [blobs, new BlobStore(dir)]) for (let i = 0; i < contents.length; i += 37) assert.deepEqual(await reader.get(hashes[i]!), contents[i]);
  });

  it('content stored raw for later compression: readable at once, compressed by compact, crash-safe, kept raw through GC', async () => {
    const dir = path.join(await tmp.make(), 'objects');
    const blobs = new BlobStore(dir, { durability: 'deferred' });
    const texts = Array.from({ length: 20 }, (_, i) => Buffer.from(`export const v${i} = ${i};\n`.repeat(300)));
    const noise = randomBytes(50_000);
    const tiny = Buffer.from('x');
    const all = [...texts, noise, tiny];
    const hashes: string[] = [];
    for (const c of all) hashes.push((await blobs.put(c, { defer: true })).hash);
    assert.deepEqual(blobs.getSync(hashes[0]!), texts[0], 'pending raw content reads back before the flush');
    await blobs.flush();
    const packDir = path.join(dir, 'pack');
    const raw = blobs.uncompactedPacks();
    assert.equal(raw.length, 1);
    assert.match(raw[0]!, /^pack-[0-9a-f]{16}-u\.pack$/);
    assert.equal(await blobs.sizeOf(hashes[0]!), texts[0]!.length + 1, 'stored raw');
    const other = new BlobStore(dir); // another instance, which loaded the raw pack
    assert.deepEqual(other.getSync(hashes[1]!), texts[1]);

    // GC while raw: the rewritten pack keeps its objects raw, still to be compacted.
    await blobs.deleteMany([hashes[19]!]);
    assert.equal(blobs.uncompactedPacks().length, 1, 'the rewritten pack still awaits compaction');
    await assert.rejects(blobs.get(hashes[19]!), BlobNotFoundError);

    // A crash after the compressed pack is named, before the raw one is removed: put a copy back.
    const rawName = blobs.uncompactedPacks()[0]!;
    const saved = await fs.readFile(path.join(packDir, rawName));
    const r = await blobs.compact();
    assert.deepEqual([r.packs, r.objects], [1, 21]);
    assert.ok(r.bytesAfter < r.bytesBefore / 3, JSON.stringify(r));
    assert.deepEqual(blobs.uncompactedPacks(), []);
    assert.ok((await blobs.sizeOf(hashes[0]!))! < texts[0]!.length / 10, 'compressed');
    assert.equal(await blobs.sizeOf(hashes[20]!), noise.length + 1, 'incompressible content stays raw');
    await fs.writeFile(path.join(packDir, rawName), saved);
    const again = new BlobStore(dir, { durability: 'deferred' });
    assert.deepEqual(again.uncompactedPacks(), [rawName]);
    assert.deepEqual(await again.compact(), { packs: 1, objects: 0, bytesBefore: 0, bytesAfter: 0 }, 'its objects are already held compressed: the raw pack only goes');
    assert.deepEqual((await fs.readdir(packDir)).filter((n) => n.endsWith('.pack')).length, 1);

    for (const reader of [blobs, other, again, new BlobStore(dir)]) {
      for (let i = 0; i < all.length; i++) {
        if (i === 19) assert.equal(reader.hasSync(hashes[i]!), false);
        else assert.deepEqual(reader.getSync(hashes[i]!), all[i], `blob ${i}`);
      }
    }
    // Immediate mode never leaves raw content behind: it has no packs to compact.
    const loose = new BlobStore(path.join(await tmp.make(), 'objects'));
    const put = await loose.put(texts[0]!, { defer: true });
    assert.ok(put.storedBytes < texts[0]!.length / 10);
    assert.deepEqual(loose.uncompactedPacks(), []);
  });

  it('an instance that knew several packs finds every blob after another instance GC rewrote them all', async () => {
    const dir = path.join(await tmp.make(), 'objects');
    const gc = new BlobStore(dir, { durability: 'deferred' });
    const contents = Array.from({ length: 30 }, () => randomBytes(1500));
    const hashes = [];
    for (let i = 0; i < 30; i++) {
      hashes.push((await gc.put(contents[i]!)).hash);
      if (i % 10 === 9) await gc.flush(); // three packs
    }
    const reader = new BlobStore(dir);
    for (let i = 0; i < 30; i += 10) assert.deepEqual(reader.getSync(hashes[i]!), contents[i]);
    await gc.deleteMany([hashes[5]!, hashes[15]!, hashes[25]!]); // every pack rewritten under a new name
    // The first miss finds all three new packs while the other two old ones are still mapped:
    // those must not shadow the new packs' blobs.
    for (let i = 0; i < 30; i++) {
      if (i % 10 === 5) assert.equal(reader.hasSync(hashes[i]!), false);
      else assert.deepEqual(reader.getSync(hashes[i]!), contents[i], `blob ${i}`);
    }
  });

  it('a batch reader opens each pack once and still reads right after GC rewrites the pack under it', async () => {
    const dir = path.join(await tmp.make(), 'objects');
    const blobs = new BlobStore(dir, { durability: 'deferred' });
    const contents = Array.from({ length: 40 }, (_, i) => (i % 2 ? randomBytes(3000) : Buffer.from(`export const v${i} = ${'"y", '.repeat(200 + i)};\n`)));
    const hashes: string[] = [];
    for (const c of contents.slice(0, 20)) hashes.push((await blobs.put(c)).hash);
    await blobs.flush();
    for (const c of contents.slice(20)) hashes.push((await blobs.put(c)).hash);
    await blobs.flush(); // two packs
    const packDir = path.join(dir, 'pack');
    const openPacks = async () => {
      let n = 0;
      for (const fd of await fs.readdir('/proc/self/fd').catch(() => [] as string[])) {
        const to = await fs.readlink(`/proc/self/fd/${fd}`).catch(() => '');
        if (to.startsWith(packDir)) n++;
      }
      return n;
    };
    const other = new BlobStore(dir); // another instance: it knows the packs as they are now
    const r1 = other.batchReader();
    for (let i = 0; i < 40; i += 3) assert.deepEqual(r1.get(hashes[i]!), contents[i]);
    if (process.platform === 'linux') assert.equal(await openPacks(), 2, 'one descriptor per pack, kept for the batch');
    // GC through the first instance rewrites both packs under new names and removes the old ones.
    await blobs.deleteMany([hashes[1]!, hashes[21]!]);
    assert.equal((await fs.readdir(packDir)).length, 2);
    // Through the kept descriptors of the removed packs: read before or not, every blob is still right.
    for (let i = 0; i < 40; i++) {
      if (i === 1 || i === 21) continue;
      assert.deepEqual(r1.get(hashes[i]!), contents[i], `blob ${i} through a reader opened before the GC`);
    }
    r1.close();
    if (process.platform === 'linux') assert.equal(await openPacks(), 0, 'close releases every pack');
    // A new batch of the same instance: its index still names the removed packs, so it finds where the blobs went.
    const r3 = other.batchReader();
    for (let i = 0; i < 40; i += 2) assert.deepEqual(r3.get(hashes[i]!), contents[i], `blob ${i} after its pack was rewritten`);
    if (process.platform === 'linux') assert.equal(await openPacks(), 2, 'the two rewritten packs');
    r3.close();
    const r2 = blobs.batchReader();
    try {
      assert.throws(() => r2.get(hashes[1]!), BlobNotFoundError);
      assert.deepEqual(r2.get(hashes[2]!), contents[2]);
      assert.deepEqual(r2.get(hashes[2]!), blobs.getSync(hashes[2]!));
    } finally {
      r2.close();
    }
  });

  it('a damaged pack is reported and its blobs read as missing; a crash before the flush leaves only a temp pack, swept later', async () => {
    const dir = path.join(await tmp.make(), 'objects');
    const a = new BlobStore(dir, { durability: 'deferred' });
    const kept = await a.put(Buffer.from('kept content, kept content, kept content, kept content'));
    await a.flush();
    const doomed = await a.put(Buffer.from('in a pack that will be damaged'));
    await a.flush();
    const packDir = path.join(dir, 'pack');
    const names = await fs.readdir(packDir);
    // Small content is stored raw, so the pack holding it can be found by its bytes.
    const holds = await Promise.all(names.map(async (n) => (await fs.readFile(path.join(packDir, n))).includes(Buffer.from('will be damaged'))));
    const damaged = names[holds.indexOf(true)]!;
    await fs.truncate(path.join(packDir, damaged), 10);
    const b = new BlobStore(dir, { durability: 'deferred' });
    assert.deepEqual(await b.get(kept.hash), Buffer.from('kept content, kept content, kept content, kept content'));
    await assert.rejects(b.get(doomed.hash), BlobNotFoundError);
    assert.equal(b.damagedPacks.length, 1);
    assert.equal(b.damagedPacks[0]!.name, damaged);
    // The content is stored afresh when it is seen again.
    assert.equal((await b.put(Buffer.from('in a pack that will be damaged'))).isNew, true);
    // "Crash" before the flush: a temp pack, invisible to others, swept by the next owner.
    assert.equal(await new BlobStore(dir).has(doomed.hash), false);
    assert.equal(await b.sweepTemp(), 0, 'an instance never sweeps its own pack in progress');
    assert.equal(await new BlobStore(dir).sweepTemp(), 1);
    assert.deepEqual((await fs.readdir(packDir)).filter((n) => n.startsWith('tmp-')), []);
  });
});

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}
