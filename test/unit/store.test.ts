import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawn } from 'node:child_process';
import { EventStore } from '../../src/core/store/eventStore';
import { Db } from '../../src/core/store/db';
import { migrate, DB_VERSION, MIGRATIONS } from '../../src/core/store/migrations';
import { insertEvent } from '../../src/core/store/projections';
import { loadSqlJs } from '../../src/core/store/sqlite';
import { encodeRecord, endOfData, listSegments } from '../../src/core/store/journal';
import { OwnerLock, readLock } from '../../src/core/store/ownerLock';
import { parseEvent } from '../../src/core/model/schema';
import { WaypointError } from '../../src/core/model/errors';
import { started, tmpDir } from '../support/tmp';


async function append(store: EventStore, from: number, n: number): Promise<void> {
  const ps: Promise<void>[] = [];
  for (let i = from; i < from + n; i++) ps.push(store.commit([started(i)]).durable);
  await Promise.all(ps);
}

describe('store', () => {
  let t: ReturnType<typeof tmpDir>;
  let dir: string;
  beforeEach(() => {
    t = tmpDir();
    dir = path.join(t.dir, '.waypoint');
  });
  afterEach(() => t.cleanup());

  it('creates .waypoint with a .gitignore of *', async () => {
    const s = await EventStore.open({ dir });
    await s.close();
    assert.equal(fs.readFileSync(path.join(dir, '.gitignore'), 'utf8'), '*\n');
  });

  it('keeps every acknowledged event across close and reopen', async () => {
    let s = await EventStore.open({ dir });
    await append(s, 1, 50);
    await s.close();
    s = await EventStore.open({ dir });
    assert.equal(s.lastSeq, 50);
    assert.equal(s.report.source, 'db');
    assert.equal(s.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM tasks')?.n, 50);
    await s.close();
  });

  it('replays journal records the database lacks (a crash before export)', async () => {
    const s = await EventStore.open({ dir });
    await append(s, 1, 30);
    await s.simulateCrash();
    const s2 = await EventStore.open({ dir });
    assert.equal(s2.lastSeq, 30);
    assert.equal(s2.report.replayed, 30);
    await s2.close();
  });

  it('exports with free pages, so replaying the journal tail after a crash does not grow the database file', async () => {
    let s = await EventStore.open({ dir, exportThresholdBytes: 1 << 30 });
    await append(s, 1, 200);
    await s.exportNow();
    await append(s, 201, 100); // the tail a crash leaves in the journal
    await s.simulateCrash();
    const fileBytes = fs.statSync(path.join(dir, 'waypoint.db')).size;
    s = await EventStore.open({ dir });
    assert.equal(s.report.replayed, 100);
    const pragma = (p: string) => Number(Object.values(s.db.get(`PRAGMA ${p}`) ?? {})[0]);
    // The replay used reserved pages: the file SQLite sees is no larger than the one exported.
    assert.equal(pragma('page_count') * pragma('page_size'), fileBytes);
    assert.ok(pragma('freelist_count') > 0, 'some reserve is left for new events');
    assert.equal(s.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM tasks')?.n, 300);
    assert.equal(s.db.get<{ n: number }>("SELECT COUNT(*) AS n FROM sqlite_schema WHERE name = 'wp_reserve'")?.n, 0);
    const check = await s.verify();
    assert.ok(check.ok, JSON.stringify(check.differences));
    await s.close();
  });

  it('keeps no events from before an export in the database: they are read from the segments, older ones from archive/', async () => {
    let s = await EventStore.open({ dir, exportThresholdBytes: 1 << 30 });
    const all: number[] = [];
    for (let g = 0; g < 4; g++) {
      await append(s, g * 100 + 1, 100);
      all.push(...Array.from({ length: 100 }, (_, i) => g * 100 + i + 1));
      await s.exportNow();
    }
    await append(s, 401, 20); // the tail since the last export, in memory and in the live segment
    assert.equal(s.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM events')?.n, 20, 'the table holds only the events since the export');
    const seqs = (f?: Parameters<EventStore['events']>[0]) => s.events(f).map((e) => e.seq);
    assert.deepEqual(seqs(), [...all, ...Array.from({ length: 20 }, (_, i) => 401 + i)]);
    assert.deepEqual(seqs({ afterSeq: 95, limit: 10 }), [96, 97, 98, 99, 100, 101, 102, 103, 104, 105], 'a page across a segment boundary');
    assert.deepEqual(seqs({ afterSeq: 410 }), Array.from({ length: 10 }, (_, i) => 411 + i));
    assert.deepEqual(seqs({ taskId: 't150' }), [150]);
    assert.deepEqual(seqs({ taskId: 't415' }), [415]);
    // Segments no generation replays went to the archive; the ones back to the previous generation stay.
    // Small segments are folded into one archive segment (up to ~1 MB).
    assert.deepEqual(fs.readdirSync(path.join(dir, 'archive')), ['journal-000000000001.wal']);
    assert.deepEqual(listSegments(dir).map((f) => path.basename(f)), ['journal-000000000301.wal', 'journal-000000000401.wal']);
    // The file on disk holds projections only.
    const SQL = await loadSqlJs();
    const onDisk = new Db(new SQL.Database(fs.readFileSync(path.join(dir, 'waypoint.db'))));
    assert.equal(onDisk.get<{ n: number }>('SELECT COUNT(*) AS n FROM events')?.n, 0);
    assert.equal(onDisk.get<{ n: number }>('SELECT COUNT(*) AS n FROM tasks')?.n, 400);
    onDisk.close();
    assert.ok((await s.verify()).ok);
    await s.simulateCrash();
    s = await EventStore.open({ dir });
    assert.equal(s.report.replayed, 20);
    assert.equal(s.lastSeq, 420);
    assert.equal(s.events().length, 420);
    s.rebuild();
    const v = await s.verify();
    assert.ok(v.ok && v.events === 420, JSON.stringify(v));
    await s.close();
  });

  it('a closed segment that stops short (emptied, or cut off mid-record) is refused as damaged history, naming it; the database stays readable', async () => {
    const s = await EventStore.open({ dir, exportThresholdBytes: 1 << 30 });
    for (let g = 0; g < 4; g++) {
      await append(s, g * 100 + 1, 100);
      await s.exportNow();
    }
    await append(s, 401, 20);
    const closed = path.join(dir, 'journal-000000000301.wal');
    assert.ok(fs.existsSync(closed), listSegments(dir).join(', '));
    const original = fs.readFileSync(closed);
    // Emptied, it holds no record at all; cut mid-record, its last record is torn.
    const damagedHistory =
      /^The store's history is damaged: (journal segment journal-000000000301\.wal ends at event \d+ but should hold events up to 400\.|Journal segment journal-000000000301\.wal is cut off at byte \d+, although a later segment follows it: its acknowledged events after that byte are gone\.) Its events from 301 on cannot be read; the current tasks, steps and checkpoints \(the database\) are intact\.$/;
    for (const cut of [0, Math.floor(original.length / 2)]) {
      fs.writeFileSync(closed, original.subarray(0, cut));
      assert.throws(
        () => s.events(),
        (e: unknown) => e instanceof WaypointError && e.code === 'corrupt' && damagedHistory.test(e.message),
        `cut at ${cut} bytes`,
      );
      // Events after the damage, from the live segment, still read; the projections are untouched.
      assert.deepEqual(s.events({ afterSeq: 410 }).map((e) => e.seq), Array.from({ length: 10 }, (_, i) => 411 + i));
      assert.equal(s.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM tasks')?.n, 420);
    }
    fs.writeFileSync(closed, original);
    assert.equal(s.events().length, 420, 'the segment put back reads whole');
    await s.close();
  });

  it('folds the small segments of one-call-per-process use into ~1 MB archive segments; a crash mid-fold loses and doubles nothing', async () => {
    // Each open/commit/close exports and rotates, as a CLI call that owns the store does.
    for (let i = 1; i <= 12; i++) {
      const s = await EventStore.open({ dir });
      await append(s, i * 10, 3);
      await s.close();
    }
    const archived = fs.readdirSync(path.join(dir, 'archive'));
    assert.equal(archived.length, 1, `one archive segment, not one per call: ${archived.join(', ')}`);
    // A crash after a merged file replaced the archive segment but before the live one was
    // removed leaves both: keep copies of the live segments, fold them, then put them back.
    const saved = listSegments(dir).map((f) => [f, fs.readFileSync(f)] as const);
    for (let i = 13; i <= 15; i++) {
      const s = await EventStore.open({ dir });
      await append(s, i * 10, 3);
      await s.close();
    }
    const restored = saved.filter(([f]) => !fs.existsSync(f));
    assert.ok(restored.length >= 2, 'some live segments were folded into the archive');
    for (const [f, bytes] of restored) fs.writeFileSync(f, bytes);
    const s = await EventStore.open({ dir });
    try {
      const keys = s.events().map((e) => e.key);
      assert.deepEqual(keys, Array.from({ length: 15 }, (_, i) => [0, 1, 2].map((k) => `k${(i + 1) * 10 + k}`)).flat());
      assert.ok((await s.verify()).ok);
    } finally {
      await s.close();
    }
  });

  it('a database that holds events no segment has (written before v3) archives them before an export drops them', async () => {
    const SQL = await loadSqlJs();
    const db = new Db(new SQL.Database());
    migrate(db, 2);
    db.run("INSERT INTO meta (k, v) VALUES ('storeId', 'legacy-store')");
    for (let i = 1; i <= 30; i++) insertEvent(db, parseEvent({ ...started(i), seq: i, ts: 1000 + i, v: 1 }));
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'waypoint.db'), db.export());
    db.close();
    let s = await EventStore.open({ dir });
    assert.equal(s.report.migratedFrom, 2);
    assert.equal(s.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM tasks')?.n, 30, 'projections rebuilt from the table');
    await append(s, 31, 5);
    await s.close();
    assert.ok(fs.existsSync(path.join(dir, 'archive', 'journal-000000000001.wal')), 'the table-only events were written to an archive segment');
    s = await EventStore.open({ dir });
    assert.equal(s.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM events')?.n, 0);
    assert.deepEqual(
      s.events().map((e) => e.key),
      Array.from({ length: 35 }, (_, i) => `k${i + 1}`),
    );
    assert.ok((await s.verify()).ok);
    await s.close();
  });

  it('group-commits concurrent appends (fewer flushes than records)', async () => {
    const s = await EventStore.open({ dir });
    const ps: Promise<void>[] = [];
    for (let i = 0; i < 200; i++) ps.push(s.commit([started(i)]).durable);
    await Promise.all(ps);
    assert.equal(s.stats.records, 200);
    assert.ok(s.stats.flushes < 50, `200 concurrent appends took ${s.stats.flushes} flushes`);
    await s.close();
  });

  it('drops a torn tail on open and says so', async () => {
    const s = await EventStore.open({ dir });
    await append(s, 1, 10);
    await s.simulateCrash();
    const seg = listSegments(dir).at(-1)!;
    const whole = encodeRecord({ kind: 'batch', events: [] });
    fs.appendFileSync(seg, whole.subarray(0, whole.length - 3)); // a write cut short by a crash
    const s2 = await EventStore.open({ dir });
    assert.equal(s2.lastSeq, 10);
    assert.ok(s2.report.droppedTornBytes > 0);
    await append(s2, 11, 5); // appends go after the last valid record
    await s2.simulateCrash();
    const s3 = await EventStore.open({ dir });
    assert.equal(s3.lastSeq, 15);
    await s3.close();
  });

  it('refuses damage followed by valid records (acknowledged data) with a clear error', async () => {
    const s = await EventStore.open({ dir });
    await append(s, 1, 10);
    await s.simulateCrash();
    const seg = listSegments(dir).at(-1)!;
    const buf = fs.readFileSync(seg);
    // In the middle of the records, not of the zeros preallocated after them.
    buf[Math.floor(endOfData(buf, 0) / 2)] ^= 0xff;
    fs.writeFileSync(seg, buf);
    await assert.rejects(EventStore.open({ dir }), (e: unknown) => e instanceof WaypointError && e.code === 'corrupt' && /valid records follow the damage/.test(e.message));
  });

  it('falls back to the previous generation when the newest database is truncated, losing nothing', async () => {
    let s = await EventStore.open({ dir, exportThresholdBytes: 2_000 });
    for (let i = 1; i <= 40; i++) await append(s, i, 1); // several exports
    await s.close();
    assert.ok(fs.existsSync(path.join(dir, 'waypoint.db.prev')));
    const db = path.join(dir, 'waypoint.db');
    fs.truncateSync(db, Math.floor(fs.statSync(db).size / 2));
    s = await EventStore.open({ dir });
    assert.equal(s.report.source, 'prev');
    assert.match(s.report.warnings.join('\n'), /fell back to the previous generation/);
    assert.equal(s.lastSeq, 40);
    assert.equal((await s.verify()).ok, true);
    await s.close();
  });

  it('moves aside a database that matches neither generation and rebuilds from the journal', async () => {
    let s = await EventStore.open({ dir });
    await append(s, 1, 12);
    await s.close();
    // Every event is still in the journal segment that covers the (empty) previous generation.
    fs.writeFileSync(path.join(dir, 'waypoint.db'), 'this is not a database at all, not even close.'.repeat(10));
    s = await EventStore.open({ dir });
    assert.equal(s.report.source, 'journal');
    assert.equal(s.lastSeq, 12);
    const aside = fs.readdirSync(dir).filter((n) => n.startsWith('waypoint.db.broken-'));
    assert.equal(aside.length, 1, 'the bad file is kept, not deleted');
    assert.match(s.report.warnings.join('\n'), /moved it aside/);
    await s.close();
  });

  it('removes temp files left by an interrupted export', async () => {
    let s = await EventStore.open({ dir });
    await append(s, 1, 3);
    await s.close();
    fs.writeFileSync(path.join(dir, 'waypoint.db.wp-tmp-export'), 'partial');
    s = await EventStore.open({ dir });
    assert.ok(!fs.readdirSync(dir).some((n) => n.includes('.wp-tmp-')));
    await s.close();
  });

  it('refuses a database written by a newer version, and does not move it aside', async () => {
    const s = await EventStore.open({ dir });
    await append(s, 1, 2);
    s.db.exec(`PRAGMA user_version = ${DB_VERSION + 5}`);
    await s.exportNow();
    await s.simulateCrash();
    await assert.rejects(EventStore.open({ dir }), /newer Waypoint/);
    assert.ok(fs.existsSync(path.join(dir, 'waypoint.db')));
  });

  it('migrates a store written by the previous schema version (N-1) and rebuilds its projections', async () => {
    const SQL = await loadSqlJs();
    const db = new Db(new SQL.Database());
    // The previous migration's number (parallel branches claim numbers, so it need not be DB_VERSION - 1).
    const previous = MIGRATIONS[MIGRATIONS.length - 2].version;
    migrate(db, previous);
    db.run("INSERT INTO meta (k, v) VALUES ('storeId', 'old-store')");
    for (let i = 1; i <= 3; i++) {
      const e = parseEvent({ ...started(i), seq: i, ts: 1000 + i, v: 1, op: 'task.start', result: { taskId: `t${i}` } });
      insertEvent(db, e);
      // The old version's fold knew no step attempts or checkpoint bytes.
      db.run('INSERT INTO tasks (id, title, goal, agent, state, correlation_id, created_at, updated_at, attempt) VALUES (?,?,?,?,?,?,?,?,1)', [
        `t${i}`,
        `task ${i}`,
        `goal ${i}`,
        null,
        'running',
        `c${i}`,
        1000 + i,
        1000 + i,
      ]);
    }
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'waypoint.db'), db.export());
    db.close();
    const s = await EventStore.open({ dir });
    assert.equal(s.report.migratedFrom, previous);
    assert.equal(Number(s.db.get<{ user_version: number }>('PRAGMA user_version')?.user_version), DB_VERSION);
    assert.equal(s.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM steps')?.n, 3, 'projections rebuilt from the events');
    assert.equal((await s.verify()).ok, true);
    await s.close();
  });

  it('verify finds a projection that drifted from the events, and rebuild repairs it', async () => {
    const s = await EventStore.open({ dir });
    await append(s, 1, 5);
    s.db.run("UPDATE tasks SET state = 'completed' WHERE id = 't3'");
    const v = await s.verify();
    assert.equal(v.ok, false);
    assert.deepEqual(v.differences.map((d) => d.table), ['tasks']);
    s.rebuild();
    assert.equal((await s.verify()).ok, true);
    await s.close();
  });

  describe('owner lock', () => {
    it('a second opener waits, then fails naming the owner', async () => {
      const s = await EventStore.open({ dir });
      const t0 = Date.now();
      await assert.rejects(EventStore.open({ dir, lock: { waitMs: 300 } }), (e: unknown) => e instanceof WaypointError && e.code === 'locked' && new RegExp(`pid ${process.pid}`).test(e.message));
      assert.ok(Date.now() - t0 >= 280);
      await s.close();
    });

    it('a second opener gets the store once the owner closes within the wait', async () => {
      const s = await EventStore.open({ dir });
      setTimeout(() => void s.close(), 100);
      const s2 = await EventStore.open({ dir, lock: { waitMs: 3000 } });
      await s2.close();
    });

    it('takes over a lock whose pid is dead', async () => {
      fs.mkdirSync(dir, { recursive: true });
      const child = spawn(process.execPath, ['-e', '0']);
      await new Promise((r) => child.on('exit', r));
      fs.writeFileSync(
        path.join(dir, 'owner.lock'),
        JSON.stringify({ ownerId: 'ghost', pid: child.pid, host: require('node:os').hostname(), startedAt: 0, leaseExpiresAt: Date.now() + 60_000, endpoint: null }),
      );
      const lock = await OwnerLock.acquire(dir, { waitMs: 500 });
      assert.equal(readLock(dir).info?.pid, process.pid);
      lock.release();
    });

    it('takes over a lock whose lease expired, and one with garbage content', async () => {
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, 'owner.lock'), JSON.stringify({ ownerId: 'x', pid: 1, host: 'elsewhere', startedAt: 0, leaseExpiresAt: Date.now() - 1, endpoint: null }));
      (await OwnerLock.acquire(dir, { waitMs: 500 })).release();
      fs.writeFileSync(path.join(dir, 'owner.lock'), '{ not json');
      (await OwnerLock.acquire(dir, { waitMs: 500 })).release();
    });
  });
});
