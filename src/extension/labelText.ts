import type { CheckpointMeta, SideEffect, Step, Task, WaypointEvent } from '../core/model/schema';
import { CHECKPOINT_LABEL } from './checkpointLabels';
import { plural } from '../core/model/plural';
import { displayText } from '../core/model/displayText';
import { HOOK_AGENTS, isHookAgent } from '../hooks/agents';

/**
 * The words of Waypoint's rows, tooltips and documents, as plain functions (no `vscode`
 * import) so each is tested in plain Node. The tree, the status bar and the events
 * document all read from here, so a count or a state is said the same way everywhere.
 */

export { plural };

/** A task that an agent is working on right now (its steps may legitimately be in progress). */
export function isLiveTask(t: Pick<Task, 'state'>): boolean {
  return t.state === 'running' || t.state === 'waiting_tool' || t.state === 'planning';
}

/** Progress, written one way everywhere (tree, status bar, tooltip): `2/4 steps`, or `no plan`. Skipped steps count as done. */
export function stepsProgress(steps: readonly Pick<Step, 'status'>[]): string {
  if (!steps.length) return 'no plan';
  const done = steps.filter((s) => s.status === 'completed' || s.status === 'skipped').length;
  return `${done}/${steps.length} steps`;
}

/**
 * How a step's state reads. A step left `in_progress` under a task that is no longer
 * live is not running: nobody works on it until the task resumes, so it says so.
 */
export type StepShownStatus = Step['status'] | 'stopped';
export function stepShownStatus(s: Pick<Step, 'status'>, task: Pick<Task, 'state'>): StepShownStatus {
  return s.status === 'in_progress' && !isLiveTask(task) ? 'stopped' : s.status;
}
export const STEP_STATUS_WORD: Record<StepShownStatus, string> = {
  pending: 'pending',
  in_progress: 'in progress',
  completed: 'completed',
  failed: 'failed',
  skipped: 'skipped',
  abandoned: 'abandoned',
  stopped: 'stopped (task interrupted)',
};

/** `42 s`, `3 min`, `1 h 5 min`, `3 d`. */
export function duration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  return h < 48 ? `${h} h ${m % 60} min` : `${Math.round(h / 24)} d`;
}

/** A step's row description: state, then what it waits for (by title, not id), then how long it took or has run. */
export function stepDescription(s: Step, task: Pick<Task, 'state'>, steps: readonly Step[], retry: string, now = Date.now()): string {
  const shown = stepShownStatus(s, task);
  const parts = [STEP_STATUS_WORD[shown] + (s.attempts > 1 || s.status === 'failed' ? ` (${retry})` : '')];
  const open = s.dependsOn.filter((d) => steps.find((x) => x.id === d)?.status !== 'completed');
  // Only unfinished prerequisites are worth a row's width; the tooltip lists them all.
  if (s.status === 'pending' && open.length) parts.push(`after ${open.map((d) => steps.find((x) => x.id === d)?.title ?? d).join(', ')}`);
  if (s.startedAt) parts.push(s.endedAt ? duration(Math.max(1000, s.endedAt - s.startedAt)) : shown === 'stopped' ? '' : `${duration(now - s.startedAt)}`);
  return parts.filter(Boolean).join(' · ');
}

/** An auto or history checkpoint's stored label counts the editor's dirty files ("1 file change"), which can disagree with what it captured. */
const DIRTY_COUNT_LABEL = /^\d+ file changes?$/;
/** The engine names a pre-rollback checkpoint by its target's id; a person gets the target's label and local time. */
const PRE_ROLLBACK_LABEL = /^before rolling back to (\S+)$/;
/** An undo's pre-rollback checkpoint is named by the rollback it undoes, which has no name of its own. */
const UNDO_LABEL = /^undo of rollback \S+$/;

/** Ids the engine makes (`t_`, `c_`, `r_`, `s_`, `a_` and 15 base-36 characters; see core/engine/ids.ts). */
const ENGINE_ID = /\b[tcrsa]_[0-9a-z]{15}\b/g;
const NAMED_ID = /\b(Task|task|Step|step|Checkpoint|checkpoint|Rollback|rollback) '?([tcrsa]_[0-9a-z]{15})'?/g;
/** A step id after its quoted title, as the engine's step names put it (see engine.ts stepName). */
const TITLED_ID = /” \([^()\s]{1,128}\)/g;
const ID_NOUN: Record<string, string> = { t: 'a task', c: 'a checkpoint', r: 'a rollback', s: 'a step', a: 'an attempt' };

/**
 * Engine text for a person (an error in a toast, a reason the engine wrote): each id
 * becomes the name `names` gives it, in quotes, or else words ("the task", "a
 * checkpoint"). Ids stay in tooltips, Copy Id and `--json`; a person reads titles.
 */
export function withoutIds(text: string, names: ReadonlyMap<string, string> = new Map()): string {
  return text
    .replace(NAMED_ID, (_m, word: string, id: string) => {
      const name = names.get(id);
      return name ? `${word} “${name}”` : word;
    })
    .replace(ENGINE_ID, (id) => (names.get(id) ? `“${names.get(id)}”` : ID_NOUN[id[0]!]!))
    // The engine names a step “Its title” (its-id) for the agent reading the same text; a person reads the title.
    .replace(TITLED_ID, '”');
}

import { checkpointChanges } from '../core/model/checkpointWords';
export { checkpointChanges, isShownCheckpoint } from '../core/model/checkpointWords';

/**
 * A checkpoint's name for a person: its own label unless that label is an internal
 * count or id, else its kind; a pre-rollback checkpoint names the checkpoint it rolled
 * back to by that one's name and local time.
 */
export function checkpointName(c: CheckpointMeta, checkpoints: readonly CheckpointMeta[] = [], steps: readonly Step[] = []): string {
  const m = c.kind === 'pre_rollback' && c.label ? PRE_ROLLBACK_LABEL.exec(c.label) : null;
  if (m) {
    const target = checkpoints.find((x) => x.id === m[1]);
    return target ? `Before rolling back to ${checkpointWithStep(target, checkpoints, steps)} (${new Date(target.createdAt).toLocaleTimeString()})` : CHECKPOINT_LABEL.pre_rollback;
  }
  if (c.kind === 'pre_rollback' && c.label && UNDO_LABEL.test(c.label)) return 'Before undoing a rollback';
  if (!c.label || DIRTY_COUNT_LABEL.test(c.label)) return CHECKPOINT_LABEL[c.kind];
  // A recorded label, shown in rows, pickers and titles: escaped (see displayText).
  return displayText(c.label);
}

/** The name plus the step it belongs to (for pickers and tooltips, where the step is not the row's parent). */
export function checkpointWithStep(c: CheckpointMeta, checkpoints: readonly CheckpointMeta[], steps: readonly Step[]): string {
  const step = c.stepId ? steps.find((s) => s.id === c.stepId) : undefined;
  return `${checkpointName(c, checkpoints, steps)}${step ? `: ${displayText(step.title)}` : ''}`;
}

/**
 * A checkpoint row's description: a base checkpoint changed nothing, so it says how many
 * files it holds; the others say how many files changed since the one before.
 */
export function checkpointDescription(c: CheckpointMeta): string {
  return `${c.damaged ? 'damaged · ' : ''}${new Date(c.createdAt).toLocaleTimeString()} · ${checkpointChanges(c)}`;
}

export function checkpointTooltipText(c: CheckpointMeta, checkpoints: readonly CheckpointMeta[], steps: readonly Step[]): string {
  const lines = [checkpointWithStep(c, checkpoints, steps), `${CHECKPOINT_LABEL[c.kind]} · ${new Date(c.createdAt).toLocaleString()}`];
  lines.push(c.kind === 'task_base' ? `${plural(c.files, 'file')} tracked` : `${plural(c.files, 'file')} tracked, ${c.filesChanged} changed since the checkpoint before`);
  if (c.damaged) lines.push(`Damaged: ${c.damaged}`);
  return lines.join('\n');
}

/** A recorded result for a tooltip: a string as it is, anything else as compact JSON, cut to `max` characters. */
export function resultText(result: unknown, max = 500): string | null {
  if (result === null || result === undefined) return null;
  const s = typeof result === 'string' ? result : JSON.stringify(result);
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/** A side effect's row description: what kind, its outcome in words, and who settled it. */
export function effectDescription(e: SideEffect): string {
  const word = e.status === 'in_doubt' ? 'IN DOUBT' : e.status === 'intent' ? 'started' : e.status;
  return `${e.kind} · ${word}${e.resolvedBy === 'person' ? ' (by you)' : ''}`;
}

// ---------------------------------------------------------------------------
// Show Task Events: the log in words.

function clip(s: string, n: number): string {
  const one = s.replace(/\s+/g, ' ').trim();
  return one.length > n ? `${one.slice(0, n - 1)}…` : one;
}

/** One event in one line of words (no ids a person cannot use, times are the caller's). */
export function eventSentence(ev: WaypointEvent, ctx: { steps: readonly Step[]; checkpoints: readonly CheckpointMeta[]; sideEffects: readonly SideEffect[] }): string {
  const d = ev.data as Record<string, unknown>;
  const step = (id: unknown) => ctx.steps.find((s) => s.id === id)?.title ?? String(id);
  const cp = (id: unknown) => {
    const c = ctx.checkpoints.find((x) => x.id === id);
    return c ? checkpointWithStep(c, ctx.checkpoints, ctx.steps) : 'a pruned checkpoint';
  };
  const effect = (key: unknown) => ctx.sideEffects.find((e) => e.key === key)?.description ?? String(key);
  // A reason the engine wrote names a rollback or a checkpoint by id: said in words.
  const why = (r: unknown) => (typeof r === 'string' && r ? `: ${clip(withoutIds(r), 200)}` : '');
  const by = ev.by ? ` by ${ev.by}` : '';
  switch (ev.type) {
    case 'task.started':
      return `Task started${by}: ${clip(String(d.goal ?? ''), 200)}`;
    case 'task.plan_updated':
      return `Plan extended by ${plural((d.added as unknown[]).length, 'step')}`;
    case 'task.review_requested':
      return `Review requested${why(d.summary)}`;
    case 'task.completed':
      return `Task completed${d.commit ? ` as commit ${String(d.commit).slice(0, 10)}` : ''}${why(d.summary)}`;
    case 'task.reopened':
      return `Commit ${String(d.commit).slice(0, 10)} undone: the task waits for review again`;
    case 'task.abandoned':
      return `Task abandoned${why(d.reason)}`;
    case 'task.failed':
      return `Task failed${why(d.reason)}`;
    case 'task.interrupted':
      return `Task interrupted (${String(d.class).replace(/_/g, ' ')})${why(d.reason)}`;
    case 'task.suspended':
      return `Task suspended${why(d.reason)}`;
    case 'task.held':
      return `Task waits for you${why(d.reason)}`;
    case 'task.resumed':
      return `Task resumed (attempt ${String(d.attempt)})${by}`;
    case 'task.deleted':
      return 'Task deleted';
    case 'lease.heartbeat':
      return `Agent reported in${by}`;
    case 'step.started':
      return `Step “${step(d.stepId)}” started${typeof d.attempt === 'number' ? ` (attempt ${d.attempt})` : ''}`;
    case 'step.completed':
      return `Step “${step(d.stepId)}” completed${why(d.summary)}`;
    case 'step.failed':
      return `Step “${step(d.stepId)}” failed${why((d.error as { message?: string } | undefined)?.message ?? d.message)}`;
    case 'step.attempts_granted':
      return `Step “${step(d.stepId)}” granted ${plural(Number(d.attempts), 'more attempt')}${why(d.reason)}`;
    case 'step.skipped':
      return `Step “${step(d.stepId)}” skipped${why(d.reason)}`;
    case 'step.abandoned':
      return `Step “${step(d.stepId)}” abandoned${why(d.reason)}`;
    case 'step.restored':
      return `Step “${step(d.stepId)}” restored to ${String(d.status).replace('_', ' ')}${why(d.reason)}`;
    case 'checkpoint.created':
      return `Checkpoint taken: ${cp(d.checkpointId)}`;
    case 'checkpoint.pruned':
      return `${plural((d.checkpointIds as unknown[]).length, 'checkpoint')} pruned${why(d.reason)}`;
    case 'checkpoint.damaged':
      return `${plural((d.checkpoints as unknown[]).length, 'checkpoint')} found damaged`;
    case 'side_effect.intent':
      return `Side effect started: ${clip(String(d.description ?? effect(d.key)), 200)}`;
    case 'side_effect.done':
      return `Side effect done${d.by === 'person' ? ' (marked by you)' : ''}: ${clip(effect(d.key), 200)}${d.result !== null && d.result !== undefined ? ` → ${resultText(d.result, 120)}` : ''}`;
    case 'side_effect.failed':
      return `Side effect failed${d.by === 'person' ? ' (marked by you)' : ''}: ${clip(effect(d.key), 200)}${why(d.error)}`;
    case 'rollback.started':
      return `Rollback to ${cp(d.targetCheckpointId)} started`;
    case 'rollback.done': {
      const abandoned = (d.abandonedSteps as unknown[] | undefined) ?? [];
      return `Rollback ${String(d.outcome)}: ${plural(Number(d.filesWritten), 'file')} written, ${Number(d.filesRemoved)} removed${abandoned.length ? `; abandoned ${abandoned.map(step).join(', ')}` : ''}`;
    }
    case 'review.apply_started':
      return `Applying the review to ${plural((d.paths as unknown[]).length, 'file')}`;
    case 'review.apply_done':
      return `Review ${d.outcome === 'applied' ? 'applied' : 'failed to apply'}: ${plural(Number(d.filesWritten), 'file')} written, ${Number(d.filesRemoved)} removed${d.commit ? `, commit ${String(d.commit).slice(0, 10)}` : ''}${why(d.note)}`;
    default:
      // A type added later still reads as words rather than disappearing.
      return String(ev.type).replace(/[._]/g, ' ');
  }
}

/** The step an event belongs to: its own stepId, or its side effect's step. */
export function eventStepId(ev: WaypointEvent, sideEffects: readonly SideEffect[]): string | null {
  const d = ev.data as Record<string, unknown>;
  if (typeof d.stepId === 'string') return d.stepId;
  if (ev.type === 'checkpoint.created') return (d.stepId as string | null) ?? null;
  if (typeof d.key === 'string' && ev.type.startsWith('side_effect.')) return sideEffects.find((e) => e.key === d.key)?.stepId ?? null;
  return null;
}

/**
 * Show Task Events as Markdown: local times, grouped by step in plan order (the task's
 * own events first), one line of words per event. Heartbeats are counted, not listed:
 * they would bury everything else.
 */
export function eventsMarkdown(input: { task: Task; steps: readonly Step[]; checkpoints: readonly CheckpointMeta[]; sideEffects: readonly SideEffect[]; events: readonly WaypointEvent[]; rawLink?: string }): string {
  const { task, steps, events } = input;
  const out = [`# Events of “${clip(task.title, 200)}”`, ''];
  out.push(`${plural(events.length, 'event')} · started ${new Date(task.createdAt).toLocaleString()} · now ${task.state.replace(/_/g, ' ')}`);
  if (input.rawLink) out.push('', input.rawLink);
  const groups = new Map<string | null, WaypointEvent[]>([[null, []], ...steps.map((s) => [s.id, []] as [string, WaypointEvent[]])]);
  let heartbeats = 0;
  for (const ev of events) {
    if (ev.type === 'lease.heartbeat') {
      heartbeats++;
      continue;
    }
    const id = eventStepId(ev, input.sideEffects);
    (groups.get(id) ?? groups.get(null)!).push(ev);
  }
  const line = (ev: WaypointEvent) => `- \`${new Date(ev.ts).toLocaleTimeString()}\` ${displayText(eventSentence(ev, input)).replace(/([\\`*_[\]<>])/g, '\\$1')}`;
  for (const [id, list] of groups) {
    if (!list.length) continue;
    const s = id === null ? undefined : steps.find((x) => x.id === id);
    out.push('', s ? `## Step: ${clip(s.title, 200)} — ${STEP_STATUS_WORD[stepShownStatus(s, task)]}` : '## Task', '');
    out.push(...list.map(line));
  }
  if (heartbeats) out.push('', `_${plural(heartbeats, 'heartbeat')} from the agent not listed._`);
  if (!events.length) out.push('', 'No events recorded yet.');
  // Titles and step names above are recorded text too.
  return displayText(out.join('\n'), { multiline: true }) + '\n';
}

/**
 * Who drove a task or a step, in words, from the lease owner id its events carry
 * (`vscode:<session>`, `claude-code:<session>`, `waypoint-serve:<uuid>`, `mcp:<uuid>`,
 * `cli`): "this window", "Claude Code", "waypoint serve"… The id itself stays in the
 * events document and `--json`. `here` is this window's owner id; an id of no known
 * kind (one an agent chose) is shown as given.
 */
export function ownerWords(id: string, here?: string): string {
  if (id === here) return 'this window';
  if (id === 'person') return 'you';
  if (id === 'cli' || id.startsWith('cli:')) return 'the waypoint command line';
  const kind = /^([a-z-]+):/.exec(id)?.[1];
  if (kind === 'vscode') return 'VS Code';
  if (kind === 'waypoint-serve') return 'waypoint serve';
  if (kind === 'mcp') return 'an agent over MCP';
  if (kind && isHookAgent(kind)) return HOOK_AGENTS[kind].label;
  return displayText(id);
}

// The engine's own interruption reasons (engine.ts sweep and resumeTask): exact and in UTC for the record.
const LEASE_EXPIRED = /^lease of (.+?) expired at \S+ \(no call for (\d+) s\)$/;
const PROCESS_EXITED = /^owner process \d+ \((.+)\) exited$/;
const TAKEN_OVER = /^taken over by (.+)$/;

/**
 * An interruption reason as a person reads it: the engine's own reasons name the
 * lease owner by id and the time in UTC ("lease of cli expired at 2026-…Z (no call
 * for 6 s)"); they read "the waypoint command line stopped reporting (no call for 6
 * s)". An agent's own reason is its text, kept as given.
 */
export function reasonWords(reason: string, who: (ownerId: string) => string = (id) => ownerWords(id)): string {
  let m: RegExpExecArray | null;
  if ((m = LEASE_EXPIRED.exec(reason))) return `${who(m[1]!)} stopped reporting (no call for ${m[2]} s)`;
  if ((m = PROCESS_EXITED.exec(reason))) return `${who(m[1]!)} went away (its process ended)`;
  if ((m = TAKEN_OVER.exec(reason))) return `taken over by ${who(m[1]!)}`;
  return reason;
}
