import { z } from 'zod';
import { parseInput } from '../../core/model/validate';
import type { HookEnvelope, HookEvent, PlanItemChange, TodoStatus, ToolCall } from '../events';
import { Args, Id, PathText, TodoList, filesIn, kindOf, num, str, todosFrom } from './common';
import { claudeShapedEvent, sourceAmong } from './claudeShape';

/**
 * Claude Code (https://code.claude.com/docs/en/hooks): one JSON object on stdin with
 * `session_id`, `transcript_path`, `cwd`, `hook_event_name` and the event's fields.
 * Exit 2 would block the tool call or the prompt, so `waypoint hook` always exits 0.
 * VS Code's Claude harness sends the same payloads.
 */
export const CLAUDE_TOOLS = { edit: ['Edit', 'MultiEdit', 'Write', 'NotebookEdit'], shell: ['Bash'], todo: ['TodoWrite', 'TaskCreate', 'TaskUpdate'] } as const;

/**
 * Events Waypoint registers beyond the tool and session ones: Claude Code's Tasks (its plan
 * since TodoWrite was retired: TaskCreate/TaskUpdate tools, TaskCreated/TaskCompleted
 * events) and StopFailure (a turn ended by an API error).
 */
export const CLAUDE_PLAN_EVENTS = ['TaskCreated', 'TaskCompleted', 'StopFailure'] as const;

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
  task_id: z.union([z.string().max(200), z.number()]).optional(),
  task_subject: z.string().max(10_000).optional(),
  error_details: z.unknown().optional(),
});

export function claudeToolCall(name: string, input: Record<string, unknown> | undefined, id: string | undefined, table: { edit: readonly string[]; shell: readonly string[]; todo: readonly string[] } = CLAUDE_TOOLS): ToolCall {
  const kind = kindOf(name, table);
  const call: ToolCall = { id: id ?? null, name, kind };
  if (kind === 'edit') call.files = filesIn(input);
  if (kind === 'shell') call.command = str(input?.command) ?? '';
  if (kind === 'todo' && name === 'TodoWrite') {
    const list = TodoList.safeParse(input?.todos);
    call.todos = list.success ? todosFrom(list.data) : [];
  }
  return call;
}

/**
 * TaskCreate / TaskUpdate after they ran: the item they made or changed. TaskCreate's id is
 * only in its response (`{task: {id}}`); TaskUpdate names it (`taskId`) with the new status
 * (`deleted` drops the item). Words come from `subject`, as TaskCreated reports them too.
 */
export function claudePlanItem(name: string, input: Record<string, unknown> | undefined, response: unknown): PlanItemChange | undefined {
  const r = (typeof response === 'object' && response !== null ? response : {}) as Record<string, unknown>;
  if (name === 'TaskCreate') {
    const task = (typeof r.task === 'object' && r.task !== null ? r.task : {}) as Record<string, unknown>;
    const id = idText(task.id);
    const content = str(task.subject) ?? str(input?.subject);
    return id && content ? { id, content: content.slice(0, 2000) } : undefined;
  }
  if (name === 'TaskUpdate') {
    const id = idText(input?.taskId) ?? idText(r.taskId);
    if (!id) return undefined;
    const status = planStatus(str(input?.status));
    return { id, ...(status ? { status } : {}) };
  }
  return undefined;
}

const idText = (v: unknown): string | undefined => (typeof v === 'number' && Number.isFinite(v) ? String(v) : typeof v === 'string' && v ? v.slice(0, 200) : undefined);

function planStatus(s: string | undefined): TodoStatus | undefined {
  if (s === undefined) return undefined;
  if (s === 'deleted') return 'cancelled';
  return todosFrom([{ content: 'x', status: s }])[0]?.status;
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
  switch (p.hook_event_name) {
    case 'TaskCreated':
    case 'TaskCompleted': {
      const id = idText(p.task_id);
      if (!id) return { type: 'ignored', name: p.hook_event_name };
      const content = str(p.task_subject)?.slice(0, 2000);
      return { type: 'plan_item', item: { id, ...(content ? { content } : {}), ...(p.hook_event_name === 'TaskCompleted' ? { status: 'completed' as const } : {}) } };
    }
    case 'StopFailure':
      // The real one (2.1.332) sends `error: "unknown"` and the API's error as the last message ("API Error: 400 …").
      return { type: 'turn_failed', error: [str(p.last_assistant_message), errorText(p.error_details), errorText(p.error)].filter(Boolean).join(' — ') || 'the turn ended on an error' };
    // Seen from the real binary and deliberately not used: a subagent's tool calls arrive as the
    // session's own (same session_id, with agent_id), so they are the agent's already;
    // PostToolBatch repeats the calls' own hooks; SubagentStop is not the turn's end; CwdChanged,
    // FileChanged, InstructionsLoaded, Notification, PermissionRequest say nothing about work done;
    // WorktreeCreate/WorktreeRemove hooks replace Claude Code's own git worktree handling, so they
    // are never registered.
  }
  return claudeShapedEvent(p.hook_event_name, p, {
    call: () => claudeToolCall(p.tool_name ?? 'unknown', p.tool_input, p.tool_use_id),
    source: (s) => sourceAmong(s, ['startup', 'resume', 'clear', 'compact']),
    outcome: (done) => {
      const r = (typeof p.tool_response === 'object' && p.tool_response !== null ? p.tool_response : {}) as Record<string, unknown>;
      if (r.interrupted === true) return { ok: false, error: 'the command was interrupted', stdout: str(r.stdout), stderr: str(r.stderr) };
      if (done.kind === 'todo' && !done.todos) done.planItem = claudePlanItem(done.name, p.tool_input, p.tool_response);
      return { ok: true, exitCode: num(r.exit_code) ?? num(r.exitCode) ?? num(r.returnCode), stdout: str(r.stdout), stderr: str(r.stderr) };
    },
    failure: () => errorText(p.error) ?? `${p.tool_name} failed`,
    lastMessage: () => p.last_assistant_message,
  });
}
