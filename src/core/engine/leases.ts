import * as os from 'node:os';
import { randomUUID } from 'node:crypto';
import { WaypointError } from '../model/errors';
import { ACTIVE_TASK_STATES } from '../model/stateMachine';
import { interruptedEvent, leaseExpiredReason } from '../store/interruption';
import { isPidAlive } from '../store/fsutil';
import type { EngineCore } from './engineCore';
import { TaskRef } from './inputs';
import { SweepSchedule } from './sweepSchedule';

/**
 * Leases: who drives a task, renewed by its heartbeats, and the sweep that marks a
 * running task interrupted when its lease runs out or its owner process is gone.
 * Over the engine's core (as rollbacks.ts is); it holds no state of its own.
 */
export class Leases {
  constructor(private readonly core: EngineCore) {}

  async heartbeat(input: TaskRef): Promise<{ taskId: string; expiresAt: number | null }> {
    const owner = this.core.ownerOf(input.owner);
    // Nobody repeats a heartbeat: it is not kept in the idempotency table (one row per beat would grow it without end).
    const beat = `heartbeat:${randomUUID()}`;
    await this.core.run(
      'heartbeat',
      beat,
      () => {
        const task = this.core.requireTask(input.taskId);
        this.core.requireActive(task, 'renew its lease');
        if (task.lease && task.lease.owner !== owner.id) {
          throw new WaypointError('conflict', `Task ${task.id} is driven by ${task.lease.owner}, not ${owner.id}; resume it to take it over.`);
        }
        return { result: null, events: [this.core.ev('lease.heartbeat', task, owner.id, {}, beat)] };
      },
      { keyed: false },
    );
    return { taskId: input.taskId, expiresAt: this.core.queries.findTask(input.taskId)?.lease?.expiresAt ?? null };
  }

  /** The sweep of a long-lived owner: every `intervalMs`, and as the earliest lease runs out (see SweepSchedule). */
  schedule(intervalMs: number): { dispose(): void } {
    const schedule = new SweepSchedule({
      intervalMs,
      sweep: () => this.sweep(),
      nextExpiry: () => this.core.queries.earliestLeaseEnd(ACTIVE_TASK_STATES),
      expiryOf: (taskIds) => this.core.queries.earliestLeaseEndOf(taskIds, ACTIVE_TASK_STATES),
      now: () => this.core.now(),
      log: this.core.log,
    });
    const commits = this.core.eventLog.subscribe((events) => schedule.touched(events.flatMap((e) => (e.taskId ? [e.taskId] : []))));
    return {
      dispose: () => {
        commits.dispose();
        schedule.dispose();
      },
    };
  }

  /**
   * Marks running tasks whose lease expired, or whose owner process is gone, as
   * interrupted. Runs at open and on a timer in long-lived owners.
   */
  async sweep(): Promise<string[]> {
    const now = this.core.now();
    const host = os.hostname();
    const candidates = this.core.queries.tasks({ states: ACTIVE_TASK_STATES });
    const interrupted: string[] = [];
    for (const t of candidates) {
      const lease = t.lease;
      let reason: string | null = null;
      if (!lease) reason = 'no lease holder';
      else if (lease.pid && (lease.host === null || lease.host === host) && !isPidAlive(lease.pid)) reason = `owner process ${lease.pid} (${lease.owner}) exited`;
      else if (lease.expiresAt < now)
        reason = leaseExpiredReason(lease.owner, lease.expiresAt, lease.ttlMs);
      if (!reason) continue;
      const why = reason;
      await this.core.run('task.interrupt', `task.interrupt:${t.id}:${t.attempt}`, () => {
        const task = this.core.requireTask(t.id);
        if (!ACTIVE_TASK_STATES.includes(task.state)) return { events: [], result: null };
        return {
          events: [interruptedEvent(this.core, task, why)],
          result: null,
        };
      });
      interrupted.push(t.id);
      this.core.log.warn(`task ${t.id} interrupted: ${why}`, t.correlationId);
    }
    return interrupted;
  }
}

