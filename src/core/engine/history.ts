/**
 * Always-on workspace history: file activity while no task runs is
 * checkpointed into one record per day, so the work of an agent that reports nothing
 * can still be rolled back. A day's record is a task of kind `history` the engine
 * owns (id `history-YYYY-MM-DD`, local date): rollback, undo, diff and the storage
 * report work on it unchanged, while task lists, counts, the lease sweep and alerts
 * never see it (Queries.tasks leaves it out). Its retention is its own, by whole days:
 * older than an age, then the oldest until the history fits a byte budget.
 */
import { WaypointError } from '../model/errors';
import { plural } from '../model/plural';
import type { CheckpointMeta, LeaseOwner, Task } from '../model/schema';
import type { NewEvent } from '../store/eventStore';
import type { EngineCore } from './engineCore';
import { HistoryRetentionInput, RecordHistoryInput } from './inputs';

export const HISTORY_OWNER: LeaseOwner = { id: 'waypoint:history' };
const DAY_MS = 86_400_000;

/** The local calendar day of a time, as YYYY-MM-DD. */
export function historyDay(ms: number): string {
  const d = new Date(ms);
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
}

export const historyTaskId = (day: string): string => `history-${day}`;

export interface HistoryDay {
  taskId: string;
  day: string;
  title: string;
  checkpoints: number;
  /** New content its checkpoints stored (the sum of their `bytes`): what dropping the day can free at most. */
  bytes: number;
  firstAt: number;
  lastAt: number;
}

export interface HistoryFootprint {
  days: HistoryDay[];
  checkpoints: number;
  bytes: number;
}

export interface HistoryRecordResult {
  taskId: string;
  /** Null when nothing was recorded: the workspace was as the last checkpoint holds it. */
  checkpointId: string | null;
  filesChanged: number;
  /** The day's record began with this call. */
  newDay: boolean;
}

export interface HistoryPruneResult {
  /** The days dropped, oldest first, with why. */
  dropped: { taskId: string; reason: string }[];
  bytesBefore: number;
  bytesAfter: number;
  blobsDeleted: number;
  bytesFreed: number;
}

export class WorkspaceHistory {
  constructor(
    private readonly core: EngineCore,
    /** Deletes the blobs no checkpoint needs any more (the engine's gc with no policy). */
    private readonly sweep: () => Promise<{ blobsDeleted: number; bytesFreed: number }>,
  ) {}

  /**
   * Checkpoints the workspace into today's record. The first call of a day starts the
   * record with a base that reuses the newest checkpoint's manifest (the workspace as
   * last recorded, before this burst: nothing is scanned for it), so the burst itself
   * can be rolled back; on a store with no checkpoint yet the base is the workspace now.
   */
  async record(input: RecordHistoryInput = {}): Promise<HistoryRecordResult> {
    this.core.snapshots();
    const key = input.idempotencyKey ?? `history.record:${this.core.now()}:${Math.random().toString(36).slice(2)}`;
    return this.core.run<HistoryRecordResult>('history.record', key, async () => {
        const day = historyDay(this.core.now());
        const taskId = historyTaskId(day);
        const existing = this.core.queries.findTask(taskId);
        if (existing && existing.kind !== 'history') throw new WaypointError('conflict', `Task ${taskId} exists and is not workspace history; history for ${day} cannot be recorded.`, { taskId });
        const events: NewEvent[] = [];
        let task: Task;
        let baseId: string | null = null;
        if (existing) {
          task = existing;
        } else {
          const started: NewEvent = {
            type: 'task.started',
            taskId,
            corr: taskId,
            by: null,
            key: `${key}#start`,
            data: { goal: `Workspace changes made on ${day} while no task ran`, title: `Workspace history — ${day}`, agent: null, plan: [], owner: HISTORY_OWNER, leaseTtlMs: DAY_MS, kind: 'history' },
          };
          events.push(started);
          task = { id: taskId, correlationId: taskId, lastCheckpointId: null, kind: 'history' } as Task;
          const latest = this.core.latestCheckpoint();
          if (!latest) {
            const { event, checkpoint } = await this.core.captureCheckpoint(task, 'task_base', null, `workspace on ${day}`);
            events.push({ ...event, key: `${key}#base` });
            return { events, result: { taskId, checkpointId: checkpoint.id, filesChanged: checkpoint.filesChanged, newDay: true } };
          }
          baseId = `${latest.id}.h${day.replace(/-/g, '')}`;
          events.push(this.baseFrom(latest, task, baseId, `${key}#base`));
        }
        const cp = await this.core.captureCheckpoint(task, 'auto', null, input.label ?? null, input.dirty);
        if (baseId) {
          // The base is not in the projection yet: the capture took its parent from the newest checkpoint (the same manifest); the tree names the base.
          (cp.event.data as { parentId: string | null }).parentId = baseId;
        }
        if (existing && cp.checkpoint.filesChanged === 0) return { events: [], result: { taskId, checkpointId: null, filesChanged: 0, newDay: false } };
        events.push({ ...cp.event, key: `${key}#auto` });
        return { events, result: { taskId, checkpointId: cp.checkpoint.id, filesChanged: cp.checkpoint.filesChanged, newDay: !existing } };
      }, { space: 'workspace history' });
  }

  /** A day's base: the newest checkpoint's manifest again, under the day's record (no scan, no new content). */
  private baseFrom(latest: CheckpointMeta, task: Task, id: string, key: string): NewEvent {
    return {
      type: 'checkpoint.created',
      taskId: task.id,
      corr: task.correlationId,
      by: null,
      key,
      data: {
        checkpointId: id,
        kind: 'task_base',
        stepId: null,
        label: `workspace as last recorded (${new Date(latest.createdAt).toISOString().slice(0, 16).replace('T', ' ')} UTC)`,
        parentId: latest.id,
        manifestRef: latest.manifestRef,
        files: latest.files,
        filesChanged: 0,
        bytes: 0,
      },
    };
  }

  /** Every day of history, newest first, with its checkpoints and the bytes they stored. */
  footprint(): HistoryFootprint {
    const days: HistoryDay[] = this.core.queries.tasks({ kind: 'history' }).map((t) => {
      const cps = this.core.queries.checkpoints(t.id);
      return {
        taskId: t.id,
        day: t.id.replace(/^history-/, ''),
        title: t.title,
        checkpoints: cps.length,
        bytes: cps.reduce((n, c) => n + c.bytes, 0),
        firstAt: t.createdAt,
        lastAt: cps.length ? cps[cps.length - 1].createdAt : t.createdAt,
      };
    });
    days.sort((a, b) => (a.day < b.day ? 1 : a.day > b.day ? -1 : 0));
    return { days, checkpoints: days.reduce((n, d) => n + d.checkpoints, 0), bytes: days.reduce((n, d) => n + d.bytes, 0) };
  }

  /**
   * Drops whole days: those whose last checkpoint is older than `maxAgeDays`, then the
   * oldest until the history's bytes fit `maxBytes`. Today's record is never dropped
   * (it is what the person may want to roll back now). Then the blobs no checkpoint
   * needs are deleted.
   */
  async prune(policy: HistoryRetentionInput = {}): Promise<HistoryPruneResult> {
    const now = this.core.now();
    const today = historyTaskId(historyDay(now));
    const before = this.footprint();
    const oldestFirst = [...before.days].reverse().filter((d) => d.taskId !== today);
    const dropped: HistoryPruneResult['dropped'] = [];
    let bytes = before.bytes;
    for (const d of oldestFirst) {
      let reason: string | null = null;
      if (policy.maxAgeDays !== undefined && now - d.lastAt > policy.maxAgeDays * DAY_MS) reason = `older than ${policy.maxAgeDays} days`;
      else if (policy.maxBytes !== undefined && bytes > policy.maxBytes) reason = `workspace history over ${policy.maxBytes} bytes`;
      if (!reason) continue;
      const why = reason;
      await this.core.run('history.prune', `history.prune:${d.taskId}:${d.lastAt}`, () => {
        const task = this.core.queries.findTask(d.taskId);
        if (!task || task.kind !== 'history') return { events: [], result: null };
        return { events: [this.core.ev('task.deleted', task, null, {}, '')], result: { taskId: task.id, reason: why } };
      });
      bytes -= d.bytes;
      dropped.push({ taskId: d.taskId, reason: why });
      this.core.log.info(`[history] dropped ${d.taskId} (${plural(d.checkpoints, 'checkpoint')}, ${d.bytes} bytes): ${why}`);
    }
    const swept = dropped.length && this.core.workspaceSnapshots ? await this.sweep() : { blobsDeleted: 0, bytesFreed: 0 };
    return { dropped, bytesBefore: before.bytes, bytesAfter: this.footprint().bytes, blobsDeleted: swept.blobsDeleted, bytesFreed: swept.bytesFreed };
  }
}
