import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { findCycles, importGraph } from '../../scripts/importCycles';

/**
 * The layering rules in eslint.config.mjs, tried on code that breaks them: a rule
 * that never fires would let src/core grow a `vscode` import unnoticed.
 */
const ROOT = path.resolve(__dirname, '..', '..');

async function lint(file: string, code: string): Promise<string[]> {
  const { ESLint } = (await import('eslint')) as typeof import('eslint');
  const eslint = new ESLint({ cwd: ROOT });
  const [r] = await eslint.lintText(code, { filePath: path.join(ROOT, file) });
  return r.messages.filter((m) => m.ruleId === 'no-restricted-imports' || m.ruleId === 'no-restricted-syntax').map((m) => m.message);
}

describe('lint: layers import only downward', function () {
  this.timeout(60_000);
  const cases: [string, string, boolean][] = [
    ['src/core/engine/x.ts', "import * as vscode from 'vscode';\nexport const a = vscode;\n", true],
    ['src/core/engine/x.ts', "import { StoreLink } from '../../ownership/storeLink';\nexport const a = StoreLink;\n", true],
    ['src/core/engine/x.ts', "import { startOwnerEndpoint } from '../../mcp/owner';\nexport const a = startOwnerEndpoint;\n", true],
    ['src/ownership/x.ts', "import { startOwnerEndpoint } from '../mcp/owner';\nexport const a = startOwnerEndpoint;\n", true],
    ['src/mcp/x.ts', "import { findOwner } from '../ownership/discovery';\nexport const a = findOwner;\n", false],
    ['src/core/store/x.ts', "import { main } from '../../cli/main';\nexport const a = main;\n", true],
    ['src/mcp/x.ts', "import { activate } from '../extension/main';\nexport const a = activate;\n", true],
    ['src/mcp/x.ts', "import * as vscode from 'vscode';\nexport const a = vscode;\n", true],
    ['src/cli/x.ts', "import { activate } from '../extension/main';\nexport const a = activate;\n", true],
    ['src/extension/x.ts', "import * as vscode from 'vscode';\nimport { Engine } from '../core/engine/engine';\nexport const a = [vscode, Engine];\n", false],
    ['src/mcp/x.ts', "import { Engine } from '../core/engine/engine';\nexport const a = Engine;\n", false],
    ['src/extension/x.ts', "declare const e: { store: { db: { get(q: string): unknown } } };\nexport const a = e.store.db.get('SELECT 1');\n", true],
    ['src/core/engine/x.ts', "declare const e: { store: { db: { get(q: string): unknown } } };\nexport const a = e.store.db.get('SELECT 1');\n", true],
    // A reach-in however it is spelt, not only `x.store.db`.
    ['src/core/engine/x.ts', "declare const e: { projection: { db: { get(q: string): unknown } } };\nexport const a = e.projection.db.get('SELECT 1');\n", true],
    ['src/extension/x.ts', "declare const p: { db: { get(q: string): unknown } };\nexport const a = p.db.get('SELECT 1');\n", true],
    ['src/mcp/x.ts', "declare const p: { db: { get(q: string): unknown } };\nexport const a = p['db'].get('SELECT 1');\n", true],
    ['src/cli/x.ts', "declare const p: { db: { get(q: string): unknown } };\nconst { db } = p;\nexport const a = db.get('SELECT 1');\n", true],
    ['webview-ui/x.ts', "declare const p: { db: unknown };\nexport const a = p.db;\n", true],
    // The store itself and the projection reader hold the database.
    ['src/core/store/x.ts', "declare const p: { db: { get(q: string): unknown } };\nexport const a = p.db.get('SELECT 1');\n", false],
    ['src/core/store/queries.ts', "declare const p: { db: { get(q: string): unknown } };\nexport const a = p.db.get('SELECT 1');\n", false],
    ['src/core/store/postgres/x.ts', "import { Engine } from '../../engine/engine';\nexport const a = Engine;\n", true],
    ['src/core/store/x.ts', "import { TaskRef } from '../engine/inputs';\nexport const a = TaskRef;\n", true],
    ['src/core/engine/x.ts', "import { Queries } from '../store/queries';\nexport const a = Queries;\n", false],
  ];
  for (const [file, code, refused] of cases) {
    it(`${refused ? 'refuses' : 'allows'} ${code.split('\n')[0]} in ${file}`, async () => {
      const messages = await lint(file, code);
      assert.equal(messages.length > 0, refused, messages.join('; '));
    });
  }
});

describe('lint: a disable directive that disables nothing is refused', function () {
  this.timeout(60_000);
  it('reports an unused eslint-disable as an error', async () => {
    const { ESLint } = (await import('eslint')) as typeof import('eslint');
    const eslint = new ESLint({ cwd: ROOT });
    const code = "// eslint-disable-next-line no-restricted-syntax\nexport const a = 1;\n";
    const [r] = await eslint.lintText(code, { filePath: path.join(ROOT, 'src/core/engine/x.ts') });
    const unused = r.messages.filter((m) => m.ruleId === null && /Unused eslint-disable directive/.test(m.message));
    assert.equal(unused.length, 1, JSON.stringify(r.messages));
    assert.equal(unused[0].severity, 2, 'an error, so `npm run lint` fails');
  });
  it('keeps a directive that guards a real reach-in without complaint', async () => {
    const { ESLint } = (await import('eslint')) as typeof import('eslint');
    const eslint = new ESLint({ cwd: ROOT });
    const code = "declare const p: { db: unknown };\n// eslint-disable-next-line no-restricted-syntax\nexport const a = p.db;\n";
    const [r] = await eslint.lintText(code, { filePath: path.join(ROOT, 'src/core/engine/x.ts') });
    assert.deepEqual(r.messages, []);
  });
});

describe('lint: no import cycle', function () {
  this.timeout(60_000);
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'waypoint-cycles-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
  const write = (rel: string, code: string): void => {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), code);
  };

  it('finds a loop closed by a type-only import, and names its files', () => {
    write('engine.ts', "import { Core } from './core';\nexport class Engine { core?: Core }\n");
    write('core.ts', "import type { Engine } from './engine';\nexport interface Core { engine: Engine }\n");
    write('leaf.ts', "import { Engine } from './engine';\nexport const e = Engine;\n");
    const cycles = findCycles(importGraph(dir));
    assert.equal(cycles.length, 1);
    assert.deepEqual(cycles[0].files.map((f) => path.basename(f)), ['core.ts', 'engine.ts']);
    assert.equal(cycles[0].loop.length, 2);
  });

  it('finds a longer loop through folders, re-exports and dynamic imports', () => {
    write('a/a.ts', "export { b } from '../b/b';\n");
    write('b/b.ts', "export const b = async () => (await import('../c')).c;\n");
    write('c.ts', "import { b } from './a/a';\nexport const c = b;\n");
    const cycles = findCycles(importGraph(dir));
    assert.equal(cycles.length, 1);
    assert.equal(cycles[0].files.length, 3);
  });

  it('passes a graph without loops', () => {
    write('a.ts', "import { b } from './b';\nexport const a = b;\n");
    write('b.ts', "import { c } from './c';\nexport const b = c;\n");
    write('c.ts', 'export const c = 1;\n');
    assert.deepEqual(findCycles(importGraph(dir)), []);
  });

  it('the check `npm run lint` runs exits non-zero on a loop and says where', () => {
    write('x.ts', "import { y } from './y';\nexport const x = y;\n");
    write('y.ts', "import { x } from './x';\nexport const y = () => x;\n");
    const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'scripts', 'importCycles.ts'), dir], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /x\.ts -> .*y\.ts -> .*x\.ts/);
  });
});
