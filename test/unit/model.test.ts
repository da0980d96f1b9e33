import * as assert from 'node:assert/strict';
import { WaypointError } from '../../src/core/model/errors';
import { nextReadySteps, validatePlan } from '../../src/core/model/plan';
import { TASK_STATES, type StepStatus } from '../../src/core/model/schema';
import { TASK_TRANSITIONS, assertTaskTransition, assertStepTransition, canTransition } from '../../src/core/model/stateMachine';
import { parseInput } from '../../src/core/model/validate';
import { StartTaskInput, BeginSideEffectInput } from '../../src/core/engine/inputs';

describe('model: task state machine', () => {
  it('has a row for every state and only known targets', () => {
    for (const s of TASK_STATES) {
      assert.ok(TASK_TRANSITIONS[s], `row for ${s}`);
      for (const t of TASK_TRANSITIONS[s]) assert.ok(TASK_STATES.includes(t), `${s} → ${t}`);
    }
  });

  it('treats completed and abandoned as final', () => {
    for (const t of TASK_STATES) {
      assert.equal(canTransition('completed', t), false);
      assert.equal(canTransition('abandoned', t), false);
    }
  });

  it('allows the lifecycle of the design (pending → running ⇄ waiting → completed, resume from interrupted)', () => {
    assert.ok(canTransition('pending', 'running'));
    assert.ok(canTransition('running', 'waiting_tool'));
    assert.ok(canTransition('waiting_tool', 'running'));
    assert.ok(canTransition('running', 'waiting_review'));
    assert.ok(canTransition('waiting_review', 'completed'));
    assert.ok(canTransition('interrupted', 'running'));
    assert.ok(!canTransition('interrupted', 'completed'));
    assert.ok(!canTransition('running', 'completed'), 'completion goes through review');
  });

  it('refuses an illegal move naming the state and the attempted move', () => {
    assert.throws(
      () => assertTaskTransition('t_1', 'completed', 'running', 'resume it'),
      (e: unknown) => e instanceof WaypointError && e.code === 'illegal_transition' && /completed/.test(e.message) && /resume it/.test(e.message) && /completed → running/.test(e.message),
    );
  });

  it('refuses illegal step moves', () => {
    assert.throws(() => assertStepTransition('t', 's', 'completed', 'in_progress', 'start it'), /completed; cannot start it/);
    assert.doesNotThrow(() => assertStepTransition('t', 's', 'failed', 'in_progress', 'retry it'));
  });
});

describe('model: plans are DAGs', () => {
  it('accepts a diamond', () => {
    validatePlan([
      { id: 'a', title: 'A' },
      { id: 'b', title: 'B', dependsOn: ['a'] },
      { id: 'c', title: 'C', dependsOn: ['a'] },
      { id: 'd', title: 'D', dependsOn: ['b', 'c'] },
    ]);
  });

  it('refuses a cycle and names it', () => {
    assert.throws(
      () =>
        validatePlan([
          { id: 'a', title: 'A', dependsOn: ['c'] },
          { id: 'b', title: 'B', dependsOn: ['a'] },
          { id: 'c', title: 'C', dependsOn: ['b'] },
        ]),
      /cycle: (a|b|c) → (a|b|c) → (a|b|c) → (a|b|c)/,
    );
  });

  it('refuses unknown dependencies, self dependencies and duplicate ids', () => {
    assert.throws(() => validatePlan([{ id: 'a', title: 'A', dependsOn: ['zz'] }]), /depends on unknown step 'zz'/);
    assert.throws(() => validatePlan([{ id: 'a', title: 'A', dependsOn: ['a'] }]), /depends on itself/);
    assert.throws(() => validatePlan([{ id: 'a', title: 'A' }, { id: 'a', title: 'again' }]), /used twice/);
  });

  it('handles a 1000-step chain without recursion trouble', () => {
    const plan = Array.from({ length: 1000 }, (_, i) => ({ id: `s${i}`, title: `step ${i}`, dependsOn: i ? [`s${i - 1}`] : [] }));
    validatePlan(plan);
    plan[0].dependsOn = ['s999'];
    assert.throws(() => validatePlan(plan), /cycle/);
  });

  it('next ready steps = pending steps whose dependencies are all completed, in plan order', () => {
    const mk = (id: string, status: StepStatus, dependsOn: string[], order: number) => ({ id, status, dependsOn, order, error: null });
    const steps = [mk('a', 'completed', [], 0), mk('b', 'pending', ['a'], 1), mk('c', 'pending', ['b'], 2), mk('d', 'pending', ['a'], 3), mk('e', 'in_progress', [], 4)];
    assert.deepEqual(
      nextReadySteps(steps).map((s) => s.id),
      ['b', 'd'],
    );
    const retry = [{ ...mk('x', 'failed', [], 0), error: { recoverable: true } }, { ...mk('y', 'failed', [], 1), error: { recoverable: false } }];
    assert.deepEqual(
      nextReadySteps(retry).map((s) => s.id),
      ['x'],
    );
  });
});

describe('model: validation errors a person can read', () => {
  it('names the field and the rule', () => {
    assert.throws(
      () => parseInput(StartTaskInput, { goal: '', plan: [{ id: '../x', title: 'T' }] }, 'task start'),
      (e: unknown) => e instanceof WaypointError && e.code === 'invalid_input' && /goal: must not be empty/.test(e.message) && /plan\[0\]\.id: may hold only/.test(e.message),
    );
  });

  it('refuses unknown fields instead of ignoring them', () => {
    assert.throws(() => parseInput(StartTaskInput, { goal: 'g', gaol: 'typo' }, 'task start'), /Unrecognized key.*gaol|gaol/);
  });

  it('refuses wrong types with the expected type named', () => {
    assert.throws(() => parseInput(BeginSideEffectInput, { taskId: 't', key: 'k', kind: 1, description: 'd' }, 'side effect begin'), /kind: .*string/i);
  });
});
