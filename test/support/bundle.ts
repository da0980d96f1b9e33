import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildSync } from 'esbuild';

/**
 * Bundles a test helper script into out/ so child processes start in plain Node
 * (no TypeScript loader): the crash tests spawn hundreds of them.
 *
 * Several test files bundle the same helper, and with mocha --parallel they do it at the
 * same time: the bundle is written beside its place and renamed over it, so a child that
 * another file is starting never reads a half-written script.
 */
export function bundleScript(entry: string): string {
  const outfile = path.join(__dirname, '..', '..', 'out', 'test', path.basename(entry).replace(/\.ts$/, '.js'));
  const r = buildSync({ entryPoints: [entry], bundle: true, platform: 'node', format: 'cjs', target: 'node20', outfile, logLevel: 'error', write: false });
  fs.mkdirSync(path.dirname(outfile), { recursive: true });
  for (const f of r.outputFiles) {
    const tmp = `${f.path}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, f.contents);
    fs.renameSync(tmp, f.path);
  }
  return outfile;
}
