import * as assert from 'node:assert/strict';
import type { Engine } from '../../src/core/engine/engine';
import { localApi } from '../../src/core/engine/api';
import { REOPEN_TRANSITION, TASK_TRANSITIONS } from '../../src/core/model/stateMachine';
import { openEngine, tmpDir } from '../support/tmp';

/**
 * Reopening a task whose review commit was undone (issue 18): the one way out of
 * `completed`, refused for anything but the commit that completed the task, and
 * folded the same way live and on a rebuild.
 */
describe('engine: reopen a task by undoing its review commit', () => {
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine;
  const SHA = 'a'.repeat(40);
  const OTHER = 'b'.repeat(40);

  beforeEach(async () => {
    ws = tmpDir('wp-reopen-');
    engine = await openEngine(ws.dir, { snapshots: false });
  });
  afterEach(async () => {
    await engine.close();
    ws.cleanup();
  });

  async function completed(commit?: string): Promise<string> {
    const { taskId } = await engine.startTask({ goal: 'Edit', plan: [{ id: 's1', title: 'Edit' }] });
    await engine.startStep({ taskId, stepId: 's1' });
    await engine.completeStep({ taskId, stepId: 's1', outputs: { ok: true } });
    await engine.requestReview({ taskId, summary: 'done' });
    await engine.completeTask({ taskId, commit });
    return taskId;
  }

  it('goes back to waiting for review with its steps as they were, and completes again', async () => {
    const taskId = await completed(SHA);
    const steps = engine.queries.steps(taskId);
    const r = await engine.reopenTask({ taskId, commit: SHA });
    assert.deepEqual(r, { taskId, state: 'waiting_review', commit: SHA });
    const t = engine.task(taskId);
    assert.equal(t.state, 'waiting_review');
    assert.equal(t.commit, null, 'the undone commit is no longer the task’s');
    assert.equal(t.reopened?.commit, SHA);
    assert.match(t.reopened!.reason, /aaaaaaaaaa was undone/);
    assert.deepEqual(engine.queries.steps(taskId), steps, 'steps untouched');
    // A second completion with the default key is a new one, not a repeat of the first.
    await engine.completeTask({ taskId, commit: OTHER });
    assert.equal(engine.task(taskId).state, 'completed');
    assert.equal(engine.task(taskId).commit, OTHER);
    assert.equal((await engine.events({ taskId })).filter((e) => e.type === 'task.completed').length, 2);
    assert.ok((await engine.verify()).ok, 'live projections equal a rebuild');
  });

  it('a repeat appends nothing; the same commit completing again can be reopened again', async () => {
    const taskId = await completed(SHA);
    await engine.reopenTask({ taskId, commit: SHA });
    const seq = engine.eventLog.lastSeq;
    assert.deepEqual(await engine.reopenTask({ taskId, commit: SHA }), { taskId, state: 'waiting_review', commit: SHA });
    assert.equal(engine.eventLog.lastSeq, seq, 'nothing appended by the repeat');
    await engine.completeTask({ taskId, commit: SHA });
    await engine.reopenTask({ taskId, commit: SHA });
    assert.equal(engine.task(taskId).state, 'waiting_review');
    assert.equal((await engine.events({ taskId })).filter((e) => e.type === 'task.reopened').length, 2);
  });

  it('refuses, changing nothing: another commit, a task completed without one, a task not completed, bad input', async () => {
    const withSha = await completed(SHA);
    const without = await completed();
    const { taskId: open } = await engine.startTask({ goal: 'Still running' });
    const seq = engine.eventLog.lastSeq;
    await assert.rejects(engine.reopenTask({ taskId: withSha, commit: OTHER }), /completed by commit aaaaaaaaaa, not bbbbbbbbbb/);
    await assert.rejects(engine.reopenTask({ taskId: without, commit: SHA }), /completed without a commit.*completed is final/);
    await assert.rejects(engine.reopenTask({ taskId: open, commit: SHA }), (e: Error & { code?: string }) => e.code === 'illegal_transition' && /is running; only a completed task is reopened/.test(e.message));
    await assert.rejects(localApi(engine).reopenTask({ taskId: withSha, commit: 'not-a-sha' }), /is not a commit hash/);
    await assert.rejects(engine.reopenTask({ taskId: 't_nope', commit: SHA }), /t_nope/);
    assert.equal(engine.eventLog.lastSeq, seq);
    assert.equal(engine.task(withSha).state, 'completed');
  });

  it('is an operation of the API (declared once in operations.ts), validated at the boundary', async () => {
    const api = localApi(engine);
    const taskId = await completed(SHA);
    await assert.rejects(api.reopenTask({ taskId, commit: SHA, extra: 1 } as never), /extra|Unrecognized/i);
    assert.equal((await api.reopenTask({ taskId, commit: SHA })).state, 'waiting_review');
  });

  it('the state machine: completed leaves only by the reopen, never by an ordinary move', () => {
    assert.deepEqual(TASK_TRANSITIONS.completed, []);
    assert.deepEqual(REOPEN_TRANSITION, { from: 'completed', to: 'waiting_review' });
  });
});
