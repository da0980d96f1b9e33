import assert from 'node:assert/strict';
import { TASK_TRANSITIONS, canTransition } from '../../src/core/model/stateMachine';
import type { Task, TaskState } from '../../src/core/model/schema';
import {
  isActive,
  isDeletable,
  isFinal,
  isHeldForRetries,
  isLive,
  isOpen,
  isResumable,
  isReviewable,
  isWorking,
  needsPerson,
} from '../../src/core/model/taskStates';

const STATES = Object.keys(TASK_TRANSITIONS) as TaskState[];
type Probe = Pick<Task, 'state' | 'hold' | 'interruption'>;
const at = (state: TaskState, extra: Partial<Probe> = {}): Probe => ({ state, hold: null, interruption: null, ...extra });

describe('task-state predicates agree with the state machine', () => {
  it('isFinal is exactly the states with no way out', () => {
    for (const s of STATES) assert.equal(isFinal(at(s)), TASK_TRANSITIONS[s].length === 0, s);
    for (const s of STATES) assert.equal(isOpen(at(s)), !isFinal(at(s)), s);
  });

  it('every resumable task can move to running; the resumable states are the stops', () => {
    for (const s of STATES) {
      if (isResumable(at(s))) assert.ok(canTransition(s, 'running'), `${s} is resumable but cannot go to running`);
    }
    assert.deepEqual(STATES.filter((s) => isResumable(at(s))).sort(), ['failed', 'interrupted', 'suspended']);
  });

  it('live and working tasks are active, never final, and can be interrupted', () => {
    for (const s of STATES) {
      if (isWorking(at(s))) assert.ok(isLive(at(s)), s);
      if (isLive(at(s))) {
        assert.ok(isActive(at(s)), s);
        assert.ok(canTransition(s, 'interrupted'), `${s} is live but cannot be interrupted`);
      }
    }
    assert.deepEqual(STATES.filter((s) => isWorking(at(s))).sort(), ['running', 'waiting_tool']);
    assert.deepEqual(STATES.filter((s) => isLive(at(s))).sort(), ['planning', 'running', 'waiting_tool']);
  });

  it('active tasks are open and can still reach review or abandonment', () => {
    for (const s of STATES.filter((x) => isActive(at(x)))) {
      assert.ok(isOpen(at(s)), s);
      assert.ok(canTransition(s, 'abandoned'), s);
    }
    assert.deepEqual(STATES.filter((s) => isActive(at(s))).sort(), ['pending', 'planning', 'running', 'waiting_tool']);
  });

  it('a reviewable task is open; a deletable one has no agent driving it', () => {
    assert.deepEqual(STATES.filter((s) => isReviewable(at(s))).sort(), ['interrupted', 'running', 'waiting_review']);
    for (const s of STATES) {
      if (isReviewable(at(s))) assert.ok(isOpen(at(s)), s);
      assert.equal(isDeletable(at(s)), !isLive(at(s)), s);
    }
  });

  it('a hold for used-up attempts makes a task need a person and blocks resuming', () => {
    const hold = { cause: 'retries_exhausted', stepId: 'fetch', since: 1 } as unknown as Task['hold'];
    const held = at('interrupted', { hold });
    assert.ok(needsPerson(held));
    assert.ok(isHeldForRetries(held));
    assert.equal(isResumable(held), false);
    assert.equal(needsPerson(at('interrupted')), false);
    assert.equal(isResumable(at('interrupted')), true);
  });

  it('a failed task resumes only when its failure was recoverable', () => {
    const failure = (cls: string): Probe => at('failed', { interruption: { reason: 'x', class: cls, at: 1, stepId: null } as unknown as Task['interruption'] });
    assert.equal(isResumable(failure('unrecoverable')), false);
    assert.equal(isResumable(failure('recoverable')), true);
  });
});
