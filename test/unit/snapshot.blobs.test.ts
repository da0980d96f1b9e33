import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { BlobNotFoundError, BlobStore, sha256Hex } from '../../src/core/snapshot/index.js';
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
});

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}
