import { z } from 'zod';
import { parseInput } from '../../core/model/validate';
import type { HookEnvelope, HookEvent, ToolCall } from '../events';
import { Id, PathText, argsOf, filesIn, kindOf, str } from './common';

/**
 * Cline (https://docs.cline.bot/features/hooks/hook-reference): each hook is an
 * executable named after its event in `.clinerules/hooks/`. Every input has
 * `clineVersion`, `hookName`, `timestamp`, `taskId`, `workspaceRoots`, `userId`, and
 * the event's data under its camelCase name (`preToolUse: {toolName, parameters}`,
 * `postToolUse: {…, result, success}`, `userPromptSubmit: {prompt}`,
 * `taskStart: {taskMetadata: {initialTask}}`…). A Cline task is the session. Cline
 * reads a JSON answer from stdout, so `waypoint hook cline` prints `{"cancel":false}`.
 * Cline keeps its plan in the task's focus chain, which no hook reports: no plan from it.
 */
export const CLINE_TOOLS = { edit: ['write_to_file', 'replace_in_file', 'new_rule'], shell: ['execute_command'], todo: [] as string[] } as const;

const Tool = z.looseObject({ toolName: z.string().min(1).max(200), parameters: z.unknown().optional(), result: z.unknown().optional(), success: z.boolean().optional() });
const ClineHookInput = z.looseObject({
  hookName: z.string().min(1).max(100),
  taskId: Id,
  workspaceRoots: z.array(PathText).max(100).optional(),
  preToolUse: Tool.optional(),
  postToolUse: Tool.optional(),
  userPromptSubmit: z.looseObject({ prompt: z.string().max(1_000_000).optional() }).optional(),
  taskStart: z.looseObject({ taskMetadata: z.looseObject({ initialTask: z.string().max(1_000_000).optional() }).optional() }).optional(),
});

function clineCall(t: z.infer<typeof Tool>): ToolCall {
  const input = argsOf(t.parameters);
  const kind = kindOf(t.toolName, CLINE_TOOLS);
  const call: ToolCall = { id: null, name: t.toolName, kind };
  if (kind === 'edit') call.files = filesIn(input);
  if (kind === 'shell') call.command = str(input?.command) ?? '';
  return call;
}

export function clineAdapter(raw: unknown): HookEnvelope {
  const p = parseInput(ClineHookInput, raw, 'Cline hook input');
  let event: HookEvent;
  switch (p.hookName) {
    case 'TaskStart':
      // The task's first message comes with its start, not as a UserPromptSubmit.
      event = { type: 'prompt', prompt: p.taskStart?.taskMetadata?.initialTask ?? '' };
      break;
    case 'TaskResume':
      event = { type: 'session_start', source: 'resume' };
      break;
    case 'UserPromptSubmit':
      event = { type: 'prompt', prompt: p.userPromptSubmit?.prompt ?? '' };
      break;
    case 'PreToolUse':
      event = p.preToolUse ? { type: 'tool_before', call: clineCall(p.preToolUse) } : { type: 'ignored', name: p.hookName };
      break;
    case 'PostToolUse': {
      const t = p.postToolUse;
      event = t ? { type: 'tool_after', call: clineCall(t), ok: t.success !== false, error: t.success === false ? str(t.result) ?? 'the tool failed' : undefined, stdout: str(t.result) } : { type: 'ignored', name: p.hookName };
      break;
    }
    case 'TaskComplete':
      event = { type: 'stop' };
      break;
    case 'TaskCancel':
      event = { type: 'session_end', reason: 'cancelled' };
      break;
    case 'PreCompact':
      event = { type: 'compaction' };
      break;
    default:
      event = { type: 'ignored', name: p.hookName };
  }
  return { sessionId: p.taskId, cwd: p.workspaceRoots?.[0], event };
}
