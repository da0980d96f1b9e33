import { WaypointError } from '../model/errors';
import type { AppendResult, EventLog, NewEvent, Projection } from '../store/eventLog';
import type { Queries } from '../store/queries';

/** What an operation's body decides: its answer, and the events that record it (none: nothing to record). */
export interface Outcome<R> {
  result: R;
  events?: readonly NewEvent[];
}

export interface OnceOptions<R> {
  /**
   * An earlier record of this call kept somewhere other than the idempotency table —
   * the side-effect ledger, the first half of a fork — answered as a repeat is.
   */
  repeat?: () => { result: R; seq: number } | null;
  /**
   * Whether the call is recorded under its key in the idempotency table (default
   * true): the first event carries the key, the operation and its result, the rest
   * keys derived from it. Off for calls the ledger itself records (a side effect's
   * intent) and for those nobody repeats (a heartbeat, upkeep): their events are
   * appended with the keys they have.
   */
  keyed?: boolean;
}

/**
 * The engine's one operation runner (as VS Code's git extension runs every
 * repository operation through one `run()`): every writing operation goes through
 * `once`, which serializes it after every earlier one, answers a call whose key was
 * seen before from the ledger (after that record is durable), and otherwise runs the
 * body, appends what it returns, folds it into the projection and answers only once
 * it is durable. A body may record earlier phases itself (`record`: a rollback's plan
 * is durable before any file changes); its last events still come back through here.
 */
export class OperationRunner {
  private tail: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly log: EventLog,
    private readonly projection: Projection,
    private readonly queries: Queries,
  ) {}

  /** Runs fn after every earlier operation's critical section; fn's own awaits hold the line. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.tail.then(fn, fn);
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** Settles when every operation queued so far has left its critical section. */
  idle(): Promise<void> {
    return this.tail.then(() => undefined);
  }

  /**
   * Appends a batch to the log and folds the sequenced events into the projection
   * before the next operation validates (the embedded log has folded them already,
   * at sequencing, and apply skips what it holds). Only inside `exclusive`.
   */
  async commit(batch: readonly NewEvent[]): Promise<AppendResult> {
    const appended = await this.log.append(batch);
    this.projection.apply(appended.events);
    return appended;
  }

  /** commit, then wait until the batch is durable: for a phase nothing answers before. */
  async record(batch: readonly NewEvent[]): Promise<void> {
    await (await this.commit(batch)).durable;
  }

  /** The one way a writing operation runs (see the class comment). */
  async once<R>(op: string, key: string, body: () => Promise<Outcome<R>> | Outcome<R>, opts: OnceOptions<R> = {}): Promise<R> {
    const keyed = opts.keyed ?? true;
    const { result, durable } = await this.exclusive(async () => {
      if (keyed) {
        const seen = this.queries.idempotent(key);
        if (seen) {
          if (seen.op !== op) throw new WaypointError('conflict', `Idempotency key '${key}' was already used for ${seen.op}, not ${op}.`, { key, op: seen.op });
          return { result: seen.result as R, durable: this.log.waitDurable(seen.seq) };
        }
      }
      const earlier = opts.repeat?.();
      if (earlier) return { result: earlier.result, durable: this.log.waitDurable(earlier.seq) };
      const { result, events = [] } = await body();
      if (events.length === 0) return { result, durable: Promise.resolve() };
      const batch = keyed ? events.map((e, i) => (i === 0 ? { ...e, key, op, result } : { ...e, key: e.key || `${key}#${i}` })) : events;
      return { result, durable: (await this.commit(batch)).durable };
    });
    await durable;
    return result;
  }
}
