import * as fs from 'node:fs';
import * as path from 'node:path';
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { Engine } from '../core/engine/engine';
import { Logger, silentLogger } from '../core/log';
import { WaypointError } from '../core/model/errors';
import type { LeaseOwner, Task } from '../core/model/schema';
import { isActive, isOpen } from '../core/model/taskStates';
import { writeFileAtomicSync } from '../core/store/fsutil';
import { parseInput } from '../core/model/validate';
import { HOOK_ROUTES } from './hookRoutes';

/**
 * Claude Code hooks → the engine, with no cooperation from the agent:
 *
 *   UserPromptSubmit          start the session's task (goal = prompt), or continue it
 *   PreToolUse  Edit/Write/…  start a step (step_start checkpoint)
 *   PostToolUse Edit/Write/…  complete it (step_end checkpoint)
 *   PreToolUse  Bash          side-effect intent, keyed by the tool_use_id
 *   PostToolUse Bash          its outcome (PostToolUseFailure: failed)
 *   Stop                      waiting_review (open steps that never finished are failed, recoverable)
 *   SessionEnd                an active task is interrupted
 *
 * Every event is checked against what is already recorded first, so a hook that
 * fires twice (or a whole sequence fed again) appends nothing. The session → task
 * link lives in `.waypoint/hooks/<session>.json`.
 */
export const HOOK_ROUTE = HOOK_ROUTES['claude-code'];

/** Claude Code's documented hook input; unknown fields are kept (the format grows). */
export const ClaudeHookInput = z.looseObject({
  session_id: z.string().min(1).max(200),
  hook_event_name: z.string().min(1).max(100),
  cwd: z.string().max(4096).optional(),
  transcript_path: z.string().max(4096).optional(),
  tool_name: z.string().max(200).optional(),
  tool_input: z.record(z.string(), z.unknown()).optional(),
  tool_response: z.unknown().optional(),
  tool_use_id: z.string().max(200).optional(),
  prompt: z.string().optional(),
  error: z.unknown().optional(),
  reason: z.string().max(200).optional(),
});
export type ClaudeHookInput = z.infer<typeof ClaudeHookInput>;

export const EDIT_TOOLS = new Set(['Edit', 'MultiEdit', 'Write', 'NotebookEdit']);
/** Tasks driven by hooks have no process to watch; a long Bash call must not look like a dead driver. */
export const HOOK_LEASE_TTL_MS = 60 * 60_000;

const SessionState = z.strictObject({
  sessionId: z.string(),
  taskId: z.string().nullable(),
  generation: z.number().int().nonnegative(),
  /** Digests of prompt events already handled, so a repeated hook changes nothing. */
  seenPrompts: z.array(z.string()).max(200),
});
type SessionState = z.infer<typeof SessionState>;

export interface HookResult {
  event: string;
  taskId: string | null;
  actions: string[];
}

// Hook events of one process are handled one at a time (the state file is read-modify-write).
let queue: Promise<unknown> = Promise.resolve();

export function handleClaudeHook(engine: Engine, raw: unknown, opts: { log?: Logger } = {}): Promise<HookResult> {
  const run = queue.then(
    () => handle(engine, raw, (opts.log ?? silentLogger)),
    () => handle(engine, raw, (opts.log ?? silentLogger)),
  );
  queue = run.catch(() => undefined);
  return run;
}

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

function safeName(sessionId: string): string {
  return /^[A-Za-z0-9_-]{1,100}$/.test(sessionId) ? sessionId : sha(sessionId).slice(0, 32);
}

/** Step ids from tool_use_id (toolu_…): stable across repeats of the same hook. */
function stepIdFor(p: ClaudeHookInput): string {
  if (p.tool_use_id) {
    const id = p.tool_use_id.replace(/[^A-Za-z0-9._:\-/]/g, '_').slice(0, 120);
    return /^[A-Za-z0-9]/.test(id) ? id : `t${id}`.slice(0, 120);
  }
  return `tool-${sha(`${p.session_id}\n${p.tool_name}\n${JSON.stringify(p.tool_input ?? {})}`).slice(0, 16)}`;
}

function effectKeyFor(p: ClaudeHookInput): string {
  const id = p.tool_use_id ? p.tool_use_id.replace(/[^\x21-\x7e]/g, '_') : sha(`${p.session_id}\n${JSON.stringify(p.tool_input ?? {})}`).slice(0, 16);
  return `bash:${id}`.slice(0, 256);
}

function tail(v: unknown, max = 2000): string | undefined {
  if (typeof v !== 'string' || !v) return undefined;
  return v.length > max ? `…${v.slice(-max)}` : v;
}

class SessionStore {
  readonly file: string;
  constructor(storeDir: string, sessionId: string) {
    this.file = path.join(storeDir, 'hooks', `${safeName(sessionId)}.json`);
  }
  read(sessionId: string): SessionState {
    try {
      return SessionState.parse(JSON.parse(fs.readFileSync(this.file, 'utf8')));
    } catch {
      return { sessionId, taskId: null, generation: 0, seenPrompts: [] };
    }
  }
  write(s: SessionState): void {
    fs.mkdirSync(path.dirname(this.file), { recursive: true });
    writeFileAtomicSync(this.file, JSON.stringify(s));
  }
}

async function handle(engine: Engine, raw: unknown, log: Logger): Promise<HookResult> {
  const p = parseInput(ClaudeHookInput, raw, 'Claude Code hook input');
  const store = new SessionStore(engine.storeDir, p.session_id);
  let state = store.read(p.session_id);
  const owner: LeaseOwner = { id: `claude-code:${p.session_id}` };
  const actions: string[] = [];
  const current = (): Task | null => (state.taskId ? engine.queries.findTask(state.taskId) : null);

  /** The session's task, started or brought back to running as needed. */
  const ensureTask = async (goal: string): Promise<Task> => {
    let task = current();
    if (task && isOpen(task)) {
      if (!isActive(task)) {
        await engine.resumeTask({ taskId: task.id, owner, leaseTtlMs: HOOK_LEASE_TTL_MS });
        actions.push(`resumed ${task.id} (was ${task.state})`);
        task = engine.queries.task(task.id);
      }
      return task;
    }
    // A new task: the key makes a repeated start (or a lost state file) find the same one.
    let generation = state.taskId ? state.generation + 1 : state.generation;
    for (let tries = 0; tries < 1000; tries++, generation++) {
      const r = await engine.startTask({
        goal: goal.slice(0, 10_000) || `Claude Code session ${p.session_id}`,
        agent: 'claude-code',
        idempotencyKey: `claude-code:${p.session_id}:${generation}`.slice(0, 256),
        owner,
        leaseTtlMs: HOOK_LEASE_TTL_MS,
      });
      const t = engine.queries.findTask(r.taskId);
      if (t && isOpen(t)) {
        state = { ...state, taskId: t.id, generation };
        store.write(state);
        actions.push(`task ${t.id}`);
        return isActive(t) ? t : ensureTask(goal);
      }
    }
    throw new WaypointError('conflict', `Could not find a fresh task key for session ${p.session_id}.`);
  };
  const fallbackGoal = `Claude Code session ${p.session_id}`;

  switch (p.hook_event_name) {
    case 'UserPromptSubmit': {
      const digest = sha(JSON.stringify(p)).slice(0, 32);
      if (state.seenPrompts.includes(digest)) break;
      await ensureTask(p.prompt ?? fallbackGoal);
      state = { ...state, seenPrompts: [...state.seenPrompts, digest].slice(-100) };
      store.write(state);
      break;
    }
    case 'PreToolUse':
    case 'PostToolUse':
    case 'PostToolUseFailure': {
      if (p.tool_name && EDIT_TOOLS.has(p.tool_name)) await onEdit(engine, p, owner, actions, current, () => ensureTask(fallbackGoal));
      else if (p.tool_name === 'Bash') await onBash(engine, p, owner, actions, current, () => ensureTask(fallbackGoal));
      break;
    }
    case 'Stop': {
      const task = current();
      if (!task || !isActive(task)) break;
      // A tool call whose Post hook never came (denied, cancelled) leaves its step open; review needs none open.
      for (const s of engine.queries.steps(task.id).filter((x) => x.status === 'in_progress')) {
        await engine.failStep({ taskId: task.id, stepId: s.id, error: 'The tool call did not finish (denied, cancelled or failed before its result).', recoverable: true, owner });
        actions.push(`failed open step ${s.id}`);
      }
      // A failure that used the step's last attempt put the task on hold: it waits for the person, not for review.
      const held = engine.queries.findTask(task.id)?.hold;
      if (held) {
        actions.push(`${task.id} waits for a person: ${held.reason}`);
        break;
      }
      await engine.requestReview({ taskId: task.id, owner });
      actions.push(`${task.id} waiting_review`);
      break;
    }
    case 'SessionEnd': {
      const task = current();
      if (!task || !isActive(task)) break;
      await engine.interruptTask({ taskId: task.id, reason: `Claude Code session ended (${p.reason ?? 'unknown reason'})` });
      actions.push(`${task.id} interrupted`);
      break;
    }
    default:
      break;
  }
  const taskId = state.taskId;
  if (actions.length) log.info(`${p.hook_event_name}${p.tool_name ? ` ${p.tool_name}` : ''}: ${actions.join('; ')}`);
  return { event: p.hook_event_name, taskId, actions };
}

function editedPath(engine: Engine, p: ClaudeHookInput): { display: string; dirty: string[] } {
  const raw = p.tool_input?.file_path ?? p.tool_input?.notebook_path;
  if (typeof raw !== 'string' || !raw) return { display: '(unknown file)', dirty: [] };
  const abs = path.resolve(p.cwd ?? engine.workspace, raw);
  const rel = path.relative(engine.workspace, abs);
  // A path outside the workspace is recorded for the person but never handed to the snapshotter.
  if (!rel || rel.startsWith('..') || path.isAbsolute(rel)) return { display: abs, dirty: [] };
  return { display: rel.split(path.sep).join('/'), dirty: [rel.split(path.sep).join('/')] };
}

async function onEdit(engine: Engine, p: ClaudeHookInput, owner: LeaseOwner, actions: string[], current: () => Task | null, ensure: () => Promise<Task>): Promise<void> {
  const stepId = stepIdFor(p);
  const file = editedPath(engine, p);
  const existing = current() ? engine.queries.step(current()!.id, stepId) : null;
  const start = async (task: Task) => {
    await engine.startStep({ taskId: task.id, stepId, title: `${p.tool_name} ${file.display}`.slice(0, 500), inputs: { tool: p.tool_name, file: file.display }, owner, dirty: file.dirty });
    actions.push(`step ${stepId} started`);
  };
  if (p.hook_event_name === 'PreToolUse') {
    if (existing) return; // this tool call is already recorded
    await start(await ensure());
    return;
  }
  if (existing && existing.status !== 'in_progress') return;
  const task = await ensure();
  if (!existing) await start(task); // the Pre hook was missed (hooks installed mid-call)
  if (p.hook_event_name === 'PostToolUse') {
    await engine.completeStep({ taskId: task.id, stepId, outputs: { tool: p.tool_name, file: file.display }, summary: `${p.tool_name} ${file.display}`, owner, dirty: file.dirty });
    actions.push(`step ${stepId} completed`);
  } else {
    await engine.failStep({ taskId: task.id, stepId, error: errorText(p.error) ?? `${p.tool_name} failed`, recoverable: true, owner });
    actions.push(`step ${stepId} failed`);
  }
}

async function onBash(engine: Engine, p: ClaudeHookInput, owner: LeaseOwner, actions: string[], current: () => Task | null, ensure: () => Promise<Task>): Promise<void> {
  const key = effectKeyFor(p);
  const command = typeof p.tool_input?.command === 'string' ? p.tool_input.command : '';
  const existing = current() ? engine.queries.sideEffect(current()!.id, key) : null;
  const begin = async (task: Task) => {
    await engine.beginSideEffect({
      taskId: task.id,
      key,
      kind: 'shell',
      description: (command || 'shell command').slice(0, 2000),
      args: { command, description: p.tool_input?.description ?? null },
      owner,
    });
    actions.push(`side effect ${key} begun`);
  };
  if (p.hook_event_name === 'PreToolUse') {
    if (existing) return;
    await begin(await ensure());
    return;
  }
  if (existing && (existing.status === 'done' || existing.status === 'failed')) return;
  const task = await ensure();
  if (!existing) await begin(task);
  const outcome = bashOutcome(p);
  await engine.endSideEffect({ taskId: task.id, key, owner, ...outcome });
  actions.push(`side effect ${key} ${outcome.ok ? 'done' : 'failed'}`);
}

/** PostToolUse fires on success; an explicit exit code or interruption still counts as failure. */
function bashOutcome(p: ClaudeHookInput): { ok: boolean; result?: unknown; error?: string } {
  if (p.hook_event_name === 'PostToolUseFailure') return { ok: false, error: errorText(p.error) ?? 'the command failed' };
  const r = (typeof p.tool_response === 'object' && p.tool_response !== null ? p.tool_response : {}) as Record<string, unknown>;
  const code = [r.exit_code, r.exitCode, r.returnCode].find((v) => typeof v === 'number') as number | undefined;
  const result = Object.fromEntries(
    Object.entries({ exitCode: code, stdout: tail(r.stdout), stderr: tail(r.stderr), interrupted: r.interrupted === true ? true : undefined }).filter(([, v]) => v !== undefined),
  );
  if (r.interrupted === true) return { ok: false, error: 'the command was interrupted' };
  if (code !== undefined && code !== 0) return { ok: false, error: `exit code ${code}${tail(r.stderr, 500) ? `: ${tail(r.stderr, 500)}` : ''}` };
  return { ok: true, result };
}

function errorText(e: unknown): string | undefined {
  if (typeof e === 'string' && e) return e.slice(0, 10_000);
  if (e && typeof e === 'object') return JSON.stringify(e).slice(0, 10_000);
  return undefined;
}
