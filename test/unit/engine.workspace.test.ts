import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Engine } from '../../src/core/engine/engine';
import { WaypointError } from '../../src/core/model/errors';
import { BlobStore, canonicalJson } from '../../src/core/snapshot';
import { bundleScript } from '../support/bundle';
import { tmpDir } from '../support/tmp';
import { embeddedStore } from '../support/embedded';
import { localApi, serveRpc } from '../../src/core/engine/api';
import type { RollbackResult } from '../../src/core/engine/engine';

/** Every file under dir (but .waypoint and .git) with its bytes, for byte-identical comparisons. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      if (e.name === '.waypoint' || e.name === '.git') continue;
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out[path.relative(dir, p)] = e.isSymbolicLink() ? `-> ${fs.readlinkSync(p)}` : fs.readFileSync(p).toString('base64');
    }
  };
  walk(dir);
  return out;
}

function write(dir: string, rel: string, text: string): void {
  fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
  fs.writeFileSync(path.join(dir, rel), text);
}

describe('engine: workspace checkpoints and rollback', () => {
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine;
  beforeEach(async () => {
    ws = tmpDir();
    write(ws.dir, 'src/a.ts', 'export const a = 1;\n');
    write(ws.dir, 'src/b.ts', 'export const b = 2;\n');
    write(ws.dir, '.gitignore', 'build/\n*.log\n');
    write(ws.dir, 'build/out.js', 'ignored output\n');
    write(ws.dir, 'debug.log', 'ignored log\n');
    engine = await Engine.open({ workspace: ws.dir, store: { lock: { waitMs: 500 } } });
  });
  afterEach(async () => {
    await engine.close();
    ws.cleanup();
  });

  async function taskWithTwoSteps() {
    const { taskId, baseCheckpointId } = await engine.startTask({ goal: 'edit', plan: [{ id: 'one', title: 'One' }, { id: 'two', title: 'Two', dependsOn: ['one'] }] });
    const s1 = await engine.startStep({ taskId, stepId: 'one' });
    write(ws.dir, 'src/a.ts', 'export const a = 10;\n');
    write(ws.dir, 'src/new.ts', 'export const n = 1;\n');
    const e1 = await engine.completeStep({ taskId, stepId: 'one' });
    const atOneEnd = tree(ws.dir);
    await engine.startStep({ taskId, stepId: 'two' });
    fs.rmSync(path.join(ws.dir, 'src/b.ts'));
    write(ws.dir, 'src/a.ts', 'export const a = 100;\n');
    await engine.completeStep({ taskId, stepId: 'two' });
    return { taskId, baseCheckpointId, s1, e1, atOneEnd };
  }

  it('checkpoints record real content and count changed files', async () => {
    const { taskId, e1 } = await taskWithTwoSteps();
    assert.equal(e1.filesChanged, 2);
    const d = engine.taskDetail(taskId);
    assert.ok(d.checkpoints.every((c) => c.manifestRef && c.files >= 3));
    const diff = await engine.diff({ from: d.checkpoints[0].id });
    assert.deepEqual(diff.changes.map((c) => [c.path, c.status]).sort(), [
      ['src/a.ts', 'modified'],
      ['src/b.ts', 'deleted'],
      ['src/new.ts', 'added'],
    ]);
  });

  it('rolls back byte-identically, leaves ignored files alone, abandons later steps, and undo restores the later state', async () => {
    const { taskId, s1, e1, atOneEnd } = await taskWithTwoSteps();
    const later = tree(ws.dir);
    write(ws.dir, 'build/out.js', 'ignored output, changed\n');
    const ignoredLater = fs.readFileSync(path.join(ws.dir, 'build/out.js'), 'utf8');
    const r = await engine.rollback({ taskId, checkpointId: e1.checkpointId });
    assert.equal(fs.readFileSync(path.join(ws.dir, 'build/out.js'), 'utf8'), ignoredLater, 'ignored files untouched');
    const now = tree(ws.dir);
    delete now['build/out.js'];
    const expect = { ...atOneEnd };
    delete expect['build/out.js'];
    assert.deepEqual(now, expect);
    assert.deepEqual(r.abandonedSteps, ['two']);
    assert.equal(engine.queries.step(taskId, 'two')?.status, 'abandoned');
    assert.equal(engine.queries.step(taskId, 'one')?.status, 'completed');
    assert.deepEqual((await engine.resumeContext(taskId)).nextSteps.map((s) => s.id), ['two']);
    void s1;
    await engine.undoRollback({ taskId });
    const back = tree(ws.dir);
    delete back['build/out.js'];
    const laterNoBuild = { ...later };
    delete laterNoBuild['build/out.js'];
    assert.deepEqual(back, laterNoBuild);
    assert.equal((await engine.verify()).ok, true);
  });

  it('preview lists exactly what will change and writes nothing', async () => {
    const { taskId, s1 } = await taskWithTwoSteps();
    const before = tree(ws.dir);
    const seq = engine.eventLog.lastSeq;
    const p = await engine.rollbackPreview({ taskId, checkpointId: s1.checkpointId });
    assert.deepEqual(p.changes, [
      { path: 'src/a.ts', action: 'modify' },
      { path: 'src/b.ts', action: 'create' },
      { path: 'src/new.ts', action: 'delete' },
    ]);
    assert.deepEqual(p.personChanged, [], 'only steps changed them: nothing to ask about');
    assert.deepEqual(tree(ws.dir), before);
    assert.equal(engine.eventLog.lastSeq, seq);
  });

  it('a preview is a query of its own: the old preview flag is refused at the door with the way to ask, and changes nothing', async () => {
    const { taskId, s1 } = await taskWithTwoSteps();
    const api = localApi(engine);
    const before = tree(ws.dir);
    const seq = engine.eventLog.lastSeq;
    const refusedWith = (query: string) => (e: unknown) => e instanceof WaypointError && e.code === 'invalid_input' && e.message.includes(`preview: a preview is its own query now: call ${query}`);
    await assert.rejects(api.rollback({ taskId, checkpointId: s1.checkpointId, preview: true } as never), refusedWith('rollbackPreview'));
    await assert.rejects(api.undoRollback({ taskId, preview: true } as never), refusedWith('undoRollbackPreview'));
    // Over the owner's /rpc, as another process (an older CLI) would send it: the same refusal, as data.
    const rpc = await serveRpc(engine, { method: 'rollback', arg: { taskId, checkpointId: s1.checkpointId, preview: true } });
    assert.equal(rpc.ok, false);
    assert.match(!rpc.ok ? rpc.error.message : '', /^Invalid rollback: preview: a preview is its own query now: call rollbackPreview/);
    assert.deepEqual(tree(ws.dir), before);
    assert.equal(engine.eventLog.lastSeq, seq, 'nothing recorded');
    // The query answers in and out of process, and records nothing either; it takes no idempotency key (nothing to repeat).
    const viaRpc = await serveRpc(engine, { method: 'rollbackPreview', arg: { taskId, checkpointId: s1.checkpointId } });
    assert.ok(viaRpc.ok);
    assert.deepEqual((viaRpc.result as RollbackResult).changes.map((c) => c.path), ['src/a.ts', 'src/b.ts', 'src/new.ts']);
    await assert.rejects(api.rollbackPreview({ taskId, checkpointId: s1.checkpointId, idempotencyKey: 'k' } as never), /Unrecognized key/);
    assert.equal(engine.eventLog.lastSeq, seq);
    // An explicit `preview: false` is what a rollback does anyway.
    const r = await api.rollback({ taskId, checkpointId: s1.checkpointId, preview: false });
    assert.equal(r.preview, false);
    // Undo's preview names what the undo then does.
    const undoPreview = await api.undoRollbackPreview(taskId);
    assert.equal(undoPreview.preview, true);
    assert.equal(undoPreview.targetCheckpointId, r.preRollbackCheckpointId);
    const afterRollback = engine.eventLog.lastSeq;
    const undone = await api.undoRollback({ taskId });
    assert.ok(afterRollback < engine.eventLog.lastSeq);
    assert.deepEqual(undone.changes, undoPreview.changes);
    assert.deepEqual(undone.restoredSteps, undoPreview.restoredSteps);
  });

  it('restores chosen paths only', async () => {
    const { taskId, s1 } = await taskWithTwoSteps();
    await engine.rollback({ taskId, checkpointId: s1.checkpointId, paths: ['src/b.ts'] });
    assert.equal(fs.readFileSync(path.join(ws.dir, 'src/b.ts'), 'utf8'), 'export const b = 2;\n');
    assert.equal(fs.readFileSync(path.join(ws.dir, 'src/a.ts'), 'utf8'), 'export const a = 100;\n');
    assert.equal(engine.queries.step(taskId, 'two')?.status, 'completed', 'a partial restore abandons no step');
  });

  it('agent-only keeps the person’s edits made outside step windows and reports files both touched as conflicts', async () => {
    const { taskId, baseCheckpointId } = await engine.startTask({ goal: 'g' });
    write(ws.dir, 'notes.md', 'my own notes\n'); // the person, between checkpoints (no step open)
    write(ws.dir, 'src/b.ts', 'export const b = 3; // mine\n');
    await engine.checkpoint({ taskId });
    await engine.startStep({ taskId, title: 'agent edits' });
    write(ws.dir, 'src/a.ts', 'export const a = "agent";\n');
    write(ws.dir, 'src/b.ts', 'export const b = "agent";\n'); // both touched b
    await engine.completeStep({ taskId, stepId: 's1' });
    const r = await engine.rollback({ taskId, checkpointId: baseCheckpointId, mode: 'agent-only' });
    assert.equal(fs.readFileSync(path.join(ws.dir, 'src/a.ts'), 'utf8'), 'export const a = 1;\n', 'agent change reverted');
    assert.equal(fs.readFileSync(path.join(ws.dir, 'notes.md'), 'utf8'), 'my own notes\n', 'person file kept');
    // b.ts: the person's edit came before the agent's step, so undoing the step gives back the person's version.
    assert.equal(fs.readFileSync(path.join(ws.dir, 'src/b.ts'), 'utf8'), 'export const b = 3; // mine\n', 'agent hunk reverted, the person’s kept');
    assert.deepEqual(r.conflicts, []);
    assert.deepEqual(r.merged, ['src/b.ts']);
  });

  describe('agent-only rollback of a file both changed: the agent’s hunks go, the person’s stay', () => {
    const lines = (n: number, edit: Record<number, string> = {}) => Array.from({ length: n }, (_, i) => `${edit[i] ?? `line ${i}`}\n`).join('');
    async function agentStep(taskId: string, title: string, fn: () => void) {
      const s = await engine.startStep({ taskId, title });
      fn();
      await engine.completeStep({ taskId, stepId: s.stepId });
    }

    it('reverts two agent steps’ hunks and keeps the person’s edits before, between and after them', async () => {
      write(ws.dir, 'src/f.ts', lines(40));
      const { taskId, baseCheckpointId } = await engine.startTask({ goal: 'g' });
      write(ws.dir, 'src/f.ts', lines(40, { 0: 'person before' }));
      await engine.checkpoint({ taskId });
      await agentStep(taskId, 'first', () => write(ws.dir, 'src/f.ts', lines(40, { 0: 'person before', 10: 'agent one' })));
      write(ws.dir, 'src/f.ts', lines(40, { 0: 'person before', 10: 'agent one', 20: 'person between' }));
      await engine.checkpoint({ taskId });
      await agentStep(taskId, 'second', () => write(ws.dir, 'src/f.ts', lines(40, { 0: 'person before', 10: 'agent one again', 20: 'person between', 30: 'agent two' })));
      write(ws.dir, 'src/f.ts', lines(40, { 0: 'person before', 10: 'agent one again', 20: 'person between', 30: 'agent two', 39: 'person after' }));
      const whole = await engine.rollbackPreview({ taskId, checkpointId: baseCheckpointId });
      assert.deepEqual(whole.personChanged, ['src/f.ts'], 'a whole rollback would take the person’s edits: the preview says whose files they are');
      const preview = await engine.rollbackPreview({ taskId, checkpointId: baseCheckpointId, mode: 'agent-only' });
      const merged = preview.changes[0]?.mergedHash;
      assert.deepEqual(preview.changes, [{ path: 'src/f.ts', action: 'modify', agentHunksOnly: true, mergedHash: merged }]);
      // What the preview's diff shows on its right side: the merged content, by its hash, through the engine API.
      const shown = await localApi(engine).objectFile({ hash: merged! });
      assert.equal(Buffer.from(shown.base64, 'base64').toString('utf8'), lines(40, { 0: 'person before', 20: 'person between', 39: 'person after' }));
      await assert.rejects(localApi(engine).objectFile({ hash: 'f'.repeat(64) }), (e: WaypointError) => e.code === 'not_found');
      await assert.rejects(localApi(engine).objectFile({ hash: '../objects' } as never), (e: WaypointError) => e.code === 'invalid_input');
      assert.equal(fs.readFileSync(path.join(ws.dir, 'src/f.ts'), 'utf8'), lines(40, { 0: 'person before', 10: 'agent one again', 20: 'person between', 30: 'agent two', 39: 'person after' }), 'a preview writes nothing');
      const r = await engine.rollback({ taskId, checkpointId: baseCheckpointId, mode: 'agent-only' });
      assert.deepEqual(r.merged, ['src/f.ts']);
      assert.deepEqual(r.conflicts, []);
      assert.equal(fs.readFileSync(path.join(ws.dir, 'src/f.ts'), 'utf8'), lines(40, { 0: 'person before', 20: 'person between', 39: 'person after' }));
      // Undo gives back exactly what was there.
      await engine.undoRollback({ taskId });
      assert.equal(fs.readFileSync(path.join(ws.dir, 'src/f.ts'), 'utf8'), lines(40, { 0: 'person before', 10: 'agent one again', 20: 'person between', 30: 'agent two', 39: 'person after' }));
    });

    it('keeps CRLF line endings and a missing final newline byte for byte', async () => {
      const text = (mid: string) => `one\r\ntwo\r\n${mid}\r\nfour\r\nfive\r\nsix\r\nseven`;
      write(ws.dir, 'w.txt', text('three'));
      const { taskId, baseCheckpointId } = await engine.startTask({ goal: 'g' });
      await agentStep(taskId, 'agent', () => write(ws.dir, 'w.txt', text('THREE')));
      write(ws.dir, 'w.txt', text('THREE').replace('seven', 'seven!'));
      const r = await engine.rollback({ taskId, checkpointId: baseCheckpointId, mode: 'agent-only' });
      assert.deepEqual(r.merged, ['w.txt']);
      assert.equal(fs.readFileSync(path.join(ws.dir, 'w.txt'), 'utf8'), text('three').replace('seven', 'seven!'));
    });

    it('leaves a file alone and names it a conflict when the person edited the agent’s own lines', async () => {
      write(ws.dir, 'src/f.ts', lines(20));
      const { taskId, baseCheckpointId } = await engine.startTask({ goal: 'g' });
      await agentStep(taskId, 'agent', () => write(ws.dir, 'src/f.ts', lines(20, { 5: 'agent' })));
      write(ws.dir, 'src/f.ts', lines(20, { 5: 'agent, then mine' }));
      write(ws.dir, 'src/a.ts', 'export const a = "person";\n');
      const before = tree(ws.dir);
      const r = await engine.rollback({ taskId, checkpointId: baseCheckpointId, mode: 'agent-only' });
      assert.deepEqual(r.conflicts, ['src/f.ts']);
      assert.deepEqual(r.merged, []);
      assert.match(r.kept.find((k) => k.path === 'src/f.ts')!.reason, /overlap near line 6/);
      assert.deepEqual(tree(ws.dir), before, 'nothing written');
    });

    it('does not merge a file the agent created, nor a binary file', async () => {
      write(ws.dir, 'bin.dat', 'a\u0000b\nline\n');
      const { taskId, baseCheckpointId } = await engine.startTask({ goal: 'g' });
      await agentStep(taskId, 'agent', () => {
        write(ws.dir, 'made.txt', 'agent made\n');
        write(ws.dir, 'bin.dat', 'a\u0000b\nline changed\n');
      });
      write(ws.dir, 'made.txt', 'agent made\nperson added\n');
      write(ws.dir, 'bin.dat', 'a\u0000b\nline changed\nperson\n');
      const r = await engine.rollback({ taskId, checkpointId: baseCheckpointId, mode: 'agent-only' });
      assert.deepEqual(r.conflicts, ['bin.dat', 'made.txt']);
      assert.match(r.kept.find((k) => k.path === 'made.txt')!.reason, /created or deleted/);
      assert.match(r.kept.find((k) => k.path === 'bin.dat')!.reason, /not a text file/);
      assert.equal(fs.readFileSync(path.join(ws.dir, 'made.txt'), 'utf8'), 'agent made\nperson added\n');
    });
  });

  it('shows drift (changes since the last checkpoint) in the resume context', async () => {
    const { taskId } = await engine.startTask({ goal: 'g', leaseTtlMs: 1000 });
    write(ws.dir, 'src/a.ts', 'export const a = "drift";\n');
    const ctx = await engine.resumeContext(taskId);
    assert.deepEqual(ctx.drift?.files, [{ path: 'src/a.ts', status: 'modified' }]);
    assert.match(ctx.markdown, /modified: src\/a\.ts/);
  });

  it('refuses a hostile manifest (../outside.txt) and writes nothing', async () => {
    const { taskId } = await engine.startTask({ goal: 'g' });
    const ws2 = engine.workspaceSnapshots!;
    const hash = 'a'.repeat(64);
    const hostile = Buffer.from(canonicalJson({ v: 1, full: true, entries: { '../outside.txt': { type: 'file', hash, size: 3, mode: 0o644, mtimeMs: 0, ino: 0 } } }));
    const { hash: ref } = await ws2.blobs.put(hostile);
    await ws2.blobs.flush();
    await embeddedStore(engine).commit([
      {
        type: 'checkpoint.created',
        taskId,
        corr: engine.task(taskId).correlationId,
        by: null,
        key: 'injected',
        data: { checkpointId: 'c_injected', kind: 'manual', stepId: null, label: 'injected', parentId: null, manifestRef: ref, files: 1, filesChanged: 1, bytes: 0 },
      },
    ]).durable;
    const before = tree(ws.dir);
    const outside = path.join(path.dirname(ws.dir), 'outside.txt');
    await assert.rejects(engine.rollback({ taskId, checkpointId: 'c_injected' }), /unsafe|outside|\.\./i);
    assert.equal(fs.existsSync(outside), false);
    assert.deepEqual(tree(ws.dir), before);
  });

  it('deleting a task frees its unique blobs; shared content stays', async () => {
    const a = await engine.startTask({ goal: 'a' });
    write(ws.dir, 'big-a.bin', 'A'.repeat(200_000));
    await engine.checkpoint({ taskId: a.taskId });
    fs.rmSync(path.join(ws.dir, 'big-a.bin'));
    await engine.checkpoint({ taskId: a.taskId });
    const b = await engine.startTask({ goal: 'b' });
    const before = await engine.storage();
    const taskA = before.tasks.find((t) => t.taskId === a.taskId)!;
    assert.ok(taskA.uniqueBytes > 0, 'task a holds big-a.bin alone');
    assert.ok(taskA.sharedBytes > 0, 'src files are shared with task b');
    await engine.abandonTask({ taskId: a.taskId });
    await engine.deleteTask({ taskId: a.taskId });
    const gc = await engine.gc();
    assert.ok(gc.blobsDeleted >= 1);
    const after = await engine.storage();
    assert.ok(after.totalBytes < before.totalBytes);
    assert.ok(after.tasks.every((t) => t.taskId !== a.taskId));
    // Task b still rolls back fine (its blobs survived).
    await engine.rollback({ taskId: b.taskId, checkpointId: b.baseCheckpointId });
  });

  it('a bulk task_base checkpoint is stored raw, compressed in the background (storage and close wait for it), and raw packs a crash left are compressed on open', async () => {
    for (let i = 0; i < 400; i++) write(ws.dir, `bulk/d${i % 7}/f${i}.ts`, `export const v${i} = ${i};\n`.repeat(40 + (i % 30)));
    const atStart = tree(ws.dir);
    const packDir = path.join(ws.dir, '.waypoint', 'objects', 'pack');
    const rawPacks = () => fs.readdirSync(packDir).filter((n) => n.endsWith('-u.pack'));
    const { taskId, baseCheckpointId } = await engine.startTask({ goal: 'bulk' });
    const report = await engine.storage(); // waits for the compaction the checkpoint started
    assert.deepEqual(rawPacks(), []);
    const bulkBytes = Object.entries(atStart).filter(([k]) => k.startsWith('bulk')).reduce((n, [, v]) => n + Buffer.from(v, 'base64').length, 0);
    assert.ok(report.totalBytes < bulkBytes / 4, `compressed: ${report.totalBytes} bytes on disk for ${bulkBytes} of source`);
    // Edits, then back to the base: byte-identical, read from the compacted packs.
    write(ws.dir, 'bulk/d0/f0.ts', 'changed\n');
    fs.rmSync(path.join(ws.dir, 'bulk/d1'), { recursive: true });
    await engine.rollback({ taskId, checkpointId: baseCheckpointId });
    assert.deepEqual(tree(ws.dir), atStart);

    // A process killed before its compaction ended leaves a raw pack: the next open compresses it.
    await engine.close();
    const left = new BlobStore(path.join(ws.dir, '.waypoint', 'objects'), { durability: 'deferred' });
    const leftover = Buffer.from('left raw by a killed process\n'.repeat(200));
    const { hash } = await left.put(leftover, { defer: true });
    await left.flush();
    assert.equal(rawPacks().length, 1);
    engine = await Engine.open({ workspace: ws.dir, store: { lock: { waitMs: 500 } } });
    await engine.workspaceSnapshots!.whenCompacted();
    assert.deepEqual(rawPacks(), []);
    assert.deepEqual(await engine.workspaceSnapshots!.blobs.get(hash), leftover);
    assert.ok((await engine.workspaceSnapshots!.blobs.sizeOf(hash))! < leftover.length / 10);
    assert.equal((await engine.verify()).ok, true);
  });

  it('a size limit right after a bulk checkpoint counts the compressed store, not the raw one still being compressed', async () => {
    const { taskId } = await engine.startTask({ goal: 'limit' });
    write(ws.dir, 'src/a.ts', 'export const a = 2;\n');
    await engine.checkpoint({ taskId }); // prunable: neither the base nor the head
    let bulkBytes = 0;
    for (let i = 0; i < 400; i++) {
      const text = `export const v${i} = ${i};\n`.repeat(40 + (i % 30));
      bulkBytes += text.length;
      write(ws.dir, `bulk/d${i % 7}/f${i}.ts`, text);
    }
    await engine.checkpoint({ taskId }); // bulk: stored raw, compressed in the background
    const r = await engine.gc({ maxTotalBytes: Math.floor(bulkBytes / 2) });
    assert.deepEqual(r.pruned, [], `nothing to prune once compressed (${r.totalBytes} bytes on disk)`);
    assert.ok(r.totalBytes < bulkBytes / 2);
  });

  it('retention keeps at most N checkpoints per task but never the base or the head', async () => {
    const { taskId, baseCheckpointId } = await engine.startTask({ goal: 'g' });
    for (let i = 0; i < 6; i++) {
      write(ws.dir, 'src/a.ts', `export const a = ${i};\n`);
      await engine.checkpoint({ taskId });
    }
    const r = await engine.gc({ maxPerTask: 3 });
    const left = engine.queries.checkpoints(taskId);
    assert.equal(left.length, 3);
    assert.ok(left.some((c) => c.id === baseCheckpointId));
    assert.ok(left.some((c) => c.id === engine.task(taskId).lastCheckpointId));
    assert.equal(r.pruned.length, 4);
    assert.equal((await engine.verify()).ok, true);
    // The head still restores (its delta chain survived GC).
    await engine.rollbackPreview({ taskId, checkpointId: baseCheckpointId });
  });

  it('unknown checkpoints and checkpoints of other tasks are refused', async () => {
    const a = await engine.startTask({ goal: 'a' });
    const b = await engine.startTask({ goal: 'b' });
    await assert.rejects(engine.rollback({ taskId: a.taskId, checkpointId: 'c_nope' }), (e: unknown) => e instanceof WaypointError && e.code === 'not_found');
    await assert.rejects(engine.rollback({ taskId: a.taskId, checkpointId: b.baseCheckpointId }), /belongs to task/);
  });
});

/**
 * Runs a bundled child script and resolves with its stdout once it exits by itself or
 * by SIGKILL. `onOutput` sees the output so far after each chunk and may return a delay
 * in ms after which the child is SIGKILLed (the first such answer counts).
 */
function runChildUntilKilled(script: string, args: string[], onOutput: (out: string) => number | undefined): Promise<string> {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  let out = '';
  let scheduled = false;
  child.stderr.on('data', (d) => (err += d));
  return new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const delay = scheduled ? undefined : onOutput(out);
      if (delay === undefined) return;
      scheduled = true;
      setTimeout(() => child.kill('SIGKILL'), delay);
    });
    child.on('exit', (code, sig) => (sig === 'SIGKILL' || code === 0 ? resolve(out) : reject(new Error(`${path.basename(script)} failed: ${err}`))));
  });
}

describe('engine: a one-call process and what its bulk checkpoint stored raw', function () {
  this.timeout(120_000);
  const bulkTree = (dir: string) => {
    for (let i = 0; i < 600; i++) write(dir, `p${i % 20}/m${i}.ts`, `// file ${i}\n${randomBytes(300 + (i % 700)).toString('hex')}\n`);
  };
  const oneCall = { snapshots: { releaseWorkersAfterScan: true } };

  it('compresses it as it closes; or leaves it raw for the next owner, which compresses it on open, ordered by the newest checkpoint’s names', async () => {
    const t = tmpDir('wp-onecall-');
    try {
      bulkTree(t.dir);
      let engine = await Engine.open({ workspace: t.dir, ...oneCall });
      const { baseCheckpointId } = await engine.startTask({ goal: 'one call' });
      const snaps = engine.workspaceSnapshots!;
      assert.ok(snaps.blobs.uncompactedPacks().length > 0, 'a bulk capture stores new content raw');
      await snaps.whenCompacted();
      assert.ok(snaps.blobs.uncompactedPacks().length > 0, 'a one-call process does not compress it before it closes');
      await engine.close({ leaveRawContent: true });
      const left = fs.readdirSync(path.join(t.dir, '.waypoint', 'objects', 'pack')).filter((n) => n.endsWith('-u.pack'));
      assert.ok(left.length > 0, 'left raw for the owner that takes the store next');

      // The next owner: raw packs found on open are compressed; the names come from the scan cache the call left.
      engine = await Engine.open({ workspace: t.dir });
      const next = engine.workspaceSnapshots!;
      const names = next.namesOfLatest(engine.queries.checkpoint(baseCheckpointId));
      assert.equal(names?.size, 600, 'the newest checkpoint’s map, read from the scan cache');
      const key = [...names!.keys()].find((k) => k.endsWith('p3/m3.ts'));
      assert.equal(key && names!.get(key)?.type, 'file');
      await next.whenCompacted();
      assert.deepEqual(next.blobs.uncompactedPacks(), [], 'compressed by the owner that opened the store');
      const m = await next.load(engine.queries.checkpoint(baseCheckpointId)!);
      for (const e of m.values()) if (e.type === 'file') assert.ok(await next.blobs.verify(e.hash), `blob ${e.hash}`);
      assert.equal((await engine.verify()).ok, true);
      await engine.close();

      // Without leaveRawContent, a one-call process compresses what it stored raw as it closes.
      fs.rmSync(path.join(t.dir, 'p0'), { recursive: true });
      for (let i = 0; i < 600; i++) write(t.dir, `q${i % 20}/n${i}.ts`, `// more ${i}\n${randomBytes(300 + (i % 700)).toString('hex')}\n`);
      engine = await Engine.open({ workspace: t.dir, ...oneCall });
      await engine.checkpoint({ taskId: engine.tasks()[0]!.id });
      assert.ok(engine.workspaceSnapshots!.blobs.uncompactedPacks().length > 0);
      await engine.close();
      assert.deepEqual(fs.readdirSync(path.join(t.dir, '.waypoint', 'objects', 'pack')).filter((n) => n.endsWith('-u.pack')), [], 'compressed before the process closed the store');
    } finally {
      t.cleanup();
    }
  });
});

describe('crash safety of bulk checkpoints and their compaction (SIGKILL)', function () {
  this.timeout(0);
  const KILLS = Number(process.env.WAYPOINT_BULK_KILLS ?? 30);
  let script: string;
  before(() => {
    script = bundleScript(path.join(__dirname, '..', 'support', 'bulkCheckpointChild.ts'));
  });

  it(`every acknowledged checkpoint's blobs read back and no raw pack or temp outlives the next open, across ${KILLS} kills`, async () => {
    const t = tmpDir('wp-bulkcrash-');
    try {
      write(t.dir, 'README.md', 'bulk crash test\n');
      let engine = await Engine.open({ workspace: t.dir });
      const { taskId } = await engine.startTask({ goal: 'bulk kills' });
      await engine.close();
      const phases = { beforeAck: 0, afterAck: 0, closed: 0, rawAtOpen: 0 };
      const acked: string[] = [];
      for (let k = 0; k < KILLS; k++) {
        // 1,200 new files each round (new paths: a changed file is not a new one): past the
        // first 256 (read here), the workers store them raw. Hex text: compressible by half,
        // so the compaction has real work to do.
        fs.rmSync(path.join(t.dir, `bulk${k - 1}`), { recursive: true, force: true });
        for (let i = 0; i < 1200; i++) write(t.dir, `bulk${k}/d${i % 16}/f${i}.ts`, `// round ${k} file ${i}\n${randomBytes(500 + ((i * 7 + k) % 1500)).toString('hex')}\n`);
        // Even rounds: a kill anywhere from the open on (mostly in the scan and its barrier);
        // odd rounds: within 60 ms of the acknowledgement (in the compaction).
        const out = await runChildUntilKilled(script, [t.dir, taskId], (now) => {
          if (k % 2 === 0 && now.includes('ready')) return Math.random() * 700;
          if (k % 2 === 1 && now.includes('ack')) return Math.random() * 60;
          return undefined;
        });
        const ack = /ack (\S+)/.exec(out)?.[1];
        if (ack) acked.push(ack);
        if (out.includes('closed')) phases.closed++;
        else if (ack) phases.afterAck++;
        else phases.beforeAck++;
        engine = await Engine.open({ workspace: t.dir });
        const snaps = engine.workspaceSnapshots!;
        if (snaps.blobs.uncompactedPacks().length) phases.rawAtOpen++;
        await snaps.whenCompacted();
        assert.deepEqual(snaps.blobs.uncompactedPacks(), [], `kill ${k}: raw packs left after open`);
        const temps = fs.readdirSync(path.join(t.dir, '.waypoint', 'objects', 'pack')).filter((n) => n.startsWith('tmp-'));
        assert.deepEqual(temps, [], `kill ${k}: temp packs left after open`);
        for (const id of acked) assert.ok(engine.queries.checkpoint(id), `kill ${k}: acknowledged checkpoint ${id} is gone`);
        // Every blob of the last acknowledged checkpoint reads back and hashes to its name.
        const last = acked[acked.length - 1];
        if (last) {
          const m = await snaps.load(engine.queries.checkpoint(last)!);
          for (const e of m.values()) if (e.type === 'file') assert.ok(await snaps.blobs.verify(e.hash), `kill ${k}: blob ${e.hash} of ${last}`);
        }
        assert.equal((await engine.verify()).ok, true);
        await engine.close();
      }
      process.stdout.write(`      (${KILLS} kills: ${phases.beforeAck} before the checkpoint was acknowledged, ${phases.afterAck} after it (compaction running), ${phases.closed} after close; ${phases.rawAtOpen} opens found raw packs to compress)\n`);
      assert.ok(phases.beforeAck > 0 && phases.rawAtOpen > 0, `kills must fall both in the checkpoint and in its compaction: ${JSON.stringify(phases)}`);
    } finally {
      t.cleanup();
    }
  });
});

describe('crash safety of rollbacks (SIGKILL mid-rollback)', function () {
  this.timeout(0);
  const KILLS = Number(process.env.WAYPOINT_ROLLBACK_KILLS ?? 40);
  let script: string;
  before(() => {
    script = bundleScript(path.join(__dirname, '..', 'support', 'rollbackChild.ts'));
  });

  it(`leaves the workspace in the before or the after state across ${KILLS} kills`, async () => {
    const t = tmpDir('wp-rbcrash-');
    try {
      for (let i = 0; i < 120; i++) write(t.dir, `f/${i}.txt`, `before ${i}\n`.repeat(50));
      let engine = await Engine.open({ workspace: t.dir });
      const { taskId, baseCheckpointId } = await engine.startTask({ goal: 'g' });
      for (let i = 0; i < 120; i++) write(t.dir, `f/${i}.txt`, `after ${i}\n`.repeat(50));
      for (let i = 0; i < 20; i++) write(t.dir, `g/${i}.txt`, `new ${i}\n`);
      const after = await engine.checkpoint({ taskId });
      await engine.close();
      let recovered = 0;
      let target = baseCheckpointId;
      for (let k = 0; k < KILLS; k++) {
        await runChildUntilKilled(script, [t.dir, taskId, target], (now) => (now.includes('ready') ? 20 + Math.random() * 400 : undefined));
        engine = await Engine.open({ workspace: t.dir });
        recovered += engine.recoveryNotes.length;
        const now = tree(t.dir);
        // The rollbacks alternate between the two checkpoints, so either state is a legal end state.
        const count = (word: string) => Array.from({ length: 120 }, (_, i) => now[`f/${i}.txt`] === Buffer.from(`${word} ${i}\n`.repeat(50)).toString('base64')).filter(Boolean).length;
        const fBefore = count('before');
        const gFiles = Object.keys(now).filter((p) => p.startsWith('g/')).length;
        const isBefore = fBefore === 120 && gFiles === 0;
        const isAfter = count('after') === 120 && gFiles === 20;
        assert.ok(
          isBefore || isAfter,
          `kill ${k + 1}: the workspace is neither the before nor the after state (${fBefore}/120 f files before, ${Object.keys(now).filter((p) => p.startsWith('g/')).length} g files; notes: ${engine.recoveryNotes.join(' ')}; rollbacks: ${JSON.stringify(embeddedStore(engine).db.all('SELECT id, state, outcome FROM rollbacks'))})`,
        );
        assert.deepEqual(fs.readdirSync(path.join(t.dir, 'f')).filter((n) => n.includes('tmp')), [], 'no temp files left');
        const v = await engine.verify();
        assert.ok(v.ok, `kill ${k + 1}: projections differ from a rebuild`);
        for (const c of engine.queries.checkpoints(taskId)) if (c.manifestRef) await engine.workspaceSnapshots!.load(c);
        await engine.close();
        target = target === baseCheckpointId ? after.checkpointId : baseCheckpointId;
      }
      process.stdout.write(`      ${KILLS} kills during rollbacks, ${recovered} interrupted rollback(s) finished on open\n`);
    } finally {
      t.cleanup();
    }
  });
});

describe('engine: rollback preview names every file it deletes, and who made it', () => {
  it('flags the deletes of files no step of the task created (made by the person since, or between steps); undo brings them back', async () => {
    const ws = tmpDir();
    try {
      write(ws.dir, 'src/a.ts', 'a\n');
      const engine = await Engine.open({ workspace: ws.dir });
      try {
        const { taskId, baseCheckpointId } = await engine.startTask({ goal: 'g', plan: [{ id: 'one', title: 'one' }, { id: 'two', title: 'two' }] });
        await engine.startStep({ taskId, stepId: 'one' });
        write(ws.dir, 'src/agent.ts', 'by the agent\n');
        await engine.completeStep({ taskId, stepId: 'one' });
        write(ws.dir, 'notes/between.md', 'the person, between steps\n');
        await engine.startStep({ taskId, stepId: 'two' });
        write(ws.dir, 'src/agent2.ts', 'by the agent again\n');
        await engine.completeStep({ taskId, stepId: 'two' });
        write(ws.dir, 'notes/later.md', 'the person, after the last checkpoint\n');
        const preview = await engine.rollbackPreview({ taskId, checkpointId: baseCheckpointId });
        assert.deepEqual(preview.changes, [
          { path: 'notes/between.md', action: 'delete', createdOutsideTask: true },
          { path: 'notes/later.md', action: 'delete', createdOutsideTask: true },
          { path: 'src/agent.ts', action: 'delete' },
          { path: 'src/agent2.ts', action: 'delete' },
        ]);
        const r = await engine.rollback({ taskId, checkpointId: baseCheckpointId });
        assert.deepEqual(r.changes, preview.changes);
        assert.equal(fs.existsSync(path.join(ws.dir, 'notes/later.md')), false);
        await engine.undoRollback({ taskId });
        assert.equal(fs.readFileSync(path.join(ws.dir, 'notes/later.md'), 'utf8'), 'the person, after the last checkpoint\n');
      } finally {
        await engine.close();
      }
    } finally {
      ws.cleanup();
    }
  });
});
