/**
 * Crash recovery of the operations that write the workspace from a durable plan (a
 * rollback, a fork's restore, a review apply). Each records its plan before any file
 * changes and its outcome after; one whose outcome is missing was cut short. On the
 * next writable open the plan is applied again — it converges, so a half-done write
 * ends whole — and the outcome is recorded as recovered, with a sentence for the
 * person. One routine for every kind, so each finishes its plan the same way: under
 * the runner, temps swept when the replay fails (the next scan would otherwise
 * record them as the person's files), the outcome durable before the next one.
 */
import type { Task } from '../model/schema';
import type { NewEvent } from '../store/eventLog';
import type { EngineCore } from './engineCore';

/** How applying the plan again went. */
export type Replay = { ok: true; written: number; removed: number; conflicts: string[] } | { ok: false; error: string };

export interface InterruptedPlan {
  taskId: string;
  planRef: string;
  /** The events that record the outcome and the person's sentence about it. */
  outcome(replay: Replay, task: Task | null): Promise<{ events: NewEvent[]; note: string }>;
}

/** Finishes each interrupted plan in turn; returns the sentences, one per plan, also logged as warnings. */
export async function finishInterruptedPlans(core: EngineCore, plans: readonly InterruptedPlan[]): Promise<string[]> {
  const ws = core.workspaceSnapshots;
  if (!ws) return [];
  const notes: string[] = [];
  for (const p of plans) {
    await core.exclusive(async () => {
      const task = core.queries.findTask(p.taskId);
      let replay: Replay;
      try {
        const plan = await ws.loadPlan(p.planRef);
        try {
          const applied = await ws.apply(plan);
          replay = { ok: true, written: applied.written.length, removed: applied.removed.length, conflicts: applied.conflicts.map((c) => c.path) };
        } catch (e) {
          await ws.sweepTemps(plan);
          throw e;
        }
      } catch (e) {
        replay = { ok: false, error: (e as Error).message };
      }
      const { events, note } = await p.outcome(replay, task);
      await core.record(events);
      notes.push(note);
      core.log.warn(note, task?.correlationId);
    });
  }
  return notes;
}
