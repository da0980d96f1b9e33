import type { Database, SqlValue, Statement } from 'sql.js';

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

  /** Runs fn inside a transaction; on a throw the database is left as it was. */
  transaction<T>(fn: () => T): T {
    // Prepared once: parsing SAVEPOINT/RELEASE text on every commit is measurable.
    this.run('SAVEPOINT wp');
    try {
      const r = fn();
      this.run('RELEASE wp');
      return r;
    } catch (e) {
      this.run('ROLLBACK TO wp');
      this.run('RELEASE wp');
      throw e;
    }
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
    const pageSize = Number(this.get<{ page_size: number }>('PRAGMA page_size')?.page_size ?? 4096);
    const free = Number(this.get<{ freelist_count: number }>('PRAGMA freelist_count')?.freelist_count ?? 0);
    if (free * pageSize <= maxFreeBytes) return false;
    this.dropStatements();
    this.raw.exec('VACUUM');
    return true;
  }

  export(): Uint8Array {
    this.dropStatements();
    const bytes = this.raw.export();
    this.applyPragmas();
    return bytes;
  }

  close(): void {
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
