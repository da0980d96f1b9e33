import type { Engine } from '../core/engine/engine';
import type { CheckpointMeta, SideEffect, Step, Task } from '../core/model/schema';
import type { EngineHost } from './engineHost';

/**
 * The reads the window's surfaces share, in both modes, through the one engine API
 * (the operation table, with ownership checked): in-process while this window owns the
 * store, the owner's /rpc while it relays.
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
  const { tasks, steps } = await (await host.api()).taskListing(filter);
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
  return (await host.api()).taskDetail(taskId);
}

/** Tasks only (no steps), for the status bar, alerts and pickers' filters. */
export async function tasksOnly(host: EngineHost, filter?: Parameters<Engine['tasks']>[0]): Promise<Task[]> {
  return (await (await host.api()).taskListing(filter)).tasks;
}
