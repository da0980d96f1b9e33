/**
 * Retry-on-transient-errors for the scanner's opens and listings: a low descriptor
 * limit (EMFILE/ENFILE) or EAGAIN is worth waiting out a little while the scan's own
 * large reads and stat batches release what they hold; anything else fails at once.
 */
import { errCode } from './fsAccess.js';

/** Out of descriptors (this process's or the system's) or asked to try again. */
export const TRANSIENT = new Set(['EMFILE', 'ENFILE', 'EAGAIN']);
/** Waits before each retry of a transient failure (ms): about 1.3 s in all, while other work closes what it holds. */
const TRANSIENT_BACKOFF_MS = [5, 10, 20, 40, 80, 160, 320, 640];
/** What one scan may spend waiting on transient errors in all: past it, what still fails is recorded at once (a limit that stays low would cost 1.3 s a path). */
export const TRANSIENT_BUDGET_MS = 5000;

/** The waiting one scan has left (see TRANSIENT_BUDGET_MS). */
export interface RetryBudget {
  ms: number;
}

/**
 * Runs `fn`, retrying while it fails with a transient error. The last failure is
 * thrown: the caller records the path as not captured, never as absent.
 */
export async function retryTransient<T>(fn: () => T, budget: RetryBudget): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return fn();
    } catch (err) {
      const wait = TRANSIENT_BACKOFF_MS[i];
      if (wait === undefined || budget.ms < wait || !TRANSIENT.has(errCode(err))) throw err;
      budget.ms -= wait;
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}
