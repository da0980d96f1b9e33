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

  constructor(readonly raw: Database) {}

  private stmt(sql: string): Statement {
    let s = this.cache.get(sql);
    if (!s) {
      s = this.raw.prepare(sql);
      this.cache.set(sql, s);
    }
    return s;
  }

  run(sql: string, params?: Params): void {
    const s = this.stmt(sql);
    s.run(params as SqlValue[]);
  }

  get<T = Row>(sql: string, params?: Params): T | undefined {
    const s = this.stmt(sql);
    try {
      if (params) s.bind(params as SqlValue[]);
      return s.step() ? (s.getAsObject() as T) : undefined;
    } finally {
      s.reset();
    }
  }

  all<T = Row>(sql: string, params?: Params): T[] {
    const s = this.stmt(sql);
    const out: T[] = [];
    try {
      if (params) s.bind(params as SqlValue[]);
      while (s.step()) out.push(s.getAsObject() as T);
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
    this.raw.exec('SAVEPOINT wp');
    try {
      const r = fn();
      this.raw.exec('RELEASE wp');
      return r;
    } catch (e) {
      this.raw.exec('ROLLBACK TO wp; RELEASE wp');
      throw e;
    }
  }

  export(): Uint8Array {
    this.dropStatements();
    return this.raw.export();
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
