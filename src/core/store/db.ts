import type { Database, SqlValue, Statement } from 'sql.js';
import { WaypointError } from '../model/errors';

export type Params = Record<string, SqlValue> | SqlValue[];
export type Row = Record<string, SqlValue>;

/**
 * A thin layer over a sql.js Database: cached prepared statements and typed
 * helpers. sql.js's `export()` frees every prepared statement (it closes and
 * reopens the connection), so export goes through here and drops the cache.
 */
export class Db {
  private cache = new Map<string, Statement>();
  /** Each cached statement's column names (a statement's columns never change). */
  private names = new WeakMap<Statement, string[]>();
  /** See deferCommits: how many transactions at most, and for how long, one SQLite transaction folds. */
  private defer: { transactions: number; ms: number } | null = null;
  /** The SQLite transaction now open for deferCommits, with the transactions it holds so far. */
  private outer: { transactions: number; timer: NodeJS.Timeout } | null = null;
  /** Set when SQLite gave up an open deferred transaction: what it held is gone, so nothing may go on. */
  private broken: Error | null = null;
  /** How many `transaction` calls are running (they nest as savepoints). */
  private depth = 0;

  constructor(readonly raw: Database) {
    this.applyPragmas();
  }

  /**
   * The database lives in sql.js's in-memory file system; durability comes from the
   * event journal, not from SQLite. A rollback journal in memory keeps SAVEPOINT
   * rollback working while avoiding a MEMFS file write per transaction (4× faster).
   * Exclusive locking: one connection ever uses the file, and in the normal mode
   * SQLite looks for a hot journal (`<file>-journal`) each time it takes its read
   * lock, once per statement outside a transaction — in sql.js a MEMFS path lookup
   * that throws ENOENT in JavaScript. That was about a tenth of a team store append's
   * CPU (the writer reads each task's summary back after folding) and a quarter of
   * the embedded store's group-commit time. These are per-connection, and export()
   * reopens the connection, so they are re-applied after it.
   */
  private applyPragmas(): void {
    this.raw.exec('PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF; PRAGMA temp_store = MEMORY;');
  }

  private stmt(sql: string): Statement {
    let s = this.cache.get(sql);
    if (!s) {
      s = this.raw.prepare(sql);
      this.cache.set(sql, s);
    }
    return s;
  }

  /**
   * getAsObject() reads every column's name again for each row (a string out of the
   * wasm heap per column per row): for a list of 1,000 tasks that was half the query,
   * and a tenth of a team store append (the writer reads each task's summary back).
   * The names are the prepared statement's, so they are read once per statement.
   */
  private columnNames(s: Statement): string[] {
    let names = this.names.get(s);
    if (!names) {
      names = s.getColumnNames();
      this.names.set(s, names);
    }
    return names;
  }

  run(sql: string, params?: Params): void {
    const s = this.stmt(sql);
    s.run(params as SqlValue[]);
  }

  get<T = Row>(sql: string, params?: Params): T | undefined {
    const s = this.stmt(sql);
    try {
      if (params) s.bind(params as SqlValue[]);
      if (!s.step()) return undefined;
      const names = this.columnNames(s);
      const values = s.get();
      const row: Row = {};
      for (let i = 0; i < names.length; i++) row[names[i]] = values[i];
      return row as T;
    } finally {
      s.reset();
    }
  }

  all<T = Row>(sql: string, params?: Params): T[] {
    const s = this.stmt(sql);
    const out: T[] = [];
    try {
      if (params) s.bind(params as SqlValue[]);
      let names: string[] | undefined;
      while (s.step()) {
        names ??= this.columnNames(s);
        const values = s.get();
        const row: Row = {};
        for (let i = 0; i < names.length; i++) row[names[i]] = values[i];
        out.push(row as T);
      }
    } finally {
      s.reset();
    }
    return out;
  }

  exec(sql: string): void {
    this.raw.exec(sql);
  }

  /**
   * Runs fn inside a transaction; on a throw the database is left as it was.
   *
   * With deferCommits, the transaction is a savepoint inside one SQLite transaction
   * that stays open across calls and is committed later (settle): its changes are
   * visible to every later statement at once, as after a commit.
   */
  transaction<T>(fn: () => T): T {
    if (this.broken) throw this.broken;
    if (this.defer && !this.outer) {
      this.run('BEGIN');
      const timer = setTimeout(() => this.settleQuietly(), this.defer.ms);
      timer.unref?.();
      this.outer = { transactions: 0, timer };
    }
    const folded = this.outer?.transactions ?? 0;
    // Prepared once: parsing SAVEPOINT/RELEASE text on every commit is measurable.
    this.run('SAVEPOINT wp');
    let r: T;
    this.depth++;
    try {
      r = fn();
      this.run('RELEASE wp');
    } catch (e) {
      try {
        this.run('ROLLBACK TO wp');
        this.run('RELEASE wp');
      } catch (undo) {
        // SQLite rolled back the whole transaction on its own (out of memory, say): with
        // deferred commits, the earlier transactions it held went with it.
        if (folded > 0) this.lose(undo);
        else this.dropOuter();
        throw e;
      }
      throw e;
    } finally {
      this.depth--;
    }
    // Only an outermost transaction counts: a commit must never cut through an enclosing one.
    if (this.depth === 0 && this.outer && this.defer && ++this.outer.transactions >= this.defer.transactions) this.settle();
    return r;
  }

  /**
   * Folds the transactions of the next `ms` milliseconds (at most `transactions` of
   * them) into one SQLite transaction. sql.js keeps the database in an in-memory file
   * and a commit writes every page it changed into it: for the embedded store, whose
   * durability is its journal, not this file, that write was about half of folding one
   * event. The open transaction is committed by `settle`, which export and compact call
   * first (they read or rewrite the file); nothing outside this connection sees the
   * difference.
   */
  deferCommits(o: { transactions: number; ms: number }): void {
    this.defer = o;
  }

  /** Commits the deferred transaction, if one is open. */
  settle(): void {
    if (this.broken) throw this.broken;
    const outer = this.outer;
    if (!outer) return;
    if (this.depth > 0) throw new Error('Db.settle inside a transaction');
    this.outer = null;
    clearTimeout(outer.timer);
    try {
      this.run('COMMIT');
    } catch (e) {
      this.lose(e);
      throw this.broken;
    }
  }

  private settleQuietly(): void {
    try {
      this.settle();
    } catch {
      // recorded in `broken`: the next transaction throws it
    }
  }

  private dropOuter(): void {
    if (this.outer) clearTimeout(this.outer.timer);
    this.outer = null;
  }

  private lose(e: unknown): void {
    this.dropOuter();
    this.broken ??= new WaypointError(
      'io',
      `The in-memory database lost changes it had folded (${e instanceof Error ? e.message : String(e)}); the journal holds every acknowledged event: reopen the store.`,
    );
  }

  /**
   * Makes sure the database file holds at least `bytes` of free pages, so the next
   * open can replay a journal tail (and take new events) without growing the file.
   *
   * Why: sql.js keeps the file in an Emscripten MEMFS array of exactly the loaded
   * size, and the first write past its end reallocates and copies the whole file
   * (1.125x). For a 40 MB store that copy touches ~45 MB of fresh memory, which
   * measured 150-500 ms on the benchmark machine — more than the rest of opening.
   * Free pages are reused by SQLite before the file is extended. Returns the pages added.
   */
  reserveFreePages(bytes: number): number {
    const pageSize = Number(this.get<{ page_size: number }>('PRAGMA page_size')?.page_size ?? 4096);
    const free = Number(this.get<{ freelist_count: number }>('PRAGMA freelist_count')?.freelist_count ?? 0);
    const want = Math.ceil(bytes / pageSize) - free;
    if (want <= 0) return 0;
    // A blob's overflow pages go to the freelist when its table is dropped.
    this.raw.exec(`CREATE TABLE wp_reserve (b BLOB); INSERT INTO wp_reserve VALUES (zeroblob(${want * (pageSize - 8)})); DROP TABLE wp_reserve;`);
    return want;
  }

  /**
   * VACUUMs when the free pages exceed `maxFreeBytes` — after an export has dropped
   * the events a long history left in the table — so the file, read whole on every
   * open and held whole in memory, shrinks back to what it holds. Below that, free
   * pages are kept: new rows reuse them without growing the file.
   */
  compact(maxFreeBytes: number): boolean {
    this.settle();
    const pageSize = Number(this.get<{ page_size: number }>('PRAGMA page_size')?.page_size ?? 4096);
    const free = Number(this.get<{ freelist_count: number }>('PRAGMA freelist_count')?.freelist_count ?? 0);
    if (free * pageSize <= maxFreeBytes) return false;
    this.dropStatements();
    this.raw.exec('VACUUM');
    return true;
  }

  export(): Uint8Array {
    this.settle();
    this.dropStatements();
    const bytes = this.raw.export();
    this.applyPragmas();
    return bytes;
  }

  close(): void {
    // Whatever a deferred transaction holds dies with the in-memory database, as a commit would have.
    this.dropOuter();
    this.dropStatements();
    this.raw.close();
  }

  private dropStatements(): void {
    for (const s of this.cache.values()) {
      try {
        s.free();
      } catch {
        // already freed by sql.js
      }
    }
    this.cache.clear();
  }
}
