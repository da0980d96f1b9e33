import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Engine } from '../../src/core/engine/engine';
import type { ResumeContext } from '../../src/core/engine/resumeContext';
import { tmpDir } from '../support/tmp';
import { embeddedStore } from '../support/embedded';

function write(dir: string, rel: string, text: string): void {
  fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
  fs.writeFileSync(path.join(dir, rel), text);
}

/** What the next agent is told, without what names a checkpoint (undo returns to a new one holding the same files). */
function told(ctx: ResumeContext) {
  return { plan: ctx.plan, interruptedStep: ctx.interruptedStep, nextSteps: ctx.nextSteps, sideEffects: ctx.sideEffects, drift: ctx.drift?.files, state: ctx.task.state };
}

describe('engine: undoing a rollback restores the record too', () => {
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine;
  beforeEach(async () => {
    ws = tmpDir();
    write(ws.dir, 'src/a.ts', 'export const a = 1;\n');
    engine = await Engine.open({ workspace: ws.dir, store: { lock: { waitMs: 500 } } });
  });
  afterEach(async () => {
    if (!embeddedStore(engine).isClosed) await engine.close();
    ws.cleanup();
  });

  /** read (completed) → edit (completed, after a failure) → test (in progress, a side effect done), rolled back to the end of read. */
  async function workedTask() {
    const plan = [
      { id: 'read', title: 'Read' },
      { id: 'edit', title: 'Edit', dependsOn: ['read'] },
      { id: 'test', title: 'Test', dependsOn: ['edit'] },
      { id: 'docs', title: 'Docs', dependsOn: ['test'] },
    ];
    const { taskId } = await engine.startTask({ goal: 'work', plan, retry: { backoffMs: 0 } });
    await engine.startStep({ taskId, stepId: 'read' });
    const afterRead = await engine.completeStep({ taskId, stepId: 'read', outputs: { lines: 1 }, summary: 'read it' });
    await engine.startStep({ taskId, stepId: 'edit' });
    write(ws.dir, 'src/a.ts', 'export const a = 2;\n');
    await engine.failStep({ taskId, stepId: 'edit', error: 'typo', recoverable: true });
    await engine.startStep({ taskId, stepId: 'edit' });
    write(ws.dir, 'src/a.ts', 'export const a = 3;\n');
    write(ws.dir, 'src/b.ts', 'export const b = 3;\n');
    await engine.completeStep({ taskId, stepId: 'edit', outputs: { changed: ['src/a.ts', 'src/b.ts'] }, summary: 'edited' });
    await engine.startStep({ taskId, stepId: 'test' });
    await engine.beginSideEffect({ taskId, key: 'npm-test', kind: 'shell', description: 'npm test' });
    await engine.endSideEffect({ taskId, key: 'npm-test', ok: true, result: { exitCode: 0 } });
    await engine.checkpoint({ taskId, label: 'tests ran' });
    return { taskId, afterRead };
  }

  it('gives the abandoned steps their earlier status back, so the resume context equals the one before the rollback', async () => {
    const { taskId, afterRead } = await workedTask();
    const before = await engine.resumeContext(taskId);
    const statusBefore = engine.queries.steps(taskId).map((s) => [s.id, s.status, s.endedAt]);

    const r = await engine.rollback({ taskId, checkpointId: afterRead.checkpointId });
    assert.deepEqual(r.abandonedSteps, ['edit', 'test']);
    assert.deepEqual(engine.queries.steps(taskId).map((s) => s.status), ['completed', 'abandoned', 'abandoned', 'pending']);
    assert.notDeepEqual(told(await engine.resumeContext(taskId)), told(before), 'the rollback changes what the agent is told');

    const u = await engine.undoRollback({ taskId });
    assert.deepEqual(u.restoredSteps, ['edit', 'test']);
    assert.equal(fs.readFileSync(path.join(ws.dir, 'src/a.ts'), 'utf8'), 'export const a = 3;\n');
    assert.deepEqual(engine.queries.steps(taskId).map((s) => [s.id, s.status, s.endedAt]), statusBefore, 'statuses and end times as before');
    assert.deepEqual(told(await engine.resumeContext(taskId)), told(before));
    assert.match((await engine.resumeContext(taskId)).markdown, /\[x\] `edit` Edit/);

    const types = (await engine.events()).filter((e) => e.taskId === taskId).map((e) => e.type);
    assert.equal(types.filter((t) => t === 'step.restored').length, 2);
  });

  it('is replayable: a rebuild from the events and a reopen give the same steps', async () => {
    const { taskId, afterRead } = await workedTask();
    await engine.rollback({ taskId, checkpointId: afterRead.checkpointId });
    await engine.undoRollback({ taskId });
    const steps = engine.queries.steps(taskId);
    const v = await engine.verify();
    assert.equal(v.ok, true, JSON.stringify(v.differences));
    await engine.close();
    engine = await Engine.open({ workspace: ws.dir, store: { lock: { waitMs: 500 } } });
    assert.deepEqual(engine.queries.steps(taskId), steps);
  });

  it('does not restore a step redone after the rollback: the undo discards that redo’s files, so the redo is what it abandons', async () => {
    const { taskId, afterRead } = await workedTask();
    await engine.rollback({ taskId, checkpointId: afterRead.checkpointId });
    await engine.startStep({ taskId, stepId: 'edit' });
    write(ws.dir, 'src/a.ts', 'export const a = 4;\n');
    await engine.completeStep({ taskId, stepId: 'edit', summary: 'redone' });
    const u = await engine.undoRollback({ taskId });
    assert.deepEqual(u.restoredSteps, ['test']);
    const byId = new Map(engine.queries.steps(taskId).map((s) => [s.id, s]));
    assert.deepEqual(u.abandonedSteps, ['edit']);
    assert.equal(byId.get('edit')!.summary, 'redone');
    assert.equal(byId.get('edit')!.status, 'abandoned');
    assert.equal(fs.readFileSync(path.join(ws.dir, 'src/a.ts'), 'utf8'), 'export const a = 3;\n');
    assert.equal(byId.get('test')!.status, 'in_progress');
    assert.equal(byId.get('test')!.endedAt, null);
  });

  it('restores nothing for a rollback of chosen files (which abandons no step), and a preview restores nothing', async () => {
    const { taskId, afterRead } = await workedTask();
    const r = await engine.rollback({ taskId, checkpointId: afterRead.checkpointId, paths: ['src/b.ts'] });
    assert.deepEqual(r.abandonedSteps, []);
    assert.equal(fs.existsSync(path.join(ws.dir, 'src/b.ts')), false);
    const u = await engine.undoRollback({ taskId });
    assert.deepEqual(u.restoredSteps, []);
    assert.equal(fs.readFileSync(path.join(ws.dir, 'src/b.ts'), 'utf8'), 'export const b = 3;\n');
    assert.deepEqual(engine.queries.steps(taskId).map((s) => s.status), ['completed', 'completed', 'in_progress', 'pending']);
  });

  it('offers an undo only while there is one: not after the undo, again after a new rollback', async () => {
    const { taskId, afterRead } = await workedTask();
    assert.equal(engine.queries.lastUndoableRollback(taskId), null);
    assert.deepEqual(engine.queries.undoableTaskIds(), []);
    const r = await engine.rollback({ taskId, checkpointId: afterRead.checkpointId });
    assert.equal(engine.queries.lastUndoableRollback(taskId)?.id, r.rollbackId);
    assert.deepEqual(engine.queries.undoableTaskIds(), [taskId]);
    await engine.undoRollback({ taskId });
    assert.equal(engine.queries.lastUndoableRollback(taskId), null, 'an undo is not itself offered for undoing');
    await assert.rejects(engine.undoRollback({ taskId }), /no rollback to undo/);
    const again = await engine.rollback({ taskId, checkpointId: afterRead.checkpointId });
    assert.equal(engine.queries.lastUndoableRollback(taskId)?.id, again.rollbackId);
  });
});
