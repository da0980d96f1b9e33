import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { CheckpointMeta, SideEffect, Step, Task } from '../../src/core/model/schema';
import type { Engine } from '../../src/core/engine/engine';
import {
  checkpointChanges,
  checkpointDescription,
  checkpointName,
  checkpointTooltipText,
  checkpointWithStep,
  effectDescription,
  eventSentence,
  eventsMarkdown,
  eventStepId,
  plural,
  resultText,
  stepDescription,
  stepShownStatus,
  stepsProgress,
  isShownCheckpoint,
  withoutIds,
} from '../../src/extension/labelText';
import { FakeClock, openEngine, tmpDir } from '../support/tmp';

const T0 = Date.UTC(2026, 11, 1, 9, 0, 0);

function step(id: string, over: Partial<Step> = {}): Step {
  return {
    taskId: 't_1', id, title: `Title of ${id}`, status: 'pending', dependsOn: [], inputs: null, outputs: null, summary: null, error: null,
    startedAt: null, endedAt: null, attempts: 0, adhoc: false, order: 0, taskAttempt: null, maxAttempts: 3, ...over,
  } as Step;
}
function cp(id: string, over: Partial<CheckpointMeta> = {}): CheckpointMeta {
  return { id, taskId: 't_1', stepId: null, kind: 'step_end', label: null, parentId: null, createdAt: T0, manifestRef: 'm', files: 6, filesChanged: 0, bytes: 0, ...over };
}
function effect(over: Partial<SideEffect> = {}): SideEffect {
  return { taskId: 't_1', key: 'k1', stepId: 's1', kind: 'shell', description: 'npm test', args: null, status: 'done', result: null, error: null, attempts: 1, intentAt: T0, endedAt: T0, resolvedBy: 'agent', ...over };
}

describe('labels: the words of rows, tooltips and the events document', () => {
  it('plural: one helper, no "(s)"', () => {
    assert.equal(plural(1, 'file'), '1 file');
    assert.equal(plural(0, 'file'), '0 files');
    assert.equal(plural(3, 'file'), '3 files');
    assert.equal(plural(2, 'entry', 'entries'), '2 entries');
  });

  it('progress is written one way: done (completed or skipped) over total, in steps', () => {
    assert.equal(stepsProgress([]), 'no plan');
    assert.equal(stepsProgress([step('a', { status: 'completed' }), step('b', { status: 'skipped' }), step('c', { status: 'in_progress' }), step('d')]), '2/4 steps');
  });

  it('an unfinished step of a task that is not live reads as stopped, not in progress', () => {
    const s = step('a', { status: 'in_progress', startedAt: T0 });
    assert.equal(stepShownStatus(s, { state: 'running' }), 'in_progress');
    assert.equal(stepShownStatus(s, { state: 'interrupted' }), 'stopped');
    assert.equal(stepShownStatus(s, { state: 'suspended' }), 'stopped');
    assert.equal(stepShownStatus(step('b', { status: 'completed' }), { state: 'interrupted' }), 'completed');
    const d = stepDescription(s, { state: 'interrupted' }, [s], '', T0 + 60_000);
    assert.match(d, /^stopped \(task interrupted\)$/);
    assert.match(stepDescription(s, { state: 'running' }, [s], '', T0 + 60_000), /^in progress · 1 min$/);
  });

  it('a step row carries no step id: state first, unfinished prerequisites by title', () => {
    const read = step('read', { status: 'completed', startedAt: T0, endedAt: T0 + 4_000, title: 'Read the code' });
    const change = step('change', { dependsOn: ['read', 'docs'] });
    const docs = step('docs', { title: 'Write docs' });
    assert.equal(stepDescription(read, { state: 'running' }, [read, change, docs], ''), 'completed · 4 s');
    assert.equal(stepDescription(change, { state: 'running' }, [read, change, docs], ''), 'pending · after Write docs');
    assert.equal(stepDescription(step('f', { status: 'failed', attempts: 1 }), { state: 'running' }, [], 'attempt 1 of 3'), 'failed (attempt 1 of 3)');
  });

  it('a base checkpoint says how many files it holds, not that it changed them', () => {
    const base = cp('c_base', { kind: 'task_base', files: 6, filesChanged: 6 });
    assert.equal(checkpointName(base), 'Start of task');
    assert.match(checkpointDescription(base), / · 6 files$/);
    assert.doesNotMatch(checkpointDescription(base), /changed/);
    assert.match(checkpointTooltipText(base, [base], []), /6 files tracked$/m);
    assert.match(checkpointDescription(cp('c2', { filesChanged: 1 })), / · 1 file changed$/);
    assert.match(checkpointDescription(cp('c3', { filesChanged: 0 })), / · no changes$/);
    assert.match(checkpointDescription(cp('c4', { filesChanged: 1, damaged: 'lost' })), /^damaged · /);
  });

  it("an auto checkpoint's dirty-file count label gives way to its kind, so the row cannot contradict itself", () => {
    const auto = cp('c_a', { kind: 'auto', label: '1 file change', filesChanged: 0 });
    assert.equal(checkpointName(auto), 'Auto checkpoint');
    assert.equal(checkpointName(cp('c_b', { kind: 'auto', label: '3 file changes' })), 'Auto checkpoint');
    assert.equal(checkpointName(cp('c_c', { kind: 'manual', label: 'settled' })), 'settled');
  });

  it('a pre-rollback checkpoint names its target by label and local time, never by id', () => {
    const s1 = step('s1', { title: 'One' });
    const target = cp('c_0mx4zi9', { kind: 'step_end', stepId: 's1', createdAt: T0 });
    const pre = cp('c_pre', { kind: 'pre_rollback', label: 'before rolling back to c_0mx4zi9' });
    const name = checkpointName(pre, [target, pre], [s1]);
    assert.equal(name, `Before rolling back to After step: One (${new Date(T0).toLocaleTimeString()})`);
    assert.doesNotMatch(name, /c_/);
    // The target pruned: the kind, still no id.
    assert.equal(checkpointName(pre, [pre], [s1]), 'Before rollback');
    // A reason the person gave is kept as it is.
    assert.equal(checkpointName(cp('c_p2', { kind: 'pre_rollback', label: 'the tests went red' })), 'the tests went red');
    assert.equal(checkpointWithStep(target, [target], [s1]), 'After step: One');
  });

  it('a history checkpoint counting dirty files, and an undo, are named in words, never by a count or an id', () => {
    assert.equal(checkpointName(cp('c_h', { kind: 'auto', taskId: 't_h', label: '2 file changes' })), 'Auto checkpoint');
    assert.equal(checkpointName(cp('c_h2', { kind: 'manual', label: '2 file changes', filesChanged: 0 })), 'Checkpoint');
    const undo = cp('c_u', { kind: 'pre_rollback', label: 'undo of rollback r_0mx4zi9abcdefgh' });
    assert.equal(checkpointName(undo, [undo], []), 'Before undoing a rollback');
    // With its step, as pickers and the timeline show it: still no count that contradicts "no changes".
    const s1 = step('s1', { title: 'Add a maxLength check' });
    assert.equal(checkpointWithStep(cp('c_a', { kind: 'auto', stepId: 's1', label: '2 file changes', filesChanged: 0 }), [], [s1]), 'Auto checkpoint: Add a maxLength check');
  });

  it('files changed, one definition: a base holds N files, the others changed N; empty auto checkpoints are not shown', () => {
    assert.equal(checkpointChanges(cp('c_b', { kind: 'task_base', files: 2806, filesChanged: 2806 })), '2806 files');
    assert.equal(checkpointChanges(cp('c_1', { filesChanged: 1 })), '1 file changed');
    assert.equal(checkpointChanges(cp('c_0', { filesChanged: 0 })), 'no changes');
    assert.equal(isShownCheckpoint(cp('c_e', { kind: 'auto', filesChanged: 0 })), false);
    assert.equal(isShownCheckpoint(cp('c_e2', { kind: 'auto', filesChanged: 0, damaged: 'lost' })), true, 'a damaged one is news');
    assert.equal(isShownCheckpoint(cp('c_f', { kind: 'auto', filesChanged: 3 })), true);
    assert.equal(isShownCheckpoint(cp('c_s', { kind: 'step_end', filesChanged: 0 })), true, 'a step boundary is shown even when nothing changed');
  });

  it('engine text for a toast names tasks, steps and checkpoints by title, or in words, never by id', () => {
    const names = new Map([
      ['t_0mx4zi9abcdefgh', 'Add a maxLength check'],
      ['s_0mx4zi9hijklmno', 'Write the test'],
    ]);
    assert.equal(withoutIds('Task t_0mx4zi9abcdefgh is completed; cannot start a step: completed is final.', names), 'Task “Add a maxLength check” is completed; cannot start a step: completed is final.');
    assert.equal(withoutIds("Task t_0mx4zi9abcdefgh has no step 's_0mx4zi9hijklmno'.", names), 'Task “Add a maxLength check” has no step “Write the test”.');
    assert.equal(withoutIds("Unknown checkpoint 'c_0mx4zi9opqrstuv'."), 'Unknown checkpoint.');
    assert.equal(withoutIds('undo of rollback r_0mx4zi9vwxyzabc'), 'undo of rollback');
    assert.equal(withoutIds('before rolling back to c_0mx4zi9opqrstuv'), 'before rolling back to a checkpoint');
    // Text without engine ids is left alone (a step the agent called "s1", a path).
    assert.equal(withoutIds("Step 's1' depends on src/t_x.ts"), "Step 's1' depends on src/t_x.ts");
  });

  it('a step restored by an undo reads without the rollback id', () => {
    const s1 = step('s1', { title: 'One' });
    const ev = { seq: 1, ts: T0, type: 'step.restored', taskId: 't_1', corr: null, key: 'k', by: null, data: { stepId: 's1', status: 'in_progress', rollbackId: 'r_0mx4zi9vwxyzabc', reason: 'undo of rollback r_0mx4zi9vwxyzabc' } };
    const line = eventSentence(ev as never, { steps: [s1], checkpoints: [], sideEffects: [] });
    assert.equal(line, 'Step “One” restored to in progress: undo of rollback');
  });

  it("a completed side effect's result is shown; the row says its outcome in words", () => {
    assert.equal(resultText(null), null);
    assert.equal(resultText('exit 0'), 'exit 0');
    assert.equal(resultText({ exitCode: 0, passed: 12 }), '{"exitCode":0,"passed":12}');
    assert.equal(resultText('x'.repeat(600))!.length, 500);
    assert.equal(effectDescription(effect()), 'shell · done');
    assert.equal(effectDescription(effect({ status: 'intent' })), 'shell · started');
    assert.equal(effectDescription(effect({ status: 'in_doubt' })), 'shell · IN DOUBT');
    assert.equal(effectDescription(effect({ status: 'done', resolvedBy: 'person' })), 'shell · done (by you)');
  });

  describe('the events document, from a real engine', () => {
    let sandbox: ReturnType<typeof tmpDir>;
    let engine: Engine;
    let clock: FakeClock;
    let ws: string;
    beforeEach(async () => {
      sandbox = tmpDir('wp-labels-');
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

    it('groups events by step in plan order, in words and local times, and names no checkpoint by id', async () => {
      const owner = { id: 'agent-1' };
      const plan = [
        { id: 'read', title: 'Read the code' },
        { id: 'change', title: 'Change it', dependsOn: ['read'] },
      ];
      const { taskId } = await engine.startTask({ goal: 'Fix the bug', plan, agent: 'demo-agent', owner, leaseTtlMs: 3_600_000 });
      clock.advance(1_000);
      await engine.startStep({ taskId, stepId: 'read', owner });
      await engine.beginSideEffect({ taskId, stepId: 'read', key: 'npm-test-1', kind: 'shell', description: 'npm test', owner });
      await engine.endSideEffect({ taskId, key: 'npm-test-1', ok: true, result: { exitCode: 0 }, idempotencyKey: 'e1', owner });
      fs.writeFileSync(path.join(ws, 'a.txt'), 'b\n');
      await engine.completeStep({ taskId, stepId: 'read', owner });
      await engine.startStep({ taskId, stepId: 'change', owner });
      const base = engine.taskDetail(taskId).checkpoints.find((c) => c.kind === 'task_base')!;
      await engine.rollback({ taskId, checkpointId: base.id, owner });
      await engine.interruptTask({ taskId, reason: 'window closed' });

      const d = engine.taskDetail(taskId);
      const events = (await engine.events({ taskId }));
      const md = eventsMarkdown({ ...d, events, rawLink: 'Show Raw JSON' });
      const sections = md.split('\n').filter((l) => l.startsWith('## '));
      assert.equal(sections[0], '## Task');
      assert.deepEqual(sections.map((s) => s.replace(/ — .*$/, '')), ['## Task', '## Step: Read the code', '## Step: Change it'], 'plan order');
      const read = md.slice(md.indexOf('## Step: Read the code'), md.indexOf('## Step: Change it'));
      assert.match(read, /Step “Read the code” started \(attempt 1\)/);
      assert.match(read, /Side effect started: npm test/);
      assert.match(read, /Side effect done: npm test → \{"exitCode":0\}/, 'the side effect is under its step, with its result');
      assert.match(md, /Rollback to Start of task started/);
      assert.match(md, /Task interrupted \(.*\): window closed/);
      assert.match(md, new RegExp(`\`${new Date(events[0].ts).toLocaleTimeString().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\``), 'local times');
      assert.doesNotMatch(md, /c_[a-z0-9]{5,}/, 'no checkpoint id');
      assert.doesNotMatch(md, /\b1[0-9]{12}\b/, 'no epoch milliseconds');
      assert.match(md, /^Show Raw JSON$/m);
      // Every event but heartbeats is one line.
      const lines = md.split('\n').filter((l) => l.startsWith('- `'));
      assert.equal(lines.length, events.filter((e) => e.type !== 'lease.heartbeat').length);
      const effectEv = events.find((e) => e.type === 'side_effect.done')!;
      assert.equal(eventStepId(effectEv, d.sideEffects), 'read');
      assert.equal(eventSentence(events[0], d), 'Task started by agent-1: Fix the bug');
    });

    it('an empty log says so', () => {
      const task = { id: 't_x', title: 'Nothing yet', state: 'pending', createdAt: T0 } as Task;
      assert.match(eventsMarkdown({ task, steps: [], checkpoints: [], sideEffects: [], events: [] }), /No events recorded yet\./);
    });
  });
  describe('recorded text is shown escaped (controls and bidi overrides never reach a row or a document)', () => {
    const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
    const hostile = 'invoice\u202etxt.exe \u001b]52;c;cm0=\u0007\r\u001b[2J';

    it('a checkpoint label, with its step, in rows and pickers', () => {
      const s1 = step('s1', { title: `step ${hostile}` });
      const c = cp('c_h', { kind: 'manual', label: hostile, stepId: 's1' });
      assert.equal(checkpointName(c), 'invoice\\u202etxt.exe \\x1b]52;c;cm0=\\x07\\r\\x1b[2J');
      assert.doesNotMatch(checkpointWithStep(c, [c], [s1]), RAW);
      assert.doesNotMatch(checkpointTooltipText(c, [c], [s1]), RAW);
    });

    it('the events document', () => {
      const task = { id: 't_h', title: hostile, state: 'running', createdAt: T0 } as Task;
      const s1 = step('s1', { title: hostile });
      const events = [
        { seq: 1, ts: T0, type: 'task.started', taskId: 't_h', by: 'agent', data: { goal: hostile } },
        { seq: 2, ts: T0, type: 'step.started', taskId: 't_h', by: 'agent', data: { stepId: 's1', attempt: 1 } },
      ] as never[];
      const md = eventsMarkdown({ task, steps: [s1], checkpoints: [], sideEffects: [], events });
      assert.doesNotMatch(md, RAW);
      assert.ok(md.includes('invoice\\u202etxt.exe'), md);
    });
  });
});
