import { z } from 'zod';
import { parseInput } from '../../core/model/validate';
import type { HookEnvelope, HookEvent, ToolCall } from '../events';
import { Id, PathText, TodoList, argsOf, filesIn, kindOf, str, todosFrom } from './common';
import { claudeShapedEvent, sourceAmong } from './claudeShape';

/**
 * Gemini CLI (https://geminicli.com/docs/hooks/reference): hooks in `settings.json`;
 * every input has `session_id`, `transcript_path`, `cwd`, `hook_event_name`,
 * `timestamp`. BeforeAgent carries the prompt, AfterAgent the final answer
 * (`prompt_response`), BeforeTool/AfterTool `tool_name`, `tool_input`, `tool_response`
 * (no call id: before and after are paired by content). Exit 2 blocks; on exit 0
 * stdout must be JSON only, so `waypoint hook gemini-cli` prints `{}`.
 *
 * What the real binary sends (0.61, test/fixtures/hooks-real/gemini-cli): `tool_response`
 * is `{llmContent, returnDisplay}`, for most tools as a JSON string; `write_todos` items are
 * `{description, status}`; SessionEnd comes at the end of every `-p` run (`reason: "exit"`)
 * and `--resume` starts with SessionStart `source: "resume"`. PreCompress `trigger: "auto"`
 * comes before every model request once there is history, whether or not it then
 * compresses (the threshold is checked after the hook), so it says nothing and is not
 * counted; only a `manual` one (`/compress`) is.
 */
export const GEMINI_TOOLS = { edit: ['write_file', 'replace', 'edit'], shell: ['run_shell_command'], todo: ['write_todos'] } as const;

const GeminiHookInput = z.looseObject({
  session_id: Id,
  hook_event_name: z.string().min(1).max(100),
  cwd: PathText.optional(),
  transcript_path: PathText.optional(),
  source: z.string().max(100).optional(),
  reason: z.string().max(200).optional(),
  prompt: z.string().max(1_000_000).optional(),
  prompt_response: z.string().max(1_000_000).optional(),
  tool_name: z.string().max(200).optional(),
  tool_input: z.record(z.string(), z.unknown()).optional(),
  tool_response: z.unknown().optional(),
  trigger: z.string().max(40).optional(),
});

function geminiCall(p: z.infer<typeof GeminiHookInput>): ToolCall {
  const name = p.tool_name ?? 'unknown';
  const kind = kindOf(name, GEMINI_TOOLS);
  const call: ToolCall = { id: null, name, kind };
  if (kind === 'edit') call.files = filesIn(p.tool_input);
  if (kind === 'shell') call.command = str(p.tool_input?.command) ?? '';
  if (kind === 'todo') {
    const list = TodoList.safeParse(p.tool_input?.todos);
    call.todos = list.success ? todosFrom(list.data) : [];
  }
  return call;
}

export function geminiAdapter(raw: unknown): HookEnvelope {
  const p = parseInput(GeminiHookInput, raw, 'Gemini CLI hook input');
  return { sessionId: p.session_id, cwd: p.cwd, transcriptPath: p.transcript_path, event: geminiEvent(p) };
}

/** Gemini CLI's names for the events it shares with the Claude Code-shaped agents; any other name is its own or ignored. */
const SHARED_NAMES: Readonly<Record<string, string>> = { SessionStart: 'SessionStart', BeforeAgent: 'UserPromptSubmit', BeforeTool: 'PreToolUse', AfterTool: 'PostToolUse', AfterAgent: 'Stop', SessionEnd: 'SessionEnd' };

function geminiEvent(p: z.infer<typeof GeminiHookInput>): HookEvent {
  const name = p.hook_event_name;
  if (name === 'PreCompress') return p.trigger === 'auto' ? { type: 'ignored', name } : { type: 'compaction' };
  const shared = Object.hasOwn(SHARED_NAMES, name) ? SHARED_NAMES[name] : undefined;
  if (!shared) return { type: 'ignored', name };
  const event = claudeShapedEvent(shared, p, {
    call: () => geminiCall(p),
    source: (s) => sourceAmong(s, ['startup', 'resume', 'clear']),
    outcome: () => {
      const r = argsOf(p.tool_response) ?? {};
      const error = r.error === undefined || r.error === null ? undefined : typeof r.error === 'string' ? r.error : JSON.stringify(r.error);
      return { ok: !error, error, stdout: str(r.returnDisplay) ?? str(r.llmContent) };
    },
    // Gemini CLI reports a failed tool in AfterTool's response; it has no failure event.
    failure: () => `${p.tool_name} failed`,
    lastMessage: () => p.prompt_response,
  });
  return event.type === 'ignored' ? { type: 'ignored', name } : event;
}
