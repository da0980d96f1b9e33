import { z } from 'zod';
import { parseInput } from '../../core/model/validate';
import type { HookEnvelope, HookEvent, ToolCall } from '../events';
import { Id, PathText, TodoList, argsOf, filesIn, filesInPatch, kindOf, num, str, todosFrom } from './common';
import { errorText } from './claudeCode';
import { claudeShapedEvent, sourceAmong } from './claudeShape';

/**
 * Codex (https://developers.openai.com/codex/hooks): hooks in `.codex/hooks.json` (or
 * `[hooks]` in config.toml) in Claude Code's shape — `session_id`, `turn_id`,
 * `transcript_path`, `cwd`, `hook_event_name`, and for tools `tool_name`, `tool_input`,
 * `tool_use_id`, `tool_response`; Stop carries `last_assistant_message`. Exit 2 blocks,
 * so `waypoint hook` exits 0. Edits arrive as `apply_patch` (the patch names its files),
 * the plan as `update_plan` (`plan: [{step, status}]`).
 *
 * What the real binary sends (0.171, test/fixtures/hooks-real/codex): its `exec_command`
 * tool reaches hooks named `Bash` with `{command}`; apply_patch's input is
 * `{command: <patch>}` with paths relative to `cwd`; `tool_response` is a string; every
 * `codex exec` ends with SessionEnd (`reason: "other"`). It runs a project's hooks only
 * once they are trusted.
 */
export const CODEX_TOOLS = { edit: ['apply_patch', 'Edit', 'Write'], shell: ['Bash', 'shell', 'local_shell', 'shell_command', 'exec_command'], todo: ['update_plan'] } as const;

const CodexHookInput = z.looseObject({
  session_id: Id,
  hook_event_name: z.string().min(1).max(100),
  turn_id: z.string().max(200).optional(),
  cwd: PathText.optional(),
  transcript_path: PathText.nullable().optional(),
  source: z.string().max(100).optional(),
  tool_name: z.string().max(200).optional(),
  tool_input: z.unknown().optional(),
  tool_response: z.unknown().optional(),
  tool_use_id: z.string().max(200).optional(),
  prompt: z.string().max(1_000_000).optional(),
  error: z.unknown().optional(),
  reason: z.string().max(200).optional(),
  last_assistant_message: z.string().max(1_000_000).nullable().optional(),
});

function codexCall(p: z.infer<typeof CodexHookInput>): ToolCall {
  const name = p.tool_name ?? 'unknown';
  const input = argsOf(p.tool_input);
  const kind = kindOf(name, CODEX_TOOLS);
  const call: ToolCall = { id: p.tool_use_id ?? null, name, kind };
  if (kind === 'edit') call.files = name === 'apply_patch' ? filesInPatch(str(input?.command) ?? str(input?.patch) ?? str(input?.input) ?? (typeof p.tool_input === 'string' ? p.tool_input : undefined)) : filesIn(input);
  if (kind === 'shell') call.command = Array.isArray(input?.command) ? input.command.map(String).join(' ') : (str(input?.command) ?? '');
  if (kind === 'todo') {
    const list = TodoList.safeParse(input?.plan ?? input?.todos);
    call.todos = list.success ? todosFrom(list.data) : [];
  }
  return call;
}

export function codexAdapter(raw: unknown): HookEnvelope {
  const p = parseInput(CodexHookInput, raw, 'Codex hook input');
  return { sessionId: p.session_id, cwd: p.cwd, transcriptPath: p.transcript_path ?? undefined, event: codexEvent(p) };
}

function codexEvent(p: z.infer<typeof CodexHookInput>): HookEvent {
  return claudeShapedEvent(p.hook_event_name, p, {
    call: () => codexCall(p),
    source: (s) => sourceAmong(s, ['startup', 'resume', 'clear']),
    outcome: () => {
      const r = argsOf(p.tool_response) ?? {};
      return { ok: true, exitCode: num(r.exit_code) ?? num(r.exitCode), stdout: str(r.stdout) ?? str(r.output), stderr: str(r.stderr) };
    },
    failure: () => errorText(p.error) ?? `${p.tool_name} failed`,
    lastMessage: () => p.last_assistant_message ?? undefined,
  });
}
