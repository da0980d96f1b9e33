import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import { Engine } from '../../src/core/engine/engine';
import { isWaypointError } from '../../src/core/model/errors';
import { EventStore } from '../../src/core/store/eventStore';
import { RECORD_MAGIC, endOfData, listSegments } from '../../src/core/store/journal';
import { assertReadable, fuzzParams } from '../support/fuzz';
import { tmpDir } from '../support/tmp';
import { embeddedStore } from '../support/embedded';

/**
 * Random damage to the real files of a real store (journal segments and the
 * database), then a real open. Open must never crash: it either opens with every
 * acknowledged event that lies before the damage — and nothing that was never
 * written, byte for byte the same events — or refuses with a WaypointError
 * ('corrupt') that says what is wrong. A torn tail (the newest segment cut short)
 * must always open. A damaged database file with an intact journal loses nothing.
 */
interface Golden {
  dir: string;
  /** Every acknowledged event as the store holds it, by seq. */
  events: string[];
  /** Per segment file: each record's end offset and the highest seq in it (0 for the header). */
  records: Map<string, { end: number; last: number }[]>;
}

function recordsOf(file: string): { end: number; last: number }[] {
  const buf = fs.readFileSync(file);
  const out: { end: number; last: number }[] = [];
  let at = 0;
  while (at + 12 <= buf.length && buf.readUInt32LE(at) === RECORD_MAGIC) {
    const len = buf.readUInt32LE(at + 4);
    const p = JSON.parse(buf.toString('utf8', at + 12, at + 12 + len)) as { kind: string; events?: { seq: number }[] };
    at += 12 + len;
    out.push({ end: at, last: p.kind === 'batch' ? Math.max(...p.events!.map((e) => e.seq)) : 0 });
  }
  // After the records, only the zeros the writer preallocated (a crash leaves them).
  assert.equal(endOfData(buf, at), at, `${file} parses whole`);
  return out;
}

const eventLine = (e: { seq: number; type: string; key: string; taskId: string | null; data: unknown }) => JSON.stringify([e.seq, e.type, e.key, e.taskId, e.data]);

/** Drives a real engine (tasks, steps, failures, side effects), then drops it as a crash would. */
async function makeStore(root: string, exportMidway: boolean): Promise<Golden> {
  const ws = path.join(root, exportMidway ? 'ws-db' : 'ws-journal');
  fs.mkdirSync(ws, { recursive: true });
  const engine = await Engine.open({ workspace: ws, snapshots: false, store: { lock: { waitMs: 200 } } });
  for (let t = 0; t < 4; t++) {
    const { taskId } = await engine.startTask({ goal: `goal ${t} ${'é'.repeat(t)}`, plan: [{ id: 'a', title: 'A' }, { id: 'b', title: 'B', dependsOn: ['a'] }], retry: { backoffMs: 0 } });
    await engine.startStep({ taskId, stepId: 'a', inputs: { t } });
    await engine.failStep({ taskId, stepId: 'a', error: 'flaky', recoverable: true });
    await engine.startStep({ taskId, stepId: 'a' });
    await engine.beginSideEffect({ taskId, key: `fx-${t}`, kind: 'shell', description: 'run it' });
    if (t % 2) await engine.endSideEffect({ taskId, key: `fx-${t}`, ok: true, result: { code: 0 } });
    await engine.completeStep({ taskId, stepId: 'a', outputs: [t] });
    if (exportMidway && t === 1) await embeddedStore(engine).exportNow();
  }
  const events = (await engine.events()).map(eventLine);
  await embeddedStore(engine).simulateCrash();
  const dir = path.join(ws, '.waypoint');
  const records = new Map(listSegments(dir).map((f) => [path.basename(f), recordsOf(f)]));
  return { dir, events, records };
}

type Damage =
  | { kind: 'flip'; at: number[]; bits: number[] }
  | { kind: 'truncate'; at: number }
  | { kind: 'insert'; at: number; bytes: Uint8Array }
  | { kind: 'zero'; at: number; len: number }
  | { kind: 'duplicate'; record: number; to: number };

const damage: fc.Arbitrary<Damage> = fc.oneof(
  fc.record({ kind: fc.constant('flip' as const), at: fc.array(fc.nat(), { minLength: 1, maxLength: 4 }), bits: fc.array(fc.integer({ min: 0, max: 7 }), { minLength: 4, maxLength: 4 }) }),
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), bytes: fc.oneof(fc.uint8Array({ minLength: 1, maxLength: 64 }), fc.constant(magicBytes())) }),
  fc.record({ kind: fc.constant('zero' as const), at: fc.nat(), len: fc.integer({ min: 1, max: 4096 }) }),
  fc.record({ kind: fc.constant('duplicate' as const), record: fc.nat(), to: fc.nat() }),
);

function magicBytes(): Uint8Array {
  const b = Buffer.alloc(12);
  b.writeUInt32LE(RECORD_MAGIC, 0);
  b.writeUInt32LE(4, 4);
  return b;
}

function apply(buf: Buffer, d: Damage, recs: { end: number }[]): Buffer {
  // Damage lands among the records and the first of the zeros preallocated after them,
  // not mostly in those zeros (a live segment is mostly zeros when its writer is killed).
  const n = recs.length ? Math.min(buf.length, recs[recs.length - 1].end + 64) : buf.length;
  switch (d.kind) {
    case 'flip': {
      const out = Buffer.from(buf);
      d.at.forEach((a, i) => (out[a % n] ^= 1 << d.bits[i]));
      return out;
    }
    case 'truncate':
      return buf.subarray(0, d.at % n);
    case 'insert': {
      const at = d.at % (n + 1);
      return Buffer.concat([buf.subarray(0, at), Buffer.from(d.bytes), buf.subarray(at)]);
    }
    case 'zero': {
      const out = Buffer.from(buf);
      out.fill(0, d.at % n, Math.min(n, (d.at % n) + d.len));
      return out;
    }
    case 'duplicate': {
      const starts = [0, ...recs.map((r) => r.end)];
      const i = d.record % recs.length;
      const rec = buf.subarray(starts[i], recs[i].end);
      const to = starts[d.to % starts.length];
      return Buffer.concat([buf.subarray(0, to), rec, buf.subarray(to)]);
    }
  }
}

/** The first byte at which two buffers differ (the shorter length when one is a prefix of the other). */
function firstDifference(a: Buffer, b: Buffer): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

describe('fuzz: journal and database bytes (random damage to a real store, then open)', function () {
  this.timeout(300_000);
  let sandbox: ReturnType<typeof tmpDir>;
  const golden: Golden[] = [];

  before(async () => {
    sandbox = tmpDir('wp-fuzz-journal-');
    golden.push(await makeStore(sandbox.dir, false), await makeStore(sandbox.dir, true));
    assert.equal(golden[0].records.size, 1, 'journal-only store: one segment');
    assert.ok(fs.existsSync(path.join(golden[1].dir, 'waypoint.db')) && golden[1].records.size === 2, 'exported store: a database and two segments');
  });
  after(() => sandbox?.cleanup());

  let run = 0;
  function copyOf(g: Golden): string {
    const dir = path.join(sandbox.dir, `run-${run++}`, '.waypoint');
    fs.mkdirSync(dir, { recursive: true });
    for (const n of fs.readdirSync(g.dir)) if (n !== 'owner.lock') fs.copyFileSync(path.join(g.dir, n), path.join(dir, n));
    return dir;
  }

  async function openOrRefusal(dir: string): Promise<{ store: EventStore } | { error: Error }> {
    try {
      return { store: await EventStore.open({ dir, lock: { waitMs: 200 } }) };
    } catch (e) {
      return { error: e as Error };
    }
  }

  it('a damaged journal segment: opens with every event before the damage, or refuses as corrupt — never crashes', async () => {
    const stats = { opened: 0, refused: 0, dropped: 0 };
    await fc.assert(
      fc.asyncProperty(fc.nat(1), fc.nat(), damage, async (which, segPick, d) => {
        const g = golden[which];
        const names = [...g.records.keys()];
        const seg = names[segPick % names.length];
        const isLast = seg === names[names.length - 1];
        const dir = copyOf(g);
        const file = path.join(dir, seg);
        const original = fs.readFileSync(file);
        const damaged = apply(original, d, g.records.get(seg)!);
        fs.writeFileSync(file, damaged);
        const at = firstDifference(original, damaged);
        // Events in records wholly before the damage were acknowledged and must survive.
        const before = g.records.get(seg)!.filter((r) => r.end <= at || at < 0);
        const segBase = Number(/journal-(\d+)/.exec(seg)![1]);
        const mustKeep = at < 0 ? g.events.length : Math.max(segBase - 1, ...before.map((r) => r.last));
        const r = await openOrRefusal(dir);
        try {
          if ('error' in r) {
            stats.refused++;
            assert.ok(isWaypointError(r.error), `open threw a non-Waypoint error: ${r.error.stack}`);
            assert.equal(r.error.code, 'corrupt', r.error.message);
            assertReadable(r.error.message, 'corrupt journal refusal');
            assert.ok(!(isLast && d.kind === 'truncate'), `a torn tail of the newest segment must open, got: ${r.error.message}`);
            return;
          }
          stats.opened++;
          let got: string[];
          try {
            got = r.store.events().map(eventLine);
          } catch (e) {
            // A segment the database already covers holds only history (the projections are
            // in the database, so the store opens): damage there is reported on reading it.
            assert.ok(isWaypointError(e) && e.code === 'corrupt', `reading history threw a non-Waypoint error: ${(e as Error).stack}`);
            assertReadable(e.message, 'damaged history refusal');
            assert.match(e.message, /history is damaged: .*journal-\d+\.wal.*the current tasks, steps and checkpoints \(the database\) are intact/);
            assert.ok(!isLast, `the newest segment is replayed on open, so its damage is handled there: ${e.message}`);
            stats.refused++;
            return;
          }
          // Exactly a prefix of what was acknowledged: nothing altered, nothing invented.
          assert.deepEqual(got, g.events.slice(0, got.length), 'opened store holds a prefix of the acknowledged events, byte for byte');
          assert.ok(got.length >= mustKeep, `lost acknowledged events before the damage at byte ${at} of ${seg}: kept ${got.length}, needed ${mustKeep}`);
          if (got.length < g.events.length) stats.dropped++;
          // A record still intact after the damage was acknowledged: dropping it is loss, not a torn tail.
          const recs = g.records.get(seg)!;
          recs.forEach((rec, i) => {
            const start = i === 0 ? 0 : recs[i - 1].end;
            if (at < 0 || start < at || rec.last === 0) return;
            if (damaged.indexOf(original.subarray(start, rec.end), at) >= 0) {
              assert.ok(got.length >= rec.last, `dropped events up to ${rec.last} whose record is intact after the damage at byte ${at} of ${seg}`);
            }
          });
          const v = await r.store.verify();
          assert.ok(v.ok, `projections equal a rebuild: ${JSON.stringify(v.differences)}`);
          // The store is usable: a reopen after close sees the same events.
          await r.store.close();
          const again = await EventStore.open({ dir, lock: { waitMs: 200 } });
          assert.deepEqual((await again.events()).map(eventLine), got, 'reopen after repair sees the same events');
          await again.close();
        } finally {
          if ('store' in r && !r.store.isClosed) await r.store.close();
        }
      }),
      fuzzParams(100),
    );
    assert.ok(stats.opened > 10 && stats.refused > 5, `both outcomes exercised: ${JSON.stringify(stats)}`);
  });

  it('a damaged database file with an intact journal: opens with every acknowledged event', async () => {
    const g = golden[1];
    await fc.assert(
      fc.asyncProperty(damage.filter((d) => d.kind !== 'duplicate'), async (d) => {
        const dir = copyOf(g);
        const file = path.join(dir, 'waypoint.db');
        const original = fs.readFileSync(file);
        fs.writeFileSync(file, apply(original, d, []));
        const r = await openOrRefusal(dir);
        assert.ok('store' in r, `refused to open although the journal holds everything: ${'error' in r ? r.error.stack : ''}`);
        try {
          assert.deepEqual(r.store.events().map(eventLine), g.events);
          const v = await r.store.verify();
          assert.ok(v.ok, JSON.stringify(v.differences));
        } finally {
          await r.store.close();
        }
      }),
      fuzzParams(30),
    );
  });
});
