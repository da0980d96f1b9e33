import type { EngineApi } from '../core/engine/api';
import type { CheckpointMeta, Task, WaypointEvent } from '../core/model/schema';
import { plural } from '../core/model/plural';
import { checkpointChanges, isShownCheckpoint } from '../core/model/checkpointWords';
import { required } from './args';
import type { Command } from './command';

/**
 * `waypoint timeline --task T`: a task's story in time order, read from its events —
 * each step attempt (start, duration, outcome), checkpoints, side effects, rollbacks
 * and the task's own moves. The JSON (`--json`) holds the same entries.
 */

export type TimelineEntry =
  | { at: number; kind: 'task'; event: string; detail: string | null }
  | { at: number; kind: 'attempt'; stepId: string; title: string; attempt: number; status: 'running' | 'completed' | 'failed' | 'skipped' | 'abandoned' | 'interrupted'; end: number | null; durationMs: number | null; error: string | null }
  | { at: number; kind: 'checkpoint'; checkpointId: string; checkpointKind: string; stepId: string | null; label: string | null; files: number; filesChanged: number }
  | { at: number; kind: 'side_effect'; key: string; stepId: string | null; effectKind: string; description: string; status: 'intent' | 'done' | 'failed'; end: number | null; detail: string | null }
  | { at: number; kind: 'rollback'; rollbackId: string; targetCheckpointId: string; outcome: string | null; filesWritten: number | null; filesRemoved: number | null };

/** A task's whole event list (paged: a long task has more events than one read returns). */
async function allEvents(api: EngineApi, taskId: string): Promise<WaypointEvent[]> {
  const out: WaypointEvent[] = [];
  for (let after = 0; ; ) {
    const page = await api.events({ taskId, afterSeq: after, limit: 10_000 });
    out.push(...page);
    if (page.length < 10_000) return out;
    after = page[page.length - 1].seq;
  }
}

const TASK_MOVES: Partial<Record<WaypointEvent['type'], (d: Record<string, unknown>) => string | null>> = {
  'task.started': (d) => `goal: ${String(d.goal)}`,
  'task.plan_updated': (d) => `plan: ${plural((d.added as unknown[]).length, 'step')} added`,
  'task.resumed': (d) => `attempt ${String(d.attempt)}`,
  'task.interrupted': (d) => `${String(d.reason)} (${String(d.class)})`,
  'task.failed': (d) => String(d.reason),
  'task.suspended': (d) => (d.reason as string | null) ?? null,
  'task.held': (d) => `waits for a person: ${String(d.reason)}`,
  'task.review_requested': (d) => (d.summary as string | null) ?? null,
  'task.completed': (d) => (d.summary as string | null) ?? null,
  'task.reopened': (d) => String(d.reason),
  'task.abandoned': (d) => (d.reason as string | null) ?? null,
};

export function timelineEntries(events: readonly WaypointEvent[]): TimelineEntry[] {
  const entries: TimelineEntry[] = [];
  const openAttempt = new Map<string, Extract<TimelineEntry, { kind: 'attempt' }>>();
  const effects = new Map<string, Extract<TimelineEntry, { kind: 'side_effect' }>>();
  const rollbacks = new Map<string, Extract<TimelineEntry, { kind: 'rollback' }>>();
  const close = (stepId: string, at: number, status: Extract<TimelineEntry, { kind: 'attempt' }>['status'], error: string | null = null) => {
    const a = openAttempt.get(stepId);
    if (!a) return;
    a.status = status;
    a.end = at;
    a.durationMs = Math.max(0, at - a.at);
    a.error = error;
    openAttempt.delete(stepId);
  };
  for (const ev of events) {
    const d = ev.data as Record<string, unknown>;
    const move = TASK_MOVES[ev.type];
    if (move) {
      entries.push({ at: ev.ts, kind: 'task', event: ev.type.slice('task.'.length).replace(/_/g, ' '), detail: move(d) });
      // A task that stops leaves its running attempt interrupted.
      if (ev.type === 'task.interrupted' || ev.type === 'task.failed' || ev.type === 'task.abandoned') for (const id of [...openAttempt.keys()]) close(id, ev.ts, 'interrupted', String(d.reason ?? ev.type));
      continue;
    }
    switch (ev.type) {
      case 'step.started': {
        const stepId = String(d.stepId);
        const current = openAttempt.get(stepId);
        if (current && current.attempt === d.attempt) break; // the same start, repeated
        if (current) close(stepId, ev.ts, 'interrupted', 'started again before an outcome was recorded');
        const a: Extract<TimelineEntry, { kind: 'attempt' }> = { at: ev.ts, kind: 'attempt', stepId, title: String(d.title), attempt: Number(d.attempt), status: 'running', end: null, durationMs: null, error: null };
        entries.push(a);
        openAttempt.set(stepId, a);
        break;
      }
      case 'step.completed':
        close(String(d.stepId), ev.ts, 'completed');
        break;
      case 'step.failed':
        close(String(d.stepId), ev.ts, 'failed', `${String(d.error)}${d.recoverable ? ' (recoverable)' : ''}`);
        break;
      case 'step.skipped':
        close(String(d.stepId), ev.ts, 'skipped', (d.reason as string | null) ?? null);
        break;
      case 'step.abandoned':
        close(String(d.stepId), ev.ts, 'abandoned', String(d.reason));
        break;
      case 'checkpoint.created': {
        const c = { kind: String(d.kind) as CheckpointMeta['kind'], files: Number(d.files ?? 0), filesChanged: Number(d.filesChanged) };
        // As the tree and the timeline page: an auto checkpoint that captured nothing is left out.
        if (!isShownCheckpoint(c)) break;
        entries.push({ at: ev.ts, kind: 'checkpoint', checkpointId: String(d.checkpointId), checkpointKind: c.kind, stepId: (d.stepId as string | null) ?? null, label: (d.label as string | null) ?? null, files: c.files, filesChanged: c.filesChanged });
        break;
      }
      case 'side_effect.intent': {
        const e: Extract<TimelineEntry, { kind: 'side_effect' }> = { at: ev.ts, kind: 'side_effect', key: String(d.key), stepId: (d.stepId as string | null) ?? null, effectKind: String(d.kind), description: String(d.description), status: 'intent', end: null, detail: null };
        entries.push(e);
        effects.set(e.key, e);
        break;
      }
      case 'side_effect.done':
      case 'side_effect.failed': {
        const e = effects.get(String(d.key));
        if (!e) break;
        e.status = ev.type === 'side_effect.done' ? 'done' : 'failed';
        e.end = ev.ts;
        e.detail = ev.type === 'side_effect.failed' ? String(d.error) : `by ${String(d.by)}`;
        break;
      }
      case 'rollback.started': {
        const r: Extract<TimelineEntry, { kind: 'rollback' }> = { at: ev.ts, kind: 'rollback', rollbackId: String(d.rollbackId), targetCheckpointId: String(d.targetCheckpointId), outcome: null, filesWritten: null, filesRemoved: null };
        entries.push(r);
        rollbacks.set(r.rollbackId, r);
        break;
      }
      case 'rollback.done': {
        const r = rollbacks.get(String(d.rollbackId));
        if (!r) break;
        r.outcome = String(d.outcome);
        r.filesWritten = Number(d.filesWritten);
        r.filesRemoved = Number(d.filesRemoved);
        break;
      }
      default:
        break;
    }
  }
  return entries.sort((a, b) => a.at - b.at);
}

function duration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
  return `${Math.floor(ms / 3_600_000)} h ${Math.round((ms % 3_600_000) / 60_000)} min`;
}

function line(e: TimelineEntry): string {
  switch (e.kind) {
    case 'task':
      return `task ${e.event}${e.detail ? `: ${e.detail}` : ''}`;
    case 'attempt':
      return `step ${e.stepId} attempt ${e.attempt}  ${e.status}${e.durationMs !== null ? ` after ${duration(e.durationMs)}` : ''}  ${e.title}${e.error ? `  — ${e.error}` : ''}`;
    case 'checkpoint':
      return `checkpoint ${e.checkpointId} ${e.checkpointKind}${e.stepId ? ` (step ${e.stepId})` : ''}, ${e.checkpointKind === 'task_base' ? `holds ${checkpointChanges({ kind: 'task_base', files: e.files, filesChanged: e.filesChanged })}` : checkpointChanges({ kind: e.checkpointKind as CheckpointMeta['kind'], files: e.files, filesChanged: e.filesChanged })}${e.label ? `  "${e.label}"` : ''}`;
    case 'side_effect':
      return `side effect ${e.key} (${e.effectKind}) ${e.status === 'intent' ? 'begun, no outcome recorded' : e.status}${e.end !== null ? ` after ${duration(Math.max(0, e.end - e.at))}` : ''}: ${e.description}${e.detail ? `  — ${e.detail}` : ''}`;
    case 'rollback':
      return `rollback to ${e.targetCheckpointId}${e.outcome ? ` ${e.outcome}: ${plural(e.filesWritten ?? 0, 'file')} written, ${e.filesRemoved ?? 0} removed` : ' (not finished)'}`;
  }
}

export function timelineText(task: Task, entries: readonly TimelineEntry[]): string {
  const start = entries[0]?.at ?? task.createdAt;
  const head = `${task.title}  [${task.state}]  ${task.id}, started ${new Date(task.createdAt).toISOString()}`;
  if (!entries.length) return `${head}\n  (nothing recorded)`;
  return [head, ...entries.map((e) => `  +${duration(e.at - start).padStart(9)}  ${new Date(e.at).toISOString().slice(11, 23)}  ${line(e)}`)].join('\n');
}

export const TIMELINE_COMMAND: Command = {
  summary: 'a task in time order: step attempts (duration, outcome), checkpoints, side effects, rollbacks',
  usage: 'waypoint timeline --task ID [--json]',
  readOnly: true,
  options: { task: { type: 'string', short: 't' } },
  async run(c) {
    const taskId = required(c.values, 'task');
    const api = await c.engine();
    const { task } = await api.taskDetail(taskId);
    const entries = timelineEntries(await allEvents(api, taskId));
    c.out(timelineText(task, entries), { taskId, state: task.state, title: task.title, entries });
  },
};
