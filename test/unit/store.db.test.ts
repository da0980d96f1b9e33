import * as assert from 'node:assert/strict';
import { Db } from '../../src/core/store/db';
import { loadSqlJs } from '../../src/core/store/sqlite';

/** Db.all builds rows from one read of the column names: they must equal sql.js's own getAsObject() rows. */
describe('Db.all', () => {
  it('returns exactly the rows getAsObject() returns: every value type, NULLs, duplicate names, no rows, rebinding', async () => {
    const SQL = await loadSqlJs();
    const raw = new SQL.Database();
    const db = new Db(raw);
    db.exec('CREATE TABLE t (i INTEGER, r REAL, s TEXT, b BLOB, n TEXT)');
    db.run('INSERT INTO t VALUES (?, ?, ?, ?, ?)', [1, 1.5, 'one', new Uint8Array([0, 255, 7]), null]);
    db.run('INSERT INTO t VALUES (?, ?, ?, ?, ?)', [-2, -0.25, '', new Uint8Array([]), 'x']);
    db.run('INSERT INTO t VALUES (?, ?, ?, ?, ?)', [null, null, 'nul\u0000in', null, null]);
    const expected = (sql: string, params?: (string | number)[]) => {
      const s = raw.prepare(sql);
      if (params) s.bind(params);
      const out: Record<string, unknown>[] = [];
      while (s.step()) out.push(s.getAsObject());
      s.free();
      return out;
    };
    for (const [sql, params] of [
      ['SELECT * FROM t ORDER BY rowid', undefined],
      // The same name twice: the later column wins, as in getAsObject().
      ['SELECT i AS v, s AS v, r FROM t ORDER BY rowid', undefined],
      ['SELECT * FROM t WHERE i = ?', [1]],
      ['SELECT * FROM t WHERE i = ?', [-2]],
      ['SELECT * FROM t WHERE i = ?', [99]],
    ] as const) {
      assert.deepEqual(db.all(sql, params ? [...params] : undefined), expected(sql, params ? [...params] : undefined), sql);
    }
    assert.deepEqual(Object.keys(db.all('SELECT * FROM t')[0]), ['i', 'r', 's', 'b', 'n'], 'column order kept');
    db.close();
  });
});
