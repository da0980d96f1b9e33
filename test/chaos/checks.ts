/**
 * The invariants checked after every kill, in the driver's process, on the real
 * store and workspace the victim left:
 *  - the store opens;
 *  - every acknowledged call is in it (its idempotency record, task, side-effect
 *    intent or checkpoint event);
 *  - the projections equal a rebuild from the events;
 *  - every blob a live checkpoint's manifest refers to exists and hashes to its
 *    name, and every manifest object of the chain exists;
 *  - an interrupted rollback or review apply left the workspace in its before or
 *    after state (open may have finished it: then it says so), and none is left open;
 *  - no temp file is left anywhere in .waypoint/ or the workspace.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Engine } from '../../src/core/engine/engine';
import { looksLikeRestoreTemp } from '../../src/core/snapshot';
import { TEMP_MARKER } from '../../src/core/store/fsutil';
import { diskTree, treeDiff, withoutPrefix, type Expectation } from './tree';
import { checkLiveEdits, type LiveTotals, type LiveWriter } from './liveCheck';
import { LIVE_DIR } from './live';
import { embeddedStore } from '../support/embedded';

export interface Ack {
  kind: 'task' | 'key' | 'effect' | 'checkpoint' | 'completed';
  taskId: string;
  /** The idempotency key (task, key, effect), the checkpoint id, or a tag (completed). */
  id: string;
}

/** What the checks remember within one workspace: acks so far, blobs already hashed, manifests already read. */
export interface CheckState {
  acks: Ack[];
  hashed: Set<string>;
  manifests: Map<string, { chain: string[]; files: string[] }>;
  /** The liveedits phase: per manifest ref, the `path\0hash` pairs it holds under live/. */
  liveHeld: Map<string, string[]>;
}

export function newCheckState(): CheckState {
  return { acks: [], hashed: new Set(), manifests: new Map(), liveHeld: new Map() };
}

export interface CheckResult {
  checks: number;
  violations: string[];
  /** Interrupted operations open finished (and reported in its recovery notes). */
  repaired: number;
  /** The liveedits phase: the person's saves so far in this workspace, and what became of them. */
  live?: LiveTotals;
}

/**
 * `live`: the person saving files while the workload ran (and while this open finishes
 * an interrupted rollback); paused for the comparison, resumed after.
 */
export async function checkAfterKill(workspace: string, state: CheckState, open: Expectation | null, live?: LiveWriter): Promise<CheckResult> {
  const violations: string[] = [];
  let checks = 0;
  /** Opens that found raw packs to compress (counted with the repairs). */
  let rawAtOpen = 0;
  let engine: Engine;
  try {
    engine = await Engine.open({ workspace, store: { lock: { waitMs: 10_000 } } });
    checks++;
  } catch (e) {
    return { checks: 1, violations: [`the store does not open: ${(e as Error).message}`], repaired: 0 };
  }
  const fail = (m: string) => violations.push(m);
  try {
    // Through the store's reader: events before the last export live in the journal's segments.
    const events = embeddedStore(engine).events();
    const hasEvent = (type: string, field: string, value: string) => events.some((e) => e.type === type && (e.data as Record<string, unknown>)[field] === value);
    for (const a of state.acks) {
      checks++;
      if (a.kind === 'task' && !(engine.queries.findTask(a.taskId) && engine.queries.idempotent(a.id))) fail(`acknowledged task ${a.taskId} (${a.id}) is missing`);
      else if (a.kind === 'key' && !engine.queries.idempotent(a.id)) fail(`acknowledged call ${a.id} of ${a.taskId} is missing`);
      else if (a.kind === 'effect' && !engine.queries.sideEffect(a.taskId, a.id)) fail(`acknowledged side-effect intent ${a.id} of ${a.taskId} is missing`);
      else if (a.kind === 'checkpoint' && !hasEvent('checkpoint.created', 'checkpointId', a.id)) fail(`acknowledged checkpoint ${a.id} of ${a.taskId} is missing`);
      else if (a.kind === 'completed') {
        const t = engine.queries.findTask(a.taskId);
        const done = events.some((e) => e.type === 'review.apply_done' && e.taskId === a.taskId && (e.data as { recovered: boolean }).recovered === false);
        if (t?.state !== 'completed' || !done) fail(`acknowledged review apply of ${a.taskId} is missing (task ${t?.state ?? 'gone'})`);
      }
    }

    const v = await engine.verify();
    checks++;
    if (!v.ok) {
      const damaged = v.objects?.damaged.filter((d) => !d.marked) ?? [];
      fail(v.differences.length ? `projections differ from a rebuild: ${JSON.stringify(v.differences[0])}` : `damaged checkpoint(s): ${JSON.stringify(damaged.slice(0, 3))}`);
    }

    const ws = engine.workspaceSnapshots!;
    const referenced = new Set<string>();
    for (const c of engine.queries.checkpoints()) {
      if (!c.manifestRef) continue;
      checks++;
      try {
        // A manifest is immutable under its ref: read it once, then only check its objects still exist.
        let m = state.manifests.get(c.manifestRef);
        if (!m) {
          m = { chain: await ws.manifests.objectChain(c.manifestRef), files: [...(await ws.load(c)).values()].flatMap((e) => (e.type === 'file' ? [e.hash] : [])) };
          state.manifests.set(c.manifestRef, m);
        }
        for (const ref of m.chain) if (!(await ws.blobs.has(ref))) fail(`manifest object ${ref} of checkpoint ${c.id} is missing`);
        for (const h of m.files) referenced.add(h);
      } catch (e) {
        fail(`checkpoint ${c.id}'s manifest does not load: ${(e as Error).message}`);
      }
    }
    for (const h of referenced) {
      checks++;
      // Hash each blob once per workspace; after that, that it still exists (retention must not drop a live one).
      if (state.hashed.has(h)) {
        if (!(await ws.blobs.has(h))) fail(`blob ${h} is gone though a checkpoint refers to it`);
      } else if (await ws.blobs.verify(h)) state.hashed.add(h);
      else fail(`blob ${h} is missing or does not hash to its name`);
    }

    let liveTotals: LiveTotals | undefined;
    if (live) {
      // Every save is on disk or held by a checkpoint; the conflicts rollbacks reported under live/ are counted.
      await live.pause();
      const kept = events.filter((e) => e.type === 'rollback.done').reduce((n, e) => n + (e.data as { conflicts: string[] }).conflicts.filter((p) => p.startsWith(`${LIVE_DIR}/`)).length, 0);
      const l = await checkLiveEdits(engine, workspace, live.log, state.liveHeld, kept);
      checks += l.checks;
      for (const v of l.violations) fail(v);
      liveTotals = l.totals;
    }
    if (open) {
      checks++;
      const now = withoutPrefix(diskTree(workspace), open.ignore);
      const d = treeDiff(now, open.after);
      if (d && treeDiff(now, open.before)) fail(`after a kill during ${open.op}, the workspace is neither the before nor the after state: vs after, ${d}; notes: ${engine.recoveryNotes.join(' ') || 'none'}`);
    }
    checks++;
    const unfinished = embeddedStore(engine).db.get<{ n: number }>("SELECT COUNT(*) AS n FROM rollbacks WHERE state = 'started'")!.n;
    const openApplies = engine.unfinishedReviewApplies().length;
    if (unfinished || openApplies) fail(`open left ${unfinished} rollback(s) and ${openApplies} review apply(s) unfinished`);

    // The compaction an open resumes (raw content a killed bulk checkpoint left) is a
    // live operation with its own temp pack: let it end, then nothing raw may remain.
    const snaps = engine.workspaceSnapshots;
    if (snaps) {
      checks++;
      // Raw packs at open: the kill fell in a bulk checkpoint or its compaction.
      if (snaps.blobs.uncompactedPacks().length) rawAtOpen++;
      await snaps.whenCompacted();
      const raw = snaps.blobs.uncompactedPacks();
      if (raw.length) fail(`raw packs left uncompressed after open: ${raw.join(', ')}`);
    }
    checks++;
    const temps = tempFiles(workspace);
    if (temps.length) fail(`temp files left behind: ${temps.slice(0, 5).join(', ')}`);
    return { checks, violations, repaired: engine.recoveryNotes.length + rawAtOpen, ...(liveTotals ? { live: liveTotals } : {}) };
  } finally {
    await engine.close();
    live?.resume();
  }
}

/** Every name a Waypoint writer uses for a file in flight, anywhere in the store or the workspace (git's own directory aside). */
export function tempFiles(workspace: string): string[] {
  const out: string[] = [];
  const walk = (dir: string, rel: string) => {
    for (const d of fs.readdirSync(dir, { withFileTypes: true })) {
      const r = rel ? `${rel}/${d.name}` : d.name;
      if (r === '.git') continue;
      const inObjects = r.startsWith('.waypoint/objects/');
      if (d.name.includes(TEMP_MARKER) || looksLikeRestoreTemp(d.name) || d.name.includes('.waypoint-review-') || (inObjects && d.name.startsWith('tmp-'))) out.push(r);
      if (d.isDirectory()) walk(path.join(dir, d.name), r);
    }
  };
  walk(workspace, '');
  return out;
}
