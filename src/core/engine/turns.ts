import { createHash } from 'node:crypto';
import { z } from 'zod';
import { isActive } from '../model/taskStates';
import { WaypointError } from '../model/errors';
import { LeaseOwner, type Turn } from '../model/schema';
import type { EngineCore } from './engineCore';
import { TaskId } from './inputs';

/**
 * Conversation turns of a hook-recorded agent: each turn's bounded digest, kept with
 * the step it worked in and given back in the resume context. Digests only — never
 * whole transcripts: the bounds below are the contract.
 */
const Count = z.number().int().min(0).max(1_000_000);
export const RecordTurnInput = z.strictObject({
  taskId: TaskId,
  turn: z.number().int().min(1).max(1_000_000),
  sessionId: z.string().min(1, 'must not be empty').max(200),
  stepId: z.string().min(1).max(128).nullable().optional(),
  prompt: z.string().max(4000, 'must be at most 4000 characters (a digest, not the transcript)'),
  lastMessage: z.string().max(4000, 'must be at most 4000 characters (a digest, not the transcript)').nullable().optional(),
  tools: z.strictObject({ edit: Count, shell: Count, todo: Count, other: Count }),
  compactions: Count,
  startedAt: z.number().int().min(0).max(8.64e15),
  owner: LeaseOwner.optional(),
});
export type RecordTurnInput = z.output<typeof RecordTurnInput>;

export async function recordTurn(core: EngineCore, input: RecordTurnInput): Promise<{ taskId: string; turn: number; recorded: boolean }> {
  const data = {
    turn: input.turn,
    sessionId: input.sessionId,
    stepId: input.stepId ?? null,
    prompt: input.prompt,
    lastMessage: input.lastMessage ?? null,
    tools: input.tools,
    compactions: input.compactions,
    startedAt: input.startedAt,
  };
  // The key names the digest, so a hook delivered twice appends nothing and a corrected digest appends once.
  const digest = createHash('sha256').update(JSON.stringify(data)).digest('hex').slice(0, 16);
  const key = `turn:${input.taskId}:${data.sessionId}:${data.turn}:${digest}`.slice(0, 256);
  return core.run<{ taskId: string; turn: number; recorded: boolean }>('turn.record', key, () => {
    const task = core.requireTask(input.taskId);
    if (!isActive(task)) throw new WaypointError('illegal_transition', `Task ${task.id} is ${task.state}; a turn is recorded while the task runs.`, { taskId: task.id, state: task.state });
    if (data.stepId && !core.queries.step(task.id, data.stepId)) throw new WaypointError('not_found', `Task ${task.id} has no step '${data.stepId}'.`);
    const same = core.queries.turns(task.id).find((t) => t.sessionId === data.sessionId && t.turn === data.turn);
    if (same && sameDigest(same, data)) return { result: { taskId: task.id, turn: data.turn, recorded: false } };
    const owner = input.owner?.id ?? null;
    return { result: { taskId: task.id, turn: data.turn, recorded: true }, events: [core.ev('turn.recorded', task, owner, data, key)] };
  });
}

function sameDigest(t: Turn, d: { stepId: string | null; prompt: string; lastMessage: string | null; tools: Turn['tools']; compactions: number; startedAt: number }): boolean {
  return t.stepId === d.stepId && t.prompt === d.prompt && t.lastMessage === d.lastMessage && JSON.stringify(t.tools) === JSON.stringify(d.tools) && t.compactions === d.compactions && t.startedAt === d.startedAt;
}
