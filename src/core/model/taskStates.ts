import type { Task, TaskState } from './schema';
import { ACTIVE_TASK_STATES, FINAL_TASK_STATES, RESUMABLE_TASK_STATES } from './stateMachine';

/**
 * Named questions about a task's state, asked in one place. The extension, the CLI
 * and the MCP tools used to spell these out inline (`t.state === 'completed' ||
 * t.state === 'abandoned'`, `['running', …].includes(t.state)`), and the copies had
 * started to disagree; each predicate below is what those copies meant.
 */

/** `completed` or `abandoned`: nothing more happens to the task (the state machine has no way out). */
export function isFinal(t: Pick<Task, 'state'>): boolean {
  return FINAL_TASK_STATES.includes(t.state);
}

/** Not final: the task is still work in progress in some sense (it may be checkpointed or abandoned). */
export function isOpen(t: Pick<Task, 'state'>): boolean {
  return !isFinal(t);
}

/** Steps and side effects may be recorded (`pending`, `planning`, `running`, `waiting_tool`). */
export function isActive(t: Pick<Task, 'state'>): boolean {
  return ACTIVE_TASK_STATES.includes(t.state);
}

/** States in which an agent is driving the task right now (the clock runs, it must not be deleted). */
export const LIVE_TASK_STATES: readonly TaskState[] = ['planning', 'running', 'waiting_tool'];

/** An agent is driving the task now: `planning`, `running` or `waiting_tool`. */
export function isLive(t: Pick<Task, 'state'>): boolean {
  return LIVE_TASK_STATES.includes(t.state);
}

/** The agent is at work (`running` or `waiting_tool`): it may ask for review, and edits are auto-checkpointed. */
export function isWorking(t: Pick<Task, 'state'>): boolean {
  return t.state === 'running' || t.state === 'waiting_tool';
}

/** A person's decision is what the task waits for: a step used its attempts, or side effects are in doubt. */
export function needsPerson(t: Pick<Task, 'hold'>): boolean {
  return t.hold !== null && t.hold !== undefined;
}

/** Held because a step used its attempts: the person grants more, skips or abandons — resuming is refused. */
export function isHeldForRetries(t: Pick<Task, 'hold'>): boolean {
  return t.hold?.cause === 'retries_exhausted';
}

/**
 * A person can resume it: interrupted, suspended, or failed with a recoverable
 * failure — and not held for attempts (that needs a grant, not a resume).
 */
export function isResumable(t: Pick<Task, 'state' | 'hold' | 'interruption'>): boolean {
  if (isHeldForRetries(t)) return false;
  if (!RESUMABLE_TASK_STATES.includes(t.state)) return false;
  return t.state !== 'failed' || t.interruption?.class !== 'unrecoverable';
}

/** The review panel has something to show: the agent asked for review, is still at it, or stopped mid-way. */
export function isReviewable(t: Pick<Task, 'state'>): boolean {
  return t.state === 'waiting_review' || t.state === 'running' || t.state === 'interrupted';
}

/** The task can be deleted: no agent is driving it (a live task's driver would write into a deleted record). */
export function isDeletable(t: Pick<Task, 'state'>): boolean {
  return !isLive(t);
}
