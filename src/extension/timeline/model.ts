/**
 * Events and projections → the Task Timeline's model. Pure (no `vscode`), so it runs
 * and is tested in plain Node. Attempts are read from the task's events, since the
 * step projection keeps only the last one: each `step.started` with a new attempt
 * number opens a bar, the step's next outcome event (or the task being interrupted,
 * abandoned or failed under it) closes it.
 */
import type { CheckpointMeta, SideEffect, Step, Task, WaypointEvent } from '../../core/model/schema';
import { isLive } from '../../core/model/taskStates';
import { checkpointChanges, checkpointWithStep, isShownCheckpoint, ownerWords, reasonWords } from '../labelText';
import {
  MAX_ATTEMPTS,
  MAX_CHECKPOINTS,
  MAX_EFFECTS,
  MAX_MARKS,
  MAX_STEPS,
  type AttemptOutcome,
  type TimelineAttempt,
  type TimelineMark,
  type TimelineModel,
  type TimelineStep,
} from './protocol';
import { plural } from '../../core/model/plural';

export interface TimelineInput {
  task: Task;
  steps: readonly Step[];
  checkpoints: readonly CheckpointMeta[];
  sideEffects: readonly SideEffect[];
  /** The task's events in sequence order. */
  events: readonly WaypointEvent[];
  /** "Now", for the end of the axis while something still runs. */
  now: number;
  /** This window's lease owner id, so its own work reads "by this window". */
  here?: string;
}

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
const clipN = (s: string | null | undefined, n: number) => (s == null ? null : clip(s, n));

export function buildTimeline(input: TimelineInput): TimelineModel {
  const { task } = input;
  const steps = input.steps.slice(0, MAX_STEPS);
  const stepTitles = new Map(input.steps.map((s) => [s.id, clip(s.title, 500)]));
  // Who ran what, in words ("this window", "Claude Code"): owner ids stay in the events document.
  const who = (id: string) => ownerWords(id, input.here);
  const attempts = readAttempts(input.events, who);
  const marks = readMarks(input.events, stepTitles, who);
  // Empty auto checkpoints are noise (the tree leaves them out too).
  const shownCheckpoints = input.checkpoints.filter(isShownCheckpoint);
  const checkpoints = shownCheckpoints.slice(-MAX_CHECKPOINTS);
  const effects = input.sideEffects.slice(0, MAX_EFFECTS);
  const keptAttempts = attempts.slice(-MAX_ATTEMPTS);
  const keptMarks = marks.slice(-MAX_MARKS);
  const running = isLive(task);
  const times = [task.createdAt, task.updatedAt, ...keptAttempts.flatMap((a) => (a.end === null ? [a.start] : [a.start, a.end])), ...checkpoints.map((c) => c.createdAt)];
  const lastEvent = input.events.at(-1);
  if (lastEvent) times.push(lastEvent.ts);
  const start = Math.min(...times);
  let end = Math.max(...times);
  // A bar still open runs to "now" while the task runs; otherwise to the last thing recorded.
  if (running || keptAttempts.some((a) => a.end === null && a.outcome === 'running')) end = Math.max(end, input.now);
  return {
    task: {
      id: task.id,
      title: clip(task.title, 1_000),
      state: task.state,
      agent: clipN(task.agent, 200),
      correlationId: clip(task.correlationId, 256),
      createdAt: task.createdAt,
      updatedAt: task.updatedAt,
      attempt: task.attempt,
      interruption: task.interruption ? clip(`${reasonWords(task.interruption.reason, who)}${task.interruption.error ? `: ${task.interruption.error}` : ''} (${task.interruption.class.replace(/_/g, ' ')})`, 2_000) : null,
    },
    events: input.events.length,
    lastSeq: lastEvent?.seq ?? 0,
    range: { start, end: Math.max(end, start + 1) },
    steps: layoutSteps(steps),
    attempts: keptAttempts,
    checkpoints: checkpoints.map((c) => ({
      id: c.id,
      kind: c.kind,
      label: clipN(c.label, 500),
      // Named as the tree names it: a count or an id in the stored label gives way to words.
      title: clip(checkpointWithStep(c, input.checkpoints, input.steps), 1_100),
      stepId: c.stepId,
      at: c.createdAt,
      filesChanged: c.filesChanged,
      changes: checkpointChanges(c),
      restorable: !!c.manifestRef && !c.damaged,
    })),
    effects: effects.map((e) => ({
      key: e.key,
      kind: clip(e.kind, 100),
      description: clip(e.description, 2_000),
      status: e.status,
      stepId: e.stepId,
      at: e.intentAt,
      endedAt: e.endedAt,
      attempts: e.attempts,
      error: clipN(e.error, 2_000),
      resolvedBy: e.resolvedBy,
      shell: e.kind === 'shell',
    })),
    marks: keptMarks,
    omitted: {
      steps: input.steps.length - steps.length,
      attempts: attempts.length - keptAttempts.length,
      checkpoints: shownCheckpoints.length - checkpoints.length,
      effects: input.sideEffects.length - effects.length,
      marks: marks.length - keptMarks.length,
    },
  };
}

/**
 * Layers the `dependsOn` DAG: a step's layer is one more than its deepest
 * dependency's (unknown ids are ignored; a cycle, which the plan validator already
 * refuses, is cut where it closes rather than looping). Rows keep plan order.
 */
export function layoutSteps(steps: readonly Step[]): TimelineStep[] {
  const byId = new Map(steps.map((s) => [s.id, s]));
  const layer = new Map<string, number>();
  const visiting = new Set<string>();
  const depth = (id: string): number => {
    const known = layer.get(id);
    if (known !== undefined) return known;
    if (visiting.has(id)) return 0;
    visiting.add(id);
    let d = 0;
    for (const dep of byId.get(id)?.dependsOn ?? []) if (byId.has(dep) && dep !== id) d = Math.max(d, depth(dep) + 1);
    visiting.delete(id);
    layer.set(id, d);
    return d;
  };
  const rows = new Map<number, number>();
  return [...steps]
    .sort((a, b) => a.order - b.order)
    .map((s) => {
      const l = depth(s.id);
      const row = rows.get(l) ?? 0;
      rows.set(l, row + 1);
      return {
        id: s.id,
        title: clip(s.title, 500),
        status: s.status,
        dependsOn: s.dependsOn.filter((d) => byId.has(d)).slice(0, 256),
        layer: Math.min(l, MAX_STEPS),
        row: Math.min(row, MAX_STEPS),
        adhoc: s.adhoc,
        error: clipN(s.error?.message, 2_000),
      };
    });
}

/** Every attempt of every step, in the order they started. */
export function readAttempts(events: readonly WaypointEvent[], who: (ownerId: string) => string = (id) => id): TimelineAttempt[] {
  const all: TimelineAttempt[] = [];
  /** The step's latest bar, open or not. */
  const last = new Map<string, TimelineAttempt>();
  const bars = new Map<string, number>();
  const open = (stepId: string) => {
    const a = last.get(stepId);
    return a && a.end === null ? a : undefined;
  };
  const close = (a: TimelineAttempt, at: number, outcome: AttemptOutcome, error: string | null = null, failureClass: string | null = null) => {
    a.end = Math.max(a.start, at);
    a.outcome = outcome;
    a.error = clipN(error, 2_000);
    a.failureClass = failureClass;
  };
  const closeAll = (at: number, outcome: AttemptOutcome, error: string | null = null) => {
    for (const a of last.values()) if (a.end === null) close(a, at, outcome, error);
  };
  for (const ev of events) {
    switch (ev.type) {
      case 'step.started': {
        const d = (ev as WaypointEvent<'step.started'>).data;
        const current = open(d.stepId);
        // The same numbered start again (a repeated call) is the same bar.
        if (current && current.n === d.attempt) break;
        if (current) close(current, ev.ts, 'interrupted', 'started again before an outcome was recorded');
        const k = (bars.get(`${d.stepId}#${d.attempt}`) ?? 0) + 1;
        bars.set(`${d.stepId}#${d.attempt}`, k);
        const a: TimelineAttempt = {
          id: clip(k === 1 ? `${d.stepId}#${d.attempt}` : `${d.stepId}#${d.attempt}.${k}`, 300),
          stepId: d.stepId,
          n: d.attempt,
          taskAttempt: d.taskAttempt,
          start: ev.ts,
          end: null,
          outcome: 'running',
          by: clipN(ev.by === null ? null : who(ev.by), 200),
          error: null,
          failureClass: null,
        };
        all.push(a);
        last.set(d.stepId, a);
        break;
      }
      case 'step.completed':
      case 'step.skipped':
      case 'step.abandoned':
      case 'step.failed': {
        const stepId = (ev.data as { stepId: string }).stepId;
        // An outcome after an interruption (the task resumed and the agent finished the same attempt) settles that bar.
        const a = open(stepId) ?? (last.get(stepId)?.outcome === 'interrupted' ? last.get(stepId) : undefined);
        if (!a) break;
        if (ev.type === 'step.completed') close(a, ev.ts, 'completed');
        else if (ev.type === 'step.skipped') close(a, ev.ts, 'skipped', (ev as WaypointEvent<'step.skipped'>).data.reason);
        else if (ev.type === 'step.abandoned') close(a, ev.ts, 'abandoned', (ev as WaypointEvent<'step.abandoned'>).data.reason);
        else {
          const d = (ev as WaypointEvent<'step.failed'>).data;
          close(a, ev.ts, 'failed', d.error, d.class);
        }
        break;
      }
      case 'step.restored': {
        // Undoing a rollback gives an abandoned step back its state: one left in progress runs again,
        // as a new bar from the undo (the time between was not spent on it).
        const d = (ev as WaypointEvent<'step.restored'>).data;
        const prev = last.get(d.stepId);
        if (d.status !== 'in_progress' || !prev || open(d.stepId)) break;
        const k = (bars.get(`${d.stepId}#${prev.n}`) ?? 0) + 1;
        bars.set(`${d.stepId}#${prev.n}`, k);
        const a: TimelineAttempt = { ...prev, id: clip(`${d.stepId}#${prev.n}.${k}`, 300), start: ev.ts, end: null, outcome: 'running', error: null, failureClass: null };
        all.push(a);
        last.set(d.stepId, a);
        break;
      }
      case 'task.interrupted':
        closeAll(ev.ts, 'interrupted', reasonWords((ev as WaypointEvent<'task.interrupted'>).data.reason, who));
        break;
      case 'task.suspended':
        closeAll(ev.ts, 'interrupted', (ev as WaypointEvent<'task.suspended'>).data.reason ?? 'suspended');
        break;
      case 'task.failed':
        closeAll(ev.ts, 'failed', (ev as WaypointEvent<'task.failed'>).data.reason);
        break;
      case 'task.abandoned':
        closeAll(ev.ts, 'abandoned', (ev as WaypointEvent<'task.abandoned'>).data.reason ?? 'task abandoned');
        break;
      case 'task.completed':
        closeAll(ev.ts, 'completed');
        break;
      default:
        break;
    }
  }
  return all;
}

/** The task-level moments worth a mark on the axis. */
export function readMarks(events: readonly WaypointEvent[], stepTitles: ReadonlyMap<string, string> = new Map(), who: (ownerId: string) => string = (id) => id): TimelineMark[] {
  const out: TimelineMark[] = [];
  const push = (ev: WaypointEvent, text: string) => out.push({ id: String(ev.seq), at: ev.ts, type: ev.type, text: clip(text, 2_000) });
  for (const ev of events) {
    switch (ev.type) {
      case 'task.started':
        push(ev, `Started${ev.by ? ` by ${who(ev.by)}` : ''}`);
        break;
      case 'task.plan_updated':
        push(ev, `Plan extended by ${plural((ev as WaypointEvent<'task.plan_updated'>).data.added.length, 'step')}`);
        break;
      case 'task.interrupted': {
        const d = (ev as WaypointEvent<'task.interrupted'>).data;
        push(ev, `Interrupted (${d.class.replace(/_/g, ' ')}): ${reasonWords(d.reason, who)}`);
        break;
      }
      case 'task.suspended':
        push(ev, `Suspended${(ev as WaypointEvent<'task.suspended'>).data.reason ? `: ${(ev as WaypointEvent<'task.suspended'>).data.reason}` : ''}`);
        break;
      case 'task.resumed': {
        const d = (ev as WaypointEvent<'task.resumed'>).data;
        push(ev, `Resumed (task attempt ${d.attempt}) by ${who(d.owner.id)}`);
        break;
      }
      case 'task.review_requested':
        push(ev, 'Review requested');
        break;
      case 'task.completed': {
        const d = (ev as WaypointEvent<'task.completed'>).data;
        push(ev, `Completed${d.commit ? ` as commit ${d.commit.slice(0, 10)}` : ''}`);
        break;
      }
      case 'task.failed':
        push(ev, `Failed: ${(ev as WaypointEvent<'task.failed'>).data.reason}`);
        break;
      case 'task.abandoned':
        push(ev, `Abandoned${(ev as WaypointEvent<'task.abandoned'>).data.reason ? `: ${(ev as WaypointEvent<'task.abandoned'>).data.reason}` : ''}`);
        break;
      case 'rollback.done': {
        const d = (ev as WaypointEvent<'rollback.done'>).data;
        push(ev, `Rollback ${d.outcome}: ${d.filesWritten} written, ${d.filesRemoved} removed${d.abandonedSteps.length ? `; abandoned ${d.abandonedSteps.map((id) => stepTitles.get(id) ?? 'a removed step').join(', ')}` : ''}`);
        break;
      }
      case 'review.apply_done': {
        const d = (ev as WaypointEvent<'review.apply_done'>).data;
        push(ev, `Review applied (${d.outcome})${d.commit ? `, commit ${d.commit.slice(0, 10)}` : ''}`);
        break;
      }
      default:
        break;
    }
  }
  return out;
}
