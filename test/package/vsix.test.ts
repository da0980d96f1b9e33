// The VSIX carries only what the allow-list .vscodeignore names. Run after
// `npm run package` (npm run test:package does both).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import pkg from '../../package.json';
import { listZip, type ZipEntry } from './zip';
import { vsixPath } from './vsix';

/**
 * What may ship. vsce adds its own manifest files and normalises README/CHANGELOG to
 * lower case and LICENSE to LICENSE.txt, so those names are matched as vsce writes them.
 */
const allowed: RegExp[] = [
  /^\[Content_Types\]\.xml$/,
  /^extension\.vsixmanifest$/,
  /^extension\/package\.json$/,
  /^extension\/readme\.md$/i,
  /^extension\/changelog\.md$/i,
  /^extension\/LICENSE(\.txt)?$/,
  /^extension\/dist\/.+/,
  /^extension\/media\/.+/,
];

describe('VSIX contents', () => {
  let entries: ZipEntry[];
  before(() => {
    assert.ok(fs.existsSync(vsixPath), `${vsixPath} is missing: run npm run package first`);
    entries = listZip(vsixPath);
  });

  it('contains nothing outside the allow-list', () => {
    const stray = entries.map((e) => e.name).filter((n) => !allowed.some((re) => re.test(n)));
    assert.deepEqual(stray, []);
  });

  it('ships no source maps, TypeScript sources or node_modules', () => {
    const bad = entries.map((e) => e.name).filter((n) => /\.map$|\.tsx?$|node_modules\//.test(n));
    assert.deepEqual(bad, []);
  });

  it('ships the bundled extension, the CLI (its launcher and dist/cli.js) and sql-wasm.wasm', () => {
    const byName = new Map(entries.map((e) => [e.name, e]));
    const main = `extension/${pkg.main.replace(/^\.\//, '')}`;
    for (const name of [main, `extension/${pkg.bin.waypoint}`, 'extension/dist/cli.js', 'extension/dist/sql-wasm.wasm']) {
      const e = byName.get(name);
      assert.ok(e, `${name} is in the VSIX`);
      assert.ok(e.size > 0, `${name} is not empty`);
    }
  });

  it('ships the activity-bar icon and the package manifest', () => {
    const names = new Set(entries.map((e) => e.name));
    assert.ok(names.has('extension/media/waypoint.svg'));
    assert.ok(names.has('extension/package.json'));
  });
});
