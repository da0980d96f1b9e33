// Bundles the integration runner and suites into out/integration/: the extension
// host loads plain CommonJS, not TypeScript. `vscode` comes from the host and mocha
// from node_modules at run time (mocha loads its reporters dynamically).
import esbuild from 'esbuild';
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from './versions';

export const integrationOut = path.join(repoRoot, 'out', 'integration');
export const integrationRunner = path.join(integrationOut, 'runner.js');

export async function buildIntegrationTests(): Promise<void> {
  const suiteDir = path.join(repoRoot, 'test', 'integration', 'suite');
  const suites = fs.readdirSync(suiteDir).filter((f) => f.endsWith('.test.ts'));
  fs.rmSync(integrationOut, { recursive: true, force: true });
  await esbuild.build({
    entryPoints: [
      path.join(repoRoot, 'test', 'integration', 'runner.ts'),
      ...suites.map((f) => path.join(suiteDir, f)),
    ],
    outdir: integrationOut,
    entryNames: '[name]', // flat: the runner finds suites next to itself
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    sourcemap: 'inline',
    external: ['vscode', 'mocha'],
    logLevel: 'warning',
  });
}

/** The extension itself, development build (source maps on). */
export function buildExtension(production = false): void {
  const { spawnSync } = require('node:child_process') as typeof import('node:child_process');
  const r = spawnSync(process.execPath, ['esbuild.js', ...(production ? ['--production'] : [])], {
    cwd: repoRoot, stdio: 'inherit',
  });
  if (r.status !== 0) throw new Error(`esbuild.js failed (exit ${r.status})`);
}

// `node --import tsx scripts/harness/build-tests.ts`: the pre-launch task of the
// "Extension Tests" launch configuration.
if (require.main === module) {
  buildExtension();
  buildIntegrationTests().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
