/**
 * What a rescan needs from the last checkpoint, kept on disk between processes (as git
 * keeps its index): the manifest of the last capture, so a fresh process (a CLI call,
 * an agent's hook with no owner running) does not read, decompress, apply and
 * validate a chain of manifest objects of 50,000 entries before it can compare a
 * single lstat.
 *
 * Safety, since a stale or damaged cache must never hide a change:
 * - it is used only for the exact manifest ref the scan starts from (content-addressed:
 *   the entries are that manifest's, so the stat comparison is the one an in-process
 *   rescan makes), and only by the workspace it was written for (same roots, excludes,
 *   size limit, store directory: `identity`);
 * - the file is checksummed (SHA-256 of the body in the header) and refused whole when
 *   the checksum, the format, the header or any entry is wrong: the scan then loads the
 *   manifest from the store as before;
 * - "racy git": a file entry whose mtime is not safely older than the moment the cache
 *   was written is marked racy, so the scan rehashes it (a file rewritten with the same
 *   size within the timestamp granularity keeps its mtime);
 * - it carries when the scan that vouched for the manifest began, so the next scan
 *   reads again any file whose inode changed since (ctime: a file replaced under its
 *   name with its mtime put back can be handed the same inode);
 * - it also carries the directory listings the walk took (see ListingCache): a fresh
 *   process lists again only directories whose inode, mtime or ctime moved (creating,
 *   removing or renaming an entry moves both times, and ctime cannot be put back).
 *   Only listings whose directory was not racy when listed are ever kept; each is
 *   checked against the directory's lstat before use, and the ignore rules are applied
 *   afresh to its names on every walk (a .gitignore edit is seen: the file is read
 *   again, the names are what the directory holds). Used only together with a hit;
 * - written to a temporary file (0600) and renamed over the old one, inside `.waypoint/`.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import type { FileEntry, Manifest, ManifestEntry } from '../manifest.js';
import { DIRENT_SYMLINK, DiskDirent, direntKind, type ListedDir } from './listingCache.js';

export const SCAN_CACHE_FILE = 'scan-cache';
const FORMAT = 'waypoint-scan-cache/4';
/** Caches an earlier version wrote: a miss, not damage (the store has the manifest). */
const OLD_FORMAT = /^waypoint-scan-cache\/\d+$/;
/**
 * A file whose mtime is within this of the cache's write time (or after it) is racy.
 * Generous: filesystems with whole-second (or 2 s, FAT) timestamps.
 */
export const RACY_WINDOW_MS = 2_000;
/** Bounds a hostile or damaged header's claims before any allocation. */
const MAX_ENTRIES = 5_000_000;

const Header = z.strictObject({
  format: z.literal(FORMAT),
  identity: z.string().regex(/^[0-9a-f]{64}$/),
  ref: z.string().regex(/^[0-9a-f]{64}$/),
  depth: z.number().int().min(0).max(100_000),
  writtenAtMs: z.number().finite().min(0),
  verifiedAtMs: z.number().finite().min(0),
  entries: z.number().int().min(0).max(MAX_ENTRIES),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});

export interface ScanCacheIdentity {
  roots: { name: string; dir: string }[];
  excludes?: readonly string[];
  maxFileBytes?: number;
  storeDir: string;
}

/** What makes a cache this workspace's: a cache copied from another workspace or store has another. */
export function scanCacheIdentity(id: ScanCacheIdentity): string {
  return createHash('sha256')
    .update(JSON.stringify({ roots: id.roots.map((r) => [r.name, path.resolve(r.dir)]), excludes: id.excludes ?? [], max: id.maxFileBytes ?? null, store: path.resolve(id.storeDir) }))
    .digest('hex');
}

export interface LoadedScanCache {
  manifest: Manifest;
  depth: number;
  /** File entries marked racy on load (their mtime too close to the cache's write time). */
  racy: number;
  /** When the scan that vouched for the manifest began (ScanOptions.previousVerifiedAtMs). */
  verifiedAtMs: number;
  /** Directory listings by ListingCache key (`${root dir}\0${relDir}`), to seed a fresh ListingCache with. */
  listings: Map<string, ListedDir>;
}

export type ScanCacheMiss = 'absent' | 'old_format' | 'other_ref' | 'other_workspace' | 'damaged';

const HASH = /^[0-9a-f]{64}$/;
const CODE = /^E[A-Z0-9_]{1,31}$/;
const num = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const nat = (v: unknown): v is number => num(v) && Number.isInteger(v) && v >= 0;

/**
 * One entry as the manifest schema has it (manifest.ts `entrySchema`), checked by hand:
 * this runs 50,000 times on the way to a checkpoint, where zod took longer than the scan.
 */
function entryOf(v: unknown): ManifestEntry | null {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return null;
  const e = v as Record<string, unknown>;
  const n = Object.keys(e).length;
  switch (e.type) {
    case 'file':
      if (n !== (e.racy === undefined ? 6 : 7) || (e.racy !== undefined && e.racy !== true)) return null;
      if (typeof e.hash !== 'string' || !HASH.test(e.hash) || !nat(e.size) || (e.mode !== 0o755 && e.mode !== 0o644) || !num(e.mtimeMs) || !nat(e.ino)) return null;
      return e as unknown as ManifestEntry;
    case 'symlink':
      if (n !== 4 || typeof e.target !== 'string' || e.target.length === 0 || e.target.length > 4096 || e.target.includes('\0') || !num(e.mtimeMs) || !nat(e.ino)) return null;
      return e as unknown as ManifestEntry;
    case 'skipped':
      if (n !== 4 || !nat(e.size) || !num(e.mtimeMs) || e.reason !== 'too_large') return null;
      return e as unknown as ManifestEntry;
    case 'uncaptured':
      if (n !== (e.dir === undefined ? 2 : 3) || (e.dir !== undefined && e.dir !== true) || typeof e.code !== 'string' || !CODE.test(e.code)) return null;
      return e as unknown as ManifestEntry;
    default:
      return null;
  }
}

/** An empty, '.' or '..' segment anywhere in a '/'-separated key (a leading or trailing '/' makes an empty one), or a NUL or backslash. */
const BAD_KEY = /(?:^|\/)\.{0,2}(?:\/|$)|[\0\\]/;

/** A path key as a manifest holds it: relative, '/'-separated, no empty, '.' or '..' segment, no NUL or backslash (one regex: 50,000 splits were a tenth of the load). */
function keyOk(k: unknown): k is string {
  return typeof k === 'string' && k.length > 0 && k.length <= 4096 && !BAD_KEY.test(k);
}

/*
 * Body layout (all integers little-endian): u32 F, the number of file entries; u32 K,
 * the byte length of their keys; K bytes of keys (UTF-8, joined by NUL, which no key
 * holds); F × 32 bytes of content hashes; F × 4 float64 (size, mtimeMs, ino, flags:
 * 1 executable, 2 racy); then JSON [others, dirs]: the other entries (symlinks,
 * skipped, uncaptured: few) as [key, entry] pairs, and the directory listings as
 * [memo, ino, mtimeMs, ctimeMs, names joined by '/', one kind digit per name]. Columns,
 * not JSON objects: decoding 50,000 file entries from JSON took as long as reading the
 * manifest chain it replaces.
 */
const FLAG_EXEC = 1;
const FLAG_RACY = 2;

function encodeBody(manifest: Manifest, listings: ReadonlyMap<string, ListedDir>): Buffer {
  const keys: string[] = [];
  const files: FileEntry[] = [];
  const others: [string, ManifestEntry][] = [];
  for (const [k, e] of manifest) {
    if (e.type === 'file') {
      keys.push(k);
      files.push(e);
    } else others.push([k, e]);
  }
  const keyBytes = Buffer.from(keys.join('\0'), 'utf8');
  // One hex decode of all the hashes, not one call per entry.
  let hex = '';
  for (const e of files) hex += e.hash;
  const hashes = Buffer.from(hex, 'hex');
  if (hashes.length !== files.length * 32) throw new Error('a manifest entry has a malformed hash');
  const nums = new Float64Array(files.length * 4);
  files.forEach((e, i) => {
    nums[i * 4] = e.size;
    nums[i * 4 + 1] = e.mtimeMs;
    nums[i * 4 + 2] = e.ino;
    nums[i * 4 + 3] = (e.mode === 0o755 ? FLAG_EXEC : 0) | (e.racy ? FLAG_RACY : 0);
  });
  const head = Buffer.alloc(8);
  head.writeUInt32LE(files.length, 0);
  head.writeUInt32LE(keyBytes.length, 4);
  const dirs: [string, number, number, number, string, string][] = [];
  for (const [memo, d] of listings) {
    let kinds = '';
    for (const e of d.dirents) kinds += direntKind(e);
    dirs.push([memo, d.ino, d.mtimeMs, d.ctimeMs, d.dirents.map((e) => e.name).join('/'), kinds]);
  }
  return Buffer.concat([head, keyBytes, hashes, Buffer.from(nums.buffer), Buffer.from(JSON.stringify([others, dirs]), 'utf8')]);
}

/** The body's entries, or null when anything in it is not what encodeBody writes. */
function decodeBody(body: Buffer, entries: number, trustedBefore: number): { manifest: Manifest; racy: number; listings: Map<string, ListedDir> } | null {
  if (body.length < 8) return null;
  const nFiles = body.readUInt32LE(0);
  const keyLen = body.readUInt32LE(4);
  if (nFiles > entries) return null;
  const keysEnd = 8 + keyLen;
  const hashEnd = keysEnd + nFiles * 32;
  const numEnd = hashEnd + nFiles * 32;
  if (numEnd > body.length) return null;
  const keys = nFiles === 0 ? [] : body.toString('utf8', 8, keysEnd).split('\0');
  if (keys.length !== nFiles) return null;
  // Copied out: a Float64Array needs an 8-byte-aligned offset.
  const nums = new Float64Array(Uint8Array.prototype.slice.call(body, hashEnd, numEnd).buffer);
  const manifest: Manifest = new Map();
  let racy = 0;
  // One hex encode of the column; each entry's hash is a slice of it (cheap in V8), not a call per entry.
  const hex = body.toString('hex', keysEnd, hashEnd);
  for (let i = 0; i < nFiles; i++) {
    const k = keys[i]!;
    const size = nums[i * 4]!;
    const mtimeMs = nums[i * 4 + 1]!;
    const ino = nums[i * 4 + 2]!;
    const flags = nums[i * 4 + 3]!;
    if (!keyOk(k) || !nat(size) || !num(mtimeMs) || !nat(ino) || !Number.isInteger(flags) || flags < 0 || flags > 3) return null;
    const e: FileEntry = { type: 'file', hash: hex.slice(i * 64, i * 64 + 64), size, mode: flags & FLAG_EXEC ? 0o755 : 0o644, mtimeMs, ino };
    // Racy git: too close to the cache's write time for its stat to vouch for its content.
    if (flags & FLAG_RACY || mtimeMs >= trustedBefore) {
      e.racy = true;
      if (!(flags & FLAG_RACY)) racy++;
    }
    manifest.set(k, e);
  }
  // A key twice: the map is smaller than the column (checked once, not per entry).
  if (manifest.size !== nFiles) return null;
  let tail: unknown;
  try {
    tail = JSON.parse(body.toString('utf8', numEnd));
  } catch {
    return null;
  }
  if (!Array.isArray(tail) || tail.length !== 2) return null;
  const [others, dirs] = tail as unknown[];
  if (!Array.isArray(others) || !Array.isArray(dirs) || nFiles + others.length !== entries) return null;
  for (const p of others as unknown[]) {
    if (!Array.isArray(p) || p.length !== 2 || !keyOk(p[0]) || manifest.has(p[0])) return null;
    const e = entryOf(p[1]);
    if (e === null || e.type === 'file') return null;
    manifest.set(p[0], e);
  }
  const listings = new Map<string, ListedDir>();
  for (const d of dirs as unknown[]) {
    const listed = listedOf(d);
    if (listed === null || listings.has(listed[0])) return null;
    listings.set(listed[0], listed[1]);
  }
  return { manifest, racy, listings };
}

const KINDS = new RegExp(`^[0-${DIRENT_SYMLINK}]*$`);

/** One persisted listing, checked: a ListingCache key naming an absolute root and a safe relative directory, its stat, and safe, distinct names with a kind each. */
function listedOf(v: unknown): [string, ListedDir] | null {
  if (!Array.isArray(v) || v.length !== 6) return null;
  const [memo, ino, mtimeMs, ctimeMs, names, kinds] = v as unknown[];
  if (typeof memo !== 'string' || !nat(ino) || !num(mtimeMs) || !num(ctimeMs) || typeof names !== 'string' || typeof kinds !== 'string' || !KINDS.test(kinds)) return null;
  const cut = memo.indexOf('\0');
  if (cut <= 0 || !path.isAbsolute(memo.slice(0, cut))) return null;
  const relDir = memo.slice(cut + 1);
  if (relDir !== '' && !keyOk(relDir)) return null;
  const list = names === '' ? [] : names.split('/');
  if (list.length !== kinds.length || new Set(list).size !== list.length) return null;
  const dirents: DiskDirent[] = new Array(list.length);
  for (let i = 0; i < list.length; i++) {
    const name = list[i]!;
    // A backslash is a legal name on Linux (the walk reports it as unsafe): kept as listed.
    if (name === '' || name === '.' || name === '..' || name.includes('\0')) return null;
    dirents[i] = new DiskDirent(name, kinds.charCodeAt(i) - 48);
  }
  return [memo, { ino, mtimeMs, ctimeMs, dirents }];
}

/**
 * Reads the cache in `dir` for manifest `ref` of the workspace `identity`: the manifest,
 * its depth, and file entries too recent to trust marked racy. Anything else is a miss
 * (and the caller loads the manifest from the store).
 */
export function loadScanCache(dir: string, identity: string, ref: string): LoadedScanCache | ScanCacheMiss {
  let bytes: Buffer;
  try {
    bytes = fs.readFileSync(path.join(dir, SCAN_CACHE_FILE));
  } catch {
    return 'absent';
  }
  const nl = bytes.indexOf(0x0a);
  if (nl < 0 || nl > 4096) return 'damaged';
  let header: z.infer<typeof Header>;
  try {
    const raw: unknown = JSON.parse(bytes.subarray(0, nl).toString('utf8'));
    const format = typeof raw === 'object' && raw !== null ? (raw as { format?: unknown }).format : undefined;
    if (typeof format === 'string' && format !== FORMAT && OLD_FORMAT.test(format)) return 'old_format';
    const h = Header.safeParse(raw);
    if (!h.success) return 'damaged';
    header = h.data;
  } catch {
    return 'damaged';
  }
  if (header.identity !== identity) return 'other_workspace';
  if (header.ref !== ref) return 'other_ref';
  const body = bytes.subarray(nl + 1);
  if (createHash('sha256').update(body).digest('hex') !== header.sha256) return 'damaged';
  const decoded = decodeBody(body, header.entries, header.writtenAtMs - RACY_WINDOW_MS);
  if (!decoded) return 'damaged';
  return { manifest: decoded.manifest, depth: header.depth, racy: decoded.racy, verifiedAtMs: header.verifiedAtMs, listings: decoded.listings };
}

/**
 * Writes the cache for manifest `ref` (its `depth` since the last full manifest; the
 * scan that vouched for it began at `verifiedAtMs`), with the directory `listings` the
 * workspace's ListingCache holds, into `dir`: a temporary file,
 * 0600, renamed over the old one. A failure leaves the old cache or none (a later load
 * then misses); it is never half written under its name.
 */
export function saveScanCache(dir: string, identity: string, ref: string, depth: number, manifest: Manifest, verifiedAtMs: number, now = Date.now(), listings: ReadonlyMap<string, ListedDir> = new Map()): void {
  const body = encodeBody(manifest, listings);
  const header = { format: FORMAT, identity, ref, depth, writtenAtMs: now, verifiedAtMs: Math.min(verifiedAtMs, now), entries: manifest.size, sha256: createHash('sha256').update(body).digest('hex') } satisfies z.infer<typeof Header>;
  const file = path.join(dir, SCAN_CACHE_FILE);
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    const fd = fs.openSync(tmp, 'w', 0o600);
    try {
      fs.writeSync(fd, `${JSON.stringify(header)}\n`);
      fs.writeSync(fd, body);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, file);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw e;
  }
}

/** Removes the cache (after a capture that could not write it, so no older one outlives its manifest's successor unseen). */
export function dropScanCache(dir: string): void {
  fs.rmSync(path.join(dir, SCAN_CACHE_FILE), { force: true });
}
