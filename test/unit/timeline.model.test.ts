import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Engine } from '../../src/core/engine/engine';
import type { Step, WaypointEvent } from '../../src/core/model/schema';
import { buildTimeline, layoutSteps, readAttempts } from '../../src/extension/timeline/model';
import { applyPatch, diffTimeline } from '../../src/extension/timeline/patch';
import { TimelineModel } from '../../src/extension/timeline/protocol';
import { FakeClock, openEngine, tmpDir } from '../support/tmp';

/** The timeline's model from a real engine's events and projections, as the panel builds it. */
async function timelineOf(engine: Engine, taskId: string, now = Date.now()) {
  return buildTimeline({ ...engine.taskDetail(taskId), events: (await engine.events({ taskId })), now });
}

describe('timeline model', () => {
  let sandbox: ReturnType<typeof tmpDir>;
  let engine: Engine;
  let clock: FakeClock;
  let ws: string;

  beforeEach(async () => {
    sandbox = tmpDir('wp-timeline-');
    ws = path.join(sandbox.dir, 'ws');
    fs.mkdirSync(ws);
    fs.writeFileSync(path.join(ws, 'a.txt'), 'a\n');
    clock = new FakeClock();
    engine = await openEngine(ws, { clock });
  });
  afterEach(async () => {
    await engine.close();
    sandbox.cleanup();
  });

  it('lays out the dependsOn DAG in layers, with the attempts of each step, a failed one included, and who ran them', async () => {
    const plan = [
      { id: 'read', title: 'Read the code' },
      { id: 'change', title: 'Change it', dependsOn: ['read'] },
      { id: 'docs', title: 'Document it', dependsOn: ['read'] },
      { id: 'test', title: 'Test it', dependsOn: ['change', 'docs'] },
    ];
    const owner = { id: 'agent-session-7' };
    const { taskId } = await engine.startTask({ goal: 'Fix the bug', plan, agent: 'claude-code', owner, leaseTtlMs: 3_600_000 });
    clock.advance(1_000);
    await engine.startStep({ taskId, stepId: 'read', owner });
    clock.advance(2_000);
    await engine.completeStep({ taskId, stepId: 'read', owner });
    clock.advance(500);
    await engine.startStep({ taskId, stepId: 'change', owner });
    clock.advance(3_000);
    await engine.failStep({ taskId, stepId: 'change', error: 'tests broke', recoverable: true, owner });
    clock.advance(10_000);
    await engine.startStep({ taskId, stepId: 'change', owner });
    fs.writeFileSync(path.join(ws, 'a.txt'), 'b\n');
    clock.advance(4_000);
    await engine.completeStep({ taskId, stepId: 'change', owner });

    const m = await timelineOf(engine, taskId, clock.t);
    TimelineModel.parse(m); // the model is what the protocol carries, within its bounds
    assert.deepEqual(
      m.steps.map((s) => [s.id, s.layer, s.status]),
      [
        ['read', 0, 'completed'],
        ['change', 1, 'completed'],
        ['docs', 1, 'pending'],
        ['test', 2, 'pending'],
      ],
    );
    assert.deepEqual(m.steps.find((s) => s.id === 'test')!.dependsOn, ['change', 'docs']);
    // Two steps in layer 1 get distinct rows.
    assert.notEqual(m.steps.find((s) => s.id === 'change')!.row, m.steps.find((s) => s.id === 'docs')!.row);

    const change = m.attempts.filter((a) => a.stepId === 'change');
    assert.deepEqual(
      change.map((a) => [a.n, a.outcome, a.end! - a.start, a.by]),
      [
        [1, 'failed', 3_000, 'agent-session-7'],
        [2, 'completed', 4_000, 'agent-session-7'],
      ],
    );
    assert.equal(change[0].error, 'tests broke');
    assert.equal(change[0].failureClass, 'recoverable');
    assert.equal(m.attempts.find((a) => a.stepId === 'read')!.end! - m.attempts.find((a) => a.stepId === 'read')!.start, 2_000);
    assert.equal(m.task.correlationId, engine.task(taskId).correlationId);
    assert.ok(m.task.correlationId.length > 0);
    assert.equal(m.events, (await engine.events({ taskId })).length);
    assert.ok(m.range.start <= m.attempts[0].start && m.range.end >= change[1].end!);
  });

  it('shows checkpoints (restorable or not) and side effects in each state, shell commands marked', async () => {
    const owner = { id: 'agent' };
    const { taskId } = await engine.startTask({ goal: 'Ship it', owner, leaseTtlMs: 3_600_000 });
    await engine.startStep({ taskId, stepId: 's1', title: 'Run things', owner });
    await engine.beginSideEffect({ taskId, stepId: 's1', key: 'npm-test', kind: 'shell', description: 'npm test', owner });
    await engine.endSideEffect({ taskId, key: 'npm-test', ok: true });
    await engine.beginSideEffect({ taskId, key: 'deploy', kind: 'http', description: 'POST /deploy', owner });
    await engine.endSideEffect({ taskId, key: 'deploy', ok: false, error: '502 from the gateway' });
    await engine.beginSideEffect({ taskId, key: 'migrate', kind: 'migration', description: 'ALTER TABLE', owner });
    await engine.checkpoint({ taskId, label: 'before the risky part', owner });

    const m = await timelineOf(engine, taskId);
    const cps = engine.queries.checkpoints(taskId);
    assert.deepEqual(m.checkpoints.map((c) => c.id), cps.map((c) => c.id));
    assert.ok(m.checkpoints.some((c) => c.kind === 'task_base' && c.restorable));
    assert.ok(m.checkpoints.some((c) => c.label === 'before the risky part'));
    const fx = new Map(m.effects.map((e) => [e.key, e]));
    assert.equal(fx.get('npm-test')!.status, 'done');
    assert.equal(fx.get('npm-test')!.shell, true);
    assert.equal(fx.get('npm-test')!.stepId, 's1');
    assert.equal(fx.get('deploy')!.status, 'failed');
    assert.equal(fx.get('deploy')!.error, '502 from the gateway');
    assert.equal(fx.get('deploy')!.shell, false);
    assert.equal(fx.get('migrate')!.status, 'intent');
    // The step still runs: its bar is open and the axis reaches "now".
    const open = m.attempts.find((a) => a.stepId === 's1')!;
    assert.equal(open.outcome, 'running');
    assert.equal(open.end, null);
  });

  it('closes a running attempt as interrupted when the task is, and a resumed attempt that finishes settles that bar', async () => {
    const owner = { id: 'agent' };
    const { taskId } = await engine.startTask({ goal: 'Long job', owner, leaseTtlMs: 3_600_000 });
    await engine.startStep({ taskId, stepId: 'long', title: 'Long step', owner });
    clock.advance(5_000);
    await engine.interruptTask({ taskId, owner });
    let m = await timelineOf(engine, taskId);
    let bars = m.attempts.filter((a) => a.stepId === 'long');
    assert.deepEqual(bars.map((a) => [a.outcome, a.end! - a.start]), [['interrupted', 5_000]]);
    assert.ok(m.marks.some((k) => k.type === 'task.interrupted'));
    assert.ok(m.task.interruption);

    await engine.resumeTask({ taskId, owner });
    clock.advance(1_000);
    await engine.startStep({ taskId, stepId: 'long', owner });
    clock.advance(2_000);
    await engine.completeStep({ taskId, stepId: 'long', owner });
    m = await timelineOf(engine, taskId);
    bars = m.attempts.filter((a) => a.stepId === 'long');
    assert.equal(bars.at(-1)!.outcome, 'completed');
    assert.ok(bars.every((a) => a.end !== null), 'no bar is left open');
    assert.ok(m.marks.some((k) => k.type === 'task.resumed'));
  });

  it('after a rollback and its undo: no id in any title or mark, no empty auto checkpoint, a base that holds files, the restored step running again', async () => {
    const owner = { id: 'agent' };
    const { taskId, baseCheckpointId } = await engine.startTask({ goal: 'Add a check', plan: [{ id: 'edit', title: 'Edit the file' }], owner, leaseTtlMs: 3_600_000 });
    clock.advance(1_000);
    await engine.startStep({ taskId, stepId: 'edit', owner });
    fs.writeFileSync(path.join(ws, 'a.txt'), 'edited\n');
    clock.advance(1_000);
    // As the editor's watcher labels them: by the dirty files it saw, one that captured a change and one that did not.
    await engine.checkpoint({ taskId, kind: 'auto', label: '2 file changes', owner });
    clock.advance(1_000);
    await engine.checkpoint({ taskId, kind: 'auto', label: '1 file change', owner });
    clock.advance(1_000);
    await engine.rollback({ taskId, checkpointId: baseCheckpointId });
    clock.advance(1_000);
    await engine.undoRollback({ taskId });
    assert.equal(engine.taskDetail(taskId).steps[0]!.status, 'in_progress');

    const m = await timelineOf(engine, taskId, clock.t);
    TimelineModel.parse(m);
    const ENGINE_ID = /\b[tcrsa]_[0-9a-z]{15}\b/;
    for (const c of m.checkpoints) assert.doesNotMatch(c.title, ENGINE_ID, c.title);
    for (const k of m.marks) assert.doesNotMatch(k.text, ENGINE_ID, k.text);
    assert.ok(m.checkpoints.some((c) => c.title === 'Before undoing a rollback'), m.checkpoints.map((c) => c.title).join(' | '));
    assert.ok(m.checkpoints.some((c) => c.title.startsWith('Before rolling back to Start of task')));
    // The auto checkpoint that captured the edit is named by its kind and step, and says what it changed; the empty one is left out.
    const autos = m.checkpoints.filter((c) => c.kind === 'auto');
    assert.deepEqual(autos.map((c) => [c.title, c.changes]), [['Auto checkpoint: Edit the file', '1 file changed']]);
    const base = m.checkpoints.find((c) => c.kind === 'task_base')!;
    assert.match(base.changes, /^\d+ files?$/);
    assert.ok(m.marks.some((k) => k.text.includes('abandoned Edit the file')), m.marks.map((k) => k.text).join(' | '));
    // The undo gave the step back: its last bar runs (blue in the legend), not grey as abandoned.
    const bars = m.attempts.filter((a) => a.stepId === 'edit');
    assert.equal(bars.at(-1)!.outcome, 'running');
    assert.equal(bars.at(-1)!.end, null);
  });

  it('a live update is a diff: applying it to the old model gives the rebuilt model', async () => {
    const owner = { id: 'agent' };
    const { taskId } = await engine.startTask({ goal: 'Diff me', plan: [{ id: 'a', title: 'A' }, { id: 'b', title: 'B', dependsOn: ['a'] }], owner, leaseTtlMs: 3_600_000 });
    await engine.startStep({ taskId, stepId: 'a', owner });
    const before = await timelineOf(engine, taskId, clock.t);
    clock.advance(1_000);
    await engine.completeStep({ taskId, stepId: 'a', owner });
    await engine.startStep({ taskId, stepId: 'b', owner });
    await engine.beginSideEffect({ taskId, stepId: 'b', key: 'k1', kind: 'shell', description: 'make', owner });
    const after = await timelineOf(engine, taskId, clock.t);
    const patch = diffTimeline(before, after)!;
    assert.ok(patch, 'something changed');
    // Only what changed travels: step a's first bar was open and is now closed, b's is new; unchanged checkpoints stay home.
    assert.deepEqual(patch.upsert.attempts.map((a) => a.id).sort(), ['a#1', 'b#1']);
    assert.ok(patch.upsert.checkpoints.length < after.checkpoints.length);
    assert.deepEqual(patch.upsert.effects.map((e) => e.key), ['k1']);
    assert.deepEqual(applyPatch(before, patch), after);
    assert.equal(diffTimeline(after, after), null, 'no change, no message');
    // A removed entry (a pruned checkpoint) is sent as a removal.
    const fewer = { ...after, checkpoints: after.checkpoints.slice(1) };
    const p2 = diffTimeline(after, fewer)!;
    assert.deepEqual(p2.remove.checkpoints, [after.checkpoints[0].id]);
    assert.deepEqual(applyPatch(after, p2), fewer);
  });
});

describe('timeline layout and attempts (edge cases)', () => {
  const step = (id: string, order: number, dependsOn: string[] = []): Step => ({
    taskId: 't', id, order, title: id, dependsOn, status: 'pending', attempts: 0, inputs: null, outputs: null, summary: null, error: null, startedAt: null, endedAt: null, adhoc: false, taskAttempt: null, maxAttempts: 3,
  });

  it('ignores unknown dependencies and cuts a cycle instead of looping', () => {
    const out = layoutSteps([step('a', 0, ['ghost']), step('b', 1, ['c']), step('c', 2, ['b']), step('d', 3, ['a', 'c'])]);
    assert.deepEqual(out.find((s) => s.id === 'a')!.dependsOn, []);
    assert.equal(out.find((s) => s.id === 'a')!.layer, 0);
    assert.ok(out.every((s) => Number.isInteger(s.layer) && s.layer <= 3));
    assert.ok(out.find((s) => s.id === 'd')!.layer > out.find((s) => s.id === 'c')!.layer);
  });

  it('a repeated start of the same attempt is one bar; a new attempt without an outcome closes the old bar as interrupted', () => {
    let seq = 0;
    const ev = (type: string, ts: number, data: Record<string, unknown>) => ({ seq: ++seq, ts, type, v: 1, taskId: 't', corr: 'c', key: `k${seq}`, by: 'me', data }) as unknown as WaypointEvent;
    const started = (ts: number, attempt: number) => ev('step.started', ts, { stepId: 's', title: 's', attempt, taskAttempt: 1, inputs: null, adhoc: false, dependsOn: [] });
    const bars = readAttempts([started(0, 1), started(10, 1), started(50, 2), ev('step.completed', 80, { stepId: 's', outputs: null, summary: null })]);
    assert.deepEqual(bars.map((b) => [b.id, b.outcome, b.start, b.end]), [
      ['s#1', 'interrupted', 0, 50],
      ['s#2', 'completed', 50, 80],
    ]);
  });
});
