/**
 * One contender in the owner-lock race test: for each round it waits for that
 * round's wall-clock instant (shared by every contender), then tries to open the
 * store without waiting. The winner holds it for part of the round and closes it;
 * a loser must be refused with `locked` and nothing else. One line per round:
 * `won N <held from> <held until>` (ms), `lost N`, or `error N <message>`.
 *
 *   node lockRaceChild.js STORE_DIR T0_MS ROUNDS PERIOD_MS
 */
import { isWaypointError } from '../../src/core/model/errors';
import { EventStore } from '../../src/core/store/eventStore';

/** Wall-clock time in fractional ms, comparable across processes on this machine. */
const now = () => performance.timeOrigin + performance.now();

function spinUntil(t: number): Promise<void> {
  return new Promise((resolve) => {
    const wait = t - Date.now() - 20;
    setTimeout(() => {
      // A timer alone fires late on a loaded machine; the last few ms are spun.
      while (Date.now() < t) {
        // spin
      }
      resolve();
    }, Math.max(0, wait));
  });
}

async function main(): Promise<void> {
  const [dir, t0, rounds, period] = process.argv.slice(2).map((v, i) => (i === 0 ? v : Number(v))) as [string, number, number, number];
  for (let i = 0; i < rounds; i++) {
    const at = t0 + i * period;
    await spinUntil(at);
    try {
      const store = await EventStore.open({ dir, lock: { waitMs: 0 } });
      const from = now();
      await new Promise((r) => setTimeout(r, Math.max(0, at + period * 0.5 - Date.now())));
      // The hold ends when the lock is released, which close() does last.
      await store.close();
      process.stdout.write(`won ${i} ${from} ${now()}\n`);
    } catch (e) {
      if (isWaypointError(e) && e.code === 'locked') process.stdout.write(`lost ${i}\n`);
      else process.stdout.write(`error ${i} ${(e as Error).message.replace(/\n/g, ' ')}\n`);
    }
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stdout.write(`error - ${(e as Error).message}\n`);
    process.exit(1);
  },
);
