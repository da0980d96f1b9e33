import { z } from 'zod';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { notCapturedLine, type NotCapturedReport } from '../core/engine/engine';
import type { EngineApi } from '../core/engine/operations';
import { StartTaskInput, TaskId, SideEffectKey } from '../core/engine/inputs';
import { errorMessage, isWaypointError } from '../core/model/errors';
import { Identifier, IdempotencyKey, TaskState, type LeaseOwner, type Task } from '../core/model/schema';
import { isActive, isOpen } from '../core/model/taskStates';
import { plural } from '../core/model/plural';

/**
 * Waypoint's MCP tools as plain data: a name, a description that teaches an agent
 * *when* to call it, zod input/output schemas, and a handler over `EngineLike`.
 * The tool names and argument names are a stable contract (agents' configurations
 * and prompts name them, and outlive a release); the server
 * module only registers these, so the same definitions serve stdio, HTTP and a relaying
 * `waypoint mcp` (which runs them over the owner's `/rpc`).
 */

/** The engine operations the tools use, typed by the operation table (localApi or a remote owner's). */
export type EngineLike = Pick<
  EngineApi,
  'startTask' | 'startStep' | 'completeStep' | 'failStep' | 'checkpoint' | 'beginSideEffect' | 'endSideEffect' | 'resumeTask' | 'requestReview' | 'taskDetail' | 'tasks' | 'forkTask' | 'resumeContext'
>;

export type AgentRollbackPolicy = 'ask' | 'allow' | 'deny';
export const AgentRollbackPolicy = z.enum(['ask', 'allow', 'deny']);

export interface RollbackResult {
  /** Whether the workspace was rolled back (false: the person declined). */
  rolledBack: boolean;
  /** The checkpoint holding the state before the rollback (every rollback can be undone). */
  preRollbackCheckpointId?: string;
  message?: string;
}

/**
 * Performs an agent-requested rollback. Injected because rollback lands in the
 * engine with the snapshot module; under `ask` the VS Code host's handler asks the
 * person first, under `allow` it rolls back directly.
 */
export type RollbackHandler = (req: { taskId: string; checkpointId: string; reason: string; policy: 'ask' | 'allow'; owner: LeaseOwner }) => Promise<RollbackResult>;

/** Who is calling (one MCP session) and the policies that apply to it. */
export interface ToolContext {
  engine: EngineLike;
  owner: LeaseOwner;
  /** Lease of tasks this session starts or resumes; the pid check catches a dead session sooner. */
  leaseTtlMs?: number;
  agentRollback: AgentRollbackPolicy;
  rollback?: RollbackHandler;
}

interface ToolOutcome {
  structured: Record<string, unknown>;
  summary: string;
  /** Extra text for clients that show the model only text content (resume context, status). */
  detail?: string;
}

export interface ToolSpec<I extends z.ZodObject = z.ZodObject> {
  name: string;
  title: string;
  description: string;
  input: I;
  output: z.ZodObject;
  annotations?: { readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean };
  run(ctx: ToolContext, args: z.infer<I>): Promise<ToolOutcome>;
}

// ---------------------------------------------------------------------------
// Argument schemas. They reuse the engine's field schemas, so a client sees the same
// limits the engine enforces; objects are strict so a misspelt argument is refused.

const taskId = TaskId.describe('The task id returned by waypoint_task_start (e.g. "t_…").');
const stepId = Identifier;
const json = z.unknown();

const S = StartTaskInput.shape;
const PlanItemArg = z.strictObject({
  id: Identifier.describe('Short id you choose for the step, unique in the task (e.g. "parse", "tests").'),
  title: z.string().min(1).max(500).describe('What the step does.'),
  dependsOn: z.array(Identifier).max(256).optional().describe('Ids of steps that must be completed first.'),
  maxAttempts: z.number().int().min(1).max(100).optional().describe('How many times this step may be attempted before the task waits for the person (default: the workspace setting, 3).'),
});

const Brief = z.looseObject({ id: z.string(), title: z.string(), state: TaskState });

function brief(t: Task, progress?: string) {
  return {
    id: t.id,
    title: t.title,
    state: t.state,
    goal: t.goal,
    agent: t.agent,
    attempt: t.attempt,
    updatedAt: new Date(t.updatedAt).toISOString(),
    leaseOwner: t.lease?.owner ?? null,
    // A task waiting for a person: the agent must stop and say why, not retry.
    hold: t.hold,
    ...(progress ? { progress } : {}),
  };
}

/**
 * A checkpoint that did not capture everything: the list goes into the structured
 * result and a warning into the text the model reads (see NotCapturedReport).
 */
function warnNotCaptured(checkpointId: string, r: NotCapturedReport, out: ToolOutcome): ToolOutcome {
  if (!r.notCapturedCount) return out;
  const warning = notCapturedLine(checkpointId, r);
  return { ...out, structured: { ...out.structured, notCaptured: r.notCaptured, notCapturedCount: r.notCapturedCount }, detail: out.detail ? `${out.detail}\n\n${warning}` : warning };
}

/** Drops undefined members so structured content stays plain JSON. */
function clean<T extends Record<string, unknown>>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

/** Checks a tool's handler against its own input schema, then erases the type for the table. */
function defineTool<I extends z.ZodObject>(spec: ToolSpec<I>): ToolSpec {
  return spec as unknown as ToolSpec;
}

// ---------------------------------------------------------------------------
// The tools.

const taskStart = defineTool({
  name: 'waypoint_task_start',
  title: 'Start a supervised task',
  description:
    'Call this FIRST, before you change anything, when you begin a piece of work for the user. It records the goal and your plan and takes a base checkpoint of the workspace the person can roll back to. ' +
    'Give a plan of steps ({id, title, dependsOn?}) when you know one. Pass an idempotencyKey (any string unique to this job) so a retried call does not start a second task. Returns taskId: pass it to every other waypoint tool.',
  input: z.strictObject({
    goal: S.goal.describe('What the user asked for, in one or a few sentences.'),
    title: S.title.describe('A short title (defaults to the start of the goal).'),
    plan: z.array(PlanItemArg).max(1000).optional().describe('The steps you intend to take, in order; dependsOn makes a DAG.'),
    agent: S.agent.describe('Your name, e.g. "claude-code", "copilot".'),
    idempotencyKey: IdempotencyKey.optional().describe('Makes the call safe to retry: the same key returns the same task.'),
  }),
  output: z.looseObject({ taskId: z.string(), baseCheckpointId: z.string(), state: TaskState }),
  async run(ctx, a) {
    const r = await ctx.engine.startTask({ ...a, owner: ctx.owner, leaseTtlMs: ctx.leaseTtlMs });
    return warnNotCaptured(r.baseCheckpointId, r, { structured: { taskId: r.taskId, baseCheckpointId: r.baseCheckpointId, state: r.state }, summary: `Started task ${r.taskId} (${r.state}); base checkpoint ${r.baseCheckpointId}.` });
  },
});

const stepStart = defineTool({
  name: 'waypoint_step_start',
  title: 'Start a step',
  description:
    'Call this BEFORE you edit files or do the next unit of work: it takes a checkpoint of the workspace so this step can be reviewed and rolled back on its own. ' +
    'Pass stepId to start a step of your plan (its dependencies must be completed), or omit it for an ad hoc step (give a title). Then do the work and call waypoint_step_complete (or waypoint_step_fail). ' +
    'A step that failed may start again only after its retry backoff (the refusal names the time; pass wait=true to wait up to a minute) and only for as many attempts as the retry policy allows; when they are used up the task waits for a person — stop and tell the person, do not try again.',
  input: z.strictObject({
    taskId,
    stepId: stepId.optional().describe('The plan step to start; omit for an ad hoc step.'),
    title: z.string().max(500).optional().describe('What this step does (required in spirit for ad hoc steps).'),
    inputs: json.optional().describe('Anything worth recording about what the step starts from (JSON).'),
    wait: z.boolean().optional().describe('If the step is inside its retry backoff, wait (up to a minute) for it to pass instead of being refused.'),
  }),
  output: z.looseObject({ stepId: z.string(), checkpointId: z.string(), attempt: z.number(), maxAttempts: z.number() }),
  async run(ctx, a) {
    const r = await ctx.engine.startStep({ ...a, owner: ctx.owner });
    return warnNotCaptured(r.checkpointId, r, {
      structured: { taskId: r.taskId, stepId: r.stepId, checkpointId: r.checkpointId, attempt: r.attempt, maxAttempts: r.maxAttempts },
      summary: `Step ${r.stepId} started (attempt ${r.attempt} of ${r.maxAttempts}); checkpoint ${r.checkpointId}.`,
    });
  },
});

const stepComplete = defineTool({
  name: 'waypoint_step_complete',
  title: 'Complete a step',
  description:
    'Call this right after you finish the work of a step you started with waypoint_step_start. It takes a checkpoint of the result and records your outputs and a one-line summary, which a resumed session will read.',
  input: z.strictObject({
    taskId,
    stepId: stepId.describe('The step id returned by waypoint_step_start.'),
    outputs: json.optional().describe('What the step produced (JSON): files, findings, numbers.'),
    summary: z.string().max(10_000).optional().describe('One line: what changed and why.'),
  }),
  output: z.looseObject({ checkpointId: z.string(), filesChanged: z.number() }),
  async run(ctx, a) {
    const r = await ctx.engine.completeStep({ ...a, owner: ctx.owner });
    return warnNotCaptured(r.checkpointId, r, {
      structured: { taskId: r.taskId, stepId: r.stepId, checkpointId: r.checkpointId, filesChanged: r.filesChanged },
      summary: `Step ${r.stepId} completed; checkpoint ${r.checkpointId} (${plural(r.filesChanged, 'file')} changed).`,
    });
  },
});

const stepFail = defineTool({
  name: 'waypoint_step_fail',
  title: 'Fail a step',
  description:
    'Call this when a step you started cannot be finished. recoverable=true keeps the task running and tells you when you may retry the step (start it again, not before retryAt); on the last attempt the policy allows, the task waits for a person instead (hold) and you must stop. recoverable=false fails the whole task for the person to look at.',
  input: z.strictObject({
    taskId,
    stepId: stepId.describe('The step that failed.'),
    error: z.string().min(1).max(10_000).describe('What went wrong, readable by a person.'),
    recoverable: z.boolean().describe('true if retrying the step may succeed; false fails the task.'),
  }),
  output: z.looseObject({
    state: TaskState,
    retry: z.looseObject({ attempt: z.number(), maxAttempts: z.number(), backoffMs: z.number(), retryAt: z.string() }).optional(),
    hold: z.looseObject({ cause: z.string(), reason: z.string() }).optional(),
  }),
  async run(ctx, a) {
    const r = await ctx.engine.failStep({ ...a, owner: ctx.owner });
    const retry = r.retry ? { ...r.retry, retryAt: new Date(r.retry.retryAt).toISOString() } : undefined;
    return {
      structured: clean({ taskId: r.taskId, stepId: r.stepId, state: r.state, retry, hold: r.hold ?? undefined }),
      summary: r.hold
        ? `STOP: step ${r.stepId} failed on its last allowed attempt and task ${r.taskId} now waits for a person (${r.hold.reason}). Do not start it again; tell the person.`
        : retry
          ? `Step ${r.stepId} failed; you may retry it as attempt ${retry.attempt} of ${retry.maxAttempts} at ${retry.retryAt} (in ${Math.ceil(retry.backoffMs / 1000)} s), not before.`
          : `Step ${r.stepId} failed; task is ${r.state}.`,
    };
  },
});

const checkpoint = defineTool({
  name: 'waypoint_checkpoint',
  title: 'Take a checkpoint',
  description:
    'Take an extra checkpoint of the workspace inside a long step, e.g. before a risky edit, so the person can roll back to exactly this point. Steps already take checkpoints when they start and complete.',
  input: z.strictObject({ taskId, label: z.string().max(200).optional().describe('Why this checkpoint exists, e.g. "before regenerating the lockfile".') }),
  output: z.looseObject({ checkpointId: z.string(), filesChanged: z.number() }),
  async run(ctx, a) {
    const r = await ctx.engine.checkpoint({ ...a, owner: ctx.owner });
    return warnNotCaptured(r.checkpointId, r, { structured: { taskId: r.taskId, checkpointId: r.checkpointId, filesChanged: r.filesChanged }, summary: `Checkpoint ${r.checkpointId} (${plural(r.filesChanged, 'file')} changed).` });
  },
});

const DECISION_TEXT = {
  proceed: 'proceed: the intent is recorded; run it now, then call waypoint_side_effect_end with the outcome.',
  already_done: 'already_done: this ran before; do NOT run it again — use the recorded result.',
  in_doubt: 'in_doubt: it was begun before with no recorded outcome; check whether it happened before repeating it, then call waypoint_side_effect_end.',
} as const;

const sideEffectBegin = defineTool({
  name: 'waypoint_side_effect_begin',
  title: 'Announce a side effect',
  description:
    'Call this BEFORE running anything that changes the world outside the workspace files — a deploy, a migration, a message, an HTTP POST, publishing, a command with external effects — and OBEY the decision: ' +
    '"proceed" → run it, then call waypoint_side_effect_end; "already_done" → it already ran (e.g. before an interruption), do not repeat it, use the returned result; ' +
    '"in_doubt" → it was started but its outcome is unknown: verify before repeating. Use a stable key that names the effect (e.g. "deploy:staging:v42") so a retry is recognised.',
  input: z.strictObject({
    taskId,
    stepId: stepId.optional().describe('The step it belongs to (defaults to the step in progress).'),
    key: SideEffectKey.describe('Stable name of this effect; the same effect must always get the same key.'),
    kind: z.string().min(1).max(100).describe('Kind of effect: "shell", "http", "migration", "message", …'),
    description: z.string().min(1).max(2_000).describe('What it does, for the person reviewing the task.'),
    args: json.optional().describe('Its parameters (JSON), e.g. the command line or request.'),
  }),
  output: z.looseObject({ decision: z.enum(['proceed', 'already_done', 'in_doubt']), result: z.unknown().optional() }),
  async run(ctx, a) {
    const r = await ctx.engine.beginSideEffect({ ...a, owner: ctx.owner });
    return warnNotCaptured(r.checkpointId ?? '?', r, {
      structured: clean({ taskId: r.taskId, key: r.key, decision: r.decision, result: r.decision === 'already_done' ? (r.result ?? null) : undefined, attempt: r.attempt, checkpointId: r.checkpointId }),
      summary: `${DECISION_TEXT[r.decision]}${r.decision === 'already_done' ? ` Result: ${JSON.stringify(r.result ?? null).slice(0, 500)}` : ''}`,
    });
  },
});

const sideEffectEnd = defineTool({
  name: 'waypoint_side_effect_end',
  title: 'Report a side effect’s outcome',
  description:
    'Call this right after running a side effect you announced with waypoint_side_effect_begin: ok=true with its result, or ok=false with the error. A resumed session then knows it must not run it again.',
  input: z.strictObject({
    taskId,
    key: SideEffectKey.describe('The key given to waypoint_side_effect_begin.'),
    ok: z.boolean().describe('true if it succeeded.'),
    result: json.optional().describe('What it returned (JSON), e.g. an id, a URL, an exit code.'),
    error: z.string().max(10_000).optional().describe('Why it failed (required when ok is false).'),
  }),
  output: z.looseObject({ state: z.string() }),
  async run(ctx, a) {
    const r = await ctx.engine.endSideEffect({ ...a, owner: ctx.owner });
    return { structured: { taskId: r.taskId, key: r.key, state: r.state }, summary: `Side effect '${r.key}' is ${r.state}.` };
  },
});

const taskResume = defineTool({
  name: 'waypoint_task_resume',
  title: 'Resume a task',
  description:
    'After an interruption (a new session, a crash, a restart, or a task shown as interrupted) call this FIRST, before touching files: it makes you the task’s driver again and returns the resume context — ' +
    'goal, plan with status, outputs so far, the interrupted step, side effects done / failed / in doubt, workspace drift, and the next ready steps. Continue from there; do not redo completed steps or repeat done side effects.',
  input: z.strictObject({ taskId }),
  output: z.looseObject({ task: z.looseObject({ id: z.string(), state: TaskState }), plan: z.array(z.unknown()), nextSteps: z.array(z.unknown()), sideEffects: z.looseObject({}), markdown: z.string() }),
  async run(ctx, a) {
    const c = await ctx.engine.resumeTask({ ...a, owner: ctx.owner, leaseTtlMs: ctx.leaseTtlMs });
    const next = c.nextSteps.map((s) => s.id).join(', ') || 'none ready';
    return {
      structured: c as unknown as Record<string, unknown>,
      summary: `Resumed task ${c.task.id} (${c.task.state}, attempt ${c.task.attempt}); next: ${next}.`,
      detail: c.markdown,
    };
  },
});

const taskStatus = defineTool({
  name: 'waypoint_task_status',
  title: 'Task status',
  description:
    'With taskId: one task in detail (state, steps, checkpoints, side effects). Without: all open tasks in brief — call it at the start of a session to find a task to resume instead of starting a duplicate.',
  input: z.strictObject({ taskId: taskId.optional() }),
  output: z.looseObject({ task: z.looseObject({}).optional(), tasks: z.array(Brief).optional() }),
  annotations: { readOnlyHint: true },
  async run(ctx, a) {
    if (a.taskId) {
      const d = await ctx.engine.taskDetail(a.taskId);
      const done = d.steps.filter((s) => s.status === 'completed' || s.status === 'skipped').length;
      const structured = {
        task: brief(d.task),
        steps: d.steps.map((s) => clean({ id: s.id, title: s.title, status: s.status, dependsOn: s.dependsOn, attempts: s.attempts, summary: s.summary ?? undefined, error: s.error ?? undefined })),
        checkpoints: d.checkpoints.map((c) => ({ id: c.id, kind: c.kind, stepId: c.stepId, label: c.label, createdAt: new Date(c.createdAt).toISOString(), filesChanged: c.filesChanged })),
        sideEffects: d.sideEffects.map((e) => ({ key: e.key, kind: e.kind, status: e.status, description: e.description })),
        interruption: d.task.interruption,
      };
      return { structured, summary: `Task ${d.task.id} is ${d.task.state}: ${done}/${plural(d.steps.length, 'step')} done, ${plural(d.checkpoints.length, 'checkpoint')}, ${plural(d.sideEffects.length, 'side effect')}.`, detail: JSON.stringify(structured) };
    }
    const open = (await ctx.engine.tasks()).filter(isOpen);
    const tasks = open.map((t) => brief(t));
    const active = open.filter(isActive).length;
    return {
      structured: { tasks },
      summary: tasks.length ? `${plural(tasks.length, 'open task')}, ${active} active: ${tasks.map((t) => `${t.id} (${t.state})`).join(', ')}.` : 'No open tasks.',
      detail: tasks.length ? JSON.stringify({ tasks }) : undefined,
    };
  },
});

const taskComplete = defineTool({
  name: 'waypoint_task_complete',
  title: 'Hand the task over for review',
  description:
    'Call this when the whole task is done (every step completed or failed): the task then waits for the person’s review (waiting_review) — they approve, reject or roll back. Give a summary of what you changed.',
  input: z.strictObject({ taskId, summary: z.string().max(10_000).optional().describe('What was done, for the reviewer.') }),
  output: z.looseObject({ state: TaskState }),
  async run(ctx, a) {
    const r = await ctx.engine.requestReview({ ...a, owner: ctx.owner });
    return { structured: { taskId: r.taskId, state: r.state }, summary: `Task ${r.taskId} is ${r.state}.` };
  },
});

const rollback = defineTool({
  name: 'waypoint_rollback',
  title: 'Roll the workspace back',
  description:
    'Ask to restore the workspace to one of the task’s checkpoints (see waypoint_task_status) when your changes went wrong and undoing them by hand is error-prone. ' +
    'Governed by the person’s setting: they may be asked to confirm, it may be allowed, or refused. The state before the rollback is kept as a checkpoint, so it can be undone.',
  input: z.strictObject({
    taskId,
    checkpointId: Identifier.describe('The checkpoint to restore.'),
    reason: z.string().min(1).max(2_000).describe('Why, for the person who is asked to confirm.'),
  }),
  output: z.looseObject({ rolledBack: z.boolean(), preRollbackCheckpointId: z.string().optional() }),
  annotations: { destructiveHint: true },
  async run(ctx, a) {
    if (ctx.agentRollback === 'deny') {
      throw new ToolRefusal(
        `Rollback by agents is turned off in this workspace (setting agentRollback = deny). Tell the person which checkpoint (${a.checkpointId}) you would restore and why; they can roll back themselves.`,
      );
    }
    // Validate the task before asking anyone: an unknown task is a plain error.
    await ctx.engine.taskDetail(a.taskId);
    if (!ctx.rollback) throw new ToolRefusal('rollback is not available in this server yet. Tell the person which checkpoint you would restore; they can roll back from VS Code.');
    const r = await ctx.rollback({ ...a, policy: ctx.agentRollback, owner: ctx.owner });
    return {
      structured: clean({ taskId: a.taskId, checkpointId: a.checkpointId, rolledBack: r.rolledBack, preRollbackCheckpointId: r.preRollbackCheckpointId, message: r.message }),
      summary: r.rolledBack
        ? `Workspace rolled back to ${a.checkpointId}${r.preRollbackCheckpointId ? `; the previous state is checkpoint ${r.preRollbackCheckpointId}` : ''}.`
        : `Rollback to ${a.checkpointId} was not done${r.message ? `: ${r.message}` : ' (declined)'}.`,
    };
  },
});

const fork = defineTool({
  name: 'waypoint_fork',
  title: 'Fork a task from a checkpoint',
  description:
    'Start a NEW task from a checkpoint of an existing task (see waypoint_task_status for checkpoint ids) to try another approach from that point while keeping the original task and its history as they are. ' +
    'The workspace is restored to the checkpoint (undoable: the state before is kept as a checkpoint). Call with preview=true first to see which files would change. ' +
    'Returns the new taskId and its resume context: what it inherits (the steps finished by the checkpoint, with outputs) and which later steps were left behind. Drive the new task like one from waypoint_task_start. ' +
    'Changing the workspace is governed by the same setting as waypoint_rollback.',
  input: z.strictObject({
    checkpointId: Identifier.describe('The checkpoint to fork from (any task’s).'),
    goal: S.goal.optional().describe('The new task’s goal (defaults to the original’s).'),
    title: S.title.describe('A short title.'),
    plan: z.array(PlanItemArg).max(1000).optional().describe('The new task’s plan (defaults to the original’s steps not finished by the checkpoint).'),
    agent: S.agent.describe('Your name, e.g. "claude-code".'),
    idempotencyKey: IdempotencyKey.optional().describe('Makes the call safe to retry: the same key returns the same fork.'),
    preview: z.boolean().optional().describe('true: only report what would change; nothing is recorded or written.'),
  }),
  output: z.looseObject({ taskId: z.string().nullable(), preview: z.boolean(), forkedFrom: z.looseObject({ taskId: z.string(), checkpointId: z.string() }) }),
  annotations: { destructiveHint: true },
  async run(ctx, a) {
    if (!a.preview && ctx.agentRollback !== 'allow') {
      const why = ctx.agentRollback === 'deny' ? 'Changing the workspace by agents is turned off in this workspace (setting agentRollback = deny).' : 'The person asked to confirm workspace changes by agents (setting agentRollback = ask).';
      throw new ToolRefusal(`${why} Tell the person you would fork from checkpoint ${a.checkpointId} and why; they can run "Waypoint: Fork Task from Checkpoint" on it. waypoint_fork with preview=true shows what it would change.`);
    }
    const r = await ctx.engine.forkTask({ ...a, owner: ctx.owner, leaseTtlMs: ctx.leaseTtlMs });
    const structured = r as unknown as Record<string, unknown>;
    if (r.preview || !r.taskId) {
      return { structured, summary: `Forking from ${a.checkpointId} would change ${plural(r.changes.length, 'file')}; it inherits ${r.inherited.join(', ') || 'no finished step'}.`, detail: r.changes.map((c) => `${c.action} ${c.path}`).join('\n') || undefined };
    }
    const ctxDoc = await ctx.engine.resumeContext(r.taskId);
    return {
      structured: { ...structured, resumeContext: ctxDoc },
      summary: `Started task ${r.taskId}, forked from ${r.forkedFrom.taskId} at ${r.forkedFrom.checkpointId}: ${plural(r.filesWritten, 'file')} written, ${r.filesRemoved} removed. Continue it with its taskId.`,
      detail: ctxDoc.markdown,
    };
  },
});

/** A refusal by policy: reported as a tool error like an engine refusal. */
export class ToolRefusal extends Error {}

export const TOOLS: readonly ToolSpec[] = [
  taskStart,
  stepStart,
  stepComplete,
  stepFail,
  checkpoint,
  sideEffectBegin,
  sideEffectEnd,
  taskResume,
  taskStatus,
  taskComplete,
  rollback,
  fork,
] as ToolSpec[];

export const TOOL_NAMES = TOOLS.map((t) => t.name);

export function toolError(message: string): CallToolResult {
  return { content: [{ type: 'text', text: message }], isError: true };
}

/**
 * Runs one tool against the engine and shapes its MCP result. `args` are what the
 * MCP SDK parsed against the tool's input schema: that is the door, and a malformed
 * call never gets here (the SDK answers it with the schema's complaint). Engine
 * refusals (unknown task, illegal transition…) become tool errors with the engine's
 * message; the engine changed nothing in that case.
 */
export async function runTool(spec: ToolSpec, ctx: ToolContext, args: z.infer<ToolSpec['input']>): Promise<CallToolResult> {
  try {
    const out = await spec.run(ctx, args);
    const content: CallToolResult['content'] = [{ type: 'text', text: out.summary }];
    if (out.detail) content.push({ type: 'text', text: out.detail });
    return { content, structuredContent: out.structured };
  } catch (e) {
    if (isWaypointError(e) && e.code === 'held') return toolError(`STOP — this task waits for a person; do not retry. ${e.message}`);
    if (isWaypointError(e) && e.code === 'retry_later') {
      const at = Number(e.details?.retryAt);
      return toolError(`${e.message}${Number.isFinite(at) ? ` (retryAt ${new Date(at).toISOString()})` : ''}`);
    }
    if (isWaypointError(e) || e instanceof ToolRefusal) return toolError(e.message);
    return toolError(`Waypoint failed internally: ${errorMessage(e)}`);
  }
}

export const SERVER_INSTRUCTIONS = [
  'Waypoint records your work as a durable task the person can review, roll back and resume.',
  'Workflow: waypoint_task_status (is there an open task to resume?) → waypoint_task_start (goal + plan) →',
  'for each unit of work: waypoint_step_start BEFORE editing files, then waypoint_step_complete →',
  'before a command that changes the outside world: waypoint_side_effect_begin, obey its decision, then waypoint_side_effect_end →',
  'waypoint_task_complete when done. After any interruption call waypoint_task_resume first and follow its context.',
  'When a result says STOP or a task has a hold, it waits for a person (retries used up, side effects in doubt): stop and tell the person; do not retry.',
].join(' ');
