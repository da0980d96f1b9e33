import type { CheckpointMeta } from '../core/model/schema';

/** How each kind of checkpoint is named to a person (no `vscode` import: the timeline's model uses it too). */
export const CHECKPOINT_LABEL: Record<CheckpointMeta['kind'], string> = {
  task_base: 'Start of task',
  step_start: 'Before step',
  step_end: 'After step',
  before_side_effect: 'Before side effect',
  manual: 'Checkpoint',
  auto: 'Auto checkpoint',
  pre_rollback: 'Before rollback',
  periodic: 'Periodic checkpoint',
  tool_start: 'Before tool call',
  tool_end: 'After tool call',
  command_start: 'Before command',
  command_end: 'After command',
};
