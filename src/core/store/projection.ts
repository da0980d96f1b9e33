import { WaypointError } from '../model/errors';
import type { WaypointEvent } from '../model/schema';
import { Db } from './db';
import type { Projection, ProjectionCheck } from './eventLog';
import { migrate } from './migrations';
import { clearProjections, dumpProjections, insertEvent, project } from './projections';
import { loadSqlJs } from './sqlite';

/**
 * The projection half of the store seam: the writer's in-memory sql.js database
 * (tasks, steps, checkpoints, leases, ledger, and the events not yet folded into an
 * exported generation) that the one projection code in projections.ts applies events
 * to. Whatever EventLog feeds it — the embedded journal, PostgreSQL — the engine
 * validates every operation against these tables, synchronously, inside its runner.
 *
 * It holds no durability of its own: the embedded log exports this database as its
 * generations (snapshot + deltas); a remote log simply replays into a fresh one.
 */
export class SqlProjection implements Projection {
  private seq: number;

  constructor(
    readonly db: Db,
    lastSeq: number,
  ) {
    this.seq = lastSeq;
  }

  /** An empty projection of the current schema, for a log that replays its events into memory (PostgreSQL, verify). */
  static async empty(): Promise<SqlProjection> {
    const SQL = await loadSqlJs();
    const db = new Db(new SQL.Database());
    migrate(db);
    return new SqlProjection(db, 0);
  }

  get lastSeq(): number {
    return this.seq;
  }

  /**
   * Applies events in seq order as one transaction (all or nothing). Events at or
   * below lastSeq are already here and skipped — the embedded log applies at the
   * instant it sequences (its exported generation must match its journal), so the
   * engine's own apply after an append finds nothing left to do. A gap is refused:
   * a projection that skipped an event would answer from a history that never was.
   */
  apply(events: readonly WaypointEvent[]): void {
    const fresh = events.filter((e) => e.seq > this.seq);
    if (!fresh.length) return;
    let expect = this.seq + 1;
    for (const e of fresh) {
      if (e.seq !== expect) throw new WaypointError('corrupt', `The projection is at event ${expect - 1} and was given event ${e.seq}; refusing to apply across a gap.`, { from: expect, to: e.seq - 1 });
      expect++;
    }
    this.db.transaction(() => {
      for (const e of fresh) {
        insertEvent(this.db, e);
        project(this.db, e);
      }
    });
    this.seq = fresh[fresh.length - 1].seq;
  }

  /**
   * Marks events as applied without projecting them: for the embedded store's open,
   * which loads a generation that already holds them.
   */
  advanceTo(seq: number): void {
    this.seq = Math.max(this.seq, seq);
  }

  /** Rebuilds every projection table from the events alone, in place (the events table is left as it is). */
  rebuild(events: readonly WaypointEvent[]): void {
    rebuildInPlace(this.db, events);
  }

  /** Folds the events into a scratch database and compares it with these tables: the tables that differ. */
  async verify(events: readonly WaypointEvent[]): Promise<ProjectionCheck> {
    const scratch = await SqlProjection.empty();
    try {
      scratch.db.transaction(() => {
        for (const e of events) {
          insertEvent(scratch.db, e);
          project(scratch.db, e);
        }
      });
      const live = dumpProjections(this.db);
      const rebuilt = dumpProjections(scratch.db);
      const differences = Object.keys(live)
        .map((table) => {
          const a = live[table];
          const b = rebuilt[table];
          const i = a.findIndex((row, k) => row !== b[k]);
          const firstDiff = i >= 0 ? a[i] : b.length > a.length ? b[a.length] : null;
          return { table, live: a.length, rebuilt: b.length, firstDiff: a.length === b.length && i < 0 ? null : firstDiff };
        })
        .filter((d) => d.live !== d.rebuilt || d.firstDiff !== null);
      return { ok: differences.length === 0, events: events.length, differences };
    } finally {
      scratch.close();
    }
  }

  /** Frees the database; a second call (the log closed it first) does nothing. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }
  private closed = false;
}

export function rebuildInPlace(db: Db, events: readonly WaypointEvent[]): void {
  db.transaction(() => {
    clearProjections(db);
    for (const e of events) project(db, e);
  });
}
