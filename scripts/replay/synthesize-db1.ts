// Writes the database-version-1 replay fixture (test/fixtures/replay/db1-ev1).
//
// Database version 1 was never current at any commit: migrations 1 and 2 landed
// together (ab9d6a0), so no released Waypoint wrote a v1 file and none can be run
// to record one. This writes one in v1's exact format instead: migration 1's own
// SQL (from migrations.ts), PRAGMA user_version = 1, the events of a recorded
// fixture, and its projections in v1's columns (v2 added checkpoints.bytes,
// steps.task_attempt and the rollbacks table). Current code must migrate it to v2
// and rebuild the projections the recorded version produced.
//
//   node --import tsx scripts/replay/synthesize-db1.ts FROM_FIXTURE OUT_DIR
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Db } from '../../src/core/store/db';
import { MIGRATIONS } from '../../src/core/store/migrations';
import { loadSqlJs } from '../../src/core/store/sqlite';

const V1_DROPPED: Record<string, string[]> = { checkpoints: ['bytes'], steps: ['task_attempt'] };
const V1_TABLES = ['tasks', 'steps', 'checkpoints', 'side_effects', 'leases', 'idempotency'];

async function main(): Promise<void> {
  const [fromArg, outArg] = process.argv.slice(2);
  if (!fromArg || !outArg) throw new Error('usage: synthesize-db1.ts FROM_FIXTURE OUT_DIR');
  const from = path.resolve(fromArg);
  const out = path.resolve(outArg);
  const events = JSON.parse(fs.readFileSync(path.join(from, 'events.json'), 'utf8')) as Record<string, unknown>[];
  const projections = JSON.parse(fs.readFileSync(path.join(from, 'projections.json'), 'utf8')) as Record<string, string[]>;
  const SQL = await loadSqlJs();
  const db = new Db(new SQL.Database());
  const v1 = MIGRATIONS.find((m) => m.version === 1)!;
  db.exec(v1.up);
  db.exec('PRAGMA user_version = 1');
  db.run('INSERT INTO meta (k, v) VALUES (?, ?)', ['storeId', 'db1-fixture-store']);
  db.transaction(() => {
    for (const e of events) {
      db.run('INSERT INTO events (seq, ts, type, v, task_id, corr, key, by, data, op, result) VALUES (?,?,?,?,?,?,?,?,?,?,?)', [
        e.seq as number,
        e.ts as number,
        e.type as string,
        e.v as number,
        (e.taskId as string | null) ?? null,
        (e.corr as string | null) ?? null,
        e.key as string,
        (e.by as string | null) ?? null,
        JSON.stringify(e.data),
        e.op === undefined ? null : String(e.op),
        e.op === undefined ? null : JSON.stringify(e.result ?? null),
      ]);
    }
    for (const table of V1_TABLES) {
      for (const line of projections[table] ?? []) {
        const row = JSON.parse(line) as Record<string, string | number | null>;
        for (const c of V1_DROPPED[table] ?? []) delete row[c];
        const cols = Object.keys(row);
        db.run(`INSERT INTO ${table} (${cols.join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`, cols.map((c) => row[c]));
      }
    }
  });
  fs.rmSync(out, { recursive: true, force: true });
  fs.mkdirSync(path.join(out, 'store'), { recursive: true });
  fs.writeFileSync(path.join(out, 'store', 'waypoint.db'), db.export());
  db.close();
  // What current code must produce after migrating: the projections of the recorded version.
  fs.copyFileSync(path.join(from, 'projections.json'), path.join(out, 'projections.json'));
  fs.copyFileSync(path.join(from, 'events.json'), path.join(out, 'events.json'));
  const meta = JSON.parse(fs.readFileSync(path.join(from, 'meta.json'), 'utf8')) as Record<string, unknown>;
  fs.writeFileSync(
    path.join(out, 'meta.json'),
    JSON.stringify({ label: 'db1-ev1', dbVersion: 1, eventVersion: meta.eventVersion, commit: null, synthesizedFrom: path.basename(from), recordedWith: 'scripts/replay/synthesize-db1.ts', events: events.length }, null, 2) + '\n',
  );
  process.stdout.write(`wrote a database-version-1 store of ${events.length} events into ${out}\n`);
}

main().catch((e) => {
  process.stderr.write(`${(e as Error).stack}\n`);
  process.exit(1);
});
