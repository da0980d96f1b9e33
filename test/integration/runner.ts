// Entry point the extension host loads as `extensionTestsPath` (both launchers:
// code-server's smoke-test driver and @vscode/test-electron). Bundled by
// scripts/harness/build-tests.ts into out/integration/runner.js next to the suites.
import fs from 'node:fs';
import path from 'node:path';
import { format } from 'node:util';
import Mocha from 'mocha';

/** Where the launcher wants the counts; the host inherits the launcher's environment. */
const resultFile = process.env.WAYPOINT_TEST_RESULT_FILE;

/**
 * Under code-server the workbench forwards the renderer's logs and the host's console
 * through one channel; a prefix on mocha's lines lets the launcher stream ours to the
 * terminal and send the workbench's chatter to a log file. (The host's `console`
 * methods cannot be replaced: VS Code defines them with a no-op setter.)
 */
function prefixMochaOutput(prefix: string): void {
  const log = console.log;
  Mocha.reporters.Base.consoleLog = (...args: unknown[]) => log(prefix + format(...args));
}

export function run(): Promise<void> {
  const prefix = process.env.WAYPOINT_HOST_LOG_PREFIX;
  if (prefix) prefixMochaOutput(prefix);
  const reporter = process.env.WAYPOINT_TEST_REPORTER;
  const mocha = new Mocha({
    ui: 'bdd',
    color: false, // output travels through console forwarding, not a TTY
    timeout: 20_000,
    ...(reporter ? { reporter } : {}),
  });
  const grep = process.env.WAYPOINT_TEST_GREP;
  if (grep) mocha.grep(grep);
  for (const f of fs.readdirSync(__dirname).sort()) {
    if (f.endsWith('.test.js')) mocha.addFile(path.join(__dirname, f));
  }
  return new Promise((resolve, reject) => {
    const runner = mocha.run((failures) => {
      const stats = runner.stats ?? { passes: 0, failures, pending: 0 };
      if (resultFile) {
        fs.writeFileSync(resultFile, JSON.stringify({
          passes: stats.passes, failures: stats.failures, pending: stats.pending,
        }));
      }
      if (failures > 0) reject(new Error(`${failures} integration test(s) failed`));
      else if (stats.passes === 0) reject(new Error('no integration test ran'));
      else resolve();
    });
  });
}
