/**
 * Reopening a task whose review commit was undone: the person took back
 * the commit that completed the task, so the record goes back with it — the task
 * waits for review again, its steps, side effects and checkpoints untouched, and a
 * new review can commit it once more. Its own module (over EngineCore, like
 * rollbacks.ts and reviewApply.ts) so the engine gains one delegating method only.
 */
import { assertTaskReopen, REOPEN_TRANSITION } from '../model/stateMachine';
import type { TaskState } from '../model/schema';
import type { EngineCore } from './engineCore';
import { ReopenTaskInput } from './inputs';

export interface ReopenResult {
  taskId: string;
  state: TaskState;
  /** The undone commit. */
  commit: string;
}

/**
 * Records `task.reopened`, refused (changing nothing) unless the task is completed by
 * exactly `commit`. A repeat after it succeeded answers the same result and appends
 * nothing: the task already waits for review with that commit recorded as undone.
 */
export async function reopenTask(core: EngineCore, input: ReopenTaskInput): Promise<ReopenResult> {
  // Keyed by the completion it takes back (its time), so a later completion by the same commit can be reopened again.
  const pre = core.queries.findTask(input.taskId);
  const key = input.idempotencyKey ?? `task.reopen:${input.taskId}:${input.commit}:${pre?.updatedAt ?? 0}`;
  return core.run('task.reopen', key, () => {
    const task = core.requireTask(input.taskId);
    const result: ReopenResult = { taskId: task.id, state: REOPEN_TRANSITION.to, commit: input.commit };
    if (task.state === REOPEN_TRANSITION.to && task.reopened?.commit === input.commit) return { result };
    assertTaskReopen(task, input.commit);
    const reason = input.reason ?? `the review commit ${input.commit.slice(0, 10)} was undone`;
    core.log.info(`task ${task.id} reopened for review: ${reason}`, task.correlationId);
    return { result, events: [core.ev('task.reopened', task, null, { commit: input.commit, reason }, key)] };
  });
}
