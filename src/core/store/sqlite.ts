import * as fs from 'node:fs';
import * as path from 'node:path';
import initSqlJs, { type SqlJsStatic } from 'sql.js';

let sqlJs: Promise<SqlJsStatic> | undefined;

/**
 * Loads sql.js once per process, behind one promise, so nothing pays for the WASM
 * until a store is really opened. The bundle ships `sql-wasm.wasm` beside itself
 * (esbuild.js copies it into dist/); from sources (tests, tsx) it comes from the
 * sql.js package. The bytes are passed explicitly as `wasmBinary`, so sql.js never
 * tries to fetch or locate anything by itself.
 */
export function loadSqlJs(): Promise<SqlJsStatic> {
  sqlJs ??= (async () => {
    const wasmBinary = await fs.promises.readFile(locateWasm());
    return initSqlJs({ wasmBinary: wasmBinary as unknown as ArrayBuffer });
  })();
  return sqlJs;
}

function locateWasm(): string {
  const beside = path.join(__dirname, 'sql-wasm.wasm');
  if (fs.existsSync(beside)) return beside;
  return require.resolve('sql.js/dist/sql-wasm.wasm');
}
