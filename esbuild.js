// Bundles the extension host entry and the `waypoint` CLI (both Node, CommonJS).
// sql.js is bundled, never external; only its sql-wasm.wasm is copied into dist/
// and loaded explicitly as `wasmBinary` (see src/core/store/sqlite.ts).
const esbuild = require('esbuild');
const fs = require('node:fs');
const path = require('node:path');

const production = process.argv.includes('--production');
const watch = process.argv.includes('--watch');

/** Prints errors in the form VS Code's esbuild problem matcher understands. */
const problemMatcher = {
  name: 'problem-matcher',
  setup(build) {
    build.onStart(() => console.log('[watch] build started'));
    build.onEnd((result) => {
      for (const { text, location } of result.errors) {
        console.error(`✘ [ERROR] ${text}`);
        if (location) console.error(`    ${location.file}:${location.line}:${location.column}:`);
      }
      console.log('[watch] build finished');
    });
  },
};

/**
 * zod's public API re-exports every locale (~380 KB of the page's bundle) although
 * only English, imported on its own, is ever used. The page's bundle gets an empty
 * `locales` namespace instead: a smaller script that the webview parses faster.
 */
const zodEnglishOnly = {
  name: 'zod-english-only',
  setup(build) {
    build.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) =>
      /[\\/]zod[\\/]v4[\\/](classic|core|mini)[\\/]/.test(args.importer) ? { path: 'zod-locales', namespace: 'zod-english-only' } : undefined,
    );
    build.onLoad({ filter: /.*/, namespace: 'zod-english-only' }, () => ({ contents: 'export {};', loader: 'js' }));
  },
};

/**
 * `pg` decides at load time whether it runs in a Cloudflare Worker: where `navigator` is
 * not a global (Node 20, VS Code's extension host on it), it builds a `new Response(...)`
 * to find out, and that loads Node's whole fetch implementation (undici): ~25 ms of
 * every `waypoint tasks --all` (measured with --cpu-prof), in a process that never
 * fetches. Bundled for Node, the answer is known: no. The build fails if pg's source no
 * longer has the check, so a pg update cannot silently drop or change it.
 */
const pgNodeStreams = {
  name: 'pg-node-streams',
  setup(build) {
    build.onLoad({ filter: /[\\/]node_modules[\\/]pg[\\/]lib[\\/]stream\.js$/ }, async (args) => {
      const source = await fs.promises.readFile(args.path, 'utf8');
      const check = 'if (isCloudflareRuntime()) {';
      if (!source.includes(check)) throw new Error(`${args.path} no longer holds "${check}": review the pg-node-streams plugin in esbuild.js`);
      return { contents: source.replace(check, 'if (false) {'), loader: 'js' };
    });
  },
};

/**
 * The extension loads the MCP SDK eagerly: src/mcp/lazySdk.ts (a `require` on first use,
 * which spares a CLI call the SDK's load) resolves to src/mcp/eagerSdk.ts here. Required
 * lazily, the SDK's modules and the zod modules it shares with the webview protocols
 * become lazily initialised, and esbuild initialised `zod/mini` after the protocols'
 * top-level schemas had used it ("Class2 is not a constructor" as the extension loaded).
 * A window serves MCP to its agents anyway, so laziness would gain it nothing.
 */
const eagerMcpSdk = {
  name: 'eager-mcp-sdk',
  setup(build) {
    build.onResolve({ filter: /^\.\/lazySdk$/ }, (args) => ({ path: path.join(args.resolveDir, 'eagerSdk.ts') }));
  },
};

function copyWasm() {
  const src = require.resolve('sql.js/dist/sql-wasm.wasm');
  fs.mkdirSync('dist', { recursive: true });
  fs.copyFileSync(src, path.join('dist', 'sql-wasm.wasm'));
  // The `waypoint` command on Linux and macOS: a bash launcher that relays a checkpoint to a
  // serving owner without starting Node, and runs dist/cli.js for everything else.
  fs.copyFileSync(path.join('src', 'cli', 'waypoint.bash'), path.join('dist', 'waypoint'));
  fs.chmodSync(path.join('dist', 'waypoint'), 0o755);
}

async function main() {
  const common = {
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    minify: production,
    sourcemap: !production,
    sourcesContent: false,
    logLevel: 'silent',
    plugins: [problemMatcher, pgNodeStreams],
    // `pg` requires its optional native binding only when asked for it (`pg.native`), which
    // Waypoint never does: left external, the bundle builds without it and never loads it.
    external: ['pg-native'],
  };
  const contexts = await Promise.all([
    esbuild.context({
      ...common,
      entryPoints: { extension: 'src/extension/main.ts' },
      outdir: 'dist',
      external: ['vscode', 'pg-native'],
      plugins: [...common.plugins, eagerMcpSdk],
    }),
    // The review panel's and the timeline's pages: browser bundles (each shares its protocol.ts with the host).
    // highlight.js (its core and common languages only) is the review's own bundle, loaded after first content.
    esbuild.context({
      ...common,
      entryPoints: ['webview-ui/main.ts', 'webview-ui/main.css', 'webview-ui/highlight.ts', 'webview-ui/timeline.ts', 'webview-ui/timeline.css'],
      outdir: 'dist/webview',
      format: 'iife',
      platform: 'browser',
      target: 'es2022',
      // Minified in every build (the source map stays): the page fetches and parses this
      // script on every open, and in a development build it was most of the timeline's first paint.
      minify: true,
      plugins: [problemMatcher, zodEnglishOnly],
    }),
    esbuild.context({
      ...common,
      // `waypoint` itself: a small entry that answers relayed hooks without loading the rest.
      entryPoints: { cli: 'src/cli/entry.ts' },
      outdir: 'dist',
      banner: { js: '#!/usr/bin/env node' },
      plugins: [problemMatcher, zodEnglishOnly, pgNodeStreams],
    }),
    esbuild.context({
      ...common,
      // The full CLI, loaded by dist/cli.js for every other command. English-only zod here
      // too: every fresh `waypoint` process (an agent's hook, a checkpoint) parses the bundle.
      entryPoints: { 'waypoint-cli': 'src/cli/main.ts' },
      outdir: 'dist',
      plugins: [problemMatcher, zodEnglishOnly, pgNodeStreams],
    }),
  ]);
  copyWasm();
  if (watch) {
    await Promise.all(contexts.map((c) => c.watch()));
  } else {
    await Promise.all(contexts.map((c) => c.rebuild()));
    await Promise.all(contexts.map((c) => c.dispose()));
    fs.chmodSync(path.join('dist', 'cli.js'), 0o755);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
