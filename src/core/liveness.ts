/**
 * Proof that an owner's main thread is alive, for its lease (ownerLock.ts).
 *
 * The renewal thread moves the lease only up to the main thread's last mark. A timer
 * marks every turn of the event loop; long synchronous work that makes progress (a
 * rollback writing thousands of files in one stretch, on purpose: see restore.ts)
 * marks between its units of work with `noteProgress`, so a slow disk or a loaded
 * machine cannot cost it the lease. A thread stuck inside one call (a blocking open,
 * an endless read) marks nothing and loses the lease, as it should.
 */
const beats = new Set<BigInt64Array>();

/** Registers a lease's beat; returns its mark function (also called by the loop's timer). */
export function registerBeat(beat: BigInt64Array): () => void {
  beats.add(beat);
  return () => void Atomics.store(beat, 0, BigInt(Date.now()));
}

export function unregisterBeat(beat: BigInt64Array): void {
  beats.delete(beat);
}

let lastNote = 0;

/** Called between units of long synchronous work: cheap (a clock read), marks at most every 100 ms. */
export function noteProgress(): void {
  if (beats.size === 0) return;
  const now = Date.now();
  if (now - lastNote < 100) return;
  lastNote = now;
  const v = BigInt(now);
  for (const b of beats) Atomics.store(b, 0, v);
}
