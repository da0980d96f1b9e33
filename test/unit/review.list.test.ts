import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Engine } from '../../src/core/engine/engine';
import { countFileLines, listReview, loadReview } from '../../src/core/review/reviewModel';
import { openEngine, tmpDir } from '../support/tmp';

/**
 * The review opens from manifests alone and counts lines afterwards: the listing
 * must name the same files (and the same drift) as the full load, read no file
 * content, and the counts filled in later must equal the engine's own diff.
 */
describe('review: list first, count later', function () {
  this.timeout(60_000);
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine;
  const write = (rel: string, data: string | Buffer) => {
    fs.mkdirSync(path.dirname(path.join(ws.dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(ws.dir, rel), data);
  };

  beforeEach(async () => {
    ws = tmpDir('wp-review-list-');
    write('a.txt', '1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n');
    write('gone.txt', 'to be deleted\nsecond line\n');
    write('img.bin', Buffer.from([1, 2, 3, 0, 4]));
    write('same.txt', 'unchanged\n');
    engine = await openEngine(ws.dir);
  });
  afterEach(async () => {
    await engine.close();
    ws.cleanup();
  });

  async function task(): Promise<string> {
    const { taskId } = await engine.startTask({ goal: 'Edit some files', plan: [{ id: 's1', title: 'Edit' }] });
    await engine.startStep({ taskId, stepId: 's1' });
    write('a.txt', '1\nTWO\n3\n4\n5\n6\n7\n8\nNINE\n10\neleven\n');
    fs.rmSync(path.join(ws.dir, 'gone.txt'));
    write('img.bin', Buffer.from([9, 0, 9, 0]));
    write('new/deep.txt', 'x\ny\nz\n');
    await engine.completeStep({ taskId, stepId: 's1', summary: 'edits' });
    write('mine.txt', 'the person wrote this\n'); // after the step: drift
    await engine.requestReview({ taskId });
    return taskId;
  }

  it('lists the same files and drift as the full load, with counts left for later', async () => {
    const taskId = await task();
    const listed = await listReview(engine, taskId);
    const full = await loadReview(engine, taskId);
    assert.deepEqual(
      listed.files.map((f) => [f.path, f.status, f.drift, f.revertible]),
      full.files.map((f) => [f.path, f.status, f.drift, f.revertible]),
    );
    assert.deepEqual(listed.files.map((f) => f.path), ['a.txt', 'gone.txt', 'img.bin', 'mine.txt', 'new/deep.txt']);
    assert.ok(listed.files.every((f) => f.lines === null), 'the listing reads no content');
    assert.deepEqual(full.files.find((f) => f.path === 'mine.txt')?.drift, true);
    // Before counting, img.bin looks hunkable (manifests cannot tell binary); the count finds out.
    assert.equal(listed.files.find((f) => f.path === 'img.bin')?.hunkable, true);
    assert.equal(full.files.find((f) => f.path === 'img.bin')?.hunkable, false);
  });

  it('counts exactly what the engine diff counts, in batches that can be stopped', async () => {
    const taskId = await task();
    const data = await listReview(engine, taskId);
    const { changes } = await engine.diff({ from: data.base.id });
    let asked = 0;
    const first = await countFileLines(engine, data, data.files, () => ++asked > 2);
    assert.equal(first.length, 2, 'stopped after two files');
    const rest = await countFileLines(engine, data, data.files);
    assert.deepEqual([...first, ...rest].map((f) => f.path), data.files.map((f) => f.path), 'each file counted once');
    for (const c of changes) {
      const f = data.files.find((x) => x.path === c.path)!;
      assert.deepEqual(f.lines, { added: c.lines!.added, removed: c.lines!.removed, binary: c.lines!.binary }, c.path);
    }
    assert.deepEqual(data.files.find((f) => f.path === 'a.txt')?.lines, { added: 3, removed: 2, binary: false });
  });

  it('opens a review without reading any content: a missing base blob fails only the count', async () => {
    const taskId = await task();
    const data = await listReview(engine, taskId);
    const base = await engine.workspaceSnapshots!.load(data.base);
    const entry = base.get('a.txt');
    assert.ok(entry?.type === 'file');
    // The blob may be loose or in a pack: the store's own delete removes it either way.
    await engine.workspaceSnapshots!.blobs.delete(entry.hash);
    const again = await listReview(engine, taskId);
    assert.equal(again.files.length, 5);
    await assert.rejects(countFileLines(engine, again, again.files.filter((f) => f.path === 'a.txt')), /not in the store/);
  });

  it('refuses an unknown task and changes nothing', async () => {
    await assert.rejects(listReview(engine, 't_nope'), /t_nope|not found|unknown/i);
  });
});
