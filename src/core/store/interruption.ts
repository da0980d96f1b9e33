import type { EventDataOf, EventType, Task } from '../model/schema';
import type { NewEvent } from './eventLog';
import type { Queries } from './queries';

/** Builds one event of a task: the engine's EngineCore.ev, or the team store's sweep its own. */
export type TaskEventBuilder = <T extends EventType>(type: T, task: Task, by: string | null, data: EventDataOf<T>, key: string) => NewEvent;

/**
 * Why a task whose lease ran out stopped, in the one wording the timeline and the resume
 * picker read back (extension/labelText.ts): the engine's sweep and the team store's
 * store-wide sweep (store/postgres/leaseSweeper.ts) both say it so.
 */
export function leaseExpiredReason(owner: string, expiresAt: number, ttlMs: number): string {
  return `lease of ${owner} expired at ${new Date(expiresAt).toISOString()} (no call for ${Math.round(ttlMs / 1000)} s)`;
}

/**
 * A task's interruption: in doubt (inconsistent_state) while a side effect's intent
 * has no outcome, naming the step that was in progress. One definition for an
 * explicit interrupt and for both lease sweeps.
 */
export function interruptedEvent(core: { queries: Queries; ev: TaskEventBuilder }, task: Task, reason: string): NewEvent {
  const inDoubt = core.queries.sideEffects(task.id).some((e) => e.status === 'intent');
  const step = core.queries.steps(task.id).find((s) => s.status === 'in_progress') ?? null;
  return core.ev('task.interrupted', task, null, { reason, class: inDoubt ? 'inconsistent_state' : 'recoverable', stepId: step?.id ?? null }, '');
}
