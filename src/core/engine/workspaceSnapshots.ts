import * as fs from 'node:fs';
import * as path from 'node:path';
import { WaypointError } from '../model/errors';
import type { CheckpointMeta } from '../model/schema';
import type { Logger } from '../log';
import {
  BlobStore,
  CompactionStopped,
  ManifestStore,
  ListingCache,
  SpareCopy,
  UnsafePathError,
  applyRestore,
  checkRestorePaths,
  detectCaseInsensitive,
  assertSafePathKey,
  diffCheckpoint,
  diffManifests,
  newTempTag,
  planRestore,
  scan,
  loadScanCache,
  saveScanCache,
  dropScanCache,
  scanCacheIdentity,
  type ScanCacheMiss,
  sweepRestoreTemps,
  DEFAULT_MAX_FILE_BYTES,
  type ScanOptions,
  type ScanResult,
  type ApplyResult,
  type FileChangeWithLines,
  type Manifest,
  type RestorePlan,
  type SnapshotRoot,
} from '../snapshot';
import type { Capture, CaptureRequest, NotCaptured, Snapshotter } from './snapshotter';
import { plural } from '../model/plural';

export interface WorkspaceSnapshotOptions {
  roots: SnapshotRoot[];
  /** The store directory; blobs and manifests live in `<storeDir>/objects`. */
  storeDir: string;
  excludes?: string[];
  maxFileBytes?: number;
  /** A full manifest every N checkpoints along a chain (the rest are deltas). */
  fullEvery?: number;
  /**
   * Ends the stat workers as each scan ends, for a process that opens the store for one
   * call: what comes after its scan (objects, the manifest, the scan cache, the event)
   * is where its memory peaks, and two idle workers held ~15 MB of that peak. A
   * long-lived owner keeps them for its next rescan.
   */
  releaseWorkersAfterScan?: boolean;
  /**
   * A process that opens the store for one call (as releaseWorkersAfterScan): what a bulk
   * capture stored raw is compressed when it closes, not as soon as it is durable, so a
   * close that hands the store to a background owner can leave it to that owner (see close).
   */
  compactAtClose?: boolean;
  log?: Logger;
}

/** How a full manifest object starts (manifest.ts writes them so); deltas are small JSON objects naming their parent. */
const FULL_MANIFEST_HEAD = '{"entries":';
/** How long verify reads and hashes objects before it lets the event loop turn. */
const VERIFY_SLICE_MS = 50;

export interface ObjectCheck {
  /** Checkpoints with a manifest that were checked. */
  checkpoints: number;
  /** Distinct objects read and hashed. */
  blobs: number;
  /** Why each damaged checkpoint is damaged, by id. */
  damaged: Map<string, string>;
  /** Blobs a checkpoint needs that are missing or corrupt. */
  bad: Map<string, 'missing' | 'corrupt'>;
}

/**
 * The engine's side of workspace snapshots: checkpoints become real manifests of
 * the workspace, stored as deltas in the content-addressed blob store, and the
 * rollback machinery (plans stored as blobs, so a crash half-way can be finished
 * exactly) lives here. Knows nothing of events; the engine records what it returns.
 */
export class WorkspaceSnapshots implements Snapshotter {
  readonly blobs: BlobStore;
  readonly manifests: ManifestStore;
  readonly roots: SnapshotRoot[];
  /** Directory listings kept between this workspace's scans: a full rescan lists only directories that changed. */
  private readonly listings = new ListingCache();
  /** The next scan's copy of the last captured manifest, made while the owner waits (see SpareCopy). */
  private readonly spare = new SpareCopy();
  /** The background compaction running, if any, and whether another pass was asked for meanwhile. */
  private compacting: Promise<void> | null = null;
  private compactAgain = false;
  /**
   * The last bulk capture's map: compaction orders the objects by their paths' names (see
   * CompactOptions.nameOf). Or a way to find one when it is needed: compacting what another
   * process stored raw (see namesOfLatest).
   */
  private compactNames: Manifest | (() => Manifest | null) | null = null;
  /** A one-call process's bulk capture, compressed when it closes, or left for the owner that takes the store next (see close). */
  private rawLeft: Manifest | null = null;
  /** Set by a close that leaves raw content to the next owner: a compaction under way stops at its next batch. */
  private stopCompaction = false;
  /** This workspace's mark on its scan cache (see scan/scanCache.ts): another workspace's cache is never used. */
  private readonly cacheIdentity: string;
  /** The last capture's manifest (durable in the store), for the scan cache written at close. */
  private unwrittenCache: { ref: string; manifest: Manifest; verifiedAtMs: number } | null = null;
  /**
   * When the scan that vouched for each manifest this process captured began (a
   * dirty-hint scan vouches only for what it looked at: it keeps its previous
   * manifest's time). Bounded: older refs fall back to their checkpoint's time.
   */
  private readonly verifiedAt = new Map<string, number>();
  /** How the last look at the scan cache went (tests, logs). */
  lastScanCache: 'hit' | ScanCacheMiss | 'in_memory' | null = null;
  /** What the last capture's scan did (tests, logs: how many directories it listed and took from the listing cache). */
  lastScanStats: ScanResult['stats'] | null = null;

  constructor(private readonly opts: WorkspaceSnapshotOptions) {
    this.roots = opts.roots;
    this.blobs = new BlobStore(path.join(opts.storeDir, 'objects'), { durability: 'deferred' });
    this.manifests = new ManifestStore(this.blobs, { fullEvery: opts.fullEvery ?? 50 });
    this.cacheIdentity = scanCacheIdentity({ roots: opts.roots, excludes: opts.excludes, maxFileBytes: opts.maxFileBytes, storeDir: opts.storeDir });
  }

  /**
   * The manifest a scan starts from. A fresh process has none in memory: the scan cache
   * the last capture wrote gives it, when it is for this very ref and this workspace and
   * intact, without reading the object chain; otherwise the store loads it.
   */
  private async previousManifest(checkpoint: CheckpointMeta & { manifestRef: string }): Promise<{ manifest: Manifest; verifiedAtMs: number }> {
    const ref = checkpoint.manifestRef;
    // Without a record of its scan, the checkpoint's own time: no later than the scan that made it began.
    const verifiedAtMs = this.verifiedAt.get(ref) ?? checkpoint.createdAt;
    if (this.manifests.holds(ref)) {
      this.lastScanCache = 'in_memory';
      return { manifest: await this.manifests.loadShared(ref), verifiedAtMs };
    }
    const c = loadScanCache(this.opts.storeDir, this.cacheIdentity, ref);
    if (typeof c === 'string') {
      this.lastScanCache = c;
      if (c === 'damaged') this.opts.log?.warn('[snapshot] the scan cache is damaged: ignored (the manifest is read from the store)');
      return { manifest: await this.manifests.loadShared(ref), verifiedAtMs };
    }
    this.lastScanCache = 'hit';
    this.manifests.seed(ref, c.manifest, c.depth);
    this.listings.seed(c.listings);
    this.remember(ref, c.verifiedAtMs);
    return { manifest: c.manifest, verifiedAtMs: c.verifiedAtMs };
  }

  private remember(ref: string, verifiedAtMs: number): void {
    this.verifiedAt.delete(ref);
    this.verifiedAt.set(ref, verifiedAtMs);
    if (this.verifiedAt.size > 256) this.verifiedAt.delete(this.verifiedAt.keys().next().value!);
  }

  /** After a capture: the cache now describes its manifest (a failed write removes the old one, which no longer would). */
  private async writeScanCache(ref: string, manifest: Manifest, verifiedAtMs: number): Promise<void> {
    try {
      saveScanCache(this.opts.storeDir, this.cacheIdentity, ref, await this.manifests.depthOf(ref), manifest, verifiedAtMs, undefined, this.listings.dirs);
    } catch (e) {
      this.opts.log?.warn(`[snapshot] could not write the scan cache: ${(e as Error).message}`);
      try {
        dropScanCache(this.opts.storeDir);
      } catch {
        // Nothing more to do: a stale cache names another ref and is not used for this one.
      }
    }
  }

  /**
   * One scan from the previous checkpoint's map. Shared, not copied: the scan never
   * changes its previous manifest, and a rescan from the map the last capture saved
   * reuses that scan's directory plans (see DirPlan in snapshot/scan/listingCache.ts).
   * A dirty hint is used only with a previous map to vouch for the rest.
   */
  private async scanFrom(previous: CheckpointMeta | null, dirty: readonly string[] | undefined, extra: Pick<ScanOptions, 'flush' | 'deferCompression'> = {}) {
    const prev = previous?.manifestRef ? await this.previousManifest({ ...previous, manifestRef: previous.manifestRef }) : undefined;
    const r = await scan({
      roots: this.roots,
      excludes: this.opts.excludes,
      maxFileBytes: this.opts.maxFileBytes,
      previous: prev?.manifest,
      previousVerifiedAtMs: prev?.verifiedAtMs,
      dirty: prev && dirty ? [...dirty] : undefined,
      blobs: this.blobs,
      listings: this.listings,
      spare: this.spare,
      ...extra,
    });
    if (this.opts.releaseWorkersAfterScan) void this.listings.close();
    return { r, prev };
  }

  /**
   * Scans the workspace (incrementally from `previous`) without recording anything. The
   * result may be the store's cached map itself (an empty `dirty`): callers must not change it.
   */
  async scanNow(previous: CheckpointMeta | null, dirty?: readonly string[]): Promise<Manifest> {
    const { r } = await this.scanFrom(previous, dirty);
    for (const u of r.unreadable) this.opts.log?.info(`[snapshot] unreadable: ${u.path} (${u.code})`);
    return r.manifest;
  }

  async changedSince(previous: CheckpointMeta): Promise<string[]> {
    const { r, prev } = await this.scanFrom(previous, undefined);
    // The next capture starts from `previous` again: its copy is made ahead, as after a capture.
    if (prev) this.spare.prepare(prev.manifest);
    // Only a long-lived owner warms up: its later checkpoints look new content up in memory.
    this.blobs.loadIndexes();
    return r.changed.changes.map((c) => c.path);
  }

  async capture(req: CaptureRequest): Promise<Capture> {
    const { r, prev } = await this.scanFrom(req.previous, req.dirty, {
      flush: false, // ManifestStore.save flushes the new blobs and the manifest together
      // A bulk scan stores new content raw so the checkpoint is durable sooner; it is
      // compressed right after, in the background (compactSoon).
      deferCompression: true,
    });
    this.lastScanStats = r.stats;
    const bulk = r.stats.filesReadOnWorkers > 0;
    const notCaptured = notCapturedOf(r, this.opts.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES);
    for (const n of notCaptured) this.opts.log?.info(`[snapshot] not captured: ${JSON.stringify(n.path)} (${n.code}: ${n.message})`);
    const parentRef = req.parent?.manifestRef ?? null;
    // The scan's previous manifest is the parent's: only the keys it touched can differ.
    const touched = r.touched && parentRef !== null && parentRef === req.previous?.manifestRef ? r.touched : undefined;
    // Handed over: this scan's manifest is not used again but read below.
    // keysChecked: the scan checked every key it recorded; the rest came from a manifest this store loaded.
    const ref = await this.manifests.save(r.manifest, parentRef, undefined, touched, { adopt: true, deferCompression: bulk, keysChecked: true });
    // Written when the store closes, not per capture: only the next process needs it, and
    // 50,000 entries cost tens of milliseconds that an owner's every checkpoint would pay.
    // A dirty-hint scan looked only at what the hint named: the rest is vouched for as of the previous scan.
    const verifiedAtMs = prev && req.dirty ? Math.min(prev.verifiedAtMs, r.startedAtMs) : r.startedAtMs;
    this.remember(ref, verifiedAtMs);
    this.unwrittenCache = { ref, manifest: r.manifest, verifiedAtMs };
    // The store adopted it (nobody changes it now): the next scan starts from it.
    this.spare.prepare(r.manifest);
    if (bulk && this.opts.compactAtClose) this.rawLeft = r.manifest;
    else if (bulk) this.compactSoon(r.manifest);
    let filesChanged: number;
    if (parentRef === (req.previous?.manifestRef ?? null)) {
      filesChanged = r.changed.changes.length;
    } else {
      filesChanged = parentRef ? diffManifests(await this.manifests.load(parentRef), r.manifest).length : r.manifest.size;
    }
    return { manifestRef: ref, files: r.manifest.size, filesChanged, bytes: r.stats.bytesStoredNew, notCaptured };
  }

  async load(checkpoint: CheckpointMeta): Promise<Manifest> {
    if (checkpoint.damaged) {
      throw new WaypointError(
        'corrupt',
        `Checkpoint ${checkpoint.id} is damaged: ${checkpoint.damaged}. Its files cannot be restored or compared (waypoint verify --repair marked it); choose another checkpoint.`,
        { checkpointId: checkpoint.id, damaged: checkpoint.damaged },
      );
    }
    if (!checkpoint.manifestRef) {
      throw new WaypointError('invalid_input', `Checkpoint ${checkpoint.id} holds no files (it was recorded without a workspace snapshot).`);
    }
    return this.manifests.load(checkpoint.manifestRef);
  }

  async diff(a: Manifest, b: Manifest): Promise<FileChangeWithLines[]> {
    return diffCheckpoint(a, b, this.blobs);
  }

  /**
   * The exact restore plan from `current` to `target`. A file the target lacks is
   * removed only if a blob holds its content (so the removal can be undone).
   */
  async plan(current: Manifest, target: Manifest, paths?: string[]): Promise<RestorePlan> {
    if (paths) for (const p of paths) assertSafePathKey(p);
    const held = new Set<string>();
    for (const [key, e] of current) {
      if (e.type === 'file' && !target.has(key) && (await this.blobs.has(e.hash))) held.add(e.hash);
    }
    const scoped = scopeToRoots(this.roots, current, target);
    const plan = planRestore(scoped.current, scoped.target, { paths, isHeld: (h) => held.has(h) });
    plan.kept.push(...scoped.kept);
    return plan;
  }

  /**
   * Stores a plan as a blob so a crashed rollback can be finished exactly; returns its
   * ref. The plan gets its temp tag here, so the names of its temp files are durable
   * before any of them exists (recovery removes exactly those).
   */
  async savePlan(plan: RestorePlan): Promise<string> {
    plan.tempTag ??= newTempTag();
    const { hash } = await this.blobs.put(Buffer.from(JSON.stringify(plan), 'utf8'));
    await this.blobs.flush();
    return hash;
  }

  async loadPlan(ref: string): Promise<RestorePlan> {
    const text = (await this.blobs.get(ref)).toString('utf8');
    const plan = JSON.parse(text) as RestorePlan;
    if (!plan || !Array.isArray(plan.writes) || !Array.isArray(plan.removes)) throw new WaypointError('corrupt', `Rollback plan ${ref} is not a plan.`);
    // Recorded before temp tags: its temps, if a crash left any, are `<name>.waypoint-tmp`.
    if (plan.tempTag === undefined) plan.legacyTemps = true;
    return plan;
  }

  /**
   * Checks every path of a plan as applying it would, without writing: callers run
   * this before they record a rollback, so a plan that would be refused records nothing.
   */
  async validate(plan: RestorePlan): Promise<void> {
    try {
      checkRestorePaths(plan, this.roots, await detectCaseInsensitive(this.roots[0]!.dir));
    } catch (e) {
      if (e instanceof UnsafePathError) throw new WaypointError('unsafe_path', `Refused to restore: ${e.message}. Nothing was written.`);
      throw e;
    }
  }

  /** Applies a plan. Every path is validated before anything is written; a bad one refuses the whole plan. */
  async apply(plan: RestorePlan): Promise<ApplyResult> {
    try {
      return await applyRestore(plan, this.roots, this.blobs);
    } catch (e) {
      if (e instanceof UnsafePathError) throw new WaypointError('unsafe_path', `Refused to restore: ${e.message}. Nothing was written.`);
      throw e;
    }
  }

  /**
   * Removes the temp files a plan names (see RestorePlan.tempTag), for recovery when
   * re-applying the plan failed part-way; best effort, returns how many were removed.
   */
  async sweepTemps(plan: RestorePlan): Promise<number> {
    try {
      return await sweepRestoreTemps(plan, this.roots);
    } catch (e) {
      this.opts.log?.warn(`[snapshot] could not sweep a restore's temp files: ${(e as Error).message}`);
      return 0;
    }
  }

  /** Reads one file's content at a checkpoint (for diff editors), or null when it is absent or has no content. */
  async fileAt(checkpoint: CheckpointMeta, key: string): Promise<Buffer | null> {
    assertSafePathKey(key);
    const m = await this.load(checkpoint);
    const e = m.get(key);
    if (!e) return null;
    if (e.type === 'file') return this.blobs.get(e.hash);
    if (e.type === 'symlink') return Buffer.from(e.target, 'utf8');
    return null;
  }

  /**
   * Checks that every object the checkpoints need — each manifest object down its
   * delta chain, and the content of every file it records — is in the store and
   * hashes to its name. Returns why each damaged checkpoint is damaged, and the bad
   * blobs (missing or corrupt). Forgets what the blob store had cached first, so
   * objects deleted behind its back are seen as gone. Each blob is read once.
   */
  async checkObjects(checkpoints: readonly CheckpointMeta[]): Promise<ObjectCheck> {
    await this.whenCompacted();
    this.blobs.forgetLoadedState();
    const status = new Map<string, 'ok' | 'missing' | 'corrupt'>();
    const st = (h: string) => {
      let v = status.get(h);
      if (!v) status.set(h, (v = this.blobs.status(h)));
      return v;
    };
    const damaged = new Map<string, string>();
    const bad = new Map<string, 'missing' | 'corrupt'>();
    // Each manifest object's chain down to its full manifest is walked once: many
    // checkpoints share ancestors, and a full manifest is parsed by nothing but load.
    const chainMemo = new Map<string, string | null>();
    const chainProblem = (ref: string): string | null => {
      const walked: string[] = [];
      let problem: string | null = null;
      for (let cursor = ref, guard = 0; ; guard++) {
        const known = chainMemo.get(cursor);
        if (known !== undefined) {
          problem = known;
          break;
        }
        walked.push(cursor);
        const v = st(cursor);
        if (v !== 'ok') {
          problem = `manifest object ${cursor.slice(0, 12)}… is ${v}`;
          break;
        }
        const bytes = this.blobs.getSync(cursor);
        if (bytes.subarray(0, FULL_MANIFEST_HEAD.length).toString('latin1') === FULL_MANIFEST_HEAD) break;
        let parent: unknown;
        try {
          parent = (JSON.parse(bytes.toString('utf8')) as { parent?: unknown }).parent;
        } catch {
          parent = undefined;
        }
        if (typeof parent !== 'string' || !/^[0-9a-f]{64}$/.test(parent) || guard > 100_000) {
          problem = `manifest object ${cursor.slice(0, 12)}… is not a manifest`;
          break;
        }
        cursor = parent;
      }
      for (const r of walked) chainMemo.set(r, problem);
      return problem;
    };
    let checked = 0;
    // Reading and hashing every object is synchronous; yield often, so the owner's
    // event loop turns (its lease is renewed only then) however big the store is.
    let sliceAt = performance.now();
    const turn = async (): Promise<void> => {
      await new Promise<void>((r) => setImmediate(r));
      sliceAt = performance.now();
    };
    for (const c of checkpoints) {
      if (performance.now() - sliceAt > VERIFY_SLICE_MS) await turn();
      if (!c.manifestRef) continue;
      checked++;
      const ref = c.manifestRef;
      const chain = chainProblem(ref);
      let reason: string | null = chain ? `its manifest cannot be read (${chain})` : null;
      if (!reason) {
        let m: Manifest;
        try {
          m = await this.manifests.loadShared(ref);
        } catch (e) {
          damaged.set(c.id, `its manifest cannot be read: ${(e as Error).message}`);
          continue;
        }
        const lost: string[] = [];
        let files = 0;
        for (const [key, e] of m) {
          if (e.type !== 'file') continue;
          files++;
          if (performance.now() - sliceAt > VERIFY_SLICE_MS) await turn();
          const v = st(e.hash);
          if (v === 'ok') continue;
          bad.set(e.hash, v);
          lost.push(key);
        }
        if (lost.length) {
          const shown = lost.slice(0, 3).join(', ') + (lost.length > 3 ? `, and ${lost.length - 3} more` : '');
          reason = `the content of ${lost.length} of its ${plural(files, 'file')} is missing or corrupt in the store (${shown})`;
        }
      }
      // A lost manifest object cannot be made again from the workspace: only file content can.
      if (reason) damaged.set(c.id, reason);
    }
    return { checkpoints: checked, blobs: status.size, damaged, bad };
  }

  /**
   * Stores again the bad blobs whose content is still somewhere in the workspace:
   * corrupt copies are removed first (content addressing would otherwise keep them),
   * then a full scan of the workspace stores every file's content the store lacks.
   * Returns the hashes it restored.
   */
  async restoreFromWorkspace(bad: ReadonlyMap<string, 'missing' | 'corrupt'>): Promise<string[]> {
    if (bad.size === 0) return [];
    const corrupt = [...bad].filter(([, v]) => v === 'corrupt').map(([h]) => h);
    if (corrupt.length) await this.blobs.deleteMany(corrupt);
    this.blobs.forgetLoadedState();
    await this.scanNow(null);
    await this.blobs.flush();
    return [...bad.keys()].filter((h) => this.blobs.status(h) === 'ok');
  }

  /**
   * Compresses, in the background, what bulk checkpoints stored raw (see
   * BlobStore.compact): on worker threads, one pass at a time, again if asked while
   * one runs. Failures are logged; the raw packs stay valid and are retried next time.
   */
  compactSoon(names?: Manifest | (() => Manifest | null)): void {
    if (names) this.compactNames = names;
    if (this.compacting) {
      this.compactAgain = true;
      return;
    }
    this.compacting = (async () => {
      do {
        this.compactAgain = false;
        const t0 = performance.now();
        const names = this.compactNames;
        this.compactNames = null;
        const r = await this.blobs.compact({ nameOf: nameLookup(names), shouldStop: () => this.stopCompaction });
        if (r.packs) {
          const mb = (n: number) => (n / 1048576).toFixed(1);
          this.opts.log?.info(`[snapshot] compressed ${plural(r.objects, 'object')} stored raw by a bulk checkpoint: ${mb(r.bytesBefore)} MB -> ${mb(r.bytesAfter)} MB in ${(performance.now() - t0).toFixed(0)} ms`);
        }
      } while (this.compactAgain);
    })()
      .catch((e: Error) =>
        e instanceof CompactionStopped
          ? this.opts.log?.info('[snapshot] compression stopped as the store was handed over: the next owner compresses what is still stored raw')
          : this.opts.log?.warn(`[snapshot] compression after a bulk checkpoint failed (the content stays stored raw and is retried later): ${e.message}`),
      )
      .finally(() => {
        this.compacting = null;
      });
  }

  /** Resolves once no background compaction is running. */
  async whenCompacted(): Promise<void> {
    while (this.compacting) await this.compacting;
  }

  /**
   * The newest checkpoint's map as this process has it or the scan cache holds it, never
   * read from the object chain (50,000 entries): names for compacting what another process
   * stored raw, or null (the compaction then orders by size alone, as before it had names).
   */
  namesOfLatest(latest: CheckpointMeta | null): Manifest | null {
    const ref = latest?.manifestRef;
    if (!ref) return null;
    if (this.unwrittenCache?.ref === ref) return this.unwrittenCache.manifest;
    const c = loadScanCache(this.opts.storeDir, this.cacheIdentity, ref);
    return typeof c === 'string' ? null : c.manifest;
  }

  /**
   * Waits for background work on the store (compaction) to end, and leaves the scan cache
   * for the next process. With `leaveRawContent` (another owner takes the store next: the
   * background owner a one-call process started, or the window a background owner hands
   * it to), what a bulk capture stored raw stays raw: durable and read like any content,
   * and compressed by that owner when it opens the store (Engine.open compacts raw packs
   * it finds). A compaction under way stops at its next batch. The call that waits for a
   * one-call process is over ~1 s sooner on a 2,807-file first checkpoint, and a window
   * taking the store over does not wait for a compaction.
   */
  async close(o: { leaveRawContent?: boolean } = {}): Promise<void> {
    this.spare.clear();
    if (this.rawLeft && !o.leaveRawContent) this.compactSoon(this.rawLeft);
    this.rawLeft = null;
    if (o.leaveRawContent) this.stopCompaction = true;
    await this.whenCompacted();
    const last = this.unwrittenCache;
    this.unwrittenCache = null;
    if (last) await this.writeScanCache(last.ref, last.manifest, last.verifiedAtMs);
  }

  /** Bytes of the objects directory on disk. */
  diskBytes(): number {
    return dirBytes(path.join(this.opts.storeDir, 'objects'));
  }
}

/** What a scan did not capture, for the caller: unreadable paths (not those gone since listed), unsafe and reserved names, files over the limit. */
export function notCapturedOf(r: ScanResult, maxFileBytes: number): NotCaptured[] {
  const out: NotCaptured[] = [];
  for (const u of r.unreadable) {
    if (u.code === 'ENOENT' || u.code === 'ENOTDIR') continue; // gone since it was listed: absent is the truth
    const reason = u.code === 'EUNSAFEPATH' ? 'unsafe_name' : u.code === 'ERESERVED' ? 'reserved_name' : 'unreadable';
    out.push({ path: u.path, reason, code: u.code, message: u.message });
  }
  const mb = (n: number) => `${(n / 1048576).toFixed(n < 1048576 ? 2 : 1)} MB`;
  for (const s of r.skipped) out.push({ path: s.path, reason: 'too_large', code: 'ETOOLARGE', message: `${mb(s.size)}, over the ${mb(maxFileBytes)} limit: recorded without content` });
  return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

function dirBytes(dir: string): number {
  let total = 0;
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) total += dirBytes(p);
    else if (e.isFile()) total += fs.statSync(p).size;
  }
  return total;
}

/**
 * Narrows a restore to the folders both sides know (multi-root only: each key is
 * `<root>/…`). A folder added to the window after the target checkpoint was taken
 * has no key in it: it is left as it is, not emptied, since the target never saw
 * it (an empty folder at the time reads the same, and keeping its files is the
 * side that loses nothing). A folder the target holds but the window no longer
 * has is not written to: it is outside what this window supervises now. Each is
 * reported once, by its root name, among the plan's kept paths.
 */
export function scopeToRoots(roots: readonly SnapshotRoot[], current: Manifest, target: Manifest): { current: Manifest; target: Manifest; kept: RestorePlan['kept'] } {
  if (roots.length < 2) return { current, target, kept: [] };
  const rootOf = (key: string) => key.slice(0, key.indexOf('/') >>> 0);
  const inWindow = new Set(roots.map((r) => r.name));
  const inTarget = new Set<string>();
  let foreign = false;
  target.forEach((_e, key) => {
    const r = rootOf(key);
    inTarget.add(r);
    if (!inWindow.has(r)) foreign = true;
  });
  const unknown = roots.map((r) => r.name).filter((n) => !inTarget.has(n));
  if (!foreign && unknown.length === 0) return { current, target, kept: [] };
  if (target.size > 0 && unknown.length === roots.length) {
    // Taken when the window had other folders (a single-folder store's keys carry no folder name): restoring it would do nothing.
    throw new WaypointError(
      'invalid_input',
      `That checkpoint holds none of this window's folders (${roots.map((r) => r.name).join(', ')}): it was taken when the window had other folders. Open those folders (or that single folder) to roll back to it.`,
    );
  }
  const kept: RestorePlan['kept'] = [];
  let t = target;
  if (foreign) {
    t = new Map();
    const gone = new Set<string>();
    target.forEach((e, key) => {
      const r = rootOf(key);
      if (inWindow.has(r)) t.set(key, e);
      else gone.add(r);
    });
    for (const r of gone) kept.push({ path: r, reason: 'not_captured_in_current' });
  }
  let c = current;
  if (unknown.length) {
    const skip = new Set(unknown);
    c = new Map();
    current.forEach((e, key) => {
      if (!skip.has(rootOf(key))) c.set(key, e);
    });
    for (const r of unknown) kept.push({ path: r, reason: 'not_captured_in_target' });
  }
  return { current: c, target: t, kept };
}

/** A path for each file's content in `manifest` (built once, when compaction first asks). */
function nameLookup(names: Manifest | (() => Manifest | null) | null): ((hash: string) => string | undefined) | undefined {
  if (!names) return undefined;
  let byHash: Map<string, string> | null = null;
  return (hash) => {
    if (!byHash) {
      byHash = new Map();
      let manifest: Manifest | null = null;
      try {
        // Found only now, when the compaction has raw objects to order (see namesOfLatest).
        manifest = typeof names === 'function' ? names() : names;
      } catch {
        // No names: the objects are ordered by size alone.
      }
      if (manifest) for (const [p, e] of manifest) if (e.type === 'file') byHash.set(e.hash, p);
    }
    return byHash.get(hash);
  };
}
