import type { SideEffect, Task } from '../core/model/schema';
import { isFinal } from '../core/model/taskStates';
import type { AlertSettings } from './settings';

/**
 * What deserves a person's attention now, decided without VS Code
 * so it is tested in plain Node: the tasks and their in-doubt side effects, the clock,
 * the thresholds and what was already shown go in; the alerts to raise come out.
 *
 * Each alert has a key naming its task, its condition and the moment the condition
 * began (the interruption, the failure, the hold, the intent, the review request's
 * task attempt). A key shown once is never raised again, so a reload or a second
 * check does not repeat it, while a new occurrence (a new interruption, a new
 * attempt's failure) has a new key and is raised.
 */

export type AlertKind = 'interrupted' | 'failed' | 'in_doubt' | 'review_waiting' | 'retries_exhausted';

/** A notification button: its label and the command (with arguments) it runs. */
export interface AlertAction {
  title: string;
  command: string;
  args: unknown[];
}

export interface Alert {
  key: string;
  kind: AlertKind;
  taskId: string;
  severity: 'warning' | 'error';
  message: string;
  actions: AlertAction[];
}

export interface AlertInput {
  tasks: readonly Task[];
  /** Side effects in doubt, of any task (only `in_doubt` ones are looked at). */
  effects: readonly SideEffect[];
  now: number;
  thresholds: AlertSettings;
  shown: ReadonlySet<string>;
}

const MIN = 60_000;

function since(ms: number): string {
  const m = Math.max(1, Math.round(ms / MIN));
  if (m < 120) return `${m} min`;
  const h = Math.round(m / 60);
  return h < 48 ? `${h} h` : `${Math.round(h / 24)} days`;
}

const quote = (t: Task) => `“${t.title.length > 80 ? `${t.title.slice(0, 79)}…` : t.title}”`;
const show = (t: Task): AlertAction => ({ title: 'Show', command: 'waypoint.revealTask', args: [t.id] });

/** The alerts to raise now, most urgent first; none whose key is in `shown`. */
export function decideAlerts(input: AlertInput): Alert[] {
  const { now, thresholds: th } = input;
  const out: Alert[] = [];
  const byId = new Map(input.tasks.map((t) => [t.id, t]));
  for (const t of input.tasks) {
    if (t.hold?.cause === 'retries_exhausted' && th.retriesExhausted) {
      out.push({
        key: `${t.id}:retries_exhausted:${t.hold.stepId ?? ''}:${t.hold.since}`,
        kind: 'retries_exhausted',
        taskId: t.id,
        severity: 'warning',
        message: `Waypoint: ${quote(t)} waits for you — ${t.hold.reason}.`,
        actions: [{ title: 'Grant More Attempts', command: 'waypoint.grantAttempts', args: [{ taskId: t.id, stepId: t.hold.stepId }] }, show(t)],
      });
    }
    if (t.state === 'interrupted' && th.interruptedMinutes > 0) {
      const at = t.interruption?.at ?? t.updatedAt;
      if (now - at >= th.interruptedMinutes * MIN) {
        out.push({
          key: `${t.id}:interrupted:${at}`,
          kind: 'interrupted',
          taskId: t.id,
          severity: 'warning',
          message: `Waypoint: ${quote(t)} has been interrupted for ${since(now - at)} (${t.interruption?.reason ?? 'no reason recorded'}).`,
          actions: [{ title: 'Resume', command: 'waypoint.resumeTask', args: [t.id] }, show(t)],
        });
      }
    }
    if (t.state === 'failed' && th.failed) {
      const at = t.interruption?.at ?? t.updatedAt;
      out.push({
        key: `${t.id}:failed:${at}`,
        kind: 'failed',
        taskId: t.id,
        severity: 'error',
        message: `Waypoint: ${quote(t)} failed: ${t.interruption?.reason ?? 'no reason recorded'}.`,
        actions: [show(t), { title: 'Show Events', command: 'waypoint.showTaskEvents', args: [t.id] }],
      });
    }
    if (t.state === 'waiting_review' && th.reviewHours > 0 && now - t.updatedAt >= th.reviewHours * 60 * MIN) {
      // Keyed by the task attempt: the review request of this attempt, not every later event of the task.
      out.push({
        key: `${t.id}:review_waiting:${t.attempt}`,
        kind: 'review_waiting',
        taskId: t.id,
        severity: 'warning',
        message: `Waypoint: ${quote(t)} has waited for your review for ${since(now - t.updatedAt)}.`,
        actions: [{ title: 'Review', command: 'waypoint.reviewTask', args: [t.id] }, show(t)],
      });
    }
  }
  if (th.inDoubtMinutes > 0) {
    for (const e of input.effects) {
      const t = byId.get(e.taskId);
      if (e.status !== 'in_doubt' || !t || isFinal(t)) continue;
      if (now - e.intentAt < th.inDoubtMinutes * MIN) continue;
      const ref = { taskId: e.taskId, key: e.key };
      out.push({
        key: `${e.taskId}:in_doubt:${e.key}:${e.intentAt}`,
        kind: 'in_doubt',
        taskId: e.taskId,
        severity: 'warning',
        message: `Waypoint: the side effect “${e.description}” (${e.kind}) of ${quote(t)} has been in doubt for ${since(now - e.intentAt)}: nobody knows whether it happened. Check, then mark it.`,
        actions: [
          { title: 'Mark Done', command: 'waypoint.markSideEffectDone', args: [ref] },
          { title: 'Mark Failed', command: 'waypoint.markSideEffectFailed', args: [ref] },
        ],
      });
    }
  }
  const rank: Record<AlertKind, number> = { failed: 0, retries_exhausted: 1, in_doubt: 2, interrupted: 3, review_waiting: 4 };
  return out.filter((a) => !input.shown.has(a.key)).sort((a, b) => rank[a.kind] - rank[b.kind] || a.key.localeCompare(b.key));
}

/** The shown keys to keep: at most `max`, the newest last (the store of them must not grow forever). */
export function rememberShown(previous: readonly string[], added: readonly string[], max = 500): string[] {
  const all = [...previous.filter((k) => !added.includes(k)), ...added];
  return all.slice(Math.max(0, all.length - max));
}
