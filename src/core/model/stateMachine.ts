import { WaypointError } from './errors';
import type { StepStatus, TaskState } from './schema';

/**
 * The task state machine. The usual persistent-agent state machine names INITIALIZED /
 * PLANNING / EXECUTING / WAITING_TOOL / REFLECTING / COMPLETED / FAILED / SUSPENDED;
 * Waypoint's names are:
 *
 *   INITIALIZED  → pending         EXECUTING    → running
 *   PLANNING     → planning        WAITING_TOOL → waiting_tool (a side effect is in flight)
 *   REFLECTING   → waiting_review  (the reflection that matters is the person's review)
 *   COMPLETED    → completed       FAILED       → failed
 *   SUSPENDED    → suspended
 *
 * plus `interrupted` (the driver went away: lease expired, process died) and
 * `abandoned` (the person or agent gave up). `completed` and `abandoned` are final
 * to every ordinary move; undoing a review's commit is the one exception (REOPEN_TRANSITION).
 */
export const TASK_TRANSITIONS: Readonly<Record<TaskState, readonly TaskState[]>> = {
  pending: ['planning', 'running', 'abandoned', 'interrupted', 'suspended'],
  planning: ['running', 'failed', 'abandoned', 'interrupted', 'suspended'],
  running: ['planning', 'waiting_tool', 'waiting_review', 'failed', 'abandoned', 'interrupted', 'suspended'],
  waiting_tool: ['running', 'waiting_review', 'failed', 'abandoned', 'interrupted', 'suspended'],
  // From review the person may send the task back (running), accept it (completed) or drop it.
  waiting_review: ['running', 'completed', 'abandoned'],
  // Resuming is the only way forward from an interruption or a suspension.
  interrupted: ['running', 'failed', 'abandoned', 'suspended'],
  suspended: ['running', 'abandoned', 'interrupted'],
  // A failed task may be retried by a person (a new attempt) or abandoned.
  failed: ['running', 'abandoned'],
  completed: [],
  abandoned: [],
};

/**
 * The one way out of `completed`: the person undid the review commit that completed
 * the task (`task.reopened`), so the task waits for review again with its record as
 * it was. It is not a row of TASK_TRANSITIONS because no ordinary move may take it:
 * `completed` means "the person accepted this work", and what a person accepted is
 * final — unless the acceptance itself, the commit, is taken back. A task completed
 * without a commit, or whose recorded commit is not the one undone, stays final.
 */
export const REOPEN_TRANSITION = { from: 'completed', to: 'waiting_review' } as const satisfies { from: TaskState; to: TaskState };

/** Refuses a reopen unless the task is completed by exactly the commit being undone. */
export function assertTaskReopen(task: { id: string; state: TaskState; commit: string | null }, commit: string): void {
  if (task.state !== REOPEN_TRANSITION.from) {
    throw new WaypointError('illegal_transition', `Task ${task.id} is ${task.state}; only a completed task is reopened by undoing its review commit.`, {
      taskId: task.id,
      from: task.state,
      to: REOPEN_TRANSITION.to,
      action: 'reopen it',
    });
  }
  if (task.commit === null || task.commit !== commit) {
    throw new WaypointError(
      'illegal_transition',
      task.commit === null
        ? `Task ${task.id} was completed without a commit; there is no commit to undo, and completed is final.`
        : `Task ${task.id} was completed by commit ${task.commit.slice(0, 10)}, not ${commit.slice(0, 10)}; only undoing its own commit reopens it.`,
      { taskId: task.id, from: task.state, to: REOPEN_TRANSITION.to, action: 'reopen it', commit: task.commit },
    );
  }
}

/** The action names surfaces use, so refusals can name the attempted move. */
export function canTransition(from: TaskState, to: TaskState): boolean {
  return TASK_TRANSITIONS[from].includes(to);
}

export function assertTaskTransition(taskId: string, from: TaskState, to: TaskState, action: string): void {
  if (!canTransition(from, to)) {
    const allowed = TASK_TRANSITIONS[from];
    throw new WaypointError(
      'illegal_transition',
      `Task ${taskId} is ${from}; cannot ${action} (${from} → ${to}). ` +
        (allowed.length ? `From ${from} a task may go to: ${allowed.join(', ')}.` : `${from} is final.`),
      { taskId, from, to, action },
    );
  }
}

/** Task states in which steps and side effects may be recorded. */
export const ACTIVE_TASK_STATES: readonly TaskState[] = ['pending', 'planning', 'running', 'waiting_tool'];
export const FINAL_TASK_STATES: readonly TaskState[] = ['completed', 'abandoned'];
/** States a person can resume from (`failed` only when its failure was recoverable is decided by the caller). */
export const RESUMABLE_TASK_STATES: readonly TaskState[] = ['interrupted', 'suspended', 'failed'];

export const STEP_TRANSITIONS: Readonly<Record<StepStatus, readonly StepStatus[]>> = {
  pending: ['in_progress', 'skipped', 'abandoned'],
  // in_progress → in_progress is a new attempt after an interruption.
  in_progress: ['in_progress', 'completed', 'failed', 'abandoned'],
  // A recoverable failure is retried by starting the step again.
  failed: ['in_progress', 'skipped', 'abandoned'],
  // Rolling back past a completed step abandons it; a later run re-plans it.
  completed: ['abandoned'],
  skipped: ['abandoned', 'in_progress'],
  abandoned: ['in_progress'],
};

export function assertStepTransition(taskId: string, stepId: string, from: StepStatus, to: StepStatus, action: string): void {
  if (!STEP_TRANSITIONS[from].includes(to)) {
    throw new WaypointError(
      'illegal_transition',
      `Step ${stepId} of task ${taskId} is ${from}; cannot ${action} (${from} → ${to}).`,
      { taskId, stepId, from, to, action },
    );
  }
}
