import { nextReadySteps } from '../model/plan';
import { SCHEMA_VERSION, type CheckpointMeta, type SideEffect, type Step, type Task, type Turn } from '../model/schema';
import type { ForkInheritance } from './forkInheritance';
import { holdChoices, retryAt } from './retryPolicy';
import { displayText } from '../model/displayText';
import { isResumable } from '../model/taskStates';

/**
 * The resume context: everything an agent needs to continue a task without
 * guessing what already happened (precise enough that nothing done is redone). The JSON
 * is the contract; the Markdown is rendered from it and can be handed to an agent
 * as is.
 */
export interface DriftInfo {
  since: string | null;
  files: { path: string; status: string }[];
}

export interface ResumeContext {
  schemaVersion: number;
  /** Set by `task resume`: the state the task was in before this resume (the task itself is running by then). */
  resumedFrom?: Task['state'];
  task: {
    id: string;
    title: string;
    goal: string;
    state: Task['state'];
    agent: string | null;
    attempt: number;
    correlationId: string;
    createdAt: string;
    interruption: Task['interruption'];
    /** Set while the task waits for a person: the agent stops; `choices` says what the person may do. */
    hold: (NonNullable<Task['hold']> & { choices: string }) | null;
    retry: Task['retry'];
  };
  plan: {
    id: string;
    title: string;
    status: Step['status'];
    dependsOn: string[];
    attempts: number;
    maxAttempts: number;
    /** When a failed step may start again (ISO); null when now, or not waiting. */
    retryAt: string | null;
    outputs: unknown;
    summary: string | null;
    error: Step['error'];
  }[];
  interruptedStep: { id: string; title: string; status: Step['status']; attempts: number; inputs: unknown; error: Step['error'] } | null;
  sideEffects: {
    done: SideEffectBrief[];
    failed: SideEffectBrief[];
    inDoubt: SideEffectBrief[];
  };
  nextSteps: { id: string; title: string; dependsOn: string[] }[];
  lastCheckpoint: { id: string; kind: CheckpointMeta['kind']; stepId: string | null; createdAt: string; files: number } | null;
  drift: DriftInfo | null;
  /**
   * Set on a fork: where it came from and what it inherits (the original's goal, the
   * steps finished by the checkpoint with their outputs, the later work left behind).
   * `original` is null when the original's history is gone.
   */
  forkedFrom: ({ taskId: string; checkpointId: string; stepId: string | null } & { inheritance: Omit<ForkInheritance, 'remaining'> | null }) | null;
  /**
   * The conversation so far, as digests of its last turns (hook-recorded agents): what the
   * person asked, what the agent last said, how many tool calls of each kind, compactions.
   */
  conversation: { turns: number; recent: Omit<Turn, 'taskId'>[] };
  markdown: string;
}

/** How many turns the resume context gives back: enough to pick the thread up, bounded like the digests themselves. */
export const RESUME_TURNS = 5;

interface SideEffectBrief {
  key: string;
  kind: string;
  description: string;
  stepId: string | null;
  args: unknown;
  result?: unknown;
  error?: string | null;
}

function brief(s: SideEffect): SideEffectBrief {
  return {
    key: s.key,
    kind: s.kind,
    description: s.description,
    stepId: s.stepId,
    args: s.args,
    ...(s.status === 'done' ? { result: s.result } : {}),
    ...(s.status === 'failed' ? { error: s.error } : {}),
  };
}

export function buildResumeContext(
  task: Task,
  steps: Step[],
  effects: SideEffect[],
  lastCheckpoint: CheckpointMeta | null,
  drift: DriftInfo | null,
  fork: ForkInheritance | null = null,
  turns: readonly Turn[] = [],
): ResumeContext {
  const interrupted =
    steps.find((s) => s.status === 'in_progress') ??
    (task.interruption?.stepId ? steps.find((s) => s.id === task.interruption!.stepId) : undefined) ??
    steps.filter((s) => s.status === 'failed').sort((a, b) => (b.endedAt ?? 0) - (a.endedAt ?? 0))[0] ??
    null;
  const ctx: Omit<ResumeContext, 'markdown'> = {
    schemaVersion: SCHEMA_VERSION,
    task: {
      id: task.id,
      title: task.title,
      goal: task.goal,
      state: task.state,
      agent: task.agent,
      attempt: task.attempt,
      correlationId: task.correlationId,
      createdAt: new Date(task.createdAt).toISOString(),
      interruption: task.interruption,
      hold: task.hold ? { ...task.hold, choices: holdChoices(task.hold, task.id) } : null,
      retry: task.retry,
    },
    plan: steps.map((s) => ({
      id: s.id,
      title: s.title,
      status: s.status,
      dependsOn: s.dependsOn,
      attempts: s.attempts,
      maxAttempts: s.maxAttempts,
      retryAt: retryAt(s) === null ? null : new Date(retryAt(s)!).toISOString(),
      outputs: s.outputs,
      summary: s.summary,
      error: s.error,
    })),
    interruptedStep: interrupted
      ? { id: interrupted.id, title: interrupted.title, status: interrupted.status, attempts: interrupted.attempts, inputs: interrupted.inputs, error: interrupted.error }
      : null,
    sideEffects: {
      done: effects.filter((e) => e.status === 'done').map(brief),
      failed: effects.filter((e) => e.status === 'failed').map(brief),
      // An open intent is in doubt for whoever resumes: nobody can say whether it ran.
      inDoubt: effects.filter((e) => e.status === 'in_doubt' || e.status === 'intent').map(brief),
    },
    nextSteps: nextReadySteps(steps).map((s) => ({ id: s.id, title: s.title, dependsOn: s.dependsOn })),
    lastCheckpoint: lastCheckpoint
      ? { id: lastCheckpoint.id, kind: lastCheckpoint.kind, stepId: lastCheckpoint.stepId, createdAt: new Date(lastCheckpoint.createdAt).toISOString(), files: lastCheckpoint.files }
      : null,
    drift,
    forkedFrom: task.forkedFrom
      ? { ...task.forkedFrom, inheritance: fork ? { original: fork.original, checkpoint: fork.checkpoint, inherited: fork.inherited, leftBehind: fork.leftBehind } : null }
      : null,
    conversation: { turns: turns.length, recent: turns.slice(-RESUME_TURNS).map(({ taskId: _t, ...rest }) => rest) },
  };
  return { ...ctx, markdown: renderMarkdown(ctx) };
}

const STATUS_MARK: Record<Step['status'], string> = {
  completed: '[x]',
  in_progress: '[~]',
  failed: '[!]',
  pending: '[ ]',
  skipped: '[-]',
  abandoned: '[-]',
};

function short(v: unknown, max = 400): string {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  if (s === undefined || s === 'null') return '';
  return s.length > max ? `${s.slice(0, max)}… (${s.length} chars)` : s;
}

/**
 * The most characters the Markdown may hold: it is handed to an agent as a prompt, and
 * a plan at its cap (MAX_PLAN_STEPS steps of 500-character titles, each with a summary,
 * outputs and an error) would otherwise make one of megabytes. Lists are cut, whole
 * items at a time, with a note saying how many were left out; the JSON keeps them all.
 */
export const MAX_RESUME_MARKDOWN_CHARS = 64_000;

/** A run of lines kept whole, or (with `what`) a list whose items are dropped from its end when the Markdown would be too long. */
type Part = { lines: string[] } | { items: string[][]; what: string };

/**
 * The task a pasted resume prompt names, so a hook-driven agent's new session
 * continues it instead of starting another; null when the text is not one.
 */
export function resumePromptTaskId(text: string): string | null {
  if (!/^# Resume task: /m.test(text)) return null;
  const m = /^Task `(t_[0-9a-z]{9,40})` · attempt \d+/m.exec(text);
  return m ? m[1] : null;
}

export function renderMarkdown(c: Omit<ResumeContext, 'markdown'>): string {
  const parts: Part[] = [];
  let out: string[] = [];
  const list = (items: string[][], what: string) => {
    parts.push({ lines: out }, { items, what });
    out = [];
  };
  out.push(`# Resume task: ${c.task.title}`, '');
  const was = c.resumedFrom ?? c.task.state;
  out.push(`You are resuming a task that was ${was.replace(/_/g, ' ')}. Continue from where it stopped; do not redo completed steps.`, '');
  out.push(`**Goal:** ${c.task.goal}`, '');
  out.push(`Task \`${c.task.id}\` · attempt ${c.task.attempt}${c.task.agent ? ` · agent ${c.task.agent}` : ''}`);
  // A copied prompt is handed over without resuming the task (nobody drives it yet): the agent's first call does.
  if (!c.resumedFrom && isResumable(c.task)) {
    out.push(`This task is not resumed yet: before anything else call \`waypoint_task_resume\` with taskId \`${c.task.id}\` (or run \`waypoint task resume --task ${c.task.id}\`).`);
  }
  if (c.task.interruption) out.push(`Stopped because: ${c.task.interruption.reason} (${c.task.interruption.class.replace('_', ' ')}).`);
  if (c.forkedFrom) renderFork(() => out, c.forkedFrom, list);
  if (c.task.hold) {
    out.push('', '## Waiting for a person', '');
    out.push(`**Do not continue on your own.** Since ${new Date(c.task.hold.since).toISOString()} this task waits for a person (${c.task.hold.cause.replace('_', ' ')}): ${c.task.hold.reason}.`);
    out.push(c.task.hold.choices);
  }
  out.push('', '## Plan', '');
  list(
    c.plan.map((s) => {
      const deps = s.dependsOn.length ? ` (after ${s.dependsOn.join(', ')})` : '';
      const retry = s.retryAt ? `, may retry at ${s.retryAt}` : '';
      const item = [`- ${STATUS_MARK[s.status]} \`${s.id}\` ${s.title}${deps} — ${s.status}${s.attempts > 0 ? `, attempt ${s.attempts} of ${s.maxAttempts}` : ''}${retry}`];
      if (s.summary) item.push(`  - summary: ${short(s.summary)}`);
      const outputs = short(s.outputs);
      if (outputs) item.push(`  - outputs: ${outputs}`);
      if (s.error) item.push(`  - error: ${short(s.error.message)}${s.error.recoverable ? ' (recoverable)' : ''}`);
      return item;
    }),
    'plan steps',
  );
  if (c.interruptedStep) {
    out.push('', '## Interrupted step', '');
    out.push(`\`${c.interruptedStep.id}\` ${c.interruptedStep.title} was ${c.interruptedStep.status} (attempt ${c.interruptedStep.attempts}).`);
    const inputs = short(c.interruptedStep.inputs);
    if (inputs) out.push(`Inputs: ${inputs}`);
    if (c.interruptedStep.error) out.push(`Error: ${short(c.interruptedStep.error.message)}`);
    out.push('Check the workspace for partial edits from this step before redoing it.');
  }
  const { done, failed, inDoubt } = c.sideEffects;
  if (done.length || failed.length || inDoubt.length) {
    out.push('', '## Side effects', '');
    // In doubt first: those are the ones an agent must not get wrong, so a cut list keeps them.
    list(
      [
        ...inDoubt.map((e) => [`- IN DOUBT: \`${e.key}\` (${e.kind}) ${e.description} — it may or may not have happened; verify its effect before repeating it, then report the outcome`]),
        ...done.map((e) => [`- done: \`${e.key}\` (${e.kind}) ${e.description}${short(e.result) ? ` → ${short(e.result, 200)}` : ''} — do NOT repeat`]),
        ...failed.map((e) => [`- failed: \`${e.key}\` (${e.kind}) ${e.description}: ${short(e.error ?? '')}`]),
      ],
      'side effects',
    );
  }
  if (c.drift && c.drift.files.length) {
    out.push('', '## Changes made outside the task since the last checkpoint', '');
    for (const f of c.drift.files.slice(0, 50)) out.push(`- ${f.status}: ${f.path}`);
    if (c.drift.files.length > 50) out.push(`- … and ${c.drift.files.length - 50} more`);
  }
  if (c.conversation.recent.length) {
    out.push('', `## Conversation (last ${c.conversation.recent.length} of ${c.conversation.turns} turns)`, '');
    for (const t of c.conversation.recent) {
      const tools = Object.entries(t.tools).filter(([, n]) => n > 0).map(([k, n]) => `${n} ${k}`).join(', ');
      out.push(`- turn ${t.turn}${t.stepId ? ` (step \`${t.stepId}\`)` : ''}: the person asked: ${short(t.prompt, 300) || '(no prompt recorded)'}`);
      if (t.lastMessage) out.push(`  - the agent answered: ${short(t.lastMessage, 300)}`);
      if (tools || t.compactions) out.push(`  - ${tools || 'no tool calls'}${t.compactions ? `; context compacted ${t.compactions}×` : ''}`);
    }
  }
  out.push('', '## Next', '');
  list(
    c.nextSteps.map((s) => [`- \`${s.id}\` ${s.title}`]),
    'ready steps',
  );
  if (!c.nextSteps.length) out.push(c.interruptedStep ? `- Finish \`${c.interruptedStep.id}\` first.` : '- No plan step is ready; decide the next step from the goal, or complete the task.');
  if (c.lastCheckpoint) out.push('', `Last checkpoint: \`${c.lastCheckpoint.id}\` (${c.lastCheckpoint.kind}, ${c.lastCheckpoint.createdAt}).`);
  parts.push({ lines: out });
  return fitMarkdown(parts);
}

/**
 * Joins the parts, every line escaped (recorded text is data, never terminal or
 * Markdown control), within MAX_RESUME_MARKDOWN_CHARS: the fixed lines first, then the
 * lists in order while they fit, each cut list ending in a note.
 */
function fitMarkdown(parts: Part[]): string {
  const safe = (l: string) => displayText(l, { multiline: true });
  const size = (ls: readonly string[]) => ls.reduce((n, l) => n + l.length + 1, 0);
  const escaped: Part[] = parts.map((p) => ('lines' in p ? { lines: p.lines.map(safe) } : { items: p.items.map((i) => i.map(safe)), what: p.what }));
  const NOTE_ROOM = 200;
  const lists = escaped.filter((p) => 'items' in p).length;
  let room = MAX_RESUME_MARKDOWN_CHARS - escaped.reduce((n, p) => n + ('lines' in p ? size(p.lines) : 0), 0) - NOTE_ROOM * lists;
  const lines: string[] = [];
  for (const p of escaped) {
    if ('lines' in p) {
      lines.push(...p.lines);
      continue;
    }
    let kept = 0;
    for (const item of p.items) {
      const n = size(item);
      if (n > room) break;
      room -= n;
      lines.push(...item);
      kept++;
    }
    if (kept < p.items.length) {
      room = -1; // later lists get nothing, so what is shown stays in order
      lines.push(`- … ${p.items.length - kept} more ${p.what} not shown (this Markdown is kept under ${MAX_RESUME_MARKDOWN_CHARS} characters; \`waypoint resume-context --json\` holds them all)`);
    }
  }
  const text = lines.join('\n') + '\n';
  // The fixed lines alone are bounded by the input schemas; this is the last word on size whatever they hold.
  if (text.length <= MAX_RESUME_MARKDOWN_CHARS) return text;
  const note = `\n\n… cut at ${MAX_RESUME_MARKDOWN_CHARS} characters; \`waypoint resume-context --json\` holds everything.\n`;
  return text.slice(0, MAX_RESUME_MARKDOWN_CHARS - note.length) + note;
}

function renderFork(lines: () => string[], f: NonNullable<ResumeContext['forkedFrom']>, list: (items: string[][], what: string) => void): void {
  const out = () => lines();
  out().push('', '## Forked from', '');
  const inh = f.inheritance;
  if (!inh) {
    out().push(`This task is a fork of task \`${f.taskId}\` at checkpoint \`${f.checkpointId}\`; that task's history is no longer in the store, so what it did is not known here.`);
    return;
  }
  const at = inh.checkpoint.label ? `"${inh.checkpoint.label}" (\`${inh.checkpoint.id}\`)` : `\`${inh.checkpoint.id}\``;
  out().push(`This task is a fork of task \`${inh.original.taskId}\` (${inh.original.title}) at checkpoint ${at}, taken ${new Date(inh.checkpoint.createdAt).toISOString()}. The workspace was restored to that checkpoint when the fork started.`);
  out().push('', `**Original goal:** ${inh.original.goal}`, '');
  if (inh.inherited.length) {
    out().push('Inherited (finished by the original before the checkpoint; their results are in the workspace — do not redo them):');
    list(
      inh.inherited.map((s) => {
        const item = [`- \`${s.id}\` ${s.title} — ${s.status}`];
        if (s.summary) item.push(`  - summary: ${short(s.summary)}`);
        const outputs = short(s.outputs);
        if (outputs) item.push(`  - outputs: ${outputs}`);
        return item;
      }),
      'inherited steps',
    );
  } else out().push('Inherited: no finished step (the checkpoint was taken before the original finished any).');
  if (inh.leftBehind.length) {
    out().push('', 'Left behind (the original worked on these after the checkpoint, or had not finished them; none of that work is in this workspace):');
    list(
      inh.leftBehind.map((s) => [`- \`${s.id}\` ${s.title} — ${s.statusAtCheckpoint} at the checkpoint, ${s.statusNow} in the original now`]),
      'left-behind steps',
    );
  }
}
