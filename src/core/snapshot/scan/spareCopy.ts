import type { Manifest } from '../manifest.js';

/**
 * A copy of the last manifest, made while the owner waits for its next call. A scan
 * that starts from a previous manifest changes a copy of it (the previous one stays
 * as the store and the change summary know it), and copying a Map of 51,000 entries
 * costs 15–35 ms here: most of a checkpoint that looks at ten files. A long-lived owner
 * makes that copy ahead, when a capture has returned, so the next scan takes it ready.
 *
 * Only a manifest nobody changes any more may be prepared (one a capture handed to the
 * manifest store: adopted and frozen); the copy is taken only for that very map.
 */
export class SpareCopy {
  private spare: { of: Manifest; copy: Manifest } | null = null;
  private timer: NodeJS.Timeout | null = null;

  /** @param delayMs how long after `prepare` the copy is made: after the call that captured `of` has been answered. */
  constructor(private readonly delayMs = 20) {}

  /** Makes a copy of `of` soon (dropping any older one). */
  prepare(of: Manifest): void {
    this.cancel();
    this.spare = null;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.spare = { of, copy: new Map(of) };
    }, this.delayMs);
    this.timer.unref();
  }

  /** A copy of `of` that is the caller's to change: the one made ahead when it is of this map, else made now. */
  take(of: Manifest): Manifest {
    this.cancel();
    const s = this.spare;
    this.spare = null;
    if (s && s.of === of && s.copy.size === of.size) return s.copy;
    return new Map(of);
  }

  /** Whether a copy of `of` is ready (for tests). */
  holds(of: Manifest): boolean {
    return this.spare?.of === of;
  }

  /** Drops the copy and any copy still to be made. */
  clear(): void {
    this.cancel();
    this.spare = null;
  }

  private cancel(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
