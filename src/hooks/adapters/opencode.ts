import { z } from 'zod';
import { WaypointError } from '../../core/model/errors';
import { parseInput } from '../../core/model/validate';
import type { HookEnvelope, HookEvent, ToolCall } from '../events';
import { Id, PathText, TodoList, argsOf, filesIn, filesInPatch, kindOf, num, str, todosFrom } from './common';

/**
 * opencode (https://opencode.ai/docs/plugins): no hook commands, JavaScript plugins that
 * opencode loads from `.opencode/plugins/` (or `plugin/`) and awaits. `waypoint connect
 * opencode` writes one (connectHooks.ts, opencodePluginFile) that hands each call to
 * `waypoint hook opencode` as `{hook, directory, input, output}` (an `event` as
 * `{hook: "event", directory, event}`). What the real binary sends (1.18.33,
 * test/fixtures/hooks-real/opencode):
 *
 * - `chat.message` `{sessionID, model}` → `{message, parts}`: the person's words are the
 *   `text` parts (`opencode run a b` sends "a b"; one argument with spaces comes quoted).
 * - `tool.execute.before` `{tool, sessionID, callID}` → `{args}`; `tool.execute.after` the
 *   same with `args` → `{title, output, metadata}`; bash's exit code is `metadata.exit`.
 *   Tools: `edit`/`write` (`filePath`), `apply_patch` (`patchText`, GPT models), `bash`
 *   (`command`), `todowrite` (`{todos: [{content, status, priority}]}`, the whole list,
 *   no ids).
 * - A call that throws (an edit whose oldString is not there) gets no `tool.execute.after`:
 *   only a `message.part.updated` event whose tool part is in state `error`.
 * - `experimental.text.complete` has each finished text part (the last one is the answer);
 *   the `session.idle` event ends the turn; an API error comes as `session.error` (then
 *   `session.idle`, twice). `opencode run -s <id>` continues a session: no start event,
 *   its next `chat.message` carries the same sessionID.
 * - A subagent (the `task` tool) works in a session of its own (its `session.created` names
 *   the `parentID`), with its own `chat.message`, tool calls and `session.idle`. The plugin
 *   hands those on with `parentSessionID` (the top session): its tool calls are recorded as
 *   that session's, the agent's work in the task that called it, as Claude Code's subagent
 *   calls are; its prompt, answers and end are not the session's turns, and its todo list
 *   is not the session's plan.
 */
export const OPENCODE_TOOLS = { edit: ['edit', 'write', 'apply_patch'], shell: ['bash'], todo: ['todowrite'] } as const;

const Input = z.looseObject({
  sessionID: Id.optional(),
  tool: z.string().max(200).optional(),
  callID: z.string().max(200).optional(),
  messageID: z.string().max(200).optional(),
  args: z.unknown().optional(),
});
const Part = z.looseObject({ type: z.string().max(100).optional(), text: z.string().max(1_000_000).optional(), synthetic: z.boolean().optional(), ignored: z.boolean().optional() });
const Output = z.looseObject({
  args: z.unknown().optional(),
  title: z.string().max(1_000_000).optional(),
  output: z.string().max(1_000_000).optional(),
  metadata: z.unknown().optional(),
  text: z.string().max(1_000_000).optional(),
  message: z.looseObject({ sessionID: Id.optional() }).optional(),
  parts: z.array(Part).max(1000).optional(),
});
const ToolPart = z.looseObject({
  type: z.string().max(100).optional(),
  tool: z.string().max(200).optional(),
  callID: z.string().max(200).optional(),
  state: z.looseObject({ status: z.string().max(40).optional(), input: z.unknown().optional(), error: z.unknown().optional() }).optional(),
});
const Event = z.looseObject({
  type: z.string().min(1).max(200),
  properties: z.looseObject({ sessionID: Id.optional(), error: z.unknown().optional(), part: ToolPart.optional() }).optional(),
});
const OpencodeHookInput = z.looseObject({
  hook: z.string().min(1).max(200),
  directory: PathText.optional(),
  parentSessionID: Id.optional(),
  input: Input.optional(),
  output: Output.optional(),
  event: Event.optional(),
});
type Payload = z.infer<typeof OpencodeHookInput>;

function opencodeCall(name: string, id: string | undefined, rawArgs: unknown): ToolCall {
  const args = argsOf(rawArgs);
  const kind = kindOf(name, OPENCODE_TOOLS);
  const call: ToolCall = { id: id ?? null, name, kind };
  if (kind === 'edit') call.files = name === 'apply_patch' ? filesInPatch(str(args?.patchText)) : filesIn(args);
  if (kind === 'shell') call.command = str(args?.command) ?? '';
  if (kind === 'todo') {
    const list = TodoList.safeParse(args?.todos);
    call.todos = list.success ? todosFrom(list.data) : [];
  }
  return call;
}

/** An API error's words: `{name, data: {message}}` as opencode reports it. */
function errorText(e: unknown): string {
  const o = argsOf(e);
  const data = argsOf(o?.data);
  return (str(data?.message) ?? str(o?.message) ?? str(o?.name) ?? (typeof e === 'string' ? e : 'the model request failed')).slice(0, 10_000);
}

function opencodeEvent(p: Payload): HookEvent {
  const tool = p.input?.tool;
  switch (p.hook) {
    case 'chat.message': {
      const words = (p.output?.parts ?? []).filter((x) => x.type === 'text' && !x.synthetic && !x.ignored && x.text).map((x) => x.text!);
      return { type: 'prompt', prompt: words.join('\n') };
    }
    case 'tool.execute.before':
      return tool ? { type: 'tool_before', call: opencodeCall(tool, p.input?.callID, p.output?.args) } : { type: 'ignored', name: p.hook };
    case 'tool.execute.after': {
      if (!tool) return { type: 'ignored', name: p.hook };
      const meta = argsOf(p.output?.metadata);
      return { type: 'tool_after', call: opencodeCall(tool, p.input?.callID, p.input?.args), ok: true, exitCode: num(meta?.exit), stdout: p.output?.output };
    }
    case 'experimental.text.complete':
      return p.output?.text ? { type: 'agent_message', text: p.output.text } : { type: 'ignored', name: p.hook };
    case 'event':
      return eventOf(p.event);
    default:
      return { type: 'ignored', name: p.hook };
  }
}

function eventOf(e: z.infer<typeof Event> | undefined): HookEvent {
  switch (e?.type) {
    case 'session.idle':
      return { type: 'stop' };
    case 'session.error':
      return { type: 'turn_failed', error: errorText(e.properties?.error) };
    case 'session.compacted':
      return { type: 'compaction' };
    case 'message.part.updated': {
      // A tool call that threw: its only report is its part in state `error`.
      const part = e.properties?.part;
      if (part?.type !== 'tool' || part.state?.status !== 'error' || !part.tool) return { type: 'ignored', name: e.type };
      const error = typeof part.state.error === 'string' ? part.state.error : JSON.stringify(part.state.error ?? `${part.tool} failed`);
      return { type: 'tool_after', call: opencodeCall(part.tool, part.callID, part.state.input), ok: false, error: error.slice(0, 10_000) };
    }
    default:
      return { type: 'ignored', name: e ? `event ${e.type}` : 'event' };
  }
}

export function opencodeAdapter(raw: unknown): HookEnvelope {
  const p = parseInput(OpencodeHookInput, raw, 'opencode hook input');
  const own = p.input?.sessionID ?? p.output?.message?.sessionID ?? p.event?.properties?.sessionID;
  if (!own) throw new WaypointError('invalid_input', `opencode hook input (${p.hook}${p.event ? ` ${p.event.type}` : ''}) names no sessionID.`);
  const event = opencodeEvent(p);
  if (!p.parentSessionID || p.parentSessionID === own) return { sessionId: own, cwd: p.directory, event };
  // A subagent's session: its tool calls are the calling session's; its own turn is not one of that session's.
  if (event.type !== 'tool_before' && event.type !== 'tool_after') return { sessionId: p.parentSessionID, cwd: p.directory, event: { type: 'ignored', name: `subagent ${event.type}` } };
  // Nor is its todo list the calling session's plan.
  if (event.call.kind === 'todo') event.call = { id: event.call.id, name: event.call.name, kind: 'other' };
  return { sessionId: p.parentSessionID, cwd: p.directory, event };
}
