import * as path from 'node:path';
import { buildSync } from 'esbuild';

/**
 * Bundles a test helper script into out/ so child processes start in plain Node
 * (no TypeScript loader): the crash tests spawn hundreds of them.
 */
export function bundleScript(entry: string): string {
  const outfile = path.join(__dirname, '..', '..', 'out', 'test', path.basename(entry).replace(/\.ts$/, '.js'));
  buildSync({ entryPoints: [entry], bundle: true, platform: 'node', format: 'cjs', target: 'node20', outfile, logLevel: 'error' });
  return outfile;
}
