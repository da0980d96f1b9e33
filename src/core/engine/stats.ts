import type { CheckpointMeta, EventDataOf, FailureClass, SideEffect, SideEffectStatus, Step, Task, TaskState, WaypointEvent } from '../model/schema';
import { TASK_STATES } from '../model/schema';

/**
 * Metrics over the tasks of a store (`waypoint stats`, the Metrics view): tasks by
 * state, interruptions by cause, retries and attempts, step durations, files changed,
 * checkpoints and storage, side effects by outcome, per agent and per day.
 *
 * A pure fold over what the engine's readers return: the projections for the state
 * now (tasks, steps, checkpoints, side effects) and the events for what happened over
 * time (every interruption, every step attempt with its duration), because the
 * projections keep only the latest of each. Deleted tasks are not counted: their rows
 * are gone and their events are skipped.
 */

export interface StatsFilter {
  /** Only tasks with activity at or after this time (ms since the epoch): `updatedAt >= since`. */
  since?: number;
  taskId?: string;
}

export interface Durations {
  /** Finished step attempts measured (completed or failed). */
  count: number;
  medianMs: number | null;
  p95Ms: number | null;
  meanMs: number | null;
  maxMs: number | null;
}

/** What one group (everything, one agent, one day) adds up to. */
export interface StatsTotals {
  tasks: number;
  byState: Partial<Record<TaskState, number>>;
  /** Step starts, first attempts and retries together. */
  attempts: number;
  /** Step starts beyond a step's first (attempt 2, 3, …). */
  retries: number;
  stepFailures: { recoverable: number; unrecoverable: number };
  interruptions: number;
  durations: Durations;
}

export interface Stats {
  generatedAt: string;
  filter: { since: string | null; taskId: string | null };
  totals: StatsTotals;
  /** Every `task.interrupted` and `task.failed`, grouped by failure class and by reason. */
  interruptions: {
    total: number;
    byClass: Partial<Record<FailureClass, number>>;
    /** Reasons as recorded, most frequent first (at most 20). */
    byReason: { reason: string; count: number }[];
    failedTasks: number;
  };
  /** Steps now: how many attempts each took. */
  steps: {
    total: number;
    byStatus: Partial<Record<Step['status'], number>>;
    /** Steps that needed more than one attempt. */
    retried: number;
    maxAttempts: number;
    /** The steps retried most, at most 10. */
    mostRetried: { taskId: string; taskTitle: string; stepId: string; title: string; attempts: number; status: Step['status'] }[];
  };
  /**
   * Sum over the checkpoints of the files each changed since the one before (a file changed in two
   * steps counts twice). A base checkpoint changed nothing (it holds the files the task started from): not counted.
   */
  filesChanged: number;
  checkpoints: { total: number; byKind: Partial<Record<CheckpointMeta['kind'], number>>; bytes: number; damaged: number };
  /** Bytes of the blob store on disk (the whole store, shared by every task; null without snapshots). */
  storeBytes: number | null;
  sideEffects: { total: number; byOutcome: Partial<Record<SideEffectStatus, number>>; resolvedByPerson: number };
  byAgent: ({ agent: string } & StatsTotals)[];
  /** UTC days with activity, oldest first. `tasks` counts tasks started that day. */
  byDay: ({ day: string } & StatsTotals & { completed: number })[];
  /** Present with `taskId`: every step with its attempts and the duration of each finished attempt. */
  task?: { id: string; title: string; state: TaskState; steps: { id: string; title: string; status: Step['status']; attempts: number; durationsMs: number[] }[] };
}

/**
 * The median: the middle value of the sorted sample, or the mean of the two middle
 * values when the count is even. Null for an empty sample.
 */
export function median(values: readonly number[]): number | null {
  if (!values.length) return null;
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/**
 * The p-th percentile by the nearest-rank method: the smallest sample value such that
 * at least p% of the sample is less than or equal to it, i.e. the value at rank
 * ceil(p/100 × n) of the sorted sample (rank 1 for p = 0). Always a value that
 * occurred (no interpolation), so "95% of step attempts took at most this long" is
 * literally true. Null for an empty sample.
 */
export function percentile(values: readonly number[], p: number): number | null {
  if (!values.length) return null;
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile must be within 0..100, not ${p}`);
  const s = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * s.length));
  return s[rank - 1];
}

function durations(values: readonly number[]): Durations {
  return {
    count: values.length,
    medianMs: median(values),
    p95Ms: percentile(values, 95),
    meanMs: values.length ? Math.round(values.reduce((a, b) => a + b, 0) / values.length) : null,
    maxMs: values.length ? Math.max(...values) : null,
  };
}

const day = (ts: number) => new Date(ts).toISOString().slice(0, 10);
const inc = <K extends string>(m: Partial<Record<K, number>>, k: K, by = 1) => {
  m[k] = (m[k] ?? 0) + by;
};

/** A group's running counts while folding; `totalsOf` turns it into StatsTotals. */
interface Acc {
  taskIds: Set<string>;
  byState: Partial<Record<TaskState, number>>;
  attempts: number;
  retries: number;
  recoverable: number;
  unrecoverable: number;
  interruptions: number;
  durations: number[];
  completed: number;
}
const acc = (): Acc => ({ taskIds: new Set(), byState: {}, attempts: 0, retries: 0, recoverable: 0, unrecoverable: 0, interruptions: 0, durations: [], completed: 0 });
const totalsOf = (a: Acc): StatsTotals => ({
  tasks: a.taskIds.size,
  byState: a.byState,
  attempts: a.attempts,
  retries: a.retries,
  stepFailures: { recoverable: a.recoverable, unrecoverable: a.unrecoverable },
  interruptions: a.interruptions,
  durations: durations(a.durations),
});

export interface StatsSource {
  tasks: readonly Task[];
  steps: readonly Step[];
  checkpoints: readonly CheckpointMeta[];
  sideEffects: readonly SideEffect[];
  /** The events of the tasks in scope (others are ignored), in seq order. */
  events: readonly WaypointEvent[];
  storeBytes: number | null;
  now: number;
}

export function computeStats(src: StatsSource, filter: StatsFilter = {}): Stats {
  const tasks = src.tasks.filter((t) => (filter.taskId === undefined || t.id === filter.taskId) && (filter.since === undefined || t.updatedAt >= filter.since));
  const byId = new Map(tasks.map((t) => [t.id, t]));
  const agentOf = (taskId: string) => byId.get(taskId)?.agent ?? '(no agent)';
  const all = acc();
  const agents = new Map<string, Acc>();
  const days = new Map<string, Acc>();
  const groups = (taskId: string, ts: number | null): Acc[] => {
    const a = agentOf(taskId);
    if (!agents.has(a)) agents.set(a, acc());
    const out = [all, agents.get(a)!];
    if (ts !== null) {
      const d = day(ts);
      if (!days.has(d)) days.set(d, acc());
      out.push(days.get(d)!);
    }
    return out;
  };

  for (const t of tasks) {
    for (const g of groups(t.id, null)) {
      g.taskIds.add(t.id);
      inc(g.byState, t.state);
    }
    // Per day, a task counts on the day it started, in its state now.
    const d = groups(t.id, t.createdAt)[2];
    d.taskIds.add(t.id);
    inc(d.byState, t.state);
  }

  // The events: every attempt and its duration, every interruption, completions per day.
  const interruptions = { total: 0, byClass: {} as Partial<Record<FailureClass, number>>, reasons: new Map<string, number>(), failedTasks: 0 };
  const open = new Map<string, number>(); // `${task}\u0000${step}` → start ts of the attempt running
  const taskDurations = new Map<string, number[]>();
  for (const e of src.events) {
    if (!e.taskId || !byId.has(e.taskId)) continue;
    const k = (stepId: string) => `${e.taskId}\u0000${stepId}`;
    const finish = (stepId: string, measured: boolean) => {
      const start = open.get(k(stepId));
      open.delete(k(stepId));
      if (start === undefined || !measured) return;
      const ms = Math.max(0, e.ts - start);
      for (const g of groups(e.taskId!, e.ts)) g.durations.push(ms);
      const list = taskDurations.get(k(stepId)) ?? [];
      list.push(ms);
      taskDurations.set(k(stepId), list);
    };
    switch (e.type) {
      case 'step.started': {
        const d = e.data as EventDataOf<'step.started'>;
        for (const g of groups(e.taskId, e.ts)) {
          g.attempts++;
          if (d.attempt > 1) g.retries++;
        }
        open.set(k(d.stepId), e.ts);
        break;
      }
      case 'step.completed':
        finish((e.data as EventDataOf<'step.completed'>).stepId, true);
        break;
      case 'step.failed': {
        const d = e.data as EventDataOf<'step.failed'>;
        finish(d.stepId, true);
        for (const g of groups(e.taskId, e.ts)) g[d.recoverable ? 'recoverable' : 'unrecoverable']++;
        break;
      }
      // A skip or an abandon ends an attempt without an outcome worth timing.
      case 'step.skipped':
        finish((e.data as EventDataOf<'step.skipped'>).stepId, false);
        break;
      case 'step.abandoned':
        finish((e.data as EventDataOf<'step.abandoned'>).stepId, false);
        break;
      case 'task.interrupted':
      case 'task.failed': {
        const d = e.data as EventDataOf<'task.interrupted'>;
        interruptions.total++;
        if (e.type === 'task.failed') interruptions.failedTasks++;
        inc(interruptions.byClass, d.class);
        interruptions.reasons.set(d.reason, (interruptions.reasons.get(d.reason) ?? 0) + 1);
        for (const g of groups(e.taskId, e.ts)) g.interruptions++;
        break;
      }
      case 'task.completed':
        groups(e.taskId, e.ts)[2].completed++;
        break;
      default:
        break;
    }
  }

  const steps = src.steps.filter((s) => byId.has(s.taskId));
  const stepsByStatus: Partial<Record<Step['status'], number>> = {};
  for (const s of steps) inc(stepsByStatus, s.status);
  const retried = steps.filter((s) => s.attempts > 1);
  const checkpoints = src.checkpoints.filter((c) => c.taskId !== null && byId.has(c.taskId));
  const byKind: Stats['checkpoints']['byKind'] = {};
  for (const c of checkpoints) inc(byKind, c.kind);
  const effects = src.sideEffects.filter((s) => byId.has(s.taskId));
  const byOutcome: Stats['sideEffects']['byOutcome'] = {};
  for (const s of effects) inc(byOutcome, s.status);

  const one = filter.taskId ? byId.get(filter.taskId) : undefined;
  return {
    generatedAt: new Date(src.now).toISOString(),
    filter: { since: filter.since === undefined ? null : new Date(filter.since).toISOString(), taskId: filter.taskId ?? null },
    totals: totalsOf(all),
    interruptions: {
      total: interruptions.total,
      byClass: interruptions.byClass,
      byReason: [...interruptions.reasons].map(([reason, count]) => ({ reason, count })).sort((a, b) => b.count - a.count || (a.reason < b.reason ? -1 : 1)).slice(0, 20),
      failedTasks: interruptions.failedTasks,
    },
    steps: {
      total: steps.length,
      byStatus: stepsByStatus,
      retried: retried.length,
      maxAttempts: steps.reduce((m, s) => Math.max(m, s.attempts), 0),
      mostRetried: [...retried]
        .sort((a, b) => b.attempts - a.attempts || (a.taskId + a.id < b.taskId + b.id ? -1 : 1))
        .slice(0, 10)
        .map((s) => ({ taskId: s.taskId, taskTitle: byId.get(s.taskId)!.title, stepId: s.id, title: s.title, attempts: s.attempts, status: s.status })),
    },
    filesChanged: checkpoints.reduce((n, c) => n + (c.kind === 'task_base' ? 0 : c.filesChanged), 0),
    checkpoints: { total: checkpoints.length, byKind, bytes: checkpoints.reduce((n, c) => n + c.bytes, 0), damaged: checkpoints.filter((c) => c.damaged).length },
    storeBytes: src.storeBytes,
    sideEffects: { total: effects.length, byOutcome, resolvedByPerson: effects.filter((s) => s.resolvedBy === 'person').length },
    byAgent: [...agents].map(([agent, a]) => ({ agent, ...totalsOf(a) })).sort((a, b) => b.tasks - a.tasks || (a.agent < b.agent ? -1 : 1)),
    byDay: [...days].map(([d, a]) => ({ day: d, ...totalsOf(a), completed: a.completed })).sort((a, b) => (a.day < b.day ? -1 : 1)),
    ...(one
      ? {
          task: {
            id: one.id,
            title: one.title,
            state: one.state,
            steps: steps.map((s) => ({ id: s.id, title: s.title, status: s.status, attempts: s.attempts, durationsMs: taskDurations.get(`${s.taskId}\u0000${s.id}`) ?? [] })),
          },
        }
      : {}),
  };
}

/** Every task state, in the state machine's order, for tables that list them all. */
export const STATE_ORDER: readonly TaskState[] = TASK_STATES;

/** A duration for people: ms under a second, then s, min, h with one decimal; "-" for none. */
export function formatMs(v: number | null): string {
  if (v === null) return '-';
  if (v < 1000) return `${Math.round(v)} ms`;
  if (v < 60_000) return `${(v / 1000).toFixed(1)} s`;
  if (v < 3_600_000) return `${(v / 60_000).toFixed(1)} min`;
  return `${(v / 3_600_000).toFixed(1)} h`;
}
