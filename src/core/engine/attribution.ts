import type { CheckpointMeta } from '../model/schema';

/**
 * Who changed the files between two checkpoints of a task: the rule rollback
 * (`agent-only`) and review (drift) share. An interval belongs to the agent when the
 * checkpoint that ends it was taken inside a step's work (a step's end, a side
 * effect's start, or the end of one of its tool calls); it belongs to the person when
 * it ends at a step's start, a rollback, or the start of a tool call — a
 * hook-recorded agent changes files only through its tools, so what changed between
 * two of its tool calls was changed by someone else.
 */
export function endsAgentInterval(c: Pick<CheckpointMeta, 'stepId' | 'kind'>): boolean {
  return c.stepId !== null && c.kind !== 'step_start' && c.kind !== 'pre_rollback' && c.kind !== 'tool_start';
}

/**
 * Changes since the last checkpoint: the agent's while a step is open — unless the
 * last checkpoint ended one of its tool calls, after which (until the next tool call
 * starts) only someone else can have changed anything.
 */
export function trailingIsAgent(last: Pick<CheckpointMeta, 'kind'> | null, stepOpen: boolean): boolean {
  return stepOpen && last?.kind !== 'tool_end';
}
