import { parseInput } from '../../core/model/validate';
import type { HookEnvelope, HookEvent } from '../events';
import { ClaudeHookInput, claudeCodeAdapter, claudeToolCall } from './claudeCode';
import { TodoList, argsOf, num, str, todosFrom } from './common';

/**
 * Qwen Code (https://qwenlm.github.io/qwen-code-docs/): Claude Code-shaped hooks in
 * `.qwen/settings.json`, one JSON object on stdin with `session_id`, `transcript_path`,
 * `cwd`, `hook_event_name` (and `prompt_id`, `tool_use_id`). What the real binary sends
 * (0.24.4, test/fixtures/hooks-real/qwen-code), and where it differs from Claude Code:
 *
 * - `UserPromptSubmit` comes again before every follow-up model request of a turn, with an
 *   empty `prompt`, the same `prompt_id` and no `submitted_prompt`; only the first one
 *   (the person's words, also in `submitted_prompt`) starts a turn, the rest are ignored.
 * - Its own tool names: `edit`, `write_file`, `notebook_edit`, `run_shell_command`, and
 *   `todo_write` (`{todos: [{id, content, status}]}`, the whole list each time, as Claude
 *   Code's TodoWrite) — off by default in 0.24.4, on with `tools.todoWrite.enabled`.
 * - `tool_response` is `{llmContent, returnDisplay}`; a shell command's exit code is only in
 *   the text (`Exit Code: 0`). A failed call comes as PostToolUseFailure with `error`.
 * - `-p` runs end with Stop and no SessionEnd; `--resume <id>` starts with SessionStart
 *   `source: "resume"`. TodoCreated/TodoCompleted repeat what todo_write says (twice each:
 *   validation and postWrite phases), so they are not registered.
 */
export const QWEN_TOOLS = { edit: ['edit', 'write_file', 'notebook_edit'], shell: ['run_shell_command'], todo: ['todo_write'] } as const;

export function qwenCodeAdapter(raw: unknown): HookEnvelope {
  const p = parseInput(ClaudeHookInput, raw, 'Qwen Code hook input');
  const envelope = { sessionId: p.session_id, cwd: p.cwd, transcriptPath: p.transcript_path };
  const call = () => {
    const c = claudeToolCall(p.tool_name ?? 'unknown', p.tool_input, p.tool_use_id, QWEN_TOOLS);
    if (c.kind === 'todo') {
      const list = TodoList.safeParse(p.tool_input?.todos);
      c.todos = list.success ? todosFrom(list.data) : [];
    }
    return c;
  };
  const event = ((): HookEvent | undefined => {
    switch (p.hook_event_name) {
      case 'UserPromptSubmit':
        // The repeat before a follow-up request of the same turn: no words, not a new turn.
        return p.prompt ? { type: 'prompt', prompt: p.prompt } : { type: 'ignored', name: 'UserPromptSubmit (follow-up request)' };
      case 'PreToolUse':
        return p.tool_name ? { type: 'tool_before', call: call() } : undefined;
      case 'PostToolUse': {
        if (!p.tool_name) return undefined;
        const r = argsOf(p.tool_response) ?? {};
        const text = str(r.llmContent);
        const exit = text ? /^Exit Code: (-?\d+)$/m.exec(text) : null;
        const exitCode = num(r.exit_code) ?? (exit ? Number(exit[1]) : undefined);
        return { type: 'tool_after', call: call(), ok: true, exitCode, stdout: text };
      }
      case 'PostToolUseFailure':
        return p.tool_name ? { type: 'tool_after', call: call(), ok: false, error: str(p.error)?.slice(0, 10_000) ?? `${p.tool_name} failed` } : undefined;
      default:
        return undefined;
    }
  })();
  // Every other event (SessionStart, Stop, StopFailure, PreCompact, SessionEnd) has Claude Code's shape.
  return event ? { ...envelope, event } : claudeCodeAdapter(raw);
}
