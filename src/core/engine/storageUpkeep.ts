/**
 * The engine's storage upkeep: the storage report
 * (bytes per task, unique and shared), retention and garbage collection, and verify
 * (projections equal a rebuild, every live checkpoint's objects present and whole),
 * with repair. It runs over the engine's serialized runner and projection reader
 * (UpkeepCore) and holds no state of its own.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../log';
import type { CheckpointMeta } from '../model/schema';
import type { EventLog, NewEvent, Projection, ProjectionCheck } from '../store/eventLog';
import type { Outcome } from './runner';
import type { RunOptions } from './engineCore';
import { RetentionInput, VerifyInput } from './inputs';
import type { Queries } from '../store/queries';
import type { WorkspaceSnapshots } from './workspaceSnapshots';
import { plural } from '../model/plural';

export interface VerifyReport {
  /** Projections equal a rebuild, and no checkpoint is damaged without being marked so. */
  ok: boolean;
  events: number;
  differences: ProjectionCheck['differences'];
  /** The checkpoints' objects (null for a store without workspace snapshots). */
  objects: {
    checkpoints: number;
    blobs: number;
    /** Damaged checkpoints, with why; `marked`: recorded as damaged (by this or an earlier repair). */
    damaged: { checkpointId: string; taskId: string | null; reason: string; marked: boolean }[];
    /** Blobs stored again from the workspace by this repair. */
    restored: number;
    /** Checkpoints this repair marked damaged. */
    markedNow: string[];
  } | null;
  repaired: boolean;
}

export interface StorageReport {
  /** Bytes of the blob store on disk. */
  totalBytes: number;
  /** Bytes of file content that live checkpoints reference (deduplicated). */
  referencedBytes: number;
  blobs: number;
  tasks: { taskId: string; title: string | null; checkpoints: number; uniqueBytes: number; sharedBytes: number }[];
}

export interface GcResult {
  /** Checkpoints the policy pruned. */
  pruned: string[];
  blobsDeleted: number;
  bytesFreed: number;
  /** Bytes of the blob store on disk afterwards. */
  totalBytes: number;
}

/** What the upkeep needs of the engine. */
export interface UpkeepCore {
  readonly eventLog: EventLog;
  readonly projection: Projection;
  readonly queries: Queries;
  readonly log: Logger;
  /** Null for a store that records checkpoints as metadata only. */
  readonly workspaceSnapshots: WorkspaceSnapshots | null;
  now(): number;
  /** Runs fn after every earlier mutation's critical section (the engine's one runner). */
  exclusive<T>(fn: () => Promise<T>): Promise<T>;
  /** The workspace snapshots, or a clear error for a metadata-only store. */
  snapshots(): WorkspaceSnapshots;
  /** The engine's one runner (see EngineCore.run); upkeep runs unguarded: a verify that repairs nothing writes nothing. */
  run<R>(op: string, key: string, body: () => Promise<Outcome<R>> | Outcome<R>, opts?: RunOptions<R>): Promise<R>;
}

export class StorageUpkeep {
  constructor(
    private readonly core: UpkeepCore,
    /** Plans of review applies a crash cut short: garbage collection keeps their objects. */
    private readonly reviewApplyPlanRefs: () => string[],
  ) {}

  /** Bytes per task (unique to it, and shared with others) and in total, deduplicated. */
  async storage(): Promise<StorageReport> {
    const ws = this.core.snapshots();
    // Sizes after the compression a bulk checkpoint started, not in the middle of it.
    await ws.whenCompacted();
    return this.core.exclusive(async () => {
      const owners = new Map<string, Set<string>>(); // blob → tasks
      const perTask = new Map<string, { checkpoints: number; blobs: Set<string> }>();
      for (const c of this.core.queries.checkpoints()) {
        if (!c.manifestRef || c.damaged) continue;
        const t = c.taskId ?? '(none)';
        const entry = perTask.get(t) ?? { checkpoints: 0, blobs: new Set<string>() };
        entry.checkpoints++;
        perTask.set(t, entry);
        const m = await ws.manifests.load(c.manifestRef);
        for (const e of m.values()) {
          if (e.type !== 'file') continue;
          entry.blobs.add(e.hash);
          const s = owners.get(e.hash) ?? new Set<string>();
          s.add(t);
          owners.set(e.hash, s);
        }
      }
      const size = new Map<string, number>();
      for (const h of owners.keys()) size.set(h, (await ws.blobs.sizeOf(h)) ?? 0);
      const tasks = [...perTask].map(([taskId, v]) => {
        let unique = 0;
        let shared = 0;
        for (const h of v.blobs) {
          if (owners.get(h)!.size === 1) unique += size.get(h)!;
          else shared += size.get(h)!;
        }
        return { taskId, title: this.core.queries.findTask(taskId)?.title ?? null, checkpoints: v.checkpoints, uniqueBytes: unique, sharedBytes: shared };
      });
      const referencedBytes = [...size.values()].reduce((a, b) => a + b, 0);
      return { totalBytes: ws.diskBytes(), referencedBytes, blobs: owners.size, tasks: tasks.sort((a, b) => b.uniqueBytes - a.uniqueBytes) };
    });
  }

  /**
   * Applies the retention policy (max checkpoints per task, max age, max total size)
   * and collects garbage: blobs no remaining checkpoint (or pending rollback plan)
   * needs are deleted. The base checkpoint, the head and rollback checkpoints of a
   * task are never pruned.
   */
  async gc(policy: RetentionInput = {}): Promise<GcResult> {
    const ws = this.core.snapshots();
    // Sizes after the compression a bulk checkpoint started: raw packs would count
    // ~3.6x and make a size limit prune checkpoints it does not need to. (The sweep
    // below would wait for it too, being serialized with compaction; this says so.)
    await ws.whenCompacted();
    const now = this.core.now();
    const pruned: string[] = [];
    const protectedIds = (): Set<string> => this.core.queries.protectedCheckpointIds();
    const prune = async (ids: string[], reason: string) => {
      if (!ids.length) return;
      const key = `prune:${randomUUID()}`;
      // Upkeep nobody repeats by key: not kept in the idempotency table.
      await this.core.run('gc.prune', key, () => ({ result: null, events: [{ type: 'checkpoint.pruned', taskId: null, corr: null, by: null, key, data: { checkpointIds: ids, reason } }] }), { keyed: false, space: false });
      pruned.push(...ids);
    };
    const keep = protectedIds();
    const all = this.core.queries.checkpoints();
    if (policy.maxAgeDays !== undefined) {
      await prune(all.filter((c) => !keep.has(c.id) && now - c.createdAt > policy.maxAgeDays! * 86_400_000).map((c) => c.id), `older than ${policy.maxAgeDays} days`);
    }
    if (policy.maxPerTask !== undefined) {
      const byTask = new Map<string, CheckpointMeta[]>();
      for (const c of this.core.queries.checkpoints()) if (c.taskId) byTask.set(c.taskId, [...(byTask.get(c.taskId) ?? []), c]);
      const ids: string[] = [];
      for (const cs of byTask.values()) {
        const removable = cs.filter((c) => !keep.has(c.id));
        const excess = cs.length - policy.maxPerTask;
        ids.push(...removable.slice(0, Math.max(0, excess)).map((c) => c.id));
      }
      await prune(ids, `more than ${policy.maxPerTask} checkpoints per task`);
    }
    let swept = await this.sweepBlobs();
    if (policy.maxTotalBytes !== undefined) {
      // Oldest first, finished tasks before live ones, until the store fits.
      const order = (c: CheckpointMeta) => (['completed', 'abandoned'].includes(this.core.queries.findTask(c.taskId ?? '')?.state ?? 'completed') ? 0 : 1);
      while (ws.diskBytes() > policy.maxTotalBytes) {
        const cands = this.core.queries
          .checkpoints()
          .filter((c) => !keep.has(c.id))
          .sort((a, b) => order(a) - order(b) || a.createdAt - b.createdAt);
        if (!cands.length) break;
        await prune(cands.slice(0, Math.max(1, Math.ceil(cands.length / 10))).map((c) => c.id), `store larger than ${policy.maxTotalBytes} bytes`);
        const more = await this.sweepBlobs();
        swept = { deleted: swept.deleted + more.deleted, bytes: swept.bytes + more.bytes };
      }
    }
    return { pruned, blobsDeleted: swept.deleted, bytesFreed: swept.bytes, totalBytes: ws.diskBytes() };
  }

  /** Mark (every blob a live checkpoint or an unfinished rollback needs) and sweep. */
  private async sweepBlobs(): Promise<{ deleted: number; bytes: number }> {
    const ws = this.core.snapshots();
    return this.core.exclusive(async () => {
      const live = new Set<string>();
      for (const c of this.core.queries.checkpoints()) {
        if (!c.manifestRef) continue;
        try {
          for (const ref of await ws.manifests.objectChain(c.manifestRef)) live.add(ref);
          for (const e of (await ws.manifests.load(c.manifestRef)).values()) if (e.type === 'file') live.add(e.hash);
        } catch (e) {
          // A damaged checkpoint keeps what it still has (marked live above, as far as its chain reads).
          if (!c.damaged) throw e;
          live.add(c.manifestRef);
        }
      }
      for (const r of this.core.queries.startedRollbacks()) if (r.planRef) live.add(r.planRef);
      for (const ref of this.reviewApplyPlanRefs()) live.add(ref);
      let deleted = 0;
      let bytes = 0;
      const doomed: string[] = [];
      for await (const h of ws.blobs.list()) if (!live.has(h)) doomed.push(h);
      for (const h of doomed) {
        bytes += (await ws.blobs.sizeOf(h)) ?? 0;
        deleted++;
      }
      // One call, so a pack holding several doomed blobs is rewritten once.
      await ws.blobs.deleteMany(doomed, () => this.core.eventLog.assertOwned());
      if (deleted) this.core.log.info(`[gc] deleted ${plural(deleted, 'unreferenced blob')}, ${plural(bytes, 'byte')}`);
      return { deleted, bytes };
    });
  }

  /**
   * Proves the store whole: the projections equal a rebuild from the events, and
   * every object a live checkpoint needs (its manifest objects, its files' content)
   * is there and hashes to its name; damaged checkpoints are named with why. With
   * `repair`: content still in the workspace is stored again, and checkpoints that
   * stay damaged are marked so (a `checkpoint.damaged` event: part of the record), so
   * new checkpoints no longer build on them and rollbacks to them are refused with
   * the reason. `ok` is false while a damaged checkpoint is not marked.
   */
  async verify(input: VerifyInput = {}): Promise<VerifyReport> {
    const ws = this.core.workspaceSnapshots;
    let objects: VerifyReport['objects'] = null;
    if (ws) {
      const key = `verify.repair:${randomUUID()}`;
      objects = await this.core.run('verify', key, async () => {
        const cps = this.core.queries.checkpoints();
        let check = await ws.checkObjects(cps);
        let restored: string[] = [];
        const markedNow: string[] = [];
        const marking: NewEvent[] = [];
        if (input.repair && check.damaged.size) {
          if (check.bad.size) {
            restored = await ws.restoreFromWorkspace(check.bad);
            if (restored.length) check = await ws.checkObjects(cps);
          }
          const mark = cps.filter((c) => !c.damaged && check.damaged.has(c.id)).map((c) => ({ checkpointId: c.id, reason: check.damaged.get(c.id)! }));
          if (mark.length) {
            marking.push({ type: 'checkpoint.damaged', taskId: null, corr: null, by: null, key, data: { checkpoints: mark } });
            markedNow.push(...mark.map((m) => m.checkpointId));
            this.core.log.warn(`marked ${plural(mark.length, 'checkpoint')} damaged: ${mark.map((m) => `${m.checkpointId} (${m.reason})`).join('; ')}`);
          }
        }
        const damaged = cps
          .filter((c) => check.damaged.has(c.id) || c.damaged)
          .map((c) => ({ checkpointId: c.id, taskId: c.taskId, reason: check.damaged.get(c.id) ?? c.damaged!, marked: !!c.damaged || markedNow.includes(c.id) }));
        return { result: { checkpoints: check.checkpoints, blobs: check.blobs, damaged, restored: restored.length, markedNow }, events: marking };
      }, { keyed: false, space: false });
    }
    // After any marking: the new event must fold to the same projections as a rebuild.
    const own = await this.core.projection.verify(await this.core.eventLog.read());
    // A store that keeps the projection's tables itself (the team store) must hold the same rows.
    const stored = (await this.core.eventLog.verifyStoreProjection?.()) ?? [];
    const proj = { ...own, ok: own.ok && stored.length === 0, differences: [...own.differences, ...stored.map((d) => ({ ...d, table: `store: ${d.table}` }))] };
    const unmarked = objects?.damaged.filter((d) => !d.marked).length ?? 0;
    return { ...proj, ok: proj.ok && unmarked === 0, objects, repaired: input.repair === true };
  }
}
