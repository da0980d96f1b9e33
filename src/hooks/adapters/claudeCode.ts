import { z } from 'zod';
import { parseInput } from '../../core/model/validate';
import type { HookEnvelope, HookEvent, ToolCall } from '../events';
import { Args, Id, PathText, TodoList, filesIn, kindOf, num, str, todosFrom } from './common';

/**
 * Claude Code (https://code.claude.com/docs/en/hooks): one JSON object on stdin with
 * `session_id`, `transcript_path`, `cwd`, `hook_event_name` and the event's fields.
 * Exit 2 would block the tool call or the prompt, so `waypoint hook` always exits 0.
 * VS Code's Claude harness sends the same payloads.
 */
export const CLAUDE_TOOLS = { edit: ['Edit', 'MultiEdit', 'Write', 'NotebookEdit'], shell: ['Bash'], todo: ['TodoWrite'] } as const;

export const ClaudeHookInput = z.looseObject({
  session_id: Id,
  hook_event_name: z.string().min(1).max(100),
  cwd: PathText.optional(),
  transcript_path: PathText.optional(),
  source: z.string().max(100).optional(),
  tool_name: z.string().max(200).optional(),
  tool_input: Args.optional(),
  tool_response: z.unknown().optional(),
  tool_use_id: z.string().max(200).optional(),
  prompt: z.string().max(1_000_000).optional(),
  error: z.unknown().optional(),
  reason: z.string().max(200).optional(),
  last_assistant_message: z.string().max(1_000_000).optional(),
});

export function claudeToolCall(name: string, input: Record<string, unknown> | undefined, id: string | undefined, table: { edit: readonly string[]; shell: readonly string[]; todo: readonly string[] } = CLAUDE_TOOLS): ToolCall {
  const kind = kindOf(name, table);
  const call: ToolCall = { id: id ?? null, name, kind };
  if (kind === 'edit') call.files = filesIn(input);
  if (kind === 'shell') call.command = str(input?.command) ?? '';
  if (kind === 'todo') {
    const list = TodoList.safeParse(input?.todos);
    call.todos = list.success ? todosFrom(list.data) : [];
  }
  return call;
}

export function errorText(e: unknown): string | undefined {
  if (typeof e === 'string' && e) return e.slice(0, 10_000);
  if (e && typeof e === 'object') return JSON.stringify(e).slice(0, 10_000);
  return undefined;
}

export function claudeCodeAdapter(raw: unknown): HookEnvelope {
  const p = parseInput(ClaudeHookInput, raw, 'Claude Code hook input');
  return { sessionId: p.session_id, cwd: p.cwd, transcriptPath: p.transcript_path, event: claudeEvent(p) };
}

function claudeEvent(p: z.infer<typeof ClaudeHookInput>): HookEvent {
  const call = () => claudeToolCall(p.tool_name ?? 'unknown', p.tool_input, p.tool_use_id);
  switch (p.hook_event_name) {
    case 'SessionStart':
      return { type: 'session_start', source: p.source === 'startup' || p.source === 'resume' || p.source === 'clear' || p.source === 'compact' ? p.source : 'other' };
    case 'UserPromptSubmit':
      return { type: 'prompt', prompt: p.prompt ?? '' };
    case 'PreToolUse':
      return p.tool_name ? { type: 'tool_before', call: call() } : { type: 'ignored', name: p.hook_event_name };
    case 'PostToolUse': {
      if (!p.tool_name) return { type: 'ignored', name: p.hook_event_name };
      const r = (typeof p.tool_response === 'object' && p.tool_response !== null ? p.tool_response : {}) as Record<string, unknown>;
      const exitCode = num(r.exit_code) ?? num(r.exitCode) ?? num(r.returnCode);
      if (r.interrupted === true) return { type: 'tool_after', call: call(), ok: false, error: 'the command was interrupted', stdout: str(r.stdout), stderr: str(r.stderr) };
      return { type: 'tool_after', call: call(), ok: true, exitCode, stdout: str(r.stdout), stderr: str(r.stderr) };
    }
    case 'PostToolUseFailure':
      return p.tool_name ? { type: 'tool_after', call: call(), ok: false, error: errorText(p.error) ?? `${p.tool_name} failed` } : { type: 'ignored', name: p.hook_event_name };
    case 'Stop':
      return { type: 'stop', lastMessage: p.last_assistant_message };
    case 'PreCompact':
      return { type: 'compaction' };
    case 'SessionEnd':
      return { type: 'session_end', reason: p.reason };
    default:
      return { type: 'ignored', name: p.hook_event_name };
  }
}
