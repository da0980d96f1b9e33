/**
 * A small seeded PRNG (mulberry32): the chaos driver's kill plan and every
 * workload's choices come from one, so a printed seed replays a run as far as
 * process timing allows.
 */
export class Prng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0;
  }
  /** Uniform in [0, 1). */
  next(): number {
    let t = (this.s = (this.s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)]!;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  /** A fresh 32-bit seed for a sub-generator (a child's workload). */
  seed(): number {
    return this.int(0x1_0000_0000);
  }
}
