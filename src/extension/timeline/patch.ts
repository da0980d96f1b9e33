/**
 * Live updates as diffs: the host sends what changed since the model the page holds
 * (entries upserted and keys removed, per collection), and the page applies it. Both
 * sides import this file; no `vscode` import.
 */
import { COLLECTIONS, type Collection, type TimelineModel, type TimelinePatch } from './protocol';

type Entry<C extends Collection> = TimelineModel[C][number];

export function keyOf<C extends Collection>(c: C, e: Entry<C>): string {
  return c === 'effects' ? (e as Entry<'effects'>).key : (e as { id: string }).id;
}

/** The patch from `prev` to `next`, or null when nothing the page shows changed. */
export function diffTimeline(prev: TimelineModel, next: TimelineModel): TimelinePatch | null {
  const upsert = {} as TimelinePatch['upsert'];
  const remove = {} as TimelinePatch['remove'];
  let changed = JSON.stringify([prev.task, prev.events, prev.lastSeq, prev.range, prev.omitted]) !== JSON.stringify([next.task, next.events, next.lastSeq, next.range, next.omitted]);
  for (const c of COLLECTIONS) {
    const before = new Map<string, string>((prev[c] as Entry<typeof c>[]).map((e) => [keyOf(c, e), JSON.stringify(e)]));
    const up = (next[c] as Entry<typeof c>[]).filter((e) => before.get(keyOf(c, e)) !== JSON.stringify(e));
    const keep = new Set((next[c] as Entry<typeof c>[]).map((e) => keyOf(c, e)));
    const gone = [...before.keys()].filter((k) => !keep.has(k));
    (upsert as Record<Collection, unknown[]>)[c] = up;
    remove[c] = gone;
    if (up.length || gone.length) changed = true;
  }
  if (!changed) return null;
  return { task: next.task, events: next.events, lastSeq: next.lastSeq, range: next.range, omitted: next.omitted, upsert, remove };
}

/**
 * Applies a patch: removed keys go, upserted entries replace theirs in place or are
 * added; each collection is then ordered as the model orders it (steps by graph
 * position, the rest by time), so applying a diff gives the same model as a rebuild.
 */
export function applyPatch(model: TimelineModel, patch: TimelinePatch): TimelineModel {
  const out = { ...model, task: patch.task, events: patch.events, lastSeq: patch.lastSeq, range: patch.range, omitted: patch.omitted } as TimelineModel;
  for (const c of COLLECTIONS) {
    const gone = new Set(patch.remove[c]);
    const byKey = new Map<string, Entry<typeof c>>();
    for (const e of model[c] as Entry<typeof c>[]) if (!gone.has(keyOf(c, e))) byKey.set(keyOf(c, e), e);
    const order = new Map([...byKey.keys()].map((k, i) => [k, i]));
    let added = order.size;
    for (const e of patch.upsert[c] as Entry<typeof c>[]) {
      const k = keyOf(c, e);
      if (!order.has(k)) order.set(k, added++);
      byKey.set(k, e);
    }
    const sorted = [...byKey.entries()].sort((a, b) => sortKey(c, a[1], order.get(a[0])!) - sortKey(c, b[1], order.get(b[0])!) || order.get(a[0])! - order.get(b[0])!);
    (out as Record<Collection, unknown[]>)[c] = sorted.map(([, e]) => e);
  }
  return out;
}

function sortKey(c: Collection, e: Entry<Collection>, index: number): number {
  switch (c) {
    case 'steps':
      return index; // plan order: new steps come at the end, as the plan appends them
    case 'attempts':
      return (e as Entry<'attempts'>).start;
    case 'checkpoints':
    case 'effects':
    case 'marks':
      return (e as { at: number }).at;
  }
}
