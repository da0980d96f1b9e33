import type { Task } from '../../core/model/schema';

/**
 * A task's state in the person's words and local time ("demo-agent stopped
 * reporting 3 min ago"), for tooltips and the resume picker. The engine's
 * interruption reason is the record (exact, in UTC, naming the lease owner); this
 * is how it reads to someone looking at the editor. Pure (no `vscode`), so it is
 * unit-tested in plain Node.
 */

/** "just now", "45 s ago", "3 min ago", "2 h ago", "yesterday", "4 days ago"; a time in the future reads as "just now". */
export function relativeTime(ts: number, now: number): string {
  const s = Math.max(0, Math.round((now - ts) / 1000));
  if (s < 10) return 'just now';
  if (s < 60) return `${s} s ago`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min ago`;
  const h = Math.round(m / 60);
  if (h < 24) return `${h} h ago`;
  const d = Math.round(h / 24);
  return d === 1 ? 'yesterday' : `${d} days ago`;
}

/** Local wall-clock time: "14:05" today, "Mon 30 Nov, 14:05" on another day (in the person's locale and time zone). */
export function localTime(ts: number, now: number, locale?: string): string {
  const at = new Date(ts);
  const clock = at.toLocaleTimeString(locale, { hour: '2-digit', minute: '2-digit' });
  if (at.toDateString() === new Date(now).toDateString()) return clock;
  return `${at.toLocaleDateString(locale, { weekday: 'short', day: 'numeric', month: 'short' })}, ${clock}`;
}

/** "3 min ago (14:05)": both, because "3 min ago" goes stale in a tooltip left open and a bare time needs arithmetic. */
export function when(ts: number, now: number, locale?: string): string {
  return `${relativeTime(ts, now)} (${localTime(ts, now, locale)})`;
}

/** Who drove the task, as the person knows it: the agent's name, else the lease owner's id, else "The agent". */
export function driverName(task: Pick<Task, 'agent' | 'lease'>): string {
  if (task.agent && task.agent !== 'manual') return task.agent;
  return task.lease?.owner ?? 'The agent';
}

// The engine's own reasons (engine.ts sweep, resumeTask): matched so they can be said plainly.
const LEASE_EXPIRED = /^lease of (.+?) expired at \S+ \(no call for (\d+) s\)$/;
const PROCESS_EXITED = /^owner process (\d+) \((.+)\) exited$/;
const TAKEN_OVER = /^taken over by (.+)$/;

/**
 * Why and when the task stopped, in one sentence without internal ids or UTC
 * stamps; `undefined` when the task has not stopped. An agent's own reason (free
 * text it gave when it suspended or failed) is kept, after the plain part.
 */
export function describeStop(task: Pick<Task, 'agent' | 'lease' | 'interruption' | 'state'>, now: number, locale?: string): string | undefined {
  const i = task.interruption;
  if (!i) return undefined;
  const who = task.agent && task.agent !== 'manual' ? task.agent : undefined;
  const at = when(i.at, now, locale);
  let m: RegExpExecArray | null;
  if ((m = LEASE_EXPIRED.exec(i.reason))) return `${who ?? m[1]} stopped reporting ${at}`;
  if ((m = PROCESS_EXITED.exec(i.reason))) return `${who ?? m[2]} went away ${at} (its process ended)`;
  if ((m = TAKEN_OVER.exec(i.reason))) return `Taken over by ${m[1]} ${at}`;
  if (i.reason === 'no lease holder') return `${who ?? 'The agent'} stopped ${at}; no one was driving it`;
  const verb = task.state === 'failed' ? 'failed' : task.state === 'suspended' ? 'paused' : 'stopped';
  return `${who ?? 'The agent'} ${verb} ${at}: ${i.reason}`;
}
