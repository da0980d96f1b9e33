import type { EngineApi } from '../../core/engine/operations';
import type { ResumeContext } from '../../core/engine/resumeContext';
import type { LeaseOwner } from '../../core/model/schema';
import type { Delivery } from './deliveries';

/**
 * What a confirmed hand-off does to the task, apart from the editor (plain Node, so it
 * is tested against a real engine). An agent started here (a chat, a terminal) drives
 * the task from now: it is resumed under this window, as a new attempt. A copied
 * prompt is only text on the clipboard — nobody drives the task yet — so the task stays
 * as it was (interrupted, same attempt) and the prompt tells the agent to resume it:
 * its first call does (`waypoint_task_resume`, or a hook-driven session that pastes it).
 */
export async function handOver(engine: Pick<EngineApi, 'resumeTask' | 'resumeContext'>, taskId: string, delivery: Delivery, owner: LeaseOwner): Promise<ResumeContext> {
  if (delivery.how === 'clipboard') return engine.resumeContext(taskId);
  return engine.resumeTask({ taskId, owner });
}
