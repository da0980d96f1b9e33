import { SCHEMA_VERSION } from '../model/schema';

/**
 * Brings an event written by an older Waypoint to the current event format before
 * it is validated and replayed. Each step upgrades one version; add a step (and a
 * fixture in test/fixtures/) whenever SCHEMA_VERSION changes.
 */
type Step = (e: Record<string, unknown>) => Record<string, unknown>;

const STEPS: Record<number, Step> = {
  // 1 → 2 goes here when version 2 exists.
};

export function upcast(raw: unknown): unknown {
  if (!raw || typeof raw !== 'object') return raw;
  let e = raw as Record<string, unknown>;
  let v = typeof e.v === 'number' ? e.v : 1;
  while (v < SCHEMA_VERSION) {
    const step = STEPS[v];
    if (!step) throw new Error(`no upcaster from event version ${v}`);
    e = { ...step(e), v: v + 1 };
    v++;
  }
  return e;
}
