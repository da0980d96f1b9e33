// Where `npm run package` leaves the VSIX.
import path from 'node:path';
import pkg from '../../package.json';
import { repoRoot } from '../../scripts/harness/versions';

export const vsixPath = path.join(repoRoot, `${pkg.name}-${pkg.version}.vsix`);
