import * as fs from 'node:fs';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { EventStore, type NewEvent } from '../../src/core/store/eventStore';
import { benchDir, fmtMs, median, percentile, printTable, type Row } from './util';

/**
 * Store benchmarks, each measured side by side in one run:
 *  - durable append throughput and latency vs better-sqlite3 (WAL, synchronous=FULL,
 *    one transaction per event, the same payloads);
 *  - opening a store of 100k events (database + the journal tail it lacks);
 *  - export time against database size.
 */

function payload(i: number): NewEvent {
  return {
    type: 'step.completed',
    taskId: `t_${i % 50}`,
    corr: '6f1c2d8e-0b7a-4c55-9d0e-3a2b1c0d9e8f',
    key: `bench-${i}-${Math.random().toString(36).slice(2)}`,
    by: 'bench',
    data: { stepId: `s${i % 7}`, outputs: { files: ['src/a.ts', 'src/b.ts'], tests: 12, note: 'x'.repeat(120) }, summary: 'edited two files and ran the tests' },
  };
}

async function waypointAppend(n: number, concurrency: number): Promise<{ opsPerSec: number; lat: number[] }> {
  const b = benchDir('wp-bench-append-');
  const store = await EventStore.open({ dir: path.join(b.dir, '.waypoint') });
  const lat: number[] = [];
  const t0 = performance.now();
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      const s = performance.now();
      await store.commit([payload(i)]).durable;
      lat.push(performance.now() - s);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const ms = performance.now() - t0;
  await store.close();
  b.cleanup();
  return { opsPerSec: (n / ms) * 1000, lat };
}

function sqliteAppend(n: number): { opsPerSec: number; lat: number[] } {
  const b = benchDir('wp-bench-sqlite-');
  const db = new Database(path.join(b.dir, 'bench.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec('CREATE TABLE events (seq INTEGER PRIMARY KEY, ts INTEGER, type TEXT, task_id TEXT, corr TEXT, key TEXT UNIQUE, by TEXT, data TEXT)');
  const ins = db.prepare('INSERT INTO events (ts, type, task_id, corr, key, by, data) VALUES (?,?,?,?,?,?,?)');
  const tx = db.transaction((e: NewEvent) => ins.run(Date.now(), e.type, e.taskId, e.corr, e.key, e.by, JSON.stringify(e.data)));
  const lat: number[] = [];
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const s = performance.now();
    tx(payload(i));
    lat.push(performance.now() - s);
  }
  const ms = performance.now() - t0;
  db.close();
  b.cleanup();
  return { opsPerSec: (n / ms) * 1000, lat };
}

async function buildStore(dir: string, events: number, tail: number): Promise<void> {
  // Big threshold while building so the tail we leave is exactly `tail` events.
  const store = await EventStore.open({ dir, exportThresholdBytes: 1 << 30 });
  const batch = 500;
  for (let i = 0; i < events - tail; i += batch) {
    await Promise.all(Array.from({ length: Math.min(batch, events - tail - i) }, (_, k) => store.commit([payload(i + k)]).durable));
  }
  await store.exportNow();
  for (let i = events - tail; i < events; i += batch) {
    await Promise.all(Array.from({ length: Math.min(batch, events - i) }, (_, k) => store.commit([payload(i + k)]).durable));
  }
  await store.simulateCrash(); // leave the tail in the journal, as a crash before the next export would
}

async function timeOpen(dir: string, runs: number): Promise<{ ms: number; replayed: number }> {
  const times: number[] = [];
  let replayed = 0;
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    const s = await EventStore.open({ dir });
    times.push(performance.now() - t0);
    replayed = s.report.replayed;
    await s.simulateCrash();
  }
  return { ms: median(times), replayed };
}

/** Median time of an atomic export (write temp, fsync, rename) of the store in `dir`. */
async function exportRow(dir: string): Promise<Row> {
  const s = await EventStore.open({ dir });
  const dbBytes = fs.statSync(path.join(dir, 'waypoint.db')).size;
  const ex: number[] = [];
  for (let r = 0; r < 3; r++) {
    s.commit([payload(r)]);
    const t0 = performance.now();
    await s.exportNow();
    ex.push(performance.now() - t0);
  }
  await s.close();
  return { measure: `export (atomic, fsync) of ${(dbBytes / 1e6).toFixed(1)} MB`, waypoint: fmtMs(median(ex)), baseline: '-', ratio: '-', target: '(info)', ok: null };
}

export async function main(opts: { quick?: boolean } = {}): Promise<Row[]> {
  const N = opts.quick ? 300 : 2000;
  const rows: Row[] = [];
  // Warm up sql.js and the file system once so neither side pays for first use.
  await waypointAppend(50, 1);
  sqliteAppend(50);

  const runs = 3;
  const seq = [];
  const grp = [];
  const lite = [];
  for (let r = 0; r < runs; r++) {
    seq.push(await waypointAppend(N, 1));
    lite.push(sqliteAppend(N));
    grp.push(await waypointAppend(N, 16));
  }
  const thr = (xs: { opsPerSec: number }[]) => median(xs.map((x) => x.opsPerSec));
  const lat = (xs: { lat: number[] }[], p: number) => median(xs.map((x) => percentile(x.lat, p)));
  const liteThr = thr(lite);
  // Agents call one at a time: this is the figure a hook or an MCP call meets (#38).
  rows.push({ measure: 'durable appends/s, 1 in flight', waypoint: thr(seq).toFixed(0), baseline: liteThr.toFixed(0), ratio: `${(thr(seq) / liteThr).toFixed(2)}×`, target: '≥ 1.0×', ok: thr(seq) >= liteThr });
  rows.push({
    measure: 'durable appends/s, 16 in flight (group commit)',
    waypoint: thr(grp).toFixed(0),
    baseline: liteThr.toFixed(0),
    ratio: `${(thr(grp) / liteThr).toFixed(2)}×`,
    target: '≥ 1.0×',
    ok: thr(grp) / liteThr >= 1.0,
  });
  rows.push({ measure: 'append latency p50, 1 in flight', waypoint: fmtMs(lat(seq, 50)), baseline: fmtMs(lat(lite, 50)), ratio: `${(lat(seq, 50) / lat(lite, 50)).toFixed(2)}×`, target: '(info)', ok: null });
  rows.push({ measure: 'append latency p99, 1 in flight', waypoint: fmtMs(lat(seq, 99)), baseline: fmtMs(lat(lite, 99)), ratio: `${(lat(seq, 99) / lat(lite, 99)).toFixed(2)}×`, target: '≤ 5 ms', ok: lat(seq, 99) <= 5 });
  rows.push({ measure: 'append latency p99, 16 in flight', waypoint: fmtMs(lat(grp, 99)), baseline: '-', ratio: '-', target: '(info)', ok: null });

  const EVENTS = opts.quick ? 10_000 : 100_000;
  const b = benchDir('wp-bench-open-');
  try {
    const dir = path.join(b.dir, '.waypoint');
    // The tail a crash leaves: at most the export threshold's worth (8 MiB ≈ 20k such events); use 5%.
    await buildStore(dir, EVENTS, EVENTS / 20);
    const dbBytes = fs.statSync(path.join(dir, 'waypoint.db')).size;
    const open = await timeOpen(dir, 3);
    rows.push({
      measure: `open ${EVENTS / 1000}k-event store (db ${(dbBytes / 1e6).toFixed(1)} MB + replay ${open.replayed})`,
      waypoint: fmtMs(open.ms),
      baseline: '-',
      ratio: '-',
      target: '≤ 300 ms',
      ok: open.ms <= 300,
    });
    // The history stays whole: every event is read back from the journal's segments.
    const s = await EventStore.open({ dir });
    const t0 = performance.now();
    const all = s.events().length;
    const readMs = performance.now() - t0;
    await s.close();
    if (all !== EVENTS) throw new Error(`read back ${all} events, expected ${EVENTS}`);
    rows.push({ measure: `read all ${EVENTS / 1000}k events back (segments + table)`, waypoint: fmtMs(readMs), baseline: '-', ratio: '-', target: '(info)', ok: null });
    rows.push(await exportRow(dir));
  } finally {
    b.cleanup();
  }
  const b2 = benchDir('wp-bench-open-');
  try {
    const dir = path.join(b2.dir, '.waypoint');
    await buildStore(dir, EVENTS / 10, 0);
    rows.push(await exportRow(dir));
  } finally {
    b2.cleanup();
  }
  printTable('Event store (baseline: better-sqlite3, WAL, synchronous=FULL, one transaction per event)', rows);
  return rows;
}

if (require.main === module) void main({ quick: process.argv.includes('--quick') });
