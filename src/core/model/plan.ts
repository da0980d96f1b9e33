import { WaypointError } from './errors';
import { MAX_PLAN_STEPS, type PlanItem, type StepStatus } from './schema';

/**
 * A plan is a DAG of steps. Refuses duplicate ids, unknown dependencies, self
 * dependencies and cycles, naming the offending steps. `existing` are steps already
 * in the task when a plan is extended: new steps may depend on them.
 */
export function validatePlan(items: readonly PlanItem[], existing: readonly { id: string; dependsOn: readonly string[] }[] = []): void {
  if (existing.length + items.length > MAX_PLAN_STEPS) {
    throw new WaypointError(
      'limit',
      `A task's plan may hold at most ${MAX_PLAN_STEPS} steps; this task has ${existing.length} and the call adds ${items.length}. Nothing was changed. Group work into fewer, larger steps, or start a new task.`,
      { limit: 'plan_steps', max: MAX_PLAN_STEPS, existing: existing.length, adding: items.length },
    );
  }
  const ids = new Set(existing.map((s) => s.id));
  for (const item of items) {
    if (ids.has(item.id)) {
      throw new WaypointError('invalid_input', `Plan step id '${item.id}' is used twice.`, { stepId: item.id });
    }
    ids.add(item.id);
  }
  const deps = new Map<string, readonly string[]>();
  for (const s of existing) deps.set(s.id, s.dependsOn);
  for (const item of items) {
    for (const d of item.dependsOn ?? []) {
      if (d === item.id) {
        throw new WaypointError('invalid_input', `Plan step '${item.id}' depends on itself.`, { stepId: item.id });
      }
      if (!ids.has(d)) {
        throw new WaypointError('invalid_input', `Plan step '${item.id}' depends on unknown step '${d}'.`, { stepId: item.id, dependsOn: d });
      }
    }
    deps.set(item.id, item.dependsOn ?? []);
  }
  const cycle = findCycle(deps);
  if (cycle) {
    throw new WaypointError('invalid_input', `Plan has a dependency cycle: ${cycle.join(' → ')}.`, { cycle });
  }
}

/** Iterative DFS (plans may be long; no recursion limit). Returns one cycle, or null. */
function findCycle(deps: ReadonlyMap<string, readonly string[]>): string[] | null {
  const color = new Map<string, 0 | 1 | 2>(); // 0 new, 1 on stack, 2 done
  for (const start of deps.keys()) {
    if (color.get(start)) continue;
    const stack: { id: string; i: number }[] = [{ id: start, i: 0 }];
    const path: string[] = [start];
    color.set(start, 1);
    while (stack.length) {
      const top = stack[stack.length - 1];
      const next = (deps.get(top.id) ?? [])[top.i++];
      if (next === undefined) {
        color.set(top.id, 2);
        stack.pop();
        path.pop();
        continue;
      }
      const c = color.get(next) ?? 0;
      if (c === 1) return [...path.slice(path.indexOf(next)), next];
      if (c === 0) {
        color.set(next, 1);
        stack.push({ id: next, i: 0 });
        path.push(next);
      }
    }
  }
  return null;
}

/**
 * Steps that can run now, in plan order: pending ones, ones a rollback abandoned
 * (their work was undone), and recoverably failed ones — whose dependencies are all
 * completed or skipped.
 */
export function nextReadySteps<S extends { id: string; dependsOn: readonly string[]; status: StepStatus; order: number; error?: { recoverable: boolean } | null }>(
  steps: readonly S[],
): S[] {
  const done = new Set(steps.filter((s) => s.status === 'completed' || s.status === 'skipped').map((s) => s.id));
  return steps
    .filter((s) => s.status === 'pending' || s.status === 'abandoned' || (s.status === 'failed' && s.error?.recoverable === true))
    .filter((s) => s.dependsOn.every((d) => done.has(d)))
    .sort((a, b) => a.order - b.order);
}
