import type { Engine } from '../core/engine/engine';
import { ACTIVE_TASK_STATES } from '../core/model/stateMachine';

/**
 * Engine operations the MCP layer needs that src/core does not have yet. Each one
 * appends events only through `engine.store.commit`, with the same keys and event
 * shapes the engine itself uses, so it can move into Engine unchanged.
 *
 * FOR THE LEAD: `interruptTask` belongs in Engine (inside its serialized runner).
 * Here it runs outside that runner: it reads and commits synchronously (no await
 * in between), so it cannot interleave with another synchronous commit, but an
 * engine mutation that validated before it and commits after an await (e.g. a
 * startStep waiting on a snapshot) could land on the now-interrupted task. The
 * hook handler serializes its own calls, so only concurrent MCP calls on the same
 * task in the same owner could race with it.
 */
export async function interruptTask(engine: Engine, taskId: string, reason: string): Promise<boolean> {
  const task = engine.queries.task(taskId);
  if (!ACTIVE_TASK_STATES.includes(task.state)) return false;
  // The sweep's key for this attempt: a sweep and this call cannot both interrupt it.
  const key = `task.interrupt:${task.id}:${task.attempt}`;
  if (engine.queries.idempotent(key)) return false;
  const inDoubt = engine.queries.sideEffects(task.id).some((e) => e.status === 'intent');
  const step = engine.queries.steps(task.id).find((s) => s.status === 'in_progress') ?? null;
  const { durable } = engine.store.commit([
    {
      type: 'task.interrupted',
      taskId: task.id,
      corr: task.correlationId,
      by: null,
      key,
      op: 'task.interrupt',
      result: null,
      data: { reason, class: inDoubt ? 'inconsistent_state' : 'recoverable', stepId: step?.id ?? null },
    },
  ]);
  await durable;
  return true;
}
