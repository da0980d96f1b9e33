import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { z } from 'zod';
import { parseInput } from '../../core/model/validate';
import type { HookEnvelope, HookEvent, ToolCall } from '../events';
import { Id, PathText, argsOf, filesIn, filesInPatch, kindOf, str } from './common';

/**
 * Cline (https://docs.cline.bot/features/hooks/hook-reference): each hook is an
 * executable named after its event in `.clinerules/hooks/`, the event's JSON on stdin,
 * and Cline reads a JSON answer from stdout, so `waypoint hook cline` prints
 * `{"cancel":false}`. The documented input: `hookName`, `taskId`, `workspaceRoots`, and
 * the event's data under its camelCase name (`preToolUse: {toolName, parameters}`,
 * `postToolUse: {…, result, success}`, `taskStart: {taskMetadata: {initialTask}}`…).
 *
 * What the real CLI sends (3.0.65, test/fixtures/hooks-real/cline), where it differs:
 *
 * - `hookName` is its own internal name (`agent_start`, `tool_call`, `tool_result`,
 *   `agent_end`): the event is told by its data key (`taskStart`, `preToolUse`…).
 * - Each run (and each subagent of `spawn_agent`) has its own `taskId`; the session they
 *   share is `sessionContext.rootSessionId`, which a resumed session (`--id`) keeps. A
 *   subagent's events name its lead in `parent_agent_id`: its tools are the session's,
 *   its start and end are not the turn's.
 * - TaskStart carries no prompt and no UserPromptSubmit comes in a `-p`-style run: the
 *   prompt is read from the session's record (`<data dir>/sessions/<id>/<id>.json`,
 *   bounded, a regular file only). TaskStart is not awaited by Cline; PreToolUse is.
 * - Its tools: `apply_patch` (`{input: <patch>}`, absolute paths), `editor` (`{path, …}`), `run_commands`
 *   (`{commands: [...]}`; in `preToolUse.parameters` the list arrives as a JSON string, so
 *   `tool_call.input` is read first), `read_files`, `spawn_agent`, `team_*`. Call ids are
 *   in `tool_call.id` / `tool_result.id`.
 * - TaskComplete has the answer in `turn.outputText`.
 *
 * Cline keeps its plan in the task's focus chain, which no hook reports: no plan from it.
 */
export const CLINE_TOOLS = { edit: ['apply_patch', 'editor', 'write_to_file', 'replace_in_file', 'new_rule'], shell: ['run_commands', 'execute_command'], todo: [] as string[] } as const;

const Tool = z.looseObject({ toolName: z.string().min(1).max(200), parameters: z.unknown().optional(), result: z.unknown().optional(), success: z.boolean().optional() });
const RealCall = z.looseObject({ id: z.string().max(200).optional(), name: z.string().max(200).optional(), input: z.unknown().optional(), output: z.unknown().optional() });
const ClineHookInput = z.looseObject({
  hookName: z.string().min(1).max(100),
  taskId: Id,
  sessionContext: z.looseObject({ rootSessionId: Id.optional() }).optional(),
  parent_agent_id: z.string().max(200).nullable().optional(),
  workspaceRoots: z.array(PathText).max(100).optional(),
  preToolUse: Tool.optional(),
  postToolUse: Tool.optional(),
  tool_call: RealCall.optional(),
  tool_result: RealCall.optional(),
  turn: z.looseObject({ outputText: z.string().max(1_000_000).optional() }).optional(),
  userPromptSubmit: z.looseObject({ prompt: z.string().max(1_000_000).optional() }).optional(),
  taskStart: z.looseObject({ taskMetadata: z.looseObject({ initialTask: z.string().max(1_000_000).optional() }).optional() }).optional(),
  taskResume: z.unknown().optional(),
  taskCancel: z.unknown().optional(),
  taskComplete: z.unknown().optional(),
  preCompact: z.unknown().optional(),
});
type ClineInput = z.infer<typeof ClineHookInput>;

/** The documented event names, and the data key each event's input carries (what the real CLI is told by). */
const EVENT_KEYS = [
  ['TaskStart', 'taskStart'],
  ['TaskResume', 'taskResume'],
  ['TaskCancel', 'taskCancel'],
  ['TaskComplete', 'taskComplete'],
  ['UserPromptSubmit', 'userPromptSubmit'],
  ['PreToolUse', 'preToolUse'],
  ['PostToolUse', 'postToolUse'],
  ['PreCompact', 'preCompact'],
] as const;

function eventName(p: ClineInput): string {
  if (EVENT_KEYS.some(([name]) => name === p.hookName)) return p.hookName;
  return EVENT_KEYS.find(([, key]) => p[key] !== undefined)?.[0] ?? p.hookName;
}

function clineCall(t: z.infer<typeof Tool>, real: z.infer<typeof RealCall> | undefined): ToolCall {
  // The real CLI's own record of the call has the arguments as the tool got them.
  const input = argsOf(real?.input) ?? argsOf(t.parameters);
  const kind = kindOf(t.toolName, CLINE_TOOLS);
  const call: ToolCall = { id: real?.id ?? null, name: t.toolName, kind };
  if (kind === 'edit') call.files = t.toolName === 'apply_patch' ? filesInPatch(str(input?.input) ?? str(input?.patch)) : filesIn(input);
  if (kind === 'shell') call.command = commandOf(input);
  return call;
}

function commandOf(input: Record<string, unknown> | undefined): string {
  let list = input?.commands;
  if (typeof list === 'string') {
    try {
      list = JSON.parse(list) as unknown;
    } catch {
      return list as string;
    }
  }
  if (Array.isArray(list)) return list.filter((c): c is string => typeof c === 'string').join(' ; ');
  return str(input?.command) ?? '';
}

export function clineAdapter(raw: unknown): HookEnvelope {
  const p = parseInput(ClineHookInput, raw, 'Cline hook input');
  const name = eventName(p);
  // A subagent's start and end are inside the lead's turn; its tool calls are the session's own.
  const subagent = typeof p.parent_agent_id === 'string' && p.parent_agent_id.length > 0;
  let event: HookEvent;
  switch (name) {
    case 'TaskStart':
      // The task's first message comes with its start (documented), or only in the session's record (the real CLI),
      // which holds the session's first prompt: a resumed session may start with TaskStart too.
      if (subagent) event = { type: 'ignored', name: 'TaskStart (subagent)' };
      else if (p.taskStart?.taskMetadata?.initialTask !== undefined) event = { type: 'prompt', prompt: p.taskStart.taskMetadata.initialTask };
      else event = { type: 'prompt', prompt: sessionPrompt(p.sessionContext?.rootSessionId) ?? '', firstOnly: true };
      break;
    case 'TaskResume':
      event = { type: 'session_start', source: 'resume' };
      break;
    case 'UserPromptSubmit':
      event = { type: 'prompt', prompt: p.userPromptSubmit?.prompt ?? '' };
      break;
    case 'PreToolUse':
      event = p.preToolUse ? { type: 'tool_before', call: clineCall(p.preToolUse, p.tool_call) } : { type: 'ignored', name };
      break;
    case 'PostToolUse': {
      const t = p.postToolUse;
      event = t ? { type: 'tool_after', call: clineCall(t, p.tool_result), ok: t.success !== false, error: t.success === false ? (str(t.result) ?? 'the tool failed') : undefined, stdout: str(t.result) } : { type: 'ignored', name };
      break;
    }
    case 'TaskComplete':
      event = subagent ? { type: 'ignored', name: 'TaskComplete (subagent)' } : { type: 'stop', lastMessage: str(p.turn?.outputText) };
      break;
    case 'TaskCancel':
      event = subagent ? { type: 'ignored', name: 'TaskCancel (subagent)' } : { type: 'session_end', reason: 'cancelled' };
      break;
    case 'PreCompact':
      event = { type: 'compaction' };
      break;
    default:
      event = { type: 'ignored', name };
  }
  return { sessionId: p.sessionContext?.rootSessionId ?? p.taskId, cwd: p.workspaceRoots?.[0], event };
}

/** The session record is small; anything larger is not Cline's, and is not read. */
const SESSION_RECORD_MAX_BYTES = 4 * 1024 * 1024;

/**
 * The prompt a Cline session was started with, from its record in Cline's data folder
 * (`CLINE_DATA_DIR`, else `CLINE_DIR`/data, else ~/.cline/data, as Cline finds it). A
 * resumed session's record still holds its first prompt. Missing, unreadable or odd: none.
 */
export function sessionPrompt(sessionId: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (!sessionId || !/^[A-Za-z0-9_-]{1,200}$/.test(sessionId)) return undefined;
  const dataDir = env.CLINE_DATA_DIR?.trim() || path.join(env.CLINE_DIR?.trim() || path.join(os.homedir(), '.cline'), 'data');
  const file = path.join(dataDir, 'sessions', sessionId, `${sessionId}.json`);
  let fd: number | undefined;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0) | (fs.constants.O_NONBLOCK ?? 0));
    const st = fs.fstatSync(fd);
    if (!st.isFile() || st.size > SESSION_RECORD_MAX_BYTES) return undefined;
    const record = JSON.parse(fs.readFileSync(fd, 'utf8')) as { prompt?: unknown; metadata?: { prompt?: unknown } };
    const text = typeof record.metadata?.prompt === 'string' ? record.metadata.prompt : typeof record.prompt === 'string' ? record.prompt.replace(/^<user_input[^>]*>([\s\S]*)<\/user_input>$/, '$1') : undefined;
    return text?.trim() ? text.slice(0, 1_000_000) : undefined;
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}
