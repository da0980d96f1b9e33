import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Engine } from '../../src/core/engine/engine';
import { SCHEMA_VERSION } from '../../src/core/model/schema';
import { EventStore } from '../../src/core/store/eventStore';
import { DB_VERSION, MIGRATIONS } from '../../src/core/store/migrations';
import { dumpProjections } from '../../src/core/store/projections';
import { tmpDir } from '../support/tmp';

/**
 * Replay conformance: stores written by every released schema version (recorded by
 * scripts/replay/record-fixture.ts; see test/fixtures/replay/README.md) are opened
 * by the current code, migrated, their journals replayed, and must hold the same
 * events and the same projections the recording version produced.
 */
const FIXTURES = path.join(__dirname, '..', 'fixtures', 'replay');

interface Meta {
  label: string;
  dbVersion: number;
  eventVersion: number;
  commit: string | null;
}

const fixtureDirs = fs
  .readdirSync(FIXTURES)
  .filter((n) => fs.existsSync(path.join(FIXTURES, n, 'meta.json')))
  .sort();

const read = <T>(dir: string, file: string): T => JSON.parse(fs.readFileSync(path.join(FIXTURES, dir, file), 'utf8')) as T;
/** Events as plain JSON (what the store returns has the same fields; key order does not matter). */
/**
 * The live projections restricted to what the fixture recorded: a later migration may
 * add a projection table or column (filled by its rebuild), which the recording
 * version could not have; every table and column it did record must match exactly.
 */
function asRecorded(live: Record<string, string[]>, recorded: Record<string, string[]>): Record<string, string[]> {
  return Object.fromEntries(
    Object.entries(recorded).map(([table, rows]) => {
      const cols = rows.length ? Object.keys(JSON.parse(rows[0]) as object) : [];
      return [table, (live[table] ?? []).map((r) => (cols.length ? JSON.stringify(Object.fromEntries(cols.map((c) => [c, (JSON.parse(r) as Record<string, unknown>)[c]]))) : r))];
    }),
  );
}
const canon = (v: unknown): unknown => JSON.parse(JSON.stringify(v, (_k, x) => (x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => a.localeCompare(b))) : x)));

describe('replay conformance (stores recorded by every released schema version)', function () {
  this.timeout(60_000);

  it(`has a fixture for the current schema (database v${DB_VERSION}, events v${SCHEMA_VERSION}) and for every earlier version`, () => {
    const metas = fixtureDirs.map((d) => read<Meta>(d, 'meta.json'));
    const current = `db${DB_VERSION}-ev${SCHEMA_VERSION}`;
    assert.ok(
      fixtureDirs.includes(current),
      `No replay fixture for the current schema: add test/fixtures/replay/${current}/ by running ` +
        `'node --import tsx scripts/replay/record-fixture.ts test/fixtures/replay/${current} ${current}' (see test/fixtures/replay/README.md).`,
    );
    // Every version a migration declares (parallel branches reserve numbers, so the list may have gaps until they land).
    for (const { version: v } of MIGRATIONS) assert.ok(metas.some((m) => m.dbVersion === v), `no replay fixture written by database version ${v}`);
    for (let v = 1; v <= SCHEMA_VERSION; v++) assert.ok(metas.some((m) => m.eventVersion === v), `no replay fixture written with event version ${v}`);
    for (const m of metas) assert.ok(m.dbVersion <= DB_VERSION && m.eventVersion <= SCHEMA_VERSION, `${m.label} is from a newer schema than this code`);
  });

  for (const name of fixtureDirs) {
    it(`${name}: opens, migrates, replays its journal and rebuilds the recorded projections`, async () => {
      const meta = read<Meta>(name, 'meta.json');
      const events = read<unknown[]>(name, 'events.json');
      const projections = read<Record<string, string[]>>(name, 'projections.json');
      const t = tmpDir('wp-replay-');
      try {
        const dir = path.join(t.dir, '.waypoint');
        fs.cpSync(path.join(FIXTURES, name, 'store'), dir, { recursive: true });
        const store = await EventStore.open({ dir, lock: { waitMs: 200 } });
        try {
          assert.equal(store.report.migratedFrom, meta.dbVersion < DB_VERSION ? meta.dbVersion : null, 'migrated from the fixture’s database version');
          assert.deepEqual(canon(store.events()), canon(events), 'the same events, in order');
          assert.deepEqual(asRecorded(dumpProjections(store.db), projections), projections, 'the projections the recording version produced');
          const v = await store.verify();
          assert.ok(v.ok, `live projections equal a rebuild from the events: ${JSON.stringify(v.differences)}`);
        } finally {
          await store.close();
        }
        // Written back by the current code, it reopens to the same state without migrating again.
        const again = await EventStore.open({ dir, lock: { waitMs: 200 } });
        try {
          assert.equal(again.report.migratedFrom, null);
          assert.deepEqual(asRecorded(dumpProjections(again.db), projections), projections);
        } finally {
          await again.close();
        }
        // And the engine works on it: every task answers, and the first can be resumed from.
        const engine = await Engine.open({ workspace: t.dir, snapshots: false, store: { lock: { waitMs: 200 } } });
        try {
          const tasks = engine.tasks();
          assert.ok(tasks.length >= 4, `${tasks.length} tasks`);
          for (const task of tasks) engine.taskDetail(task.id);
          const first = tasks.find((x) => x.title === 'Polite greet')!;
          const ctx = await engine.resumeContext(first.id);
          assert.equal(ctx.task.state, 'completed');
        } finally {
          await engine.close();
        }
      } finally {
        t.cleanup();
      }
    });
  }
});
