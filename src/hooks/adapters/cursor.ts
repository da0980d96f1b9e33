import { z } from 'zod';
import { parseInput } from '../../core/model/validate';
import type { HookEnvelope, HookEvent, ToolCall } from '../events';
import { Id, PathText, TodoList, argsOf, filesIn, kindOf, str, todosFrom } from './common';

/**
 * Cursor (https://cursor.com/docs/agent/hooks): `.cursor/hooks.json`,
 * `{version: 1, hooks: {beforeShellExecution: [{command}]}}`. Every input has
 * `conversation_id`, `generation_id`, `hook_event_name`, `workspace_roots`. Shell calls
 * come as beforeShellExecution/afterShellExecution (`command`, `cwd`, `output`), edits
 * only after the fact (afterFileEdit: `file_path`, `edits`), the answer as
 * afterAgentResponse (`text`), the end of the loop as stop (`status`). Newer builds
 * also send preToolUse/postToolUse with `tool_name`, `tool_input`, `tool_use_id`, which
 * are understood too (TodoWrite's `todos` becomes the plan). Cursor reads JSON from
 * stdout for every hook, so `waypoint hook cursor` prints `{}` (no decision).
 */
export const CURSOR_TOOLS = { edit: ['Write', 'Edit', 'StrReplace', 'MultiEdit', 'Delete', 'edit_file', 'search_replace'], shell: ['Shell', 'run_terminal_cmd'], todo: ['TodoWrite', 'todo_write'] } as const;

const CursorHookInput = z.looseObject({
  conversation_id: Id,
  generation_id: z.string().max(200).optional(),
  hook_event_name: z.string().min(1).max(100),
  workspace_roots: z.array(PathText).max(100).optional(),
  cwd: PathText.optional(),
  prompt: z.string().max(1_000_000).optional(),
  command: z.string().max(1_000_000).optional(),
  output: z.string().optional(),
  file_path: PathText.optional(),
  text: z.string().max(1_000_000).optional(),
  status: z.string().max(40).optional(),
  tool_name: z.string().max(200).optional(),
  tool_input: z.unknown().optional(),
  tool_use_id: z.string().max(200).optional(),
  transcript_path: PathText.nullable().optional(),
  reason: z.string().max(200).optional(),
});

function toolCall(p: z.infer<typeof CursorHookInput>): ToolCall {
  const name = p.tool_name ?? 'unknown';
  const input = argsOf(p.tool_input);
  const kind = kindOf(name, CURSOR_TOOLS);
  const call: ToolCall = { id: p.tool_use_id ?? null, name, kind };
  if (kind === 'edit') call.files = filesIn(input);
  if (kind === 'shell') call.command = str(input?.command) ?? '';
  if (kind === 'todo') {
    const list = TodoList.safeParse(input?.todos);
    call.todos = list.success ? todosFrom(list.data) : [];
  }
  return call;
}

export function cursorAdapter(raw: unknown): HookEnvelope {
  const p = parseInput(CursorHookInput, raw, 'Cursor hook input');
  const shell = (): ToolCall => ({ id: null, name: 'shell', kind: 'shell', command: p.command ?? '' });
  let event: HookEvent;
  switch (p.hook_event_name) {
    case 'sessionStart':
      event = { type: 'session_start', source: 'startup' };
      break;
    case 'beforeSubmitPrompt':
      event = { type: 'prompt', prompt: p.prompt ?? '' };
      break;
    case 'beforeShellExecution':
      event = { type: 'tool_before', call: shell() };
      break;
    case 'afterShellExecution':
      event = { type: 'tool_after', call: shell(), ok: true, stdout: p.output };
      break;
    case 'afterFileEdit':
      // No before hook for edits: the change is credited when Cursor reports it.
      event = { type: 'tool_after', call: { id: null, name: 'edit', kind: 'edit', files: p.file_path ? [p.file_path] : [] }, ok: true };
      break;
    case 'preToolUse':
      event = p.tool_name ? { type: 'tool_before', call: toolCall(p) } : { type: 'ignored', name: p.hook_event_name };
      break;
    case 'postToolUse':
      event = p.tool_name ? { type: 'tool_after', call: toolCall(p), ok: true } : { type: 'ignored', name: p.hook_event_name };
      break;
    case 'afterAgentResponse':
      event = p.text ? { type: 'agent_message', text: p.text } : { type: 'ignored', name: p.hook_event_name };
      break;
    case 'stop':
      event = { type: 'stop' };
      break;
    case 'preCompact':
      event = { type: 'compaction' };
      break;
    case 'sessionEnd':
      event = { type: 'session_end', reason: p.reason };
      break;
    default:
      event = { type: 'ignored', name: p.hook_event_name };
  }
  return { sessionId: p.conversation_id, cwd: p.cwd ?? p.workspace_roots?.[0], transcriptPath: p.transcript_path ?? undefined, event };
}
