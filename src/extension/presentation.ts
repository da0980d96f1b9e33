import * as vscode from 'vscode';
import { describeStop } from './resume/words';
import type { CheckpointMeta, SideEffect, Step, Task, TaskState } from '../core/model/schema';
import { retryState } from '../core/engine/retryPolicy';
import { checkpointWithStep, duration, isLiveTask, stepShownStatus, stepsProgress, type StepShownStatus } from './labelText';
export { duration, plural, stepsProgress } from './labelText';

/**
 * How Waypoint's states look in VS Code: one codicon and theme colour per state,
 * shared by the tree, the status bar and quick picks so they never disagree.
 */
const TASK_ICON: Record<TaskState, [string, string | undefined]> = {
  pending: ['circle-large-outline', undefined],
  planning: ['list-ordered', 'charts.blue'],
  running: ['sync~spin', 'charts.blue'],
  waiting_tool: ['loading~spin', 'charts.blue'],
  waiting_review: ['eye', 'charts.purple'],
  completed: ['pass', 'testing.iconPassed'],
  interrupted: ['debug-pause', 'problemsWarningIcon.foreground'],
  suspended: ['debug-pause', 'disabledForeground'],
  failed: ['error', 'testing.iconFailed'],
  abandoned: ['circle-slash', 'disabledForeground'],
};

const STEP_ICON: Record<StepShownStatus, [string, string | undefined]> = {
  // An unfinished step of a stopped task: paused, not spinning.
  stopped: ['debug-pause', 'problemsWarningIcon.foreground'],
  pending: ['circle-large-outline', undefined],
  in_progress: ['loading~spin', 'charts.blue'],
  completed: ['pass', 'testing.iconPassed'],
  failed: ['error', 'testing.iconFailed'],
  skipped: ['debug-step-over', 'disabledForeground'],
  abandoned: ['circle-slash', 'disabledForeground'],
};

const EFFECT_ICON: Record<SideEffect['status'], [string, string | undefined]> = {
  intent: ['loading~spin', 'charts.blue'],
  done: ['check', 'testing.iconPassed'],
  failed: ['error', 'testing.iconFailed'],
  in_doubt: ['question', 'problemsWarningIcon.foreground'],
};

const icon = ([id, color]: [string, string | undefined]) => new vscode.ThemeIcon(id, color ? new vscode.ThemeColor(color) : undefined);

export const taskIcon = (s: TaskState) => icon(TASK_ICON[s]);
/** A task waiting for a person's decision looks the same everywhere: a person, in the warning colour. */
export const HOLD_CODICON = 'person';
export const taskIconOf = (t: Task) => (t.hold ? icon([HOLD_CODICON, 'problemsWarningIcon.foreground']) : taskIcon(t.state));
export const stepIcon = (s: StepShownStatus) => icon(STEP_ICON[s]);
/** A step's icon as its task's state makes it: in progress under a stopped task shows as stopped. */
export const stepIconOf = (s: Step, t: Task) => stepIcon(stepShownStatus(s, t));
export const effectIcon = (s: SideEffect['status']) => icon(EFFECT_ICON[s]);
export const checkpointIcon = (c: CheckpointMeta) => new vscode.ThemeIcon(c.kind === 'pre_rollback' ? 'history' : c.kind === 'task_base' ? 'debug-start' : 'git-commit');
export const codicon = (s: TaskState) => TASK_ICON[s][0];

export const STATE_LABEL: Record<TaskState, string> = {
  pending: 'pending',
  planning: 'planning',
  running: 'running',
  waiting_tool: 'running a side effect',
  waiting_review: 'waiting for review',
  completed: 'completed',
  interrupted: 'interrupted',
  suspended: 'suspended',
  failed: 'failed',
  abandoned: 'abandoned',
};

/** Attention first (interrupted, failed, review), then live work, then history. Takes a task summary too (the team store's listing has no hold). */
export function taskRank(t: Pick<Task, 'state'> & { hold?: Task['hold'] }): number {
  if (t.hold) return 0;
  switch (t.state) {
    case 'interrupted':
    case 'failed':
    case 'waiting_review':
      return 0;
    case 'running':
    case 'waiting_tool':
    case 'planning':
    case 'pending':
    case 'suspended':
      return 1;
    default:
      return 2;
  }
}

export function sortTasks<T extends Pick<Task, 'state' | 'updatedAt' | 'id'> & { hold?: Task['hold'] }>(tasks: readonly T[]): T[] {
  return [...tasks].sort((a, b) => taskRank(a) - taskRank(b) || b.updatedAt - a.updatedAt || a.id.localeCompare(b.id));
}

export function ago(ts: number, now = Date.now()): string {
  return `${duration(now - ts)} ago`;
}

/** `2/4 steps · 4 min`: progress in the one form used everywhere, then how long the task has run (or since it last moved). */
export function progressText(task: Task, steps: Step[], now = Date.now()): string {
  const time = isLiveTask(task) ? duration(now - task.createdAt) : ago(task.updatedAt, now);
  return `${stepsProgress(steps)} · ${time}`;
}

/** What the person is asked for, in a few words: `waits for you: fetch used its 3 attempts`. */
export function holdText(t: Task, steps: readonly Step[] = []): string | null {
  if (!t.hold) return null;
  const step = t.hold.stepId ? (steps.find((s) => s.id === t.hold!.stepId)?.title ?? 'a step') : 'a step';
  return t.hold.cause === 'retries_exhausted' ? `waits for you: “${step}” used its attempts` : 'waits for you: side effects in doubt';
}

/** A step's retry state for a row: `attempt 2 of 3 · retry at 14:02:10`, or `attempts used up`. */
export function stepRetryText(s: Step, now = Date.now()): string {
  if (s.attempts === 0) return '';
  const r = retryState(s, now);
  const when = r.exhausted ? ' · attempts used up' : r.retryAt !== null ? ` · retry at ${new Date(r.retryAt).toLocaleTimeString()}` : '';
  return `attempt ${s.attempts} of ${s.maxAttempts}${when}`;
}


/** Where a fork came from, for its row and tooltip: the original (null when it was deleted) and the checkpoint's label. */
export interface ForkOriginView {
  original: { id: string; title: string; goal: string } | null;
  checkpointLabel: string;
}

/** "forked from <original goal> at <checkpoint label>" (the goal shortened for a row). */
export function forkedFromText(task: Task, o: ForkOriginView, max = 60): string {
  const goal = o.original ? o.original.goal : `deleted task ${task.forkedFrom?.taskId ?? ''}`;
  return `forked from “${goal.length > max ? `${goal.slice(0, max - 1)}…` : goal}” at ${o.checkpointLabel}`;
}

/** A checkpoint's label for a person: its own label, or its kind and the step's title. */
export function checkpointLabelOf(c: CheckpointMeta, steps: readonly Step[], checkpoints: readonly CheckpointMeta[] = []): string {
  return checkpointWithStep(c, checkpoints, steps);
}

export function taskTooltip(task: Task, steps: Step[], effects: SideEffect[], fork?: ForkOriginView): vscode.MarkdownString {
  const md = new vscode.MarkdownString(undefined, true);
  md.supportHtml = false;
  md.appendMarkdown(`$(${task.hold ? HOLD_CODICON : codicon(task.state)}) **`);
  md.appendText(task.title);
  md.appendMarkdown(`** — ${STATE_LABEL[task.state]}\n\n`);
  md.appendText(task.goal);
  md.appendMarkdown('\n\n');
  const rows: [string, string][] = [
    ...(fork ? ([['Fork', forkedFromText(task, fork, 200)]] as [string, string][]) : []),
    ['Agent', task.agent ?? '—'],
    ['Started', new Date(task.createdAt).toLocaleString()],
    ['Last activity', ago(task.updatedAt)],
    ['Attempt', String(task.attempt)],
    ['Progress', stepsProgress(steps)],
  ];
  if (task.hold) rows.push(['Waits for you', `${task.hold.reason} (since ${new Date(task.hold.since).toLocaleString()})`]);
  rows.push(['Retry policy', `${task.retry.maxAttempts} attempts per step, backoff from ${duration(task.retry.backoffMs)}`]);
  const inDoubt = effects.filter((e) => e.status === 'in_doubt').length;
  if (inDoubt) rows.push(['Side effects in doubt', String(inDoubt)]);
  const stop = describeStop(task, Date.now());
  if (stop) rows.push(['Stopped', stop]);
  const lastError = steps.filter((s) => s.error).sort((a, b) => (b.endedAt ?? 0) - (a.endedAt ?? 0))[0]?.error;
  if (lastError) rows.push(['Last error', lastError.message]);
  for (const [k, v] of rows) {
    md.appendMarkdown(`**${k}:** `);
    md.appendText(v);
    md.appendMarkdown('  \n');
  }
  return md;
}

/** How each checkpoint kind is named in the view, quick picks and titles. */
import { CHECKPOINT_LABEL } from './checkpointLabels';
export { CHECKPOINT_LABEL };
