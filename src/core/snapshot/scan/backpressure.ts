/**
 * How a scan bounds what it has in flight: open large files (Limiter), read content
 * not yet stored (ByteBudget), files and batches out with workers (Slots), and work started during the walk that must finish
 * before the scan does (WorkTracker).
 */

/** A tiny semaphore: bounds open files and memory held by in-flight reads. */
export class Limiter {
  private active = 0;
  private readonly queue: (() => void)[] = [];
  constructor(private readonly limit: number) {}
  /** Resolves once a slot is held; pair with `release`. */
  async acquire(): Promise<void> {
    if (this.active >= this.limit) await new Promise<void>((r) => this.queue.push(r));
    this.active++;
  }
  release(): void {
    this.active--;
    this.queue.shift()?.();
  }
}

/** Bytes read and not yet in the store (being compressed): the walk waits while they are past `max` (a memory bound). */
export class ByteBudget {
  private bytes = 0;
  private readonly waiters: (() => void)[] = [];
  constructor(private readonly max: number) {}
  add(n: number): void {
    this.bytes += n;
  }
  /** `n` bytes reached the store (or failed to). */
  settled(n: number): void {
    this.bytes -= n;
    if (this.bytes <= this.max) for (const w of this.waiters.splice(0)) w();
  }
  /** Waits while too much read content is still on its way into the store. */
  async room(): Promise<void> {
    while (this.bytes > this.max) await new Promise<void>((r) => this.waiters.push(r));
  }
}

/** At most `max` held at once (files out with workers, stat batches holding a descriptor); checked and taken in one step, so a wake-up never overshoots. */
export class Slots {
  private held = 0;
  private readonly waiters: (() => void)[] = [];
  constructor(private readonly max: number) {}
  /** Takes one if one is free, without waiting: the common case costs no promise (`if (!s.take()) await s.acquire()`). */
  take(): boolean {
    if (this.held >= this.max) return false;
    this.held++;
    return true;
  }
  async acquire(): Promise<void> {
    while (this.held >= this.max) await new Promise<void>((r) => this.waiters.push(r));
    this.held++;
  }
  release(): void {
    this.held--;
    if (this.held < this.max) for (const w of this.waiters.splice(0)) w();
  }
}

/**
 * Work started during the walk and not finished (reads, stores, stat batches):
 * counted, not kept — holding 13k settled promises to the end made each one survive
 * every young-generation GC of a bulk scan. The first failure is kept for `drain` to throw.
 */
export class WorkTracker {
  private tracked = 0;
  private failure: { err: unknown } | null = null;
  private readonly drainWaiters: (() => void)[] = [];

  /**
   * Counts `p` until it settles. Marked handled now so a failure before `drain` is not
   * an unhandled rejection; `drain` still throws it.
   */
  track(p: Promise<void>): void {
    this.tracked++;
    p.then(
      () => this.untrack(),
      (err: unknown) => {
        this.failure ??= { err };
        this.untrack();
      },
    );
  }

  private untrack(): void {
    if (--this.tracked === 0) for (const w of this.drainWaiters.splice(0)) w();
  }

  /** Waits for all tracked work, including work that tracked work starts (a stat batch reading a changed file). */
  async drain(): Promise<void> {
    while (this.tracked > 0) await new Promise<void>((r) => this.drainWaiters.push(r));
    if (this.failure) throw this.failure.err;
  }
}
