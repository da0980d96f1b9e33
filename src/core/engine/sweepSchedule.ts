import type { Logger } from '../log';
import { errorMessage } from '../model/errors';

/**
 * When a long-lived owner runs the lease sweep: on an interval, because an owner process
 * that died is seen only by looking; and also as the earliest lease of an active task
 * runs out, so a lapsed lease reads as interrupted at once rather than up to an
 * interval later. The alarm follows the leases: every commit may renew, start or end
 * one, so it is set again after each (one indexed query).
 */
export interface SweepScheduleOptions {
  intervalMs: number;
  sweep: () => Promise<unknown>;
  /** The earliest lease end among active tasks (0: one has no lease, due now), or null when none is active. */
  nextExpiry: () => number | null;
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

  /** A commit happened: the earliest lease end may have moved. */
  rearm(): void {
    if (this.disposed) return;
    let next: number | null;
    try {
      next = this.o.nextExpiry();
    } catch (e) {
      this.o.log.error(`lease alarm: ${errorMessage(e)}`);
      return;
    }
    if (next === null) return this.clearAlarm();
    if (this.alarm && next === this.alarmAt) return;
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
