import * as assert from 'node:assert/strict';
import * as path from 'node:path';

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
  ];
  for (const [file, code, refused] of cases) {
    it(`${refused ? 'refuses' : 'allows'} ${code.split('\n')[0]} in ${file}`, async () => {
      const messages = await lint(file, code);
      assert.equal(messages.length > 0, refused, messages.join('; '));
    });
  }
});
