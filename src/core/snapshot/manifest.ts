/**
 * Manifests: what a checkpoint holds (path key → entry), how two differ, and how
 * they are stored — as objects in the blob store, each a delta against its parent
 * checkpoint's manifest, with a full manifest every N along the parent chain.
 */
import { z } from 'zod';
import { BlobStore, assertHash } from './blobStore.js';
import { pathKeyProblem } from './paths.js';
import { WaypointError } from '../model/errors.js';

export interface FileEntry {
  type: 'file';
  hash: string;
  size: number;
  /** Only the executable bit is kept: 0o755 or 0o644. */
  mode: 0o755 | 0o644;
  mtimeMs: number;
  ino: number;
  /**
   * Set when the file's mtime was too close to the scan for its stat to be trusted
   * next time ("racily clean", as in git): the next full scan rehashes it.
   */
  racy?: true;
}

export interface SymlinkEntry {
  type: 'symlink';
  /** readlink() as is; never followed. */
  target: string;
  mtimeMs: number;
  ino: number;
}

export interface SkippedEntry {
  type: 'skipped';
  size: number;
  mtimeMs: number;
  reason: 'too_large';
}

/**
 * A path the scan met but could not read (permission denied, out of descriptors after
 * retries, not a regular file, swapped for a symlink mid-scan): its content is not in
 * the checkpoint, and it is never treated as absent. With `dir`, the directory could
 * not be listed, so the entry stands for everything below it as well. A rollback to a
 * checkpoint holding one leaves the path (and its subtree) as it is, and a rollback
 * from a state holding one never overwrites it (see planRestore).
 */
export interface UncapturedEntry {
  type: 'uncaptured';
  /** Why, as an errno-style code: EACCES, EPERM, EMFILE, ENOTREG, ESYMLINK, … */
  code: string;
  dir?: true;
}

export type ManifestEntry = FileEntry | SymlinkEntry | SkippedEntry | UncapturedEntry;

/** Entries with no content in the store: over the size limit, or not captured at all. */
export function hasNoContent(e: ManifestEntry | undefined): e is SkippedEntry | UncapturedEntry {
  return e !== undefined && (e.type === 'skipped' || e.type === 'uncaptured');
}
export type Manifest = Map<string, ManifestEntry>;

export type ChangeStatus = 'added' | 'modified' | 'deleted' | 'type_changed' | 'mode_changed';

export interface FileChange {
  path: string;
  status: ChangeStatus;
  before?: ManifestEntry;
  after?: ManifestEntry;
}

/** True when two entries describe the same content (stat-cache fields ignored). */
export function sameContent(a: ManifestEntry, b: ManifestEntry): boolean {
  if (a.type !== b.type) return false;
  switch (a.type) {
    case 'file':
      return a.hash === (b as FileEntry).hash && a.mode === (b as FileEntry).mode;
    case 'symlink':
      return a.target === (b as SymlinkEntry).target;
    case 'skipped':
      // Content unknown: size + mtime is all there is.
      return a.size === (b as SkippedEntry).size && a.mtimeMs === (b as SkippedEntry).mtimeMs;
    case 'uncaptured':
      // Nothing known of either: the same only as the same kind of gap.
      return a.code === (b as UncapturedEntry).code && a.dir === (b as UncapturedEntry).dir;
  }
}

/** Compares two entries for one path; null when the content is the same. */
export function compareEntries(path: string, before: ManifestEntry | undefined, after: ManifestEntry | undefined): FileChange | null {
  if (!before && !after) return null;
  if (!before) return { path, status: 'added', after };
  if (!after) return { path, status: 'deleted', before };
  if (before.type !== after.type) return { path, status: 'type_changed', before, after };
  if (sameContent(before, after)) return null;
  if (before.type === 'file' && after.type === 'file' && before.hash === after.hash) {
    return { path, status: 'mode_changed', before, after };
  }
  return { path, status: 'modified', before, after };
}

/** Changes from `a` to `b`, sorted by path. Stat-only differences (touch) are not changes. */
export function diffManifests(a: Manifest, b: Manifest): FileChange[] {
  const out: FileChange[] = [];
  for (const [p, before] of a) {
    const c = compareEntries(p, before, b.get(p));
    if (c) out.push(c);
  }
  for (const [p, after] of b) {
    if (!a.has(p)) out.push({ path: p, status: 'added', after });
  }
  return out.sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0));
}

export interface ChangeSummary {
  added: number;
  modified: number;
  deleted: number;
  typeChanged: number;
  modeChanged: number;
  changes: FileChange[];
}

export function summarize(changes: FileChange[]): ChangeSummary {
  const s: ChangeSummary = { added: 0, modified: 0, deleted: 0, typeChanged: 0, modeChanged: 0, changes };
  for (const c of changes) {
    if (c.status === 'added') s.added++;
    else if (c.status === 'modified') s.modified++;
    else if (c.status === 'deleted') s.deleted++;
    else if (c.status === 'type_changed') s.typeChanged++;
    else s.modeChanged++;
  }
  return s;
}

// ---------------------------------------------------------------------------
// Encoding

/** JSON with object keys sorted at every level, so equal manifests encode to equal bytes (and refs). */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'number' && !Number.isFinite(value)) throw new Error('cannot encode a non-finite number');
    return JSON.stringify(value);
  }
  // Manifest entries are most of what is encoded (13k+ per full manifest): their
  // fixed shapes are written directly, with the keys in the same sorted order.
  const entry = entryJson(value as Record<string, unknown>);
  return entry ?? genericJson(value);
}

function num(n: unknown): string {
  if (typeof n !== 'number') return canonicalJson(n);
  if (!Number.isFinite(n)) throw new Error('cannot encode a non-finite number');
  return JSON.stringify(n);
}

/** `canonicalJson` of a manifest entry with exactly its known keys, or null for anything else. */
function entryJson(v: Record<string, unknown>): string | null {
  const t = v.type;
  if (t !== 'file' && t !== 'symlink' && t !== 'skipped') return null;
  let n = 0;
  for (const k in v) if (v[k] !== undefined) n++;
  if (t === 'file') {
    const racy = v.racy !== undefined;
    if (n !== (racy ? 7 : 6) || v.hash === undefined || v.ino === undefined || v.mode === undefined || v.mtimeMs === undefined || v.size === undefined) return null;
    return `{"hash":${canonicalJson(v.hash)},"ino":${num(v.ino)},"mode":${num(v.mode)},"mtimeMs":${num(v.mtimeMs)},${racy ? `"racy":${canonicalJson(v.racy)},` : ''}"size":${num(v.size)},"type":"file"}`;
  }
  if (t === 'symlink') {
    if (n !== 4 || v.ino === undefined || v.mtimeMs === undefined || v.target === undefined) return null;
    return `{"ino":${num(v.ino)},"mtimeMs":${num(v.mtimeMs)},"target":${canonicalJson(v.target)},"type":"symlink"}`;
  }
  if (n !== 4 || v.mtimeMs === undefined || v.reason === undefined || v.size === undefined) return null;
  return `{"mtimeMs":${num(v.mtimeMs)},"reason":${canonicalJson(v.reason)},"size":${num(v.size)},"type":"skipped"}`;
}

function genericJson(value: object): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(value as object)
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
}

const hashSchema = z.string().regex(/^[0-9a-f]{64}$/);
const stat = { mtimeMs: z.number().finite(), ino: z.number().int().nonnegative() };
const entrySchema = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('file'),
    hash: hashSchema,
    size: z.number().int().nonnegative(),
    mode: z.union([z.literal(0o755), z.literal(0o644)]),
    ...stat,
    racy: z.literal(true).optional(),
  }),
  z.strictObject({
    type: z.literal('symlink'),
    // Symlink targets are data, not paths we resolve; still, refuse NUL (cannot be created).
    target: z.string().min(1).max(4096).refine((t) => !t.includes('\0'), 'symlink target contains NUL'),
    ...stat,
  }),
  z.strictObject({
    type: z.literal('skipped'),
    size: z.number().int().nonnegative(),
    mtimeMs: z.number().finite(),
    reason: z.literal('too_large'),
  }),
  z.strictObject({
    type: z.literal('uncaptured'),
    code: z.string().regex(/^E[A-Z0-9_]{1,31}$/),
    dir: z.literal(true).optional(),
  }),
]);

const pathKeySchema = z.string().superRefine((key, ctx) => {
  const problem = pathKeyProblem(key);
  if (problem) ctx.addIssue({ code: 'custom', message: `unsafe path ${JSON.stringify(key)}: ${problem}` });
});

const entriesSchema = z.record(pathKeySchema, entrySchema);

const manifestObjectSchema = z.discriminatedUnion('full', [
  z.strictObject({ v: z.literal(1), full: z.literal(true), entries: entriesSchema }),
  z.strictObject({
    v: z.literal(1),
    full: z.literal(false),
    parent: hashSchema,
    /** Deltas between this object and the nearest full one, this one included (1..N-1). */
    depth: z.number().int().positive(),
    set: entriesSchema,
    del: z.array(pathKeySchema),
  }),
]);

type ManifestObject = z.infer<typeof manifestObjectSchema>;

/** A WaypointError ('corrupt'), so every surface shows it as a refusal, never as an internal failure. */
export class CorruptManifestError extends WaypointError {
  constructor(readonly ref: string, detail: string) {
    super('corrupt', `manifest ${ref} is corrupt or hostile: ${detail}`, { ref });
    this.name = 'CorruptManifestError';
  }
}

const FULL_HEAD = '{"entries":{';
const FULL_TAIL = '},"full":true,"v":1}';

/** `"key":entry` for each entry of `m`, keys sorted as `Array.prototype.sort` sorts them in canonicalJson. */
function fullManifestParts(m: Manifest): string[] {
  const keys = [...m.keys()].sort();
  const parts = new Array<string>(keys.length);
  for (let i = 0; i < keys.length; i++) parts[i] = `${JSON.stringify(keys[i])}:${canonicalJson(m.get(keys[i]!))}`;
  return parts;
}

/**
 * The UTF-8 of `canonicalJson({ v: 1, full: true, entries })` for the entries of `m`,
 * byte for byte (refs of equal manifests must not depend on how they were encoded),
 * without building that object, and written part by part into one buffer: one joined
 * 2.6 MB string of a 13.6k-entry manifest took ~30 ms to flatten and encode, the parts ~12 ms.
 */
export function fullManifestBytes(m: Manifest): Buffer {
  const parts = fullManifestParts(m);
  let total = FULL_HEAD.length + FULL_TAIL.length + Math.max(0, parts.length - 1);
  for (const p of parts) total += Buffer.byteLength(p, 'utf8');
  const out = Buffer.allocUnsafe(total);
  let at = out.write(FULL_HEAD, 0, 'latin1');
  for (let i = 0; i < parts.length; i++) {
    if (i > 0) out[at++] = 0x2c; // ','
    at += out.write(parts[i]!, at, 'utf8');
  }
  at += out.write(FULL_TAIL, at, 'latin1');
  if (at !== total) throw new Error(`[snapshot] manifest encoding wrote ${at} of ${total} bytes`);
  return out;
}

/** What a ManifestStore needs of a blob store (a read-only source refuses put and flush). */
export type ManifestObjects = Pick<BlobStore, 'get' | 'put' | 'flush'>;

export interface ManifestStoreOptions {
  /** A full manifest every this many checkpoints along the parent chain (default 50). */
  fullEvery?: number;
  /** How many decoded manifests to keep (default 8). */
  cacheSize?: number;
}

/**
 * Stores manifests as blob objects. A ref is the blob hash of the encoded object,
 * so the same manifest saved twice against the same parent yields the same ref.
 * Checkpoints form a tree: any ref may be a parent of several children.
 */
export class ManifestStore {
  private readonly fullEvery: number;
  private readonly cacheSize: number;
  private readonly cache = new Map<string, Manifest>();
  private readonly depthCache = new Map<string, number>();

  constructor(
    /** Where the objects are: the workspace's blob store, or (read only) the team store's copy. */
    private readonly blobs: ManifestObjects,
    opts: ManifestStoreOptions = {},
  ) {
    this.fullEvery = Math.max(1, opts.fullEvery ?? 50);
    this.cacheSize = Math.max(1, opts.cacheSize ?? 8);
  }

  /**
   * `opts.adopt`: the caller hands `manifest` over and never changes it again, so the
   * cache keeps it as is instead of a copy (a 13k-entry copy is a quarter of a
   * dirty-hint checkpoint).
   *
   * Saves `manifest` as a child of `parentRef` (null for a root checkpoint) and
   * returns its ref. `depthSinceFull` is the parent's depth (0 when the parent is
   * full); when omitted it is read from the parent object. `touched`, when the caller
   * knows it (a dirty-hint scan whose previous manifest is the parent), holds every key
   * whose entry may differ from the parent's; the delta then looks at those keys only,
   * not at every entry of a large workspace. `deferCompression`: the manifest object
   * is stored raw for `BlobStore.compact` (after a bulk scan that deferred its own).
   * `keysChecked`: every key of `manifest` has passed `pathKeyProblem` already — a
   * scan's manifest: the walk checks each key it records, and the rest come from a
   * `previous` this store loaded (and so checked). A delta's keys are checked anyway.
   */
  async save(manifest: Manifest, parentRef: string | null, depthSinceFull?: number, touched?: ReadonlySet<string>, opts: { adopt?: boolean; deferCompression?: boolean; keysChecked?: boolean } = {}): Promise<string> {
    // A full manifest is encoded straight from the map (no intermediate object of 13k+ keys).
    let obj: ManifestObject | 'full';
    let depth = 0;
    if (parentRef === null) {
      obj = 'full';
    } else {
      assertHash(parentRef);
      const parentDepth = depthSinceFull ?? (await this.depthOf(parentRef));
      depth = parentDepth + 1;
      if (depth >= this.fullEvery) {
        depth = 0;
        obj = 'full';
      } else {
        const parent = await this.loadShared(parentRef);
        const set: Record<string, ManifestEntry> = {};
        const del: string[] = [];
        if (touched) {
          for (const k of touched) {
            const v = manifest.get(k);
            const before = parent.get(k);
            if (v === undefined) {
              if (before !== undefined) del.push(k);
            } else if (before === undefined || !entriesEqual(before, v)) set[k] = v;
          }
        } else {
          let kept = 0;
          manifest.forEach((v, k) => {
            const before = parent.get(k);
            // Stat fields count: a loaded manifest must be usable as the next scan's `previous`.
            if (before === undefined || !entriesEqual(before, v)) set[k] = v;
            else kept++;
          });
          // Every key of the parent still here was counted in `kept`: only look for deletions when some are missing.
          if (kept + Object.keys(set).length - countNew(set, parent) !== parent.size) for (const k of parent.keys()) if (!manifest.has(k)) del.push(k);
        }
        del.sort();
        obj = { v: 1, full: false, parent: parentRef, depth, set, del };
      }
    }
    // Validate what this object adds (a delta's unchanged keys were checked when its
    // parent was saved or loaded); a full manifest is checked whole, unless the caller
    // vouches that every key already was (`keysChecked`: 20–50 ms for 13.6k keys here).
    const toCheck = obj === 'full' ? (opts.keysChecked ? [] : manifest.keys()) : [...Object.keys(obj.set), ...obj.del];
    for (const key of toCheck) {
      const problem = pathKeyProblem(key);
      if (problem) throw new Error(`refusing to save a manifest with unsafe path ${JSON.stringify(key)}: ${problem}`);
    }
    const bytes = obj === 'full' ? fullManifestBytes(manifest) : Buffer.from(canonicalJson(obj), 'utf8');
    const { hash } = await this.blobs.put(bytes, { defer: opts.deferCompression === true });
    // The ref is about to be recorded by the caller, so it must be durable now.
    await this.blobs.flush();
    this.depthCache.set(hash, depth);
    this.remember(hash, freezeCopy(manifest, touched, opts.adopt === true));
    return hash;
  }

  /** Deltas between `ref` and its nearest full manifest (0 when `ref` is full). */
  async depthOf(ref: string): Promise<number> {
    const known = this.depthCache.get(ref);
    if (known !== undefined) return known;
    const obj = await this.readObject(ref);
    const d = obj.full ? 0 : obj.depth;
    this.depthCache.set(ref, d);
    return d;
  }

  /**
   * The manifest objects `ref` needs to be loaded: itself, then each delta's parent
   * down to the nearest full manifest. Garbage collection keeps all of them.
   */
  async objectChain(ref: string): Promise<string[]> {
    const out: string[] = [];
    let cursor = ref;
    for (let guard = 0; guard < 100_000; guard++) {
      out.push(cursor);
      const obj = await this.readObject(cursor);
      if (obj.full) return out;
      cursor = obj.parent;
    }
    throw new CorruptManifestError(ref, 'delta chain does not end');
  }

  /** Whether `ref` is in this store's memory (no object read needed to load it). */
  holds(ref: string): boolean {
    return this.cache.has(ref);
  }

  /**
   * Puts a manifest read from a trusted copy (the scan cache, checksummed, of a manifest
   * this store saved) into memory as `ref`, with its depth since the last full one, so
   * a fresh process need not read and decode its object chain. The entries are frozen.
   */
  seed(ref: string, m: Manifest, depth: number): void {
    assertHash(ref);
    for (const e of m.values()) Object.freeze(e);
    this.depthCache.set(ref, depth);
    this.remember(ref, m);
  }

  /** Loads a manifest: walks to the nearest full one (or cached one) and applies the deltas. */
  async load(ref: string): Promise<Manifest> {
    return new Map(await this.loadShared(ref));
  }

  /**
   * Like `load` but returns the cached map itself: callers must not mutate it. A scan's
   * `previous` (scans copy it before changing anything): then it is the very map the
   * last scan returned and save adopted, which lets a rescan reuse its directory plans.
   */
  async loadShared(ref: string): Promise<Manifest> {
    assertHash(ref);
    const cached = this.cache.get(ref);
    if (cached) {
      this.cache.delete(ref);
      this.cache.set(ref, cached);
      return cached;
    }
    const chain: Extract<ManifestObject, { full: false }>[] = [];
    let base: Manifest | undefined;
    let cursor = ref;
    let expectedDepth: number | undefined;
    for (;;) {
      const hit = this.cache.get(cursor);
      if (hit && cursor !== ref) {
        base = new Map(hit);
        break;
      }
      const obj = await this.readObject(cursor);
      if (obj.full) {
        if (expectedDepth !== undefined && expectedDepth !== 0) {
          throw new CorruptManifestError(cursor, `expected a delta at depth ${expectedDepth}, found a full manifest`);
        }
        base = new Map();
        for (const [k, v] of Object.entries(obj.entries)) base.set(k, Object.freeze(v) as ManifestEntry);
        break;
      }
      // Depth must drop by one per step: this bounds the walk and rejects cycles.
      if (expectedDepth !== undefined && obj.depth !== expectedDepth) {
        throw new CorruptManifestError(cursor, `delta depth ${obj.depth}, expected ${expectedDepth}`);
      }
      chain.push(obj);
      expectedDepth = obj.depth - 1;
      cursor = obj.parent;
    }
    for (let i = chain.length - 1; i >= 0; i--) {
      const d = chain[i]!;
      for (const k of d.del) base.delete(k);
      for (const [k, v] of Object.entries(d.set)) base.set(k, Object.freeze(v) as ManifestEntry);
    }
    this.remember(ref, base);
    return base;
  }

  private async readObject(ref: string): Promise<ManifestObject> {
    let bytes: Buffer;
    try {
      bytes = await this.blobs.get(ref);
    } catch (err) {
      // A refusal already worded for the person (the team store's not_found, corrupt) keeps its code.
      if (err instanceof WaypointError) throw err;
      throw new CorruptManifestError(ref, (err as Error).message);
    }
    let json: unknown;
    try {
      json = JSON.parse(bytes.toString('utf8'));
    } catch {
      throw new CorruptManifestError(ref, 'not JSON');
    }
    const parsed = manifestObjectSchema.safeParse(json);
    if (!parsed.success) {
      const first = parsed.error.issues[0];
      // A refused record key carries the reason (e.g. "unsafe path …: contains a ".." segment") one level down.
      const inner = first && 'issues' in first && Array.isArray(first.issues) ? (first.issues[0] as { message?: string } | undefined) : undefined;
      const where = first?.path.map((p) => JSON.stringify(String(p))).join(' → ') || 'object';
      throw new CorruptManifestError(ref, `${where}: ${inner?.message ?? first?.message ?? 'invalid'}`);
    }
    return parsed.data;
  }

  private remember(ref: string, m: Manifest): void {
    this.cache.delete(ref);
    this.cache.set(ref, m);
    while (this.cache.size > this.cacheSize) this.cache.delete(this.cache.keys().next().value!);
  }
}

/** Entries are immutable values: freezing them in place (no copy) keeps the cache safe from callers. */
function freezeCopy(m: Manifest, touched: ReadonlySet<string> | undefined, adopt: boolean): Manifest {
  // Entries reused from a cached manifest are frozen already; freezing is a no-op for them but not free.
  // With `touched`, every other entry came from the (cached, frozen) parent.
  if (touched) {
    for (const k of touched) {
      const v = m.get(k);
      if (v && !Object.isFrozen(v)) Object.freeze(v);
    }
  } else {
    m.forEach((v) => {
      if (!Object.isFrozen(v)) Object.freeze(v);
    });
  }
  return adopt ? m : new Map(m);
}

/** Keys of `set` that `parent` does not have. */
function countNew(set: Record<string, ManifestEntry>, parent: Manifest): number {
  let n = 0;
  for (const k in set) if (!parent.has(k)) n++;
  return n;
}

/** Field-wise equality, stat fields included (what a delta must preserve). */
export function entriesEqual(a: ManifestEntry, b: ManifestEntry): boolean {
  if (a === b) return true;
  if (a.type === 'uncaptured' || b.type === 'uncaptured') return a.type === b.type && sameContent(a, b);
  if (a.type !== b.type || a.mtimeMs !== b.mtimeMs) return false;
  switch (a.type) {
    case 'file': {
      const f = b as FileEntry;
      return a.hash === f.hash && a.size === f.size && a.mode === f.mode && a.ino === f.ino && a.racy === f.racy;
    }
    case 'symlink':
      return a.target === (b as SymlinkEntry).target && a.ino === (b as SymlinkEntry).ino;
    case 'skipped':
      return a.size === (b as SkippedEntry).size && a.reason === (b as SkippedEntry).reason;
  }
}

/** Key-by-key equality of two manifests, stat fields included. */
export function manifestsEqual(a: Manifest, b: Manifest): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) {
    const w = b.get(k);
    if (!w || !entriesEqual(v, w)) return false;
  }
  return true;
}
