// @ts-check
// Lint: the layering DESIGN.md asks for, enforced (src/core never imports `vscode`;
// layers import only downward: core <- mcp <- cli, core/mcp <- extension; the
// webview imports only what it shares with the extension; core <- ownership <- mcp), plus typescript-eslint's
// recommended rules. `npm run lint`, run by `npm test` before the unit tests.
import tseslint from 'typescript-eslint';

/** A layer may import none of these (relative paths seen from inside the layer). */
const layer = (files, forbidden, why) => ({
  files,
  rules: {
    'no-restricted-imports': [
      'error',
      {
        paths: [{ name: 'vscode', message: why }],
        patterns: forbidden.map((group) => ({ group: [group], message: why })),
      },
    ],
  },
});

export default tseslint.config(
  { ignores: ['dist/**', 'out/**', '.vscode-test/**', 'node_modules/**', 'test-output/**', '**/*.js', '**/*.cjs', '**/*.mjs'] },
  ...tseslint.configs.recommended,
  {
    // A disable comment that disables nothing is an error: one left behind by a moved line
    // would otherwise silence the rule for whatever code lands under it next.
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // Tests and narrow casts at boundaries use these deliberately; the compiler checks the rest.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/no-require-imports': 'off',
    },
  },
  layer(['src/core/**/*.ts'], ['**/ownership/**', '**/mcp/**', '**/cli/**', '**/extension/**', '../ownership/*', '../mcp/*', '../cli/*', '../extension/*'], 'src/core runs in plain Node (CLI, MCP server, tests): it never imports vscode or an upper layer.'),
  layer(['src/core/store/**/*.ts'], ['**/engine/**', '../engine/*', '../../engine/*', '**/ownership/**', '**/mcp/**', '**/cli/**', '**/extension/**'], 'src/core/store holds the events and their projections (and reads them, queries.ts): the engine sits on the store, never the other way.'),
  layer(['src/ownership/**/*.ts'], ['**/mcp/**', '**/cli/**', '**/extension/**', '../mcp/*', '../cli/*', '../extension/*'], 'src/ownership (who owns a store, how to reach it) sits on src/core only.'),
  layer(['src/hooks/**/*.ts'], ['**/mcp/**', '**/cli/**', '**/extension/**', '../mcp/*', '../cli/*', '../extension/*', '../../mcp/*', '../../cli/*', '../../extension/*'], 'src/hooks (the hook recorder and its adapters) sits on src/core only: it talks to the engine API.'),
  layer(['src/mcp/**/*.ts'], ['**/cli/**', '**/extension/**', '../cli/*', '../extension/*'], 'src/mcp sits on src/core only; it never imports vscode, the CLI or the extension.'),
  layer(['src/cli/**/*.ts'], ['**/extension/**', '../extension/*'], 'the CLI runs in plain Node: it never imports vscode or the extension.'),
  {
    // All SQL sits behind the projection readers (src/core/store/queries.ts) and the store:
    // nothing else reaches into the sql.js database, so another store backend has one seam.
    // Any member `.db` counts, however it is reached (`engine.projection.db`, `p.db`,
    // `x['db']`, a destructured `{ db }`): matching one spelling would let the others through.
    files: ['src/**/*.ts', 'webview-ui/**/*.ts'],
    ignores: ['src/core/store/**'],
    rules: {
      'no-restricted-syntax': [
        'error',
        { selector: "MemberExpression[property.name='db']", message: 'read projections through engine.queries (src/core/store/queries.ts) or the store, not a .db reach-in' },
        { selector: "MemberExpression[computed=true][property.value='db']", message: 'read projections through engine.queries (src/core/store/queries.ts) or the store, not a .db reach-in' },
        { selector: "ObjectPattern > Property[key.name='db']", message: 'read projections through engine.queries (src/core/store/queries.ts) or the store, not a destructured db' },
      ],
    },
  },
  {
    files: ['webview-ui/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [{ name: 'vscode', message: 'the webview runs in a browser page' }],
          patterns: [{ group: ['**/src/core/**', '**/src/mcp/**', '**/src/cli/**', '!**/src/extension/review/protocol'], message: 'the webview shares only the message protocol with the extension' }],
        },
      ],
    },
  },
);
