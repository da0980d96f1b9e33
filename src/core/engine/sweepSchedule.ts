import type { Logger } from '../log';
import { errorMessage } from '../model/errors';

/**
 * When a long-lived owner runs the lease sweep: on an interval, because an owner process
 * that died is seen only by looking; and also as the earliest lease of an active task
 * runs out, so a lapsed lease reads as interrupted at once rather than up to an
 * interval later.
 *
 * The alarm is never later than the earliest lease end, and may be earlier. A commit
 * changes only the leases of the tasks its events name, so after a commit only those
 * tasks are looked up (by key): a lease that now ends sooner than the alarm (a task
 * started, resumed, given a shorter lease) moves the alarm up; one that moved later (a
 * renewal) or ended leaves it early, and the sweep it runs, finding nothing due, sets it
 * from all active tasks again. Looking through all active tasks after every commit cost
 * an owner of a large store a scan of its tasks table per call.
 */
export interface SweepScheduleOptions {
  intervalMs: number;
  sweep: () => Promise<unknown>;
  /** The earliest lease end among active tasks (0: one has no lease, due now), or null when none is active. */
  nextExpiry: () => number | null;
  /** The same among these tasks only (the ones a commit named). */
  expiryOf: (taskIds: readonly string[]) => number | null;
  now: () => number;
  log: Logger;
}

/** After the lease's end, by the clock that judges it (the sweep compares with `<`). */
const PAST_END_MS = 20;
/** Never sooner than this after the last alarm: a task that stays due cannot spin the loop. */
const MIN_DELAY_MS = 250;

export class SweepSchedule {
  private readonly interval: NodeJS.Timeout;
  private alarm: NodeJS.Timeout | undefined;
  private alarmAt = Infinity;
  private disposed = false;

  constructor(private readonly o: SweepScheduleOptions) {
    this.interval = setInterval(() => void this.run(), o.intervalMs);
    this.interval.unref();
    this.rearm();
  }

  /** A commit named these tasks: one of their leases may now end before the alarm. */
  touched(taskIds: readonly string[]): void {
    if (this.disposed || taskIds.length === 0) return;
    const next = this.expiry(() => this.o.expiryOf(taskIds));
    if (next === undefined || next === null || (this.alarm && next >= this.alarmAt)) return;
    this.setAlarm(next);
  }

  /** The alarm at the earliest lease end of all active tasks (none when no task is active). */
  private rearm(): void {
    if (this.disposed) return;
    const next = this.expiry(() => this.o.nextExpiry());
    if (next === undefined) return;
    if (next === null) return this.clearAlarm();
    if (this.alarm && next === this.alarmAt) return;
    this.setAlarm(next);
  }

  /** undefined when the query failed (logged; the interval goes on). */
  private expiry(query: () => number | null): number | null | undefined {
    try {
      return query();
    } catch (e) {
      this.o.log.error(`lease alarm: ${errorMessage(e)}`);
      return undefined;
    }
  }

  private setAlarm(next: number): void {
    this.clearAlarm();
    const delay = Math.min(Math.max(MIN_DELAY_MS, next - this.o.now() + PAST_END_MS), this.o.intervalMs);
    this.alarmAt = next;
    this.alarm = setTimeout(() => {
      this.alarm = undefined;
      this.alarmAt = Infinity;
      void this.run();
    }, delay);
    this.alarm.unref();
  }

  private async run(): Promise<void> {
    try {
      await this.o.sweep();
    } catch (e) {
      // Left to the interval: a sweep that fails must not be retried in a tight loop.
      this.o.log.error(`lease sweep failed: ${errorMessage(e)}`);
      return;
    }
    this.rearm();
  }

  private clearAlarm(): void {
    clearTimeout(this.alarm);
    this.alarm = undefined;
    this.alarmAt = Infinity;
  }

  dispose(): void {
    this.disposed = true;
    clearInterval(this.interval);
    this.clearAlarm();
  }
}
