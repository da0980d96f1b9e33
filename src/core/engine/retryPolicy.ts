import { createHash } from 'node:crypto';
import { z } from 'zod';
import { WaypointError } from '../model/errors';
import { DEFAULT_RETRY_POLICY, type Step, type Task, type TaskHold } from '../model/schema';

/**
 * The retry policy, enforced: how many times a step may be attempted and
 * how long a recoverable failure makes its next start wait. The engine asks this
 * module before it starts or fails a step; everything here is a pure function of the
 * recorded task and step, so a replay and a repeat of the same call decide the same.
 */

export interface RetryPolicy {
  /** Attempts a step may use before the task waits for a person. */
  maxAttempts: number;
  /** The first retry's delay; each later one doubles it. */
  backoffMs: number;
  /** The delay never grows past this. */
  maxBackoffMs: number;
}

export { DEFAULT_RETRY_POLICY };

/** What a caller may set (task start, the engine's default, the VS Code setting); the rest comes from the default. */
export const RetryPolicyInput = z.strictObject({
  maxAttempts: z.number().int().min(1, 'must be at least 1').max(100, 'must be at most 100').optional(),
  backoffMs: z.number().int().min(0).max(3_600_000, 'must be at most an hour').optional(),
  maxBackoffMs: z.number().int().min(0).max(24 * 3_600_000, 'must be at most a day').optional(),
});
export type RetryPolicyInput = z.infer<typeof RetryPolicyInput>;

/** The policy as a task records it (every field set), in its task.started event. */
export const RecordedRetryPolicy = z.strictObject({
  maxAttempts: z.number().int().min(1),
  backoffMs: z.number().int().min(0),
  maxBackoffMs: z.number().int().min(0),
});

/** Later layers win field by field: the default, then the engine's setting, then the task's own. */
export function resolvePolicy(...layers: (RetryPolicyInput | undefined)[]): RetryPolicy {
  const out: RetryPolicy = { ...DEFAULT_RETRY_POLICY };
  for (const l of layers) {
    if (!l) continue;
    if (l.maxAttempts !== undefined) out.maxAttempts = l.maxAttempts;
    if (l.backoffMs !== undefined) out.backoffMs = l.backoffMs;
    if (l.maxBackoffMs !== undefined) out.maxBackoffMs = l.maxBackoffMs;
  }
  out.maxBackoffMs = Math.max(out.maxBackoffMs, out.backoffMs);
  return out;
}

/** A number in [0, 1) fixed by the ids: the same (task, step, attempt) always draws the same jitter. */
function jitterFraction(taskId: string, stepId: string, attempt: number): number {
  const h = createHash('sha256').update(`${taskId}\0${stepId}\0${attempt}`).digest();
  return h.readUInt32BE(0) / 0x1_0000_0000;
}

/**
 * The wait after a step's `attempt`-th recoverable failure: exponential, capped, with
 * "equal jitter" (half fixed, half drawn) so that many tasks failing together against
 * the same service do not all come back at the same instant.
 */
export function backoffFor(policy: RetryPolicy, taskId: string, stepId: string, attempt: number): number {
  const exp = Math.min(policy.backoffMs * 2 ** Math.max(0, attempt - 1), policy.maxBackoffMs);
  const half = exp / 2;
  return Math.round(half + half * jitterFraction(taskId, stepId, attempt));
}

/** When a failed step may start again (null: now, or it is not waiting for a retry). */
export function retryAt(step: Step): number | null {
  if (step.status !== 'failed' || !step.error?.recoverable || !step.error.backoffMs) return null;
  return step.error.at + step.error.backoffMs;
}

/** The retry state a surface shows: attempt n of max, and when the next may start. */
export interface RetryState {
  attempts: number;
  maxAttempts: number;
  /** Epoch ms the next start may happen; null when it may happen now (or the step is not failed). */
  retryAt: number | null;
  /** The step used every attempt it has: only a person can let it run again. */
  exhausted: boolean;
}

export function retryState(step: Step, now: number): RetryState {
  const at = retryAt(step);
  return {
    attempts: step.attempts,
    maxAttempts: step.maxAttempts,
    retryAt: at !== null && at > now ? at : null,
    exhausted: step.status === 'failed' && !!step.error?.recoverable && step.attempts >= step.maxAttempts,
  };
}

/** Whether a recoverable failure of this (in progress) step uses its last attempt. */
export function failureExhausts(step: Step): boolean {
  return step.attempts >= step.maxAttempts;
}

export function exhaustedReason(step: Step, lastError: string): string {
  return `step ${step.id} used its ${step.attempts} attempt${step.attempts === 1 ? '' : 's'} (last error: ${lastError.length > 300 ? `${lastError.slice(0, 300)}…` : lastError}); a person must grant more, skip the step or abandon the task`;
}

/** The local time of day, 24-hour, as the person's clock shows it. */
const clock = (ms: number) => new Date(ms).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });

/** What a person may do about a hold, for messages and tool results. */
export function holdChoices(hold: TaskHold, taskId: string): string {
  if (hold.cause === 'retries_exhausted') {
    const s = hold.stepId ?? 'STEP';
    return `Stop and ask a person: they can grant more attempts (waypoint step grant --task ${taskId} --step ${s}), skip the step (waypoint step skip --task ${taskId} --step ${s}) or abandon the task (waypoint task abandon --task ${taskId}).`;
  }
  return `Stop and ask a person: settle each side effect in doubt (waypoint effect end --task ${taskId} --key KEY --ok --by person, or --error WHY --by person), roll the workspace back, or abandon the task; then resume it.`;
}

/** The refusal of a start the held task may not make. */
export function heldError(task: Task & { hold: TaskHold }, action: string): WaypointError {
  return new WaypointError('held', `Task ${task.id} waits for a person, so it cannot ${action}: ${task.hold.reason}. ${holdChoices(task.hold, task.id)}`, {
    taskId: task.id,
    hold: task.hold,
  });
}

/**
 * Refuses a start of `step` the policy does not allow now: one that used its
 * attempts (`held`), or one inside its backoff (`retry_later`, with `retryAt`).
 */
export function assertMayStart(task: Task, step: Step, now: number): void {
  const state = retryState(step, now);
  if (state.exhausted) {
    const hold: TaskHold = { cause: 'retries_exhausted', stepId: step.id, reason: exhaustedReason(step, step.error?.message ?? 'unknown'), since: step.error?.at ?? now };
    throw heldError({ ...task, hold }, `start step ${step.id} again`);
  }
  if (state.retryAt !== null) {
    const wait = state.retryAt - now;
    throw new WaypointError(
      'retry_later',
      `Step ${step.id} of task ${task.id} failed (attempt ${step.attempts} of ${step.maxAttempts}); it may retry at ${clock(state.retryAt)} (in ${Math.ceil(wait / 1000)} s). Wait until then, or pass --wait (wait: true) to wait for it.`,
      { taskId: task.id, stepId: step.id, retryAt: state.retryAt, retryAtIso: new Date(state.retryAt).toISOString(), waitMs: wait, attempts: step.attempts, maxAttempts: step.maxAttempts },
    );
  }
}

/** The longest a `wait` start blocks: past it, the refusal is returned as is. */
export const MAX_RETRY_WAIT_MS = 15 * 60_000;

/**
 * Runs `start`, and while it is refused with `retry_later`, waits until the time the
 * refusal names and tries again (each try re-reads the store, so a grant or a skip in
 * between counts). Gives up, with the refusal, when the wait would pass `maxWaitMs`.
 */
export async function startWhenAllowed<T>(start: () => Promise<T>, now: () => number, sleep: (ms: number) => Promise<void>, maxWaitMs = MAX_RETRY_WAIT_MS): Promise<T> {
  const deadline = now() + maxWaitMs;
  for (;;) {
    try {
      return await start();
    } catch (e) {
      if (!(e instanceof WaypointError) || e.code !== 'retry_later') throw e;
      const at = Number(e.details?.retryAt);
      if (!Number.isFinite(at) || at > deadline) throw e;
      await sleep(Math.max(1, at - now()));
    }
  }
}
