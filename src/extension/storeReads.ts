import type { EngineApi } from '../core/engine/api';
import type { Engine } from '../core/engine/engine';
import type { CheckpointMeta, SideEffect, Step, Task } from '../core/model/schema';
import type { EngineHost } from './engineHost';

/**
 * The reads the window's surfaces share, in both modes: while this window owns
 * the store they query the in-process engine directly (one query for every step,
 * not one per task: the cost that mattered at 1,000 tasks); while it relays they
 * are two calls to the owner.
 */
export interface TaskListing {
  tasks: Task[];
  stepsByTask: Map<string, Step[]>;
}

export interface TaskDetail {
  task: Task;
  steps: Step[];
  checkpoints: CheckpointMeta[];
  sideEffects: SideEffect[];
}

export async function listTasks(host: EngineHost, filter?: Parameters<Engine['tasks']>[0]): Promise<TaskListing> {
  const api = await host.api();
  const engine = host.current;
  const [tasks, steps] = engine ? [engine.tasks(filter), engine.queries.allSteps()] : await Promise.all([api.tasks(filter).then((ts) => ts.map(stripProgress)), api.allSteps()]);
  const stepsByTask = new Map<string, Step[]>();
  for (const s of steps) {
    const list = stepsByTask.get(s.taskId);
    if (list) list.push(s);
    else stepsByTask.set(s.taskId, [s]);
  }
  return { tasks, stepsByTask };
}

/** One task with its steps, checkpoints and side effects; rejects with `not_found` for an unknown id. */
export async function taskDetail(host: EngineHost, taskId: string): Promise<TaskDetail> {
  const engine = host.current;
  if (engine) return engine.taskDetail(taskId);
  return (await host.api()).taskDetail(taskId);
}

/** Tasks only (no steps), for the status bar, alerts and pickers' filters. */
export async function tasksOnly(host: EngineHost, filter?: Parameters<Engine['tasks']>[0]): Promise<Task[]> {
  const engine = host.current;
  if (engine) return engine.tasks(filter);
  return (await (await host.api()).tasks(filter)).map(stripProgress);
}

function stripProgress(t: Awaited<ReturnType<EngineApi['tasks']>>[number]): Task {
  const { progress: _progress, ...task } = t;
  return task;
}
