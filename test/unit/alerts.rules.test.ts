import * as assert from 'node:assert/strict';
import { decideAlerts, rememberShown, type AlertInput } from '../../src/extension/alertRules';
import type { AlertSettings } from '../../src/extension/settings';
import { DEFAULT_RETRY_POLICY, type SideEffect, type Task } from '../../src/core/model/schema';
import { Engine } from '../../src/core/engine/engine';
import { FakeClock, openEngine, tmpDir } from '../support/tmp';

/**
 * Which alerts reach a person, decided in plain Node (src/extension/alertRules.ts):
 * each condition past its threshold raises one alert whose buttons lead to the
 * action, never twice for the same occurrence, again for a new one.
 */
const MIN = 60_000;
const NOW = Date.UTC(2026, 11, 1, 12, 0, 0);
const TH: AlertSettings = { interruptedMinutes: 10, failed: true, inDoubtMinutes: 30, reviewHours: 24, retriesExhausted: true };

function task(over: Partial<Task>): Task {
  return {
    id: 't_1',
    title: 'Fix the parser',
    goal: 'g',
    agent: null,
    state: 'running',
    correlationId: 'c',
    createdAt: NOW - 100 * MIN,
    updatedAt: NOW - MIN,
    attempt: 1,
    baseCheckpointId: null,
    lastCheckpointId: null,
    summary: null,
    commit: null,
    interruption: null,
    lease: null,
    retry: { ...DEFAULT_RETRY_POLICY },
    hold: null,
    forkedFrom: null,
    reopened: null,
    kind: 'task',
    ...over,
  };
}

function effect(over: Partial<SideEffect>): SideEffect {
  return { taskId: 't_1', key: 'deploy:1', stepId: null, kind: 'shell', description: 'deploy to staging', args: null, status: 'in_doubt', result: null, error: null, attempts: 1, intentAt: NOW - 40 * MIN, endedAt: null, resolvedBy: null, ...over };
}

const decide = (over: Partial<AlertInput>) => decideAlerts({ tasks: [], effects: [], now: NOW, thresholds: TH, shown: new Set(), ...over });

describe('alert rules (what reaches a person)', () => {
  it('an interruption alerts once it is older than the threshold, with Resume', () => {
    const t = task({ state: 'interrupted', interruption: { reason: 'lease expired', class: 'recoverable', at: NOW - 9 * MIN, stepId: null } });
    assert.deepEqual(decide({ tasks: [t] }), []);
    const late = { ...t, interruption: { ...t.interruption!, at: NOW - 11 * MIN } };
    const [a] = decide({ tasks: [late] });
    assert.equal(a.kind, 'interrupted');
    assert.match(a.message, /“Fix the parser” has been interrupted for 11 min \(lease expired\)/);
    assert.deepEqual(a.actions[0], { title: 'Resume', command: 'waypoint.resumeTask', args: ['t_1'] });
    assert.deepEqual(decide({ tasks: [late], thresholds: { ...TH, interruptedMinutes: 0 } }), [], '0 turns it off');
  });

  it('fires once per occurrence: the same key is not raised again, a new interruption is', () => {
    const t = task({ state: 'interrupted', interruption: { reason: 'x', class: 'recoverable', at: NOW - 20 * MIN, stepId: null } });
    const first = decide({ tasks: [t] });
    assert.equal(first.length, 1);
    const shown = new Set(rememberShown([], first.map((a) => a.key)));
    assert.deepEqual(decide({ tasks: [t], shown, now: NOW + 60 * MIN }), [], 'a later check (or a reload) does not repeat it');
    const again = { ...t, attempt: 2, interruption: { ...t.interruption!, at: NOW - 15 * MIN } };
    assert.equal(decide({ tasks: [again], shown }).length, 1, 'a new interruption is a new alert');
  });

  it('a failed task alerts at once (an error, with Show); off by setting', () => {
    const t = task({ state: 'failed', interruption: { reason: 'step m failed: schema drift', class: 'unrecoverable', at: NOW - 1000, stepId: 'm' } });
    const [a] = decide({ tasks: [t] });
    assert.equal(a.kind, 'failed');
    assert.equal(a.severity, 'error');
    assert.match(a.message, /failed: step m failed: schema drift/);
    assert.equal(a.actions[0].command, 'waypoint.revealTask');
    assert.deepEqual(decide({ tasks: [t], thresholds: { ...TH, failed: false } }), []);
  });

  it('a review waiting longer than the threshold alerts with Review', () => {
    const t = task({ state: 'waiting_review', updatedAt: NOW - 25 * 60 * MIN });
    const [a] = decide({ tasks: [t] });
    assert.equal(a.kind, 'review_waiting');
    assert.match(a.message, /waited for your review for 25 h/);
    assert.deepEqual(a.actions[0], { title: 'Review', command: 'waypoint.reviewTask', args: ['t_1'] });
    assert.deepEqual(decide({ tasks: [{ ...t, updatedAt: NOW - 23 * 60 * MIN }] }), []);
  });

  it('a side effect in doubt too long alerts with Mark Done / Mark Failed on that effect', () => {
    const t = task({ state: 'interrupted', interruption: { reason: 'x', class: 'inconsistent_state', at: NOW - 5 * MIN, stepId: null } });
    const alerts = decide({ tasks: [t], effects: [effect({}), effect({ key: 'young', intentAt: NOW - 5 * MIN }), effect({ key: 'settled', status: 'done' })] });
    assert.deepEqual(alerts.map((a) => a.kind), ['in_doubt']);
    assert.match(alerts[0].message, /“deploy to staging” \(shell\) of “Fix the parser” has been in doubt for 40 min/);
    assert.deepEqual(alerts[0].actions.map((x) => [x.title, x.command, x.args]), [
      ['Mark Done', 'waypoint.markSideEffectDone', [{ taskId: 't_1', key: 'deploy:1' }]],
      ['Mark Failed', 'waypoint.markSideEffectFailed', [{ taskId: 't_1', key: 'deploy:1' }]],
    ]);
    assert.deepEqual(decide({ tasks: [{ ...t, state: 'abandoned' }], effects: [effect({})] }), [], 'not for a task given up');
  });

  it('retries used up alert at once with Grant More Attempts for that step', () => {
    const t = task({ state: 'suspended', hold: { cause: 'retries_exhausted', stepId: 'fetch', reason: 'step fetch used its 3 attempts', since: NOW - 1000 } });
    const [a] = decide({ tasks: [t] });
    assert.equal(a.kind, 'retries_exhausted');
    assert.match(a.message, /waits for you — step fetch used its 3 attempts/);
    assert.deepEqual(a.actions[0], { title: 'Grant More Attempts', command: 'waypoint.grantAttempts', args: [{ taskId: 't_1', stepId: 'fetch' }] });
    assert.deepEqual(decide({ tasks: [t], thresholds: { ...TH, retriesExhausted: false } }), []);
  });

  it('orders the most urgent first, and keeps the remembered keys bounded', () => {
    const failed = task({ id: 't_a', state: 'failed', interruption: { reason: 'x', class: 'unrecoverable', at: NOW, stepId: null } });
    const review = task({ id: 't_b', state: 'waiting_review', updatedAt: NOW - 48 * 60 * MIN });
    assert.deepEqual(decide({ tasks: [review, failed] }).map((a) => a.kind), ['failed', 'review_waiting']);
    const many = rememberShown(Array.from({ length: 600 }, (_, i) => `k${i}`), ['new'], 500);
    assert.equal(many.length, 500);
    assert.equal(many.at(-1), 'new');
  });

  describe('over a real store', () => {
    let ws: ReturnType<typeof tmpDir>;
    let engine: Engine;
    let clock: FakeClock;
    beforeEach(async () => {
      ws = tmpDir('wp-alerts-');
      clock = new FakeClock();
      engine = await openEngine(ws.dir, { clock, snapshots: false });
    });
    afterEach(async () => {
      await engine.close();
      ws.cleanup();
    });

    it('the engine’s tasks and in-doubt effects raise the alerts a person needs, and settling them stops them', async () => {
      const a = await engine.startTask({ goal: 'fetch twice', plan: [{ id: 'fetch', title: 'Fetch', maxAttempts: 1 }] });
      await engine.startStep({ taskId: a.taskId, stepId: 'fetch' });
      await engine.failStep({ taskId: a.taskId, stepId: 'fetch', error: '503', recoverable: true });
      const b = await engine.startTask({ goal: 'deploy' });
      await engine.beginSideEffect({ taskId: b.taskId, key: 'deploy:1', kind: 'shell', description: 'deploy' });
      await engine.interruptTask({ taskId: b.taskId, reason: 'window closed' });
      clock.advance(45 * MIN);
      const input = () => ({ tasks: engine.tasks(), effects: engine.queries.sideEffectsInDoubt(), now: clock.t, thresholds: TH, shown: new Set<string>() });
      assert.deepEqual(decideAlerts(input()).map((x) => [x.kind, x.taskId]), [
        ['retries_exhausted', a.taskId],
        ['in_doubt', b.taskId],
        ['interrupted', b.taskId],
      ]);
      await engine.grantAttempts({ taskId: a.taskId, stepId: 'fetch' });
      await engine.endSideEffect({ taskId: b.taskId, key: 'deploy:1', ok: true, by: 'person' });
      assert.deepEqual(decideAlerts(input()).map((x) => x.kind), ['interrupted']);
    });
  });
});
