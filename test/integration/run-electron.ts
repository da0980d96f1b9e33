// The same integration suites under @vscode/test-electron, for a desktop with
// internet access (it downloads a VS Code build; these CI machines cannot, which
// is why `npm test` uses run-code-server.ts). Usage: npm run test:integration:electron
// [-- VERSION], VERSION defaulting to the engines.vscode minimum.
import { runTests } from '@vscode/test-electron';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pkg from '../../package.json';
import { buildExtension, buildIntegrationTests, integrationRunner } from '../../scripts/harness/build-tests';
import { repoRoot } from '../../scripts/harness/versions';
import { printSummary, readResult } from './result';

const label = 'integration';

async function main(): Promise<number> {
  buildExtension();
  await buildIntegrationTests();
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'waypoint-it-'));
  const workspace = path.join(workDir, 'workspace');
  fs.mkdirSync(path.join(workspace, '.waypoint'), { recursive: true });
  const resultFile = path.join(workDir, 'result.json');
  const version = process.argv[2] ?? pkg.engines.vscode.replace(/^\^/, '');
  try {
    const code = await runTests({
      version,
      extensionDevelopmentPath: repoRoot,
      extensionTestsPath: integrationRunner,
      launchArgs: [workspace, '--disable-extensions', '--user-data-dir', path.join(workDir, 'user-data')],
      extensionTestsEnv: { WAYPOINT_TEST_RESULT_FILE: resultFile, WAYPOINT_SUITE_LABEL: label },
    }).catch(() => 1);
    const result = readResult(resultFile);
    printSummary(label, result);
    return code === 0 && result !== undefined && result.failures === 0 ? 0 : 1;
  } finally {
    fs.rmSync(workDir, { recursive: true, force: true });
  }
}

main().then((code) => process.exit(code), (e) => {
  console.error(`[integration] ${(e as Error).stack ?? e}`);
  process.exit(1);
});
