/**
 * Snapshot benchmark: Waypoint's scanner + blob store + manifests side by side with
 * the shadow-git method other agent tools use (`git --git-dir=SHADOW --work-tree=WS
 * add -A && git commit`), on a workspace of >= 7,000 real source files and >= 90 MB
 * copied from installed packages in node_modules.
 *
 *   node --import tsx test/bench/snapshot.bench.ts
 *
 * The machine is shared and small, so every figure is a median of several runs and
 * the targets are ratios measured in the same run; dirty pages are flushed (untimed)
 * before each measured operation so no side pays for the other's writeback, and git
 * and sync run from a helper process, so this process (where Waypoint's side runs)
 * never forks between measurements (see spawner.ts). Waypoint's checkpoint figures are
 * scan + ManifestStore.save, i.e. including the fsync barrier that makes blobs and
 * manifest durable; git (as used by those tools) does not fsync loose objects. As in
 * the engine, a first checkpoint stores new content raw and it is compressed after
 * (BlobStore.compact): that compaction is timed and printed on its own, run before the
 * next phase so it competes with nothing measured, and storage is measured after it.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Spawner } from './spawner.js';
import { BlobStore, ListingCache, ManifestStore, applyRestore, planRestore, scan, type Manifest, type SnapshotRoot } from '../../src/core/snapshot/index.js';

const MIN_FILES = 7000;
const MIN_BYTES = 90 * 1024 * 1024;
/** Below the scanner's 5 MB default so both sides store exactly the same files. */
const MAX_SOURCE_BYTES = 4 * 1024 * 1024;
const SOURCE_EXT = /\.(js|cjs|mjs|ts|mts|cts|tsx|jsx|json|md|markdown|txt|c|h|cc|cpp|hpp|py|yml|yaml|css|html|map|sh|gyp|gypi)$/i;

export interface BenchFigure {
  name: string;
  waypointMs: number;
  gitMs: number;
  ratio: number;
  target: number;
  ok: boolean;
}

export interface BenchResult {
  files: number;
  bytes: number;
  figures: BenchFigure[];
  nothingChangedMs: number;
  /** Medians of the fsync barrier inside the checkpoint figures (and the pre_rollback scan). */
  barrierMs: { first: number; hint: number; full: number; preRollbackScan: number };
  /** Median time of the compaction that compresses what the first checkpoint stored raw (background in the engine; not in any figure), and the bytes before and after. */
  compaction: { ms: number; bytesBefore: number; bytesAfter: number };
  storage: { waypointBytes: number; gitLooseBytes: number; gitGcBytes: number; ratioLoose: number; ratioGc: number };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

async function time<T>(fn: () => Promise<T> | T): Promise<[number, T]> {
  const t = performance.now();
  const v = await fn();
  return [performance.now() - t, v];
}

async function listSources(dir: string, out: { abs: string; rel: string; size: number }[], rel = ''): Promise<void> {
  for (const d of await fs.readdir(dir, { withFileTypes: true })) {
    const abs = path.join(dir, d.name);
    const r = rel ? `${rel}/${d.name}` : d.name;
    if (d.isDirectory()) await listSources(abs, out, r);
    else if (d.isFile() && SOURCE_EXT.test(d.name)) {
      const size = (await fs.stat(abs)).size;
      if (size <= MAX_SOURCE_BYTES) out.push({ abs, rel: r, size });
    }
  }
}

/** Copies node_modules sources into `ws`, in as many copies as needed; each copy gets a distinct first line so contents differ (no free dedup for either side). */
export async function buildWorkspace(ws: string, nodeModules: string): Promise<{ files: string[]; bytes: number }> {
  const sources: { abs: string; rel: string; size: number }[] = [];
  await listSources(nodeModules, sources);
  sources.sort((a, b) => (a.rel < b.rel ? -1 : 1));
  if (sources.length === 0) throw new Error(`no sources under ${nodeModules}`);
  const files: string[] = [];
  let bytes = 0;
  for (let copy = 0; files.length < MIN_FILES || bytes < MIN_BYTES; copy++) {
    for (const s of sources) {
      if (files.length >= MIN_FILES && bytes >= MIN_BYTES) break;
      const rel = `copy${copy}/${s.rel}`;
      const dest = path.join(ws, rel);
      await fs.mkdir(path.dirname(dest), { recursive: true });
      const content = Buffer.concat([Buffer.from(copy === 0 ? '' : `/* bench copy ${copy} */\n`), await fs.readFile(s.abs)]);
      await fs.writeFile(dest, content);
      files.push(rel);
      bytes += content.length;
    }
  }
  // Old mtimes: the workspace was "there before the task", as in real use.
  const old = new Date(Date.now() - 3600_000);
  for (const f of files) await fs.utimes(path.join(ws, f), old, old);
  return { files, bytes };
}

async function dirBytes(dir: string): Promise<number> {
  let total = 0;
  for (const d of await fs.readdir(dir, { withFileTypes: true })) {
    const abs = path.join(dir, d.name);
    if (d.isDirectory()) total += await dirBytes(abs);
    else if (d.isFile()) total += (await fs.stat(abs)).size;
  }
  return total;
}

/** Commands run from a helper process (see spawner.ts): this process never forks between measurements. */
let spawner: Spawner;

/**
 * Flushes dirty pages (not timed) before each measured operation, so neither side
 * is charged for the writeback of whatever ran just before it (git's commit, our
 * previous checkpoint, the edits). Both sides get the same treatment.
 */
async function settle(): Promise<void> {
  if (process.platform !== 'win32') await spawner.run('sync', []);
}

/** Runs git on the shadow repository; `ms` is the command's own time. */
async function git(shadow: string, ws: string, ...args: string[]): Promise<{ ms: number; out: string }> {
  return spawner.run('git', ['--git-dir', shadow, '--work-tree', ws, '-c', 'user.name=bench', '-c', 'user.email=bench@example.invalid', '-c', 'core.hooksPath=/dev/null', '-c', 'gc.auto=0', '-c', 'commit.gpgSign=false', ...args]);
}

/** The shadow-git checkpoint: `add -A` then `commit`; the sum of their times. */
async function gitSnapshot(shadow: string, ws: string): Promise<number> {
  const add = await git(shadow, ws, 'add', '-A');
  const commit = await git(shadow, ws, 'commit', '-q', '--allow-empty', '-m', 'x');
  return add.ms + commit.ms;
}

/** Deterministic pick of `n` distinct files for run `seed`. */
function pick(files: string[], n: number, seed: number): string[] {
  const scored = files.map((f) => [createHash('sha1').update(`${seed}:${f}`).digest().readUInt32BE(0), f] as const);
  return scored.sort((a, b) => a[0] - b[0]).slice(0, n).map(([, f]) => f);
}

async function edit(ws: string, files: string[], tag: string): Promise<void> {
  for (const f of files) await fs.appendFile(path.join(ws, f), `\n// edit ${tag}\n`);
}

export async function main(opts: { runs?: number; firstRuns?: number; keep?: boolean } = {}): Promise<BenchResult> {
  // 7: the first two rescans of a process are slower (JIT and worker warm-up, visible in the per-run log); the median is of steady runs.
  const runs = opts.runs ?? 7;
  const firstRuns = opts.firstRuns ?? 3;
  const base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'wp-bench-')));
  const ws = path.join(base, 'ws');
  await fs.mkdir(ws);
  const log = (s: string) => process.stderr.write(`[bench] ${s}\n`);
  spawner = new Spawner();
  try {
    const nodeModules = path.resolve(__dirname, '../../node_modules');
    const { files, bytes } = await buildWorkspace(ws, nodeModules);
    log(`workspace: ${files.length} files, ${(bytes / 1048576).toFixed(1)} MB`);
    const roots: SnapshotRoot[] = [{ name: 'ws', dir: ws }];

    // --- First checkpoint ---
    const wpFirst: number[] = [];
    // Time spent in the durability barrier (blob flush / manifest save, i.e. fsyncs).
    const barrier = { first: [] as number[], hint: [] as number[], full: [] as number[] };
    const gitFirst: number[] = [];
    const compactMs: number[] = [];
    let compacted = { bytesBefore: 0, bytesAfter: 0 };
    let store!: BlobStore;
    let manifests!: ManifestStore;
    let first!: Manifest;
    let firstRef = '';
    let shadow = '';
    // What the engine keeps between scans of one workspace (WorkspaceSnapshots): the
    // full-rescan side reuses the listings its first checkpoint took.
    let listings = new ListingCache();
    for (let i = 0; i < firstRuns; i++) {
      listings = new ListingCache();
      const sdir = path.join(base, `shadow${i}`);
      await git(sdir, ws, 'init', '-q');
      await settle();
      const g = await gitSnapshot(sdir, ws);
      await settle();
      gitFirst.push(g);
      const odir = path.join(base, `wp${i}`, 'objects');
      const s = new BlobStore(odir, { durability: 'deferred' });
      const ms = new ManifestStore(s);
      // As WorkspaceSnapshots.capture does: one durability barrier (in save) for the new
      // blobs and the manifest; new content stored raw, compressed right after.
      const [w, res] = await time(async () => {
        const r = await scan({ roots, blobs: s, flush: false, listings, deferCompression: true });
        const [b, ref] = await time(() => ms.save(r.manifest, null, undefined, undefined, { adopt: true, deferCompression: r.stats.filesReadOnWorkers > 0, keysChecked: true }));
        return { r, b, ref };
      });
      wpFirst.push(w);
      barrier.first.push(res.b);
      // The engine compresses in the background once the checkpoint is durable; here it
      // runs on its own (untimed in the figure) so it competes with nothing measured.
      const rawBytes = await dirBytes(odir);
      await settle();
      const names = new Map([...res.r.manifest].flatMap(([p, e]) => (e.type === 'file' ? [[e.hash, p] as const] : [])));
      const [c, cr] = await time(() => s.compact({ nameOf: (h) => names.get(h) }));
      compactMs.push(c);
      compacted = { bytesBefore: rawBytes, bytesAfter: await dirBytes(odir) };
      log(`first checkpoint run ${i + 1}: waypoint ${w.toFixed(0)} ms (${res.r.stats.filesHashed} hashed, ${res.r.stats.filesReadOnWorkers} on worker threads), git ${g.toFixed(0)} ms; then compaction ${c.toFixed(0)} ms (${cr.objects} objects, ${(rawBytes / 1048576).toFixed(1)} -> ${(compacted.bytesAfter / 1048576).toFixed(1)} MB)`);
      if (i < firstRuns - 1) {
        await fs.rm(sdir, { recursive: true, force: true });
        await fs.rm(path.dirname(odir), { recursive: true, force: true });
      } else {
        store = s;
        manifests = ms;
        first = res.r.manifest;
        firstRef = res.ref;
        shadow = sdir;
      }
    }

    // --- 10 files changed: dirty hint and full rescan (separate stores, so neither sees the other's blobs) ---
    const fullDir = path.join(base, 'wpfull', 'objects');
    await fs.cp(store.dir, fullDir, { recursive: true });
    const fullStore = new BlobStore(fullDir, { durability: 'deferred' });
    const fullManifests = new ManifestStore(fullStore);
    // The engine's store has the checkpoint it just saved in its cache (as `manifests` has
    // for the hint side); this copy's store loads it now, untimed, instead of in run 1.
    await fullManifests.load(firstRef);
    let hintPrev = first;
    let hintRef = firstRef;
    let fullPrev = first;
    let fullRef = firstRef;
    const gitTen: number[] = [];
    const wpHint: number[] = [];
    const wpFull: number[] = [];
    for (let i = 0; i < runs; i++) {
      const changed = pick(files, 10, i);
      await edit(ws, changed, `ten-${i}`);
      await settle();
      const g = await gitSnapshot(shadow, ws);
      await settle();
      const [h, hr] = await time(async () => {
        const r = await scan({ roots, blobs: store, previous: hintPrev, dirty: changed, flush: false });
        // As WorkspaceSnapshots.capture does: the scan's previous is the parent, so only its touched keys can differ.
        const [sv, ref] = await time(() => manifests.save(r.manifest, hintRef, undefined, r.touched ?? undefined, { adopt: true, keysChecked: true }));
        return { r, sv, ref };
      });
      await settle();
      const [f, fr] = await time(async () => {
        const r = await scan({ roots, blobs: fullStore, previous: fullPrev, flush: false, listings });
        // As capture does: when the scan's previous is the parent, only its touched keys (if it reports them) can differ.
        const [sv, ref] = await time(() => fullManifests.save(r.manifest, fullRef, undefined, r.touched ?? undefined, { adopt: true, keysChecked: true }));
        return { r, sv, ref };
      });
      barrier.hint.push(hr.sv);
      barrier.full.push(fr.sv);
      if (hr.r.changed.modified !== 10 || fr.r.changed.modified !== 10) throw new Error(`expected 10 modified, got ${hr.r.changed.modified} / ${fr.r.changed.modified}`);
      [hintPrev, hintRef, fullPrev, fullRef] = [hr.r.manifest, hr.ref, fr.r.manifest, fr.ref];
      gitTen.push(g);
      wpHint.push(h);
      wpFull.push(f);
      log(`10 changed run ${i + 1}: hint ${h.toFixed(1)} ms, full rescan ${f.toFixed(1)} ms (scan ${fr.r.stats.ms.toFixed(1)} ms, ${fr.r.stats.filesHashed} hashed, ${fr.r.stats.dirsFromCache} of ${fr.r.stats.dirsFromCache + fr.r.stats.dirsListed} directories from the listing cache), git ${g.toFixed(0)} ms`);
    }

    // --- Nothing changed, with the hint (scan only: an unchanged workspace needs no new checkpoint) ---
    const nothing: number[] = [];
    for (let i = 0; i < runs * 4; i++) {
      const [n, r] = await time(() => scan({ roots, blobs: store, previous: hintPrev, dirty: [] }));
      if (r.changed.changes.length !== 0) throw new Error('nothing-changed scan reported changes');
      nothing.push(n);
    }

    // --- Storage after the same history on both sides ---
    const waypointBytes = await dirBytes(store.dir);
    const gitLooseBytes = await dirBytes(path.join(shadow, 'objects'));

    // --- Rollback of 100 changed files ---
    const gitRb: number[] = [];
    const wpRb: number[] = [];
    const wpPre: number[] = [];
    for (let i = 0; i < runs; i++) {
      const changed = pick(files, 100, 1000 + i);
      await edit(ws, changed, `rb-git-${i}`);
      await settle();
      const { ms: g } = await git(shadow, ws, 'checkout', 'HEAD', '--', ...changed);
      await edit(ws, changed, `rb-wp-${i}`);
      await settle();
      // The engine takes a pre_rollback checkpoint first; timed separately.
      const [p, cur] = await time(() => scan({ roots, blobs: store, previous: hintPrev, dirty: changed }));
      await settle();
      const [w, res] = await time(async () => applyRestore(planRestore(cur.manifest, hintPrev, { isHeld: () => true }), roots, store));
      if (res.written.length !== 100 || res.conflicts.length) throw new Error(`rollback wrote ${res.written.length}, conflicts ${res.conflicts.length}`);
      gitRb.push(g);
      wpRb.push(w);
      wpPre.push(p);
      log(`rollback 100 run ${i + 1}: waypoint ${w.toFixed(1)} ms (+ pre_rollback scan ${p.toFixed(1)} ms), git checkout ${g.toFixed(1)} ms`);
      // Put the workspace back into the state both sides last recorded.
      hintPrev = (await scan({ roots, blobs: store, previous: hintPrev, dirty: changed })).manifest;
    }

    await git(shadow, ws, 'gc', '-q');
    const gitGcBytes = await dirBytes(path.join(shadow, 'objects'));

    const fig = (name: string, w: number[], g: number[], target: number): BenchFigure => {
      const wm = median(w);
      const gm = median(g);
      return { name, waypointMs: wm, gitMs: gm, ratio: wm / gm, target, ok: wm / gm <= target };
    };
    const result: BenchResult = {
      files: files.length,
      bytes,
      figures: [
        fig('first checkpoint', wpFirst, gitFirst, 1 / 4),
        fig('10 changed, dirty hint', wpHint, gitTen, 1 / 10),
        fig('10 changed, full rescan', wpFull, gitTen, 1 / 2),
        fig('rollback 100 files', wpRb, gitRb, 1 / 3),
        fig('rollback 100 incl. pre_rollback scan', wpRb.map((x, i) => x + wpPre[i]!), gitRb, 1 / 3),
      ],
      nothingChangedMs: median(nothing),
      barrierMs: { first: median(barrier.first), hint: median(barrier.hint), full: median(barrier.full), preRollbackScan: median(wpPre) },
      compaction: { ms: median(compactMs), ...compacted },
      storage: { waypointBytes, gitLooseBytes, gitGcBytes, ratioLoose: waypointBytes / gitLooseBytes, ratioGc: waypointBytes / gitGcBytes },
    };
    print(result, runs, firstRuns);
    return result;
  } finally {
    spawner.close();
    if (!opts.keep) await fs.rm(base, { recursive: true, force: true });
  }
}

function print(r: BenchResult, runs: number, firstRuns: number): void {
  const rows: string[][] = [['figure', 'waypoint', 'shadow git', 'ratio', 'target', '']];
  for (const f of r.figures) {
    rows.push([f.name, `${f.waypointMs.toFixed(1)} ms`, `${f.gitMs.toFixed(1)} ms`, f.ratio.toFixed(3), `≤ ${f.target.toFixed(3)}`, f.ok ? 'ok' : 'MISSED']);
  }
  rows.push(['nothing changed, dirty hint', `${r.nothingChangedMs.toFixed(2)} ms`, '', '', '≤ 5 ms', r.nothingChangedMs <= 5 ? 'ok' : 'MISSED']);
  const mb = (b: number) => `${(b / 1048576).toFixed(1)} MB`;
  rows.push(['storage vs git loose objects', mb(r.storage.waypointBytes), mb(r.storage.gitLooseBytes), r.storage.ratioLoose.toFixed(3), '≤ 1.000', r.storage.ratioLoose <= 1 ? 'ok' : 'MISSED']);
  rows.push(['storage vs git after gc', mb(r.storage.waypointBytes), mb(r.storage.gitGcBytes), r.storage.ratioGc.toFixed(3), '≤ 1.000', r.storage.ratioGc <= 1 ? 'ok' : 'MISSED']);
  rows.push(['of which manifest save + fsync barrier: first', `${r.barrierMs.first.toFixed(1)} ms`, '', '', '', '']);
  rows.push(['compaction after the first checkpoint (background)', `${r.compaction.ms.toFixed(0)} ms`, '', '', '', `${mb(r.compaction.bytesBefore)} -> ${mb(r.compaction.bytesAfter)}`]);
  rows.push(['of which barrier + save: hint / full', `${r.barrierMs.hint.toFixed(1)} / ${r.barrierMs.full.toFixed(1)} ms`, '', '', '', '']);
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  console.log(`\nsnapshot bench: ${r.files} files, ${(r.bytes / 1048576).toFixed(1)} MB; medians of ${runs} runs (${firstRuns} for the first checkpoint); ${os.cpus().length} cores`);
  for (const row of rows) console.log(row.map((c, i) => c.padEnd(widths[i]!)).join('  '));
}

if (require.main === module) {
  main({ keep: process.env.WAYPOINT_BENCH_KEEP === '1' }).catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
