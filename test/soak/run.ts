// `npm run soak`: a long run of the real engine over a changing workspace, to show
// that memory levels off and to measure what the store costs on disk at the end.
//
//   npm run soak                                 200,000 events, 2,000 checkpoints
//   npm run soak -- --events=20000 --checkpoints=200   a quick look
//   npm run soak -- --fleet [--short]            the team store under a fleet (test/soak/fleet.ts)
//
// The workload is what an agent session does, only much longer: tasks with steps
// (a checkpoint when each starts and completes), file edits / additions / deletions
// between checkpoints, side effects announced and settled, lease heartbeats (the bulk
// of the events, as in a long-running task), and now and then a rollback to an
// earlier checkpoint of the task. Resident memory (RSS) and the JS heap are sampled
// after a forced GC (when node runs with --expose-gc, as the npm script does) at
// even intervals; the table and the slope of the last half against the first are
// printed at the end, with the store's sizes and its open time. sql.js keeps the
// whole database in memory (its file lives in Emscripten's in-memory file system,
// counted in `external`); the database holds the projections and only the events
// since its last export (older ones stay in the journal's segments, see
// eventStore.ts), so it saw-tooths between exports instead of growing with the
// history, and RSS must level off: the run fails if RSS still climbs over the last
// half (more than 1 MB per 10,000 events, under half of what the database alone added
// when it held the history; the export saw-tooth makes the slope noisy on a loaded
// machine), or if the history cannot be read back whole.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Engine } from '../../src/core/engine/engine';
import { EventStore } from '../../src/core/store/eventStore';
import { embeddedStore } from '../support/embedded';
import { parseFleetArgs, runFleet } from './fleet';

interface Args {
  events: number;
  checkpoints: number;
  files: number;
  samples: number;
  keep: boolean;
}

function parseArgs(argv: string[]): Args {
  const a: Args = { events: 200_000, checkpoints: 2_000, files: 300, samples: 20, keep: false };
  for (const arg of argv) {
    const m = /^--(events|checkpoints|files|samples)=(\d+)$/.exec(arg);
    if (m) a[m[1] as 'events' | 'checkpoints' | 'files' | 'samples'] = Number(m[2]);
    else if (arg === '--keep') a.keep = true;
    else throw new Error(`unknown argument ${arg}; use --events=N --checkpoints=N --files=N --samples=N --keep`);
  }
  return a;
}

/** A deterministic generator, so two runs do the same work. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const MB = 1024 * 1024;
const mb = (n: number) => (n / MB).toFixed(1);

function dirBytes(dir: string): number {
  let total = 0;
  if (!fs.existsSync(dir)) return 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    total += e.isDirectory() ? dirBytes(p) : fs.statSync(p).size;
  }
  return total;
}

interface Sample {
  s: number;
  events: number;
  checkpoints: number;
  rss: number;
  heap: number;
  external: number;
  dbBytes: number;
}

/** Least-squares slope of y over x. */
function slope(xs: number[], ys: number[]): number {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i] - mx) * (ys[i] - my);
    den += (xs[i] - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) process.stdout.write('(no --expose-gc: memory samples include uncollected garbage)\n');
  const ws = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'wp-soak-')));
  const random = rng(20261130);
  const pick = <T>(xs: T[]): T => xs[Math.floor(random() * xs.length)];
  const live: string[] = [];
  let nextFile = 0;
  const body = (name: string, gen: number) => `// ${name} generation ${gen}\n` + `export const value${gen} = ${JSON.stringify('x'.repeat(200 + Math.floor(random() * 1800)))};\n`.repeat(1 + Math.floor(random() * 4));
  const addFile = () => {
    const rel = path.join(`pkg${nextFile % 12}`, `mod${nextFile}.ts`);
    nextFile++;
    fs.mkdirSync(path.join(ws, path.dirname(rel)), { recursive: true });
    fs.writeFileSync(path.join(ws, rel), body(rel, 0));
    live.push(rel);
  };
  for (let i = 0; i < args.files; i++) addFile();
  let generation = 0;
  /** Between checkpoints: a few edits, sometimes a new file, sometimes a deleted one. */
  const changeWorkspace = () => {
    generation++;
    const edits = 1 + Math.floor(random() * 4);
    for (let i = 0; i < edits; i++) {
      const rel = pick(live);
      fs.writeFileSync(path.join(ws, rel), body(rel, generation));
    }
    if (random() < 0.3) addFile();
    if (random() < 0.2 && live.length > args.files / 2) {
      const i = Math.floor(random() * live.length);
      fs.rmSync(path.join(ws, live[i]), { force: true });
      live.splice(i, 1);
    }
  };

  const t0 = performance.now();
  const engine = await Engine.open({ workspace: ws, snapshots: { excludes: [] } });
  const store = embeddedStore(engine);
  const checkpointCount = () => Number(store.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM checkpoints')?.n ?? 0);
  const dbBytes = () => {
    const pages = Number(store.db.get<{ page_count: number }>('PRAGMA page_count')?.page_count ?? 0);
    const size = Number(store.db.get<{ page_size: number }>('PRAGMA page_size')?.page_size ?? 0);
    return pages * size;
  };
  const samples: Sample[] = [];
  const sample = () => {
    gc?.();
    const m = process.memoryUsage();
    samples.push({ s: (performance.now() - t0) / 1000, events: store.lastSeq, checkpoints: checkpointCount(), rss: m.rss, heap: m.heapUsed, external: m.external, dbBytes: dbBytes() });
  };
  sample();

  // Rounds: one step each (2 checkpoints), so the checkpoint target sets the count;
  // the heartbeat flood per round fills the event target.
  const checkpointsPerRound = 2;
  const rounds = Math.ceil(args.checkpoints / checkpointsPerRound);
  const roundsPerTask = 50;
  const sampleEvery = Math.max(1, Math.floor(rounds / args.samples));
  let taskId = '';
  let taskCheckpoints: string[] = [];
  let rollbacks = 0;
  let effects = 0;
  for (let r = 0; r < rounds; r++) {
    if (r % roundsPerTask === 0) {
      if (taskId) await engine.requestReview({ taskId, summary: 'soak round done' });
      const t = await engine.startTask({ goal: `soak task ${r / roundsPerTask}`, agent: 'soak' });
      taskId = t.taskId;
      taskCheckpoints = [t.baseCheckpointId];
    }
    changeWorkspace();
    const st = await engine.startStep({ taskId, title: `round ${r}` });
    changeWorkspace();
    if (r % 10 === 5) {
      // An external effect announced, run, and settled: write-ahead intent, then the outcome.
      const key = `deploy:${r}`;
      const b = await engine.beginSideEffect({ taskId, key, kind: 'shell', description: `deploy round ${r}`, args: { cmd: ['deploy', String(r)] } });
      if (b.decision !== 'proceed') throw new Error(`side effect ${key}: expected proceed, got ${b.decision}`);
      await engine.endSideEffect({ taskId, key, ok: r % 20 !== 5, result: { exit: 0 }, error: r % 20 === 5 ? 'exit 1' : undefined });
      effects++;
    }
    const done = await engine.completeStep({ taskId, stepId: st.stepId, summary: `round ${r}`, outputs: { round: r } });
    taskCheckpoints.push(st.checkpointId, done.checkpointId);
    if (r % 25 === 24) {
      // Roll back to an earlier checkpoint of this task; the live file list follows the disk.
      await engine.rollback({ taskId, checkpointId: pick(taskCheckpoints), reason: 'soak: undo a few rounds' });
      live.length = 0;
      for (const d of fs.readdirSync(ws)) if (d.startsWith('pkg')) for (const f of fs.readdirSync(path.join(ws, d))) live.push(path.join(d, f));
      rollbacks++;
    }
    // The bulk: lease heartbeats, concurrently, so they share fsyncs as a busy session's calls do.
    const remainingEvents = args.events - store.lastSeq;
    const flood = Math.max(0, Math.round(remainingEvents / (rounds - r)));
    for (let i = 0; i < flood; i += 250) {
      await Promise.all(Array.from({ length: Math.min(250, flood - i) }, () => engine.heartbeat({ taskId })));
    }
    if ((r + 1) % sampleEvery === 0 || r === rounds - 1) sample();
  }
  const runS = (performance.now() - t0) / 1000;
  const verify = await engine.verify();
  const finalEvents = store.lastSeq;
  const finalCheckpoints = checkpointCount();
  await engine.close();

  // Sizes on disk, then the open time of what we left.
  const dir = path.join(ws, '.waypoint');
  const files = fs.readdirSync(dir);
  const size = (f: string) => fs.statSync(path.join(dir, f)).size;
  const db = files.filter((f) => /^waypoint\.db(\.prev)?$/.test(f)).reduce((a, f) => a + size(f), 0);
  const journal = files.filter((f) => /\.wal$/.test(f)).reduce((a, f) => a + size(f), 0);
  const archive = dirBytes(path.join(dir, 'archive'));
  const blobs = dirBytes(path.join(dir, 'objects'));
  const opens: number[] = [];
  for (let i = 0; i < 3; i++) {
    const s = performance.now();
    const st = await EventStore.open({ dir });
    opens.push(performance.now() - s);
    if (st.lastSeq !== finalEvents) throw new Error(`reopened store has ${st.lastSeq} events, expected ${finalEvents}`);
    await st.close();
  }
  const history = await EventStore.open({ dir });
  const readStart = performance.now();
  const readBack = history.events().length;
  const readMs = performance.now() - readStart;
  await history.close();
  const engineOpenStart = performance.now();
  const reopened = await Engine.open({ workspace: ws });
  const engineOpenMs = performance.now() - engineOpenStart;
  await reopened.close();

  // The table.
  const out: string[] = [];
  out.push(`\n## soak: ${finalEvents.toLocaleString('en')} events, ${finalCheckpoints.toLocaleString('en')} checkpoints, ${rollbacks} rollbacks, ${effects} side effects in ${runS.toFixed(0)} s\n`);
  out.push('| time s | events | checkpoints | RSS MB | heap MB | external MB | sql.js DB MB | RSS − DB MB | external − DB MB |');
  out.push('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const s of samples) {
    out.push(`| ${s.s.toFixed(0)} | ${s.events} | ${s.checkpoints} | ${mb(s.rss)} | ${mb(s.heap)} | ${mb(s.external)} | ${mb(s.dbBytes)} | ${mb(s.rss - s.dbBytes)} | ${mb(s.external - s.dbBytes)} |`);
  }
  const half = Math.floor(samples.length / 2);
  const per10k = (key: (s: Sample) => number, part: Sample[]) => (slope(part.map((s) => s.events), part.map(key)) * 10_000) / MB;
  const first = samples.slice(1, half + 1); // skip the cold start sample
  const last = samples.slice(half);
  const row = (name: string, key: (s: Sample) => number) => `| ${name} | ${per10k(key, first).toFixed(2)} | ${per10k(key, last).toFixed(2)} |`;
  out.push('\nslope, MB per 10,000 events (least squares over the samples):\n');
  out.push('| measure | first half | last half |');
  out.push('| --- | ---: | ---: |');
  out.push(row('RSS', (s) => s.rss));
  out.push(row('JS heap used', (s) => s.heap));
  out.push(row('sql.js database', (s) => s.dbBytes));
  out.push(row('RSS − database', (s) => s.rss - s.dbBytes));
  out.push(row('external − database', (s) => s.external - s.dbBytes));
  out.push(row('RSS − external (native + wasm)', (s) => s.rss - s.external));
  out.push('\nat the end:\n');
  out.push('| measure | value |');
  out.push('| --- | ---: |');
  out.push(`| database files (waypoint.db + .prev) | ${mb(db)} MB |`);
  out.push(`| journal segments (live: back to the previous generation) | ${mb(journal)} MB |`);
  out.push(`| archive/ (older segments: the rest of the history) | ${mb(archive)} MB |`);
  out.push(`| blob store (objects/) | ${mb(blobs)} MB |`);
  out.push(`| workspace files at the end | ${live.length} |`);
  out.push(`| store open (EventStore.open), median of 3 | ${[...opens].sort((a, b) => a - b)[1].toFixed(0)} ms |`);
  out.push(`| engine open (store + recovery + sweep) | ${engineOpenMs.toFixed(0)} ms |`);
  out.push(`| every event read back (EventStore.events) | ${readBack === finalEvents ? 'yes' : `NO: ${readBack}`} (${readMs.toFixed(0)} ms) |`);
  out.push(`| projections equal a rebuild | ${verify.ok ? 'yes' : `NO: ${JSON.stringify(verify.differences)}`} |`);
  const rssLastHalf = per10k((x) => x.rss, last);
  const levels = rssLastHalf <= 1.0;
  out.push(`| RSS levels off (last-half slope ≤ 1 MB per 10,000 events) | ${levels ? 'yes' : 'NO'} (${rssLastHalf.toFixed(2)}) |`);
  process.stdout.write(out.join('\n') + '\n');
  if (!args.keep) fs.rmSync(ws, { recursive: true, force: true });
  else process.stdout.write(`\nkept the workspace at ${ws}\n`);
  if (!verify.ok || readBack !== finalEvents || !levels) process.exitCode = 1;
}

if (process.argv.includes('--fleet')) {
  // The team store under a fleet: its own module (test/soak/fleet.ts).
  runFleet(parseFleetArgs(process.argv.slice(2)))
    .then((r) => process.exit(r.ok ? 0 : 1))
    .catch((e) => {
      console.error(e);
      process.exit(1);
    });
} else {
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
