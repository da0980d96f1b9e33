/**
 * A full rescan of a large workspace on the stat workers: the manifest starts as a
 * copy of the previous one, directories' files go to the workers in batches (see
 * statPool.ts), and only what differs comes back. This holds what such a rescan keeps
 * track of: the previous keys it met, the keys that may differ, the directory plans
 * it used or made, and the bound on batches holding a descriptor.
 */
import type { Manifest } from '../manifest.js';
import { PREV_FIELDS, type StatPool } from '../statPool.js';
import { Slots } from './backpressure.js';
import { prevNumbers, type DirPlan } from './listingCache.js';

/** Directories whose files may be out with the stat workers at once (each may hold its descriptor). */
const MAX_STAT_BATCHES = 64;

export class StatRescan {
  /** Keys of the previous manifest met by the walk: any missing at the end are deleted. */
  readonly seenPrev: string[] = [];
  /** Every key whose entry may differ from the previous manifest (the scan's `touched`). */
  readonly touched = new Set<string>();
  /** Directories holding a descriptor whose files are out with the stat workers (bounds descriptors held). */
  readonly batches = new Slots(MAX_STAT_BATCHES);
  /** Directory plans this rescan used or made (they describe its manifest once it is done), and files of theirs whose entry changed. */
  private readonly plans: DirPlan[] = [];
  private readonly planChanges: { plan: DirPlan; i: number }[] = [];

  constructor(readonly pool: StatPool) {}

  usePlan(plan: DirPlan): void {
    this.plans.push(plan);
  }

  /** A planned file's entry may change: the plan is out of date until the rescan ends (see settlePlans). */
  planChanged(plan: DirPlan | null, i: number): void {
    if (plan === null) return;
    plan.prevOf = plan.alsoOf = null;
    this.planChanges.push({ plan, i });
  }

  /** After the walk: previous entries it did not meet (deleted, now ignored, or under a directory gone) leave the manifest. */
  dropUnmet(previous: Manifest, manifest: Map<string, unknown>): void {
    if (this.seenPrev.length === previous.size) return;
    const seen = new Set(this.seenPrev);
    for (const k of previous.keys()) if (!seen.has(k) && manifest.delete(k)) this.touched.add(k);
  }

  /** After the rescan: each plan it used or made now describes its manifest (files that changed get their new entry). */
  settlePlans(manifest: Manifest, previous: Manifest | null): void {
    for (const { plan, i } of this.planChanges) {
      const e = manifest.get(plan.keys[i]!);
      plan.prevs[i] = e;
      prevNumbers(e, plan.nums, i * PREV_FIELDS);
    }
    for (const plan of this.plans) {
      // Unchanged by this scan (still tagged): good for its previous manifest and for its result.
      plan.alsoOf = plan.prevOf !== null ? previous : null;
      plan.prevOf = manifest;
    }
  }
}
