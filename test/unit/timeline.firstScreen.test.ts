import * as assert from 'node:assert/strict';
import { FIRST_LIST_ROWS, FIRST_ROWS, firstScreen } from '../../src/extension/timeline/firstScreen';
import { TimelineModel, type TimelineModel as Model } from '../../src/extension/timeline/protocol';
import { PIECE, validateModelInPieces } from '../../src/extension/timeline/validateInPieces';

/**
 * The timeline's first screen (what the page's document carries) and the piecewise
 * validation of the whole model that follows it.
 */
function big(steps: number): Model {
  const m: Model = {
    task: { id: 't_1', title: 'T', state: 'running', agent: null, correlationId: 'c_1', createdAt: 1, updatedAt: 2, attempt: 1, interruption: null },
    events: steps * 7,
    lastSeq: steps * 7,
    range: { start: 1, end: 10_000 },
    steps: [],
    attempts: [],
    checkpoints: [],
    effects: [],
    marks: [{ id: '1', at: 1, type: 'task.started', text: 'Started' }],
    omitted: { steps: 0, attempts: 0, checkpoints: 0, effects: 0, marks: 0 },
  };
  for (let i = 0; i < steps; i++) {
    const id = `s${i}`;
    m.steps.push({ id, title: `Step ${i}`, status: 'completed', dependsOn: i >= 20 ? [`s${i - 20}`] : [], layer: Math.floor(i / 20), row: i % 20, adhoc: false, error: null });
    m.attempts.push({ id: `${id}#1`, stepId: id, n: 1, taskAttempt: 1, start: i * 2, end: i * 2 + 1, outcome: 'failed', by: 'a', error: 'x', failureClass: 'recoverable' });
    m.attempts.push({ id: `${id}#2`, stepId: id, n: 2, taskAttempt: 1, start: i * 2 + 1, end: i * 2 + 2, outcome: 'completed', by: 'a', error: null, failureClass: null });
    m.checkpoints.push({ id: `cp${i}`, kind: 'step_end', label: null, title: `End of ${id}`, stepId: id, at: i * 2 + 2, filesChanged: 0, changes: 'no changes', restorable: true });
    m.effects.push({ key: `k${i}`, kind: 'shell', description: 'npm test', status: 'done', stepId: id, at: i * 2 + 1, endedAt: i * 2 + 2, attempts: 1, error: null, resolvedBy: null, shell: true });
  }
  return m;
}

const pause = () => new Promise<void>((r) => setImmediate(r));

describe('timeline first screen', () => {
  it('returns a model that fits whole as it is, without pending', () => {
    const m = big(10);
    assert.equal(firstScreen(m), m);
    assert.equal(firstScreen(m).pending, undefined);
  });

  it('keeps the first rows of each list, the graph’s first layers, their attempts, and counts the rest as pending', () => {
    const m = big(714);
    const f = firstScreen(m);
    assert.ok(TimelineModel.safeParse(f).success, 'the first screen is a valid model');
    assert.ok(f.steps.length >= FIRST_ROWS && f.steps.length < 200, `${f.steps.length} steps`);
    assert.deepEqual(f.steps.slice(0, FIRST_ROWS), m.steps.slice(0, FIRST_ROWS), 'the axis’s first rows, in order');
    const ids = new Set(f.steps.map((s) => s.id));
    assert.ok(f.attempts.every((a) => ids.has(a.stepId)) && f.attempts.length === f.steps.length * 2, 'every attempt of each step kept, no other');
    assert.deepEqual(f.checkpoints, m.checkpoints.slice(-FIRST_LIST_ROWS), 'the newest checkpoints (the list shows them first)');
    assert.deepEqual(f.effects, m.effects.slice(0, FIRST_LIST_ROWS));
    assert.deepEqual(f.pending, { steps: 714 - f.steps.length, attempts: 1428 - f.attempts.length, checkpoints: 714 - FIRST_LIST_ROWS, effects: 714 - FIRST_LIST_ROWS, marks: 0 });
    assert.equal(m.pending, undefined, 'the whole model is left as it was');
  });
});

describe('timeline model validated in pieces', () => {
  it('accepts a valid model with the same data as one safeParse, pausing between pieces', async () => {
    const m = big(714);
    let pauses = 0;
    const r = await validateModelInPieces(JSON.parse(JSON.stringify(m)), async () => {
      pauses++;
      await pause();
    });
    assert.ok(r.success);
    assert.deepEqual(r.data, TimelineModel.parse(m));
    assert.ok(pauses >= Math.ceil(1428 / PIECE), `${pauses} pauses`);
  });

  it('refuses the whole model at a bad entry deep in a late piece, naming where', async () => {
    const m = JSON.parse(JSON.stringify(big(714)));
    m.attempts[1203].outcome = 'exploded';
    const r = await validateModelInPieces(m, pause);
    assert.equal(r.success, false);
    assert.match(!r.success ? r.problem : '', /^attempts\.1203\.outcome: /);
    assert.equal(TimelineModel.safeParse(m).success, false, 'and one safeParse agrees');
  });

  it('refuses what one safeParse refuses: unknown keys, over-long collections, a bad header, non-objects', async () => {
    const cases: unknown[] = [null, 5, 'x', [], { ...big(1), extra: 1 }, { ...big(1), task: { id: '' } }, { ...big(1), steps: 'none' }];
    const tooMany = big(1);
    tooMany.marks = Array.from({ length: 5_001 }, (_, i) => ({ id: String(i), at: 1, type: 't', text: 'x' }));
    cases.push(tooMany);
    const withKey = JSON.parse(JSON.stringify(big(3)));
    withKey.steps[2].sneaky = true;
    cases.push(withKey);
    for (const c of cases) {
      const r = await validateModelInPieces(c, pause, 2);
      assert.equal(r.success, false, JSON.stringify(c)?.slice(0, 80));
      assert.equal(TimelineModel.safeParse(c).success, false);
    }
  });
});
