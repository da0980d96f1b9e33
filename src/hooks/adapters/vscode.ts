import { z } from 'zod';
import { WaypointError } from '../../core/model/errors';
import { parseInput } from '../../core/model/validate';
import type { HookEnvelope, ToolCall } from '../events';
import { PathText, TodoList, argsOf, filesIn, filesInPatch, kindOf, str, todosFrom } from './common';
import { changesTodos } from '../sqlTodos';
import { claudeShapedEvent } from './claudeShape';

/**
 * VS Code agent hooks, Preview (https://code.visualstudio.com/docs/agent-customization/hooks,
 * reference https://code.visualstudio.com/docs/agents/reference/hooks-reference): files in
 * `.github/hooks/*.json`, `{hooks: {PreToolUse: [{type: 'command', command}]}}`. Every
 * input has `timestamp`, `cwd`, `sessionId`, `hookEventName`, `transcript_path`; tool
 * events add `tool_name`, `tool_input`, `tool_use_id` (and `tool_response` after).
 * PostToolUse fires only on success. Exit 2 blocks, so `waypoint hook vscode` exits 0.
 *
 * GitHub Copilot CLI reads the same `.github/hooks` files and, for PascalCase event
 * names, sends "VS Code compatible" payloads (`session_id`, `hook_event_name`,
 * `tool_result`): copilotCliAdapter below.
 */
export const VSCODE_TOOLS = {
  edit: ['editFiles', 'create_file', 'replace_string_in_file', 'multi_replace_string_in_file', 'insert_edit_into_file', 'apply_patch', 'edit_notebook_file', 'create_directory'],
  shell: ['run_in_terminal'],
  todo: ['manage_todo_list'],
} as const;

const VsCodeHookInput = z.looseObject({
  sessionId: z.string().min(1).max(200).optional(),
  session_id: z.string().min(1).max(200).optional(),
  hookEventName: z.string().min(1).max(100).optional(),
  hook_event_name: z.string().min(1).max(100).optional(),
  cwd: PathText.optional(),
  transcript_path: PathText.nullable().optional(),
  source: z.string().max(100).optional(),
  prompt: z.string().max(1_000_000).optional(),
  tool_name: z.string().max(200).optional(),
  tool_input: z.unknown().optional(),
  tool_use_id: z.string().max(200).optional(),
  tool_response: z.unknown().optional(),
});

function vscodeCall(name: string, rawInput: unknown, id: string | undefined): ToolCall {
  const input = argsOf(rawInput);
  const kind = kindOf(name, VSCODE_TOOLS);
  const call: ToolCall = { id: id ?? null, name, kind };
  if (kind === 'edit') {
    const files = filesIn(input);
    const replacements = Array.isArray(input?.replacements) ? input.replacements.flatMap((r) => filesIn(argsOf(r))) : [];
    const patch = name === 'apply_patch' ? filesInPatch(str(input?.input) ?? str(input?.patch)) : [];
    call.files = [...new Set([...files, ...replacements, ...patch])];
  }
  if (kind === 'shell') call.command = str(input?.command) ?? '';
  if (kind === 'todo') {
    const list = TodoList.safeParse(input?.todoList ?? input?.todos);
    call.todos = list.success ? todosFrom(list.data) : [];
  }
  return call;
}

export function vscodeAdapter(raw: unknown): HookEnvelope {
  const p = parseInput(VsCodeHookInput, raw, 'VS Code hook input');
  const sessionId = p.sessionId ?? p.session_id;
  const name = p.hookEventName ?? p.hook_event_name;
  if (!sessionId || !name) throw new WaypointError('invalid_input', 'Invalid VS Code hook input: it names no session (sessionId) or no event (hookEventName).');
  const event = claudeShapedEvent(name, p, {
    call: () => vscodeCall(p.tool_name ?? 'unknown', p.tool_input, p.tool_use_id),
    source: () => 'startup',
    // PostToolUse fires only on success; VS Code sends no PostToolUseFailure.
    outcome: () => ({ ok: true, stdout: str(p.tool_response) }),
    failure: () => `${p.tool_name} failed`,
  });
  return { sessionId, cwd: p.cwd, transcriptPath: p.transcript_path ?? undefined, event };
}

/**
 * GitHub Copilot CLI (https://docs.github.com/en/copilot/reference/copilot-cli-reference/cli-hooks-reference):
 * `.github/hooks/*.json` with `version: 1` and `bash`/`powershell` commands. Configured
 * with PascalCase event names its payloads carry `hook_event_name` and `session_id`
 * (the camelCase form names no event, so it cannot be told apart: connect writes
 * PascalCase). No call ids. Hook failures never block the agent; PreToolUse output could.
 *
 * What the real binary sends (1.0.102, test/fixtures/hooks-real/copilot-cli): in the
 * PascalCase form tools get Claude Code's names — `bash` arrives as `Bash`, a freeform
 * `apply_patch` as `Edit` whose `tool_input` is the raw patch text (paths relative to `cwd`);
 * `sql` keeps its name. The plan is the session's `todos` table, written by the model through
 * `sql` (sqlTodos.ts replays that SQL). SessionStart says `source: "new"` or `"resume"`;
 * every `-p` run ends with Stop then SessionEnd (`reason: "complete"`).
 */
export const COPILOT_CLI_TOOLS = { edit: ['create', 'edit', 'apply_patch', 'Edit', 'Create', 'Write'], shell: ['bash', 'powershell', 'Bash', 'PowerShell'], todo: ['sql'] } as const;

const CopilotCliHookInput = z.looseObject({
  session_id: z.string().min(1).max(200).optional(),
  sessionId: z.string().min(1).max(200).optional(),
  hook_event_name: z.string().min(1).max(100).optional(),
  cwd: PathText.optional(),
  transcript_path: PathText.optional(),
  source: z.string().max(100).optional(),
  reason: z.string().max(200).optional(),
  prompt: z.string().max(1_000_000).optional(),
  initial_prompt: z.string().max(1_000_000).optional(),
  tool_name: z.string().max(200).optional(),
  tool_input: z.unknown().optional(),
  tool_result: z.looseObject({ result_type: z.string().max(40).optional(), text_result_for_llm: z.string().optional() }).optional(),
  error: z.unknown().optional(),
});

function copilotCall(name: string, rawInput: unknown): ToolCall {
  const input = argsOf(rawInput);
  let kind = kindOf(name, COPILOT_CLI_TOOLS);
  // `sql` is its plan tool only when it changes the todos table; any other query is an ordinary tool call.
  const query = name === 'sql' ? str(input?.query) : undefined;
  if (name === 'sql' && !(query && changesTodos(query))) kind = 'other';
  const call: ToolCall = { id: null, name, kind };
  // A patch arrives as its raw text (apply_patch is freeform); it names its files relative to cwd.
  if (kind === 'edit') call.files = typeof rawInput === 'string' && !input ? filesInPatch(rawInput) : name === 'apply_patch' ? filesInPatch(str(input?.input) ?? str(input?.patch)) : filesIn(input);
  if (kind === 'shell') call.command = str(input?.command) ?? '';
  if (kind === 'todo') call.todoSql = query;
  return call;
}

export function copilotCliAdapter(raw: unknown): HookEnvelope {
  const p = parseInput(CopilotCliHookInput, raw, 'Copilot CLI hook input');
  const sessionId = p.session_id ?? p.sessionId;
  if (!sessionId) throw new WaypointError('invalid_input', 'Invalid Copilot CLI hook input: it names no session (session_id).');
  if (!p.hook_event_name) {
    throw new WaypointError('invalid_input', 'Invalid Copilot CLI hook input: it names no event (hook_event_name). Configure the hooks with PascalCase event names (SessionStart, PreToolUse…), as `waypoint connect copilot-cli` does.');
  }
  const event = claudeShapedEvent(p.hook_event_name, p, {
    call: () => copilotCall(p.tool_name ?? 'unknown', p.tool_input),
    source: (s) => (s === 'resume' ? 'resume' : 'startup'),
    outcome: () => {
      const type = p.tool_result?.result_type ?? 'success';
      return { ok: type === 'success', error: type === 'success' ? undefined : `${type}: ${p.tool_result?.text_result_for_llm ?? ''}`.slice(0, 10_000), stdout: p.tool_result?.text_result_for_llm };
    },
    failure: () => (typeof p.error === 'string' ? p.error : 'the tool failed'),
  });
  return { sessionId, cwd: p.cwd, transcriptPath: p.transcript_path, event };
}
