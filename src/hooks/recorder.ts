import * as path from 'node:path';
import { createHash } from 'node:crypto';
import { toKey, type SnapshotRoot } from '../core/snapshot';
import type { EngineApi } from '../core/engine/operations';
import { Logger, silentLogger } from '../core/log';
import { WaypointError, isWaypointError } from '../core/model/errors';
import type { LeaseOwner, Step, Task } from '../core/model/schema';
import { isActive, isOpen, isResumable } from '../core/model/taskStates';
import { resumePromptTaskId } from '../core/engine/resumeContext';
import type { HookEnvelope, PlanItemChange, TodoItem, ToolCall } from './events';
import { SessionFile, remember, zeroCounts, type SessionState } from './sessionState';
import { bound, lastAssistantMessage } from './transcript';
import { applyTodoSql } from './sqlTodos';

/**
 * The one hook recorder: normalised hook events (events.ts) → the engine API.
 *
 *   prompt                 the session's task (goal = first prompt) is started or continued; a turn begins
 *   tool before/after      edit, shell: a `tool_start` and a `tool_end` checkpoint around the call, in the
 *                          current step (the todo item in progress, else the turn's own step), so what the
 *                          call changed is the agent's and what changed between calls is the person's;
 *                          a shell call is also a side effect (intent before, outcome after)
 *                          todo: the list becomes the plan (todoPlan below)
 *   stop                   the turn's digest is recorded; with no todo item in progress the task waits for review
 *   compaction             counted in the turn's digest
 *   session start resume   the session's task continues (resumed if it was interrupted)
 *   session end            an active task is interrupted
 *
 * Every event is checked against what is recorded first, so a hook delivered twice
 * (or a whole session fed again) appends nothing.
 */
export interface RecorderContext {
  api: EngineApi;
  /** The store's directory (session files live in `hooks/` there). */
  storeDir: string;
  workspace: string;
  /** The store's folders (several in a multi-root window): paths are shown as the store keys them, `folder/…` there. */
  roots?: readonly SnapshotRoot[];
  /** The agent's name as tasks record it: `claude-code`, `cursor`… */
  agent: string;
  /** How the agent is named to a person. */
  agentLabel: string;
  log?: Logger;
}

export interface HookResult {
  event: string;
  taskId: string | null;
  actions: string[];
}

/** Hook-driven tasks have no process to watch; a long shell call must not look like a dead driver. */
export const HOOK_LEASE_TTL_MS = 60 * 60_000;

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

/** Plan step ids from a todo item's words: the same item keeps its id however the list is rewritten around it. */
export function todoStepId(content: string): string {
  const norm = content.normalize('NFC').trim().replace(/\s+/g, ' ').toLowerCase();
  return `todo-${sha(norm).slice(0, 12)}`;
}

/** The side effect's key: the call's id, or (id-less agents) the paired content key. */
function effectKey(callKey: string): string {
  return `shell:${callKey.replace(/[^\x21-\x7e]/g, '_')}`.slice(0, 256);
}

/** A call's content, for agents that give no call id: its before and after hooks carry the same. */
function contentKey(call: ToolCall, sessionId: string): string {
  return `c${sha(`${sessionId}\n${call.name}\n${call.command ?? ''}\n${(call.files ?? []).join('\n')}\n${JSON.stringify(call.todos ?? null)}`).slice(0, 24)}`;
}

// Hook events of one process are handled one at a time (the session file is read-modify-write).
let queue: Promise<unknown> = Promise.resolve();

export function recordHook(ctx: RecorderContext, env: HookEnvelope): Promise<HookResult> {
  const run = queue.then(
    () => new Recording(ctx, env).run(),
    () => new Recording(ctx, env).run(),
  );
  queue = run.catch(() => undefined);
  return run;
}

class Recording {
  private readonly file: SessionFile;
  private state: SessionState;
  private readonly owner: LeaseOwner;
  private readonly actions: string[] = [];
  private readonly log: Logger;
  private readonly api: EngineApi;

  constructor(
    private readonly ctx: RecorderContext,
    private readonly env: HookEnvelope,
  ) {
    this.file = new SessionFile(ctx.storeDir, ctx.agent, env.sessionId);
    this.state = this.file.read(env.sessionId);
    this.owner = { id: `${ctx.agent}:${env.sessionId}`.slice(0, 200) };
    this.log = ctx.log ?? silentLogger;
    this.api = ctx.api;
  }

  async run(): Promise<HookResult> {
    const e = this.env.event;
    switch (e.type) {
      case 'session_start':
        await this.onSessionStart(e.source);
        break;
      case 'prompt':
        await this.onPrompt(e.firstOnly && this.state.turns > 0 ? '' : e.prompt);
        break;
      case 'tool_before':
        await this.onToolBefore(e.call);
        break;
      case 'tool_after':
        await this.onToolAfter(e);
        break;
      case 'stop':
        await this.onStop(e.lastMessage);
        break;
      case 'agent_message':
        if (this.state.turn) {
          this.state.turn.lastMessage = bound(e.text);
          this.save();
        }
        break;
      case 'plan_item':
        await this.onPlanItem(e.item);
        break;
      case 'turn_failed':
        await this.onTurnFailed(e.error, e.lastMessage);
        break;
      case 'compaction':
        if (this.state.turn) this.state.turn.compactions++;
        else this.state.pendingCompactions++;
        this.save();
        break;
      case 'session_end':
        await this.onSessionEnd(e.reason);
        break;
      case 'ignored':
        break;
    }
    const name = e.type === 'ignored' ? e.name : e.type;
    if (this.actions.length) this.log.info(`${this.ctx.agent} ${name}: ${this.actions.join('; ')}`);
    return { event: name, taskId: this.state.taskId, actions: this.actions };
  }

  private save(): void {
    this.file.write(this.state);
  }

  private async findTask(id: string | null): Promise<Task | null> {
    if (!id) return null;
    try {
      return (await this.api.taskDetail(id)).task;
    } catch (e) {
      if (isWaypointError(e) && e.code === 'not_found') return null;
      throw e;
    }
  }

  private async steps(taskId: string): Promise<Step[]> {
    return (await this.api.taskDetail(taskId)).steps;
  }

  /** The session's active task, if it has one (nothing is started or resumed). */
  private async activeTask(): Promise<Task | null> {
    const t = await this.findTask(this.state.taskId);
    return t && isActive(t) ? t : null;
  }

  /**
   * A session with no open task whose prompt is a pasted resume prompt continues the
   * task it names: copying the prompt resumed nothing, so this first call does.
   */
  private async adoptPastedResume(prompt: string): Promise<void> {
    const current = await this.findTask(this.state.taskId);
    if (current && isOpen(current)) return;
    const id = resumePromptTaskId(prompt);
    const pasted = id ? await this.findTask(id) : null;
    if (!pasted || !isResumable(pasted)) return;
    this.state = { ...this.state, taskId: pasted.id };
    this.save();
    this.actions.push(`continues ${pasted.id} from a pasted resume prompt`);
  }

  /** The session's task, started or brought back to running as needed. */
  private async ensureTask(goal: string): Promise<Task> {
    const task = await this.findTask(this.state.taskId);
    if (task && isOpen(task)) {
      if (isActive(task)) return task;
      await this.api.resumeTask({ taskId: task.id, owner: this.owner, leaseTtlMs: HOOK_LEASE_TTL_MS });
      this.actions.push(`resumed ${task.id} (was ${task.state})`);
      return (await this.api.taskDetail(task.id)).task;
    }
    // A new task: the key makes a repeated start (or a lost session file) find the same one.
    let generation = this.state.taskId ? this.state.generation + 1 : this.state.generation;
    for (let tries = 0; tries < 1000; tries++, generation++) {
      const r = await this.api.startTask({
        goal: goal.slice(0, 10_000) || this.fallbackGoal(),
        agent: this.ctx.agent,
        idempotencyKey: `${this.ctx.agent}:${this.env.sessionId}:${generation}`.slice(0, 256),
        owner: this.owner,
        leaseTtlMs: HOOK_LEASE_TTL_MS,
      });
      const t = await this.findTask(r.taskId);
      if (t && isOpen(t)) {
        this.state = { ...this.state, taskId: t.id, generation };
        this.save();
        this.actions.push(`task ${t.id}`);
        return isActive(t) ? t : this.ensureTask(goal);
      }
    }
    throw new WaypointError('conflict', `Could not find a fresh task key for ${this.ctx.agentLabel} session ${this.env.sessionId}.`);
  }

  private fallbackGoal(): string {
    return `${this.ctx.agentLabel} session ${this.env.sessionId}`.slice(0, 10_000);
  }

  private async onSessionStart(source: string): Promise<void> {
    // A new session starts its task at its first prompt; a resumed one (same session id) continues its own.
    if (source === 'startup' || !this.state.taskId) return;
    const task = await this.findTask(this.state.taskId);
    if (task && isOpen(task) && !isActive(task)) await this.ensureTask(task.goal);
  }

  private async onPrompt(prompt: string): Promise<void> {
    const digest = this.env.digest ?? sha(`${this.state.turns}\n${prompt}`).slice(0, 32);
    if (this.state.seenPrompts.includes(digest)) return;
    await this.adoptPastedResume(prompt);
    const task = await this.ensureTask(prompt.trim() || this.fallbackGoal());
    // A prompt with no Stop before it (the person interrupted the agent): the earlier turn ends here.
    if (this.state.turn) await this.endTurn(task, undefined);
    const n = this.state.turns + 1;
    this.state = {
      ...this.state,
      seenPrompts: remember(this.state.seenPrompts, digest, 100),
      turns: n,
      turn: { n, prompt: bound(prompt, 4000), stepId: null, tools: zeroCounts(), compactions: this.state.pendingCompactions, startedAt: Date.now() },
      pendingCompactions: 0,
    };
    this.save();
    this.actions.push(`turn ${n}`);
  }

  /** The step a file-changing call's work belongs to: the todo item in progress, else this turn's own step. */
  private async workStep(task: Task): Promise<string> {
    const steps = await this.steps(task.id);
    const todo = steps.filter((s) => s.status === 'in_progress' && s.id.startsWith('todo-')).sort((a, b) => (b.startedAt ?? 0) - (a.startedAt ?? 0))[0];
    if (todo) return todo.id;
    const turn = this.state.turn ?? this.startImplicitTurn();
    const id = turn.stepId ?? `turn-${turn.n}`;
    const existing = steps.find((s) => s.id === id);
    if (existing?.status !== 'in_progress') {
      await this.api.startStep({ taskId: task.id, stepId: id, title: bound(`Turn ${turn.n}: ${turn.prompt || 'agent work'}`, 500), inputs: { prompt: turn.prompt }, owner: this.owner });
      this.actions.push(`step ${id} started`);
    }
    turn.stepId = id;
    this.save();
    return id;
  }

  /** Hooks installed mid-session: work arrives with no prompt seen. */
  private startImplicitTurn() {
    const n = this.state.turns + 1;
    this.state.turns = n;
    this.state.turn = { n, prompt: '', stepId: null, tools: zeroCounts(), compactions: this.state.pendingCompactions, startedAt: Date.now() };
    this.state.pendingCompactions = 0;
    return this.state.turn;
  }

  /**
   * The key a call's hooks are recognised by. With the agent's id it is that id; without
   * one, the same command run twice must be two calls, so the n-th before hook of a content
   * pairs with the n-th after hook (a repeated delivery cannot be told from a new call then).
   */
  private callKey(call: ToolCall, phase: 'pre' | 'post'): string {
    if (call.id) return call.id;
    const base = contentKey(call, this.env.sessionId);
    let n = 1;
    while (this.state.seenCalls.includes(`${phase}:${base}#${n}`)) n++;
    return `${base}#${n}`;
  }

  private seen(tag: string): boolean {
    if (this.state.seenCalls.includes(tag)) return true;
    this.state.seenCalls = remember(this.state.seenCalls, tag, 1000);
    return false;
  }

  private describe(call: ToolCall): string {
    if (call.kind === 'shell') return bound(`${call.name}: ${call.command ?? ''}`, 200);
    const files = (call.files ?? []).map((f) => this.displayPath(f));
    return bound(`${call.name} ${files.join(', ') || '(unknown file)'}`, 200);
  }

  private displayPath(p: string): string {
    const abs = path.resolve(this.env.cwd ?? this.ctx.workspace, p);
    if (this.ctx.roots && this.ctx.roots.length > 1) return toKey(this.ctx.roots, abs) || abs;
    const rel = path.relative(this.ctx.workspace, abs);
    return !rel || rel.startsWith('..') || path.isAbsolute(rel) ? abs : rel.split(path.sep).join('/');
  }

  private async onToolBefore(call: ToolCall): Promise<void> {
    const key = this.callKey(call, 'pre');
    if (this.seen(`pre:${key}`)) return;
    const task = await this.ensureTask(this.fallbackGoal());
    if (!this.state.turn) this.startImplicitTurn();
    this.state.turn!.tools[call.kind]++;
    if (call.kind === 'edit' || call.kind === 'shell') {
      const stepId = await this.workStep(task);
      await this.api.checkpoint({ taskId: task.id, kind: 'tool_start', stepId, label: `before ${this.describe(call)}`, owner: this.owner });
      if (call.kind === 'shell') await this.beginShell(task, call, stepId, key);
      this.state.open[key] = { stepId, kind: call.kind };
      this.actions.push(`${call.kind} ${call.name} begun in ${stepId}`);
    }
    this.save();
  }

  private async beginShell(task: Task, call: ToolCall, stepId: string, key: string): Promise<void> {
    await this.api.beginSideEffect({
      taskId: task.id,
      stepId,
      key: effectKey(key),
      kind: 'shell',
      description: bound(call.command || 'shell command', 2000),
      args: { command: call.command ?? '', tool: call.name },
      owner: this.owner,
    });
  }

  private async onToolAfter(e: Extract<HookEnvelope['event'], { type: 'tool_after' }>): Promise<void> {
    const { call } = e;
    const key = this.callKey(call, 'post');
    if (this.seen(`post:${key}`)) return;
    const task = await this.ensureTask(this.fallbackGoal());
    if (call.kind === 'todo') {
      if (!this.state.turn) this.startImplicitTurn();
      this.state.turn!.tools.todo += this.state.seenCalls.includes(`pre:${key}`) ? 0 : 1;
      if (e.ok && call.todos) await this.todoPlan(task, call.todos);
      if (e.ok && call.planItem) await this.planItem(task, call.planItem);
      if (e.ok && call.todoSql) await this.sqlPlan(task, call.todoSql);
      this.save();
      return;
    }
    if (call.kind !== 'edit' && call.kind !== 'shell') {
      if (!this.state.seenCalls.includes(`pre:${key}`)) {
        if (!this.state.turn) this.startImplicitTurn();
        this.state.turn!.tools.other++;
      }
      this.save();
      return;
    }
    let open = this.state.open[key];
    if (!open) {
      // The before hook never came (hooks installed mid-call, or the agent has no before hook for
      // this tool): the changes since the last checkpoint are credited to this call, as before.
      if (!this.state.turn) this.startImplicitTurn();
      this.state.turn!.tools[call.kind]++;
      const stepId = await this.workStep(task);
      if (call.kind === 'shell') await this.beginShell(task, call, stepId, key);
      open = { stepId, kind: call.kind };
    }
    if (call.kind === 'shell') {
      const ekey = effectKey(key);
      const effect = (await this.api.taskDetail(task.id)).sideEffects.find((s) => s.key === ekey);
      if (effect && (effect.status === 'intent' || effect.status === 'in_doubt')) {
        const failed = !e.ok || (e.exitCode !== undefined && e.exitCode !== 0);
        const result = Object.fromEntries(Object.entries({ exitCode: e.exitCode, stdout: tail(e.stdout), stderr: tail(e.stderr) }).filter(([, v]) => v !== undefined));
        if (failed) await this.api.endSideEffect({ taskId: task.id, key: ekey, ok: false, error: bound(e.error ?? `exit code ${e.exitCode ?? 'unknown'}${e.stderr ? `: ${tail(e.stderr, 500)}` : ''}`, 10_000), owner: this.owner });
        else await this.api.endSideEffect({ taskId: task.id, key: ekey, ok: true, result, owner: this.owner });
      }
    }
    const step = (await this.steps(task.id)).find((s) => s.id === open.stepId);
    // The step may have ended in between (a todo update inside a parallel call): the change is still the agent's, in its own step.
    const named = call.kind === 'edit' ? (call.files ?? []).map((f) => path.resolve(this.env.cwd ?? this.ctx.workspace, f)) : [];
    // An edit tool changes only the files it names: its interval holds just those (a scan of them
    // alone), and a full scan right after gives what anyone else changed meanwhile to no step.
    // A shell call (or an edit naming nothing) owns everything that changed while it ran.
    await this.api.checkpoint({ taskId: task.id, kind: 'tool_end', stepId: step ? step.id : open.stepId, label: `after ${this.describe(call)}`, owner: this.owner, ...(named.length ? { dirty: named } : {}) });
    if (named.length) await this.api.checkpoint({ taskId: task.id, kind: 'tool_end', stepId: null, label: `others' changes during ${this.describe(call)}`.slice(0, 200), owner: this.owner });
    delete this.state.open[key];
    this.actions.push(`${call.kind} ${call.name} recorded in ${open.stepId}`);
    this.save();
  }

  /**
   * The agent's todo list becomes the plan: each item a step whose id comes from its
   * words, new items extend the plan, an item marked in progress starts its step,
   * one marked done completes it, one dropped from the list (or cancelled) is skipped.
   */
  private async todoPlan(task: Task, todos: readonly TodoItem[]): Promise<void> {
    const items: { id: string; content: string; status: TodoItem['status'] }[] = [];
    const ids = new Set<string>();
    for (const t of todos) {
      if (!t.content.trim()) continue;
      let id = todoStepId(t.content);
      for (let k = 2; ids.has(id); k++) id = `${todoStepId(t.content)}-${k}`;
      ids.add(id);
      items.push({ id, content: t.content, status: t.status });
    }
    let steps = await this.steps(task.id);
    const fresh = items.filter((i) => !steps.some((s) => s.id === i.id));
    if (fresh.length) {
      await this.api.extendPlan({ taskId: task.id, plan: fresh.map((i) => ({ id: i.id, title: bound(i.content, 500) })), owner: this.owner });
      this.actions.push(`plan +${fresh.length}`);
      steps = await this.steps(task.id);
    }
    const status = (id: string) => steps.find((s) => s.id === id)?.status;
    const toComplete = items.filter((i) => i.status === 'completed' && status(i.id) !== 'completed' && status(i.id) !== 'skipped');
    const toSkip = [
      ...items.filter((i) => i.status === 'cancelled' && (status(i.id) === 'pending' || status(i.id) === 'in_progress' || status(i.id) === 'failed')).map((i) => i.id),
      ...steps.filter((s) => s.id.startsWith('todo-') && !ids.has(s.id) && (s.status === 'pending' || s.status === 'in_progress' || s.status === 'failed')).map((s) => s.id),
    ];
    const toStart = items.filter((i) => i.status === 'in_progress' && (status(i.id) === 'pending' || status(i.id) === 'failed' || status(i.id) === 'skipped'));
    const turnStep = this.state.turn?.stepId && status(this.state.turn.stepId) === 'in_progress' ? this.state.turn.stepId : null;
    if (!toComplete.length && !toSkip.length && !toStart.length) return;
    // A step's end checkpoint credits what changed since the last one to the agent: first a
    // boundary, so the person's edits since the agent's last tool call stay the person's.
    await this.api.checkpoint({ taskId: task.id, kind: 'tool_start', label: 'plan update', owner: this.owner });
    if (turnStep && (toStart.length || toComplete.length)) {
      // Work done before the plan said which item it was for stays with the turn.
      await this.api.completeStep({ taskId: task.id, stepId: turnStep, summary: 'work before the plan', owner: this.owner });
      this.state.turn!.stepId = null;
      this.actions.push(`step ${turnStep} completed`);
    }
    for (const i of toComplete) {
      if (status(i.id) !== 'in_progress') await this.api.startStep({ taskId: task.id, stepId: i.id, owner: this.owner });
      await this.api.completeStep({ taskId: task.id, stepId: i.id, summary: bound(i.content, 10_000), owner: this.owner });
      this.actions.push(`step ${i.id} completed`);
    }
    for (const id of toSkip) {
      // Only a step not yet under way may be skipped: one in progress is failed first (recoverably).
      if (status(id) === 'in_progress') await this.api.failStep({ taskId: task.id, stepId: id, error: 'The agent dropped this item from its todo list.', recoverable: true, owner: this.owner });
      await this.api.skipStep({ taskId: task.id, stepId: id, reason: 'dropped from the agent’s todo list', owner: this.owner });
      this.actions.push(`step ${id} skipped`);
    }
    for (const i of toStart) {
      await this.api.startStep({ taskId: task.id, stepId: i.id, owner: this.owner });
      this.actions.push(`step ${i.id} started`);
    }
  }

  /** The agent's SQL on its todos table, run on the session's copy of the plan; SQL that does not run there changes nothing. */
  private async sqlPlan(task: Task, query: string): Promise<void> {
    const after = await applyTodoSql(this.state.planItems ?? [], query);
    if (!after) return;
    this.state.planItems = after;
    await this.todoPlan(task, after);
  }

  /** A plan item reported by its own event (TaskCreated, TaskCompleted): as its tool call's after hook would. */
  private async onPlanItem(item: PlanItemChange): Promise<void> {
    const task = await this.ensureTask(this.fallbackGoal());
    await this.planItem(task, item);
    this.save();
  }

  /**
   * An agent that keeps its plan item by item: the item is merged into the session's copy of
   * the plan (words from its creation, status from each update) and the whole list becomes
   * the plan as a todo list does. An update for an item never seen (its creation was before
   * the hooks) has no words and changes nothing.
   */
  private async planItem(task: Task, item: PlanItemChange): Promise<void> {
    const items = [...(this.state.planItems ?? [])];
    const at = items.findIndex((i) => i.id === item.id);
    if (at < 0) {
      if (!item.content) return;
      items.push({ id: item.id, content: item.content, status: item.status ?? 'pending' });
    } else if (item.status && !(items[at].status === 'completed' && item.status === 'pending')) {
      items[at] = { ...items[at], status: item.status };
    }
    this.state.planItems = items.slice(-500);
    await this.todoPlan(task, items);
  }

  /** The turn ended on an error (the model API failed): recorded, and the task is interrupted with the error as its cause. */
  private async onTurnFailed(error: string, lastMessage: string | undefined): Promise<void> {
    const task = await this.activeTask();
    if (!task) return;
    await this.endTurn(task, lastMessage);
    await this.api.interruptTask({ taskId: task.id, reason: bound(`${this.ctx.agentLabel} turn failed: ${error}`, 2000) });
    this.actions.push(`${task.id} interrupted (turn failed)`);
  }

  private async onStop(lastMessage: string | undefined): Promise<void> {
    const task = await this.activeTask();
    if (!task) return;
    await this.endTurn(task, lastMessage);
    const steps = await this.steps(task.id);
    // A tool call whose after hook never came (denied, cancelled) leaves a turn step open: it did not finish.
    for (const s of steps.filter((x) => x.status === 'in_progress' && !x.id.startsWith('todo-'))) {
      await this.api.failStep({ taskId: task.id, stepId: s.id, error: 'The tool call did not finish (denied, cancelled or failed before its result).', recoverable: true, owner: this.owner });
      this.actions.push(`failed open step ${s.id}`);
    }
    const now = await this.findTask(task.id);
    if (now?.hold) {
      // A failure that used the step's last attempt put the task on hold: it waits for the person, not for review.
      this.actions.push(`${task.id} waits for a person: ${now.hold.reason}`);
      return;
    }
    // A todo item still in progress: the agent paused mid-plan (it asked something); the task stays running.
    if ((await this.steps(task.id)).some((s) => s.status === 'in_progress')) return;
    await this.api.requestReview({ taskId: task.id, owner: this.owner });
    this.actions.push(`${task.id} waiting_review`);
  }

  /** Records the turn's digest and closes its own step. */
  private async endTurn(task: Task, lastMessage: string | undefined): Promise<void> {
    const turn = this.state.turn;
    if (!turn) return;
    const message = lastMessage ? bound(lastMessage) : (turn.lastMessage ?? lastAssistantMessage(this.env.transcriptPath));
    const steps = await this.steps(task.id);
    const current = steps.filter((s) => s.status === 'in_progress' && s.id.startsWith('todo-')).sort((a, b) => (b.startedAt ?? 0) - (a.startedAt ?? 0))[0];
    const stepId = turn.stepId && steps.find((s) => s.id === turn.stepId)?.status === 'in_progress' ? turn.stepId : null;
    const digest = { turn: turn.n, prompt: bound(turn.prompt), lastMessage: message ?? null, tools: turn.tools, compactions: turn.compactions };
    // A call whose after hook never came leaves its step open: it did not finish, so the turn's step is not complete
    // (a stop fails it, a session end leaves it for the interruption to name).
    const unfinished = stepId !== null && Object.values(this.state.open).some((o) => o.stepId === stepId);
    if (stepId && !unfinished) {
      await this.api.checkpoint({ taskId: task.id, kind: 'tool_start', label: 'end of turn', owner: this.owner });
      await this.api.completeStep({ taskId: task.id, stepId, outputs: digest, summary: message ? bound(message, 500) : `turn ${turn.n}`, owner: this.owner });
      this.actions.push(`step ${stepId} completed`);
    }
    await this.api.recordTurn({
      taskId: task.id,
      turn: turn.n,
      sessionId: this.env.sessionId.slice(0, 200),
      stepId: stepId ?? current?.id ?? null,
      prompt: digest.prompt,
      lastMessage: digest.lastMessage,
      tools: turn.tools,
      compactions: turn.compactions,
      startedAt: turn.startedAt,
      owner: this.owner,
    });
    this.actions.push(`turn ${turn.n} recorded`);
    this.state.turn = null;
    this.state.open = {};
    this.save();
  }

  private async onSessionEnd(reason: string | undefined): Promise<void> {
    const task = await this.activeTask();
    if (!task) return;
    await this.endTurn(task, undefined);
    await this.api.interruptTask({ taskId: task.id, reason: `${this.ctx.agentLabel} session ended (${reason ?? 'unknown reason'})` });
    this.actions.push(`${task.id} interrupted`);
  }
}

function tail(v: string | undefined, max = 2000): string | undefined {
  if (!v) return undefined;
  return v.length > max ? `…${v.slice(-max)}` : v;
}
