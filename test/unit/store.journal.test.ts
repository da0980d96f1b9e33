import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { EventStore } from '../../src/core/store/eventStore';
import { Db } from '../../src/core/store/db';
import { ARCHIVE_DIR, encodeRecord, endOfData, listSegments, segmentName } from '../../src/core/store/journal';
import { loadSqlJs } from '../../src/core/store/sqlite';
import { WaypointError } from '../../src/core/model/errors';
import { started, tmpDir } from '../support/tmp';

/**
 * The journal's preallocated segments: the writer fills the live segment with zeros
 * ahead of its records (so an append's fdatasync flushes data, not the file's size),
 * a killed writer leaves those zeros behind, and every reader takes them for free
 * space — never for a torn write, never for damage, never as a place records were lost.
 */
async function append(store: EventStore, from: number, n: number): Promise<void> {
  for (let i = from; i < from + n; i++) await store.commit([started(i)]).durable;
}

/** The bytes of records in a segment: everything before the zeros after them. */
const recordBytes = (file: string): number => endOfData(fs.readFileSync(file), 0);

describe('journal: preallocated segments', () => {
  let t: ReturnType<typeof tmpDir>;
  let dir: string;
  beforeEach(() => {
    t = tmpDir('wp-prealloc-');
    dir = path.join(t.dir, '.waypoint');
  });
  afterEach(() => t.cleanup());

  it('appends into zeros written ahead: the file does not grow with each append', async () => {
    const s = await EventStore.open({ dir });
    const seg = listSegments(dir).at(-1)!;
    await append(s, 1, 1);
    const size = fs.statSync(seg).size;
    assert.ok(size > recordBytes(seg) + 16 * 1024, `zeros ahead of the records: ${size} bytes, ${recordBytes(seg)} of records`);
    await append(s, 2, 20);
    assert.equal(fs.statSync(seg).size, size, 'twenty more appends went into the zeros');
    await s.simulateCrash();
  });

  it('a killed writer leaves zeros after its records: reopen drops nothing, calls nothing torn, and appends after the last record', async () => {
    let s = await EventStore.open({ dir });
    await append(s, 1, 10);
    await s.simulateCrash();
    const seg = listSegments(dir).at(-1)!;
    assert.ok(fs.statSync(seg).size > recordBytes(seg), 'the zeros are still there, as after a kill');
    s = await EventStore.open({ dir });
    assert.equal(s.lastSeq, 10);
    assert.equal(s.report.replayed, 10);
    assert.equal(s.report.droppedTornBytes, 0, 'preallocated zeros are not a torn write');
    assert.deepEqual(s.report.warnings, []);
    await append(s, 11, 5);
    await s.simulateCrash();
    s = await EventStore.open({ dir });
    assert.deepEqual(
      s.events().map((e) => e.seq),
      Array.from({ length: 15 }, (_, i) => i + 1),
    );
    assert.ok((await s.verify()).ok);
    await s.close();
  });

  it('a record cut short by a crash, followed by the zeros: dropped as a torn tail, and every acknowledged event kept', async () => {
    let s = await EventStore.open({ dir });
    await append(s, 1, 10);
    await s.simulateCrash();
    const seg = listSegments(dir).at(-1)!;
    // The write of record 11 reached the disk only in part; the rest of the file is still the zeros ahead.
    const buf = fs.readFileSync(seg);
    const end = endOfData(buf, 0);
    const torn = encodeRecord({ kind: 'batch', last: 11, events: [{ seq: 11 }] }).subarray(0, 20);
    torn.copy(buf, end);
    assert.ok(buf.length > end + torn.length, 'zeros follow the partial record');
    fs.writeFileSync(seg, buf);
    s = await EventStore.open({ dir });
    assert.equal(s.lastSeq, 10);
    assert.equal(s.report.droppedTornBytes, torn.length, 'the partial record, not the zeros after it');
    await append(s, 11, 3);
    await s.simulateCrash();
    s = await EventStore.open({ dir });
    assert.equal(s.lastSeq, 13);
    assert.equal(s.report.droppedTornBytes, 0);
    assert.equal(s.events().length, 13);
    await s.close();
  });

  it('damage among the records before the zeros is still refused (valid records follow it)', async () => {
    const s = await EventStore.open({ dir });
    await append(s, 1, 10);
    await s.simulateCrash();
    const seg = listSegments(dir).at(-1)!;
    const buf = fs.readFileSync(seg);
    buf[Math.floor(endOfData(buf, 0) / 2)] ^= 0xff;
    fs.writeFileSync(seg, buf);
    await assert.rejects(EventStore.open({ dir }), (e: unknown) => e instanceof WaypointError && e.code === 'corrupt' && /valid records follow the damage/.test(e.message));
  });

  it('closing trims the zeros: a closed segment holds its records only', async () => {
    const s = await EventStore.open({ dir, exportThresholdBytes: 1 << 30 });
    await append(s, 1, 10);
    const first = listSegments(dir).at(-1)!;
    await s.exportNow(); // rotates: the first segment is closed
    assert.equal(fs.statSync(first).size, recordBytes(first), 'the rotated segment was trimmed');
    await append(s, 11, 5);
    const live = listSegments(dir).at(-1)!;
    assert.notEqual(live, first);
    await s.close();
    for (const f of [...listSegments(dir), ...listSegments(path.join(dir, ARCHIVE_DIR))]) assert.equal(fs.statSync(f).size, recordBytes(f), `${path.basename(f)} holds records only`);
  });

  it('a closed segment left with its zeros (killed before trimming) is folded into the archive without them', async () => {
    // One-call-per-process use: each open appends and closes (export, rotation), and the
    // small closed segments are folded into one archive segment.
    for (let i = 0; i < 3; i++) {
      const s = await EventStore.open({ dir });
      await append(s, i * 3 + 1, 3);
      await s.close();
    }
    const live = listSegments(dir);
    assert.ok(live.length >= 2, live.join(', '));
    // The closed one among them ends in zeros, as if its writer had been killed right before trimming.
    fs.appendFileSync(live[0], Buffer.alloc(64 * 1024));
    for (let i = 3; i < 5; i++) {
      const s = await EventStore.open({ dir });
      await append(s, i * 3 + 1, 3);
      await s.close();
    }
    assert.ok(!fs.existsSync(live[0]), 'the segment was folded into the archive');
    const s = await EventStore.open({ dir });
    try {
      assert.deepEqual(
        s.events().map((e) => e.seq),
        Array.from({ length: 15 }, (_, i) => i + 1),
      );
      assert.ok((await s.verify()).ok);
      for (const f of listSegments(path.join(dir, ARCHIVE_DIR))) {
        const buf = fs.readFileSync(f);
        assert.equal(endOfData(buf, 0), buf.length, `${path.basename(f)} has no zeros in it`);
      }
    } finally {
      await s.close();
    }
  });

  it('reads a closed segment that still ends in zeros (its writer was killed before trimming)', async () => {
    let s = await EventStore.open({ dir, exportThresholdBytes: 1 << 30 });
    await append(s, 1, 6);
    await s.exportNow();
    await append(s, 7, 4);
    await s.simulateCrash();
    // Put zeros back after the first (closed, trimmed) segment's records, as if its writer had been killed right before the trim.
    const [first, second] = listSegments(dir);
    assert.ok(second, 'two live segments');
    fs.appendFileSync(first, Buffer.alloc(64 * 1024));
    s = await EventStore.open({ dir });
    try {
      assert.equal(s.lastSeq, 10);
      assert.deepEqual(
        s.events().map((e) => e.seq),
        Array.from({ length: 10 }, (_, i) => i + 1),
      );
    } finally {
      await s.close();
    }
  });

  it('a closed segment whose last records were zeroed is refused on open, even when the next segment holds no event yet', async () => {
    let s = await EventStore.open({ dir, exportThresholdBytes: 1 << 30 });
    await append(s, 1, 4);
    await s.simulateCrash();
    // The database holds none of these (never exported); the newest segment starts after event 4.
    const [first] = listSegments(dir);
    s = await EventStore.open({ dir, exportThresholdBytes: 1 << 30 });
    await s.simulateCrash();
    const buf = fs.readFileSync(first);
    const end = endOfData(buf, 0);
    // Zero the last record (event 4): what remains looks like records then preallocated zeros.
    let at = 0;
    let lastStart = 0;
    while (at < end) {
      lastStart = at;
      at += 12 + buf.readUInt32LE(at + 4);
    }
    buf.fill(0, lastStart);
    fs.writeFileSync(first, buf);
    fs.writeFileSync(path.join(dir, segmentName(5)), encodeRecord({ kind: 'header', storeId: s.storeId, baseSeq: 5, v: 1 }));
    await assert.rejects(
      EventStore.open({ dir }),
      (e: unknown) => e instanceof WaypointError && e.code === 'corrupt' && /ends at event 3 but the next segment begins at 5: events 4\.\.4 are gone/.test(e.message),
    );
  });
});

describe('Db.deferCommits: one SQLite transaction for many', () => {
  const open = async (): Promise<Db> => {
    const SQL = await loadSqlJs();
    const db = new Db(new SQL.Database());
    db.exec('CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)');
    return db;
  };

  it('each transaction is seen at once; a failed one is undone alone; export holds every one', async () => {
    const db = await open();
    db.deferCommits({ transactions: 1000, ms: 60_000 });
    db.transaction(() => db.run('INSERT INTO t VALUES (1, ?)', ['a']));
    assert.equal(db.get<{ n: number }>('SELECT COUNT(*) AS n FROM t')?.n, 1);
    assert.throws(() =>
      db.transaction(() => {
        db.run('INSERT INTO t VALUES (2, ?)', ['b']);
        db.run('INSERT INTO t VALUES (1, ?)', ['dup']);
      }),
    );
    db.transaction(() => db.run('INSERT INTO t VALUES (3, ?)', ['c']));
    assert.deepEqual(
      db.all<{ k: number }>('SELECT k FROM t ORDER BY k').map((r) => r.k),
      [1, 3],
    );
    const bytes = db.export();
    db.close();
    const SQL = await loadSqlJs();
    const copy = new Db(new SQL.Database(bytes));
    assert.deepEqual(
      copy.all<{ k: number }>('SELECT k FROM t ORDER BY k').map((r) => r.k),
      [1, 3],
      'the export settled the open transaction first',
    );
    copy.close();
  });

  it('commits after so many transactions, and after a while', async () => {
    const db = await open();
    db.deferCommits({ transactions: 3, ms: 20 });
    for (let i = 1; i <= 4; i++) db.transaction(() => db.run('INSERT INTO t VALUES (?, ?)', [i, 'x']));
    // 3 were committed together; the 4th opened another transaction, which the timer commits.
    assert.throws(() => db.exec('BEGIN'), /within a transaction/);
    await new Promise((r) => setTimeout(r, 60));
    db.exec('BEGIN');
    db.exec('COMMIT');
    db.close();
  });

  it('the store exports what its deferred transactions hold', async () => {
    const t = tmpDir('wp-defer-');
    try {
      const dir = path.join(t.dir, '.waypoint');
      let s = await EventStore.open({ dir });
      await append(s, 1, 7);
      await s.close();
      s = await EventStore.open({ dir });
      assert.equal(s.report.replayed, 0, 'every event came from the database');
      assert.equal(s.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM tasks')?.n, 7);
      await s.close();
    } finally {
      t.cleanup();
    }
  });
});
