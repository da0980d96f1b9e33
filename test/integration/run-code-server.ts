// Runs the integration suites inside code-server's Node extension host: the route
// that works offline (see shared/vscode-e2e.md). The workbench is opened by
// Chromium with a test payload; the smoke-test driver forwards the host's console
// to codeAutomationLog and reports run()'s outcome through codeAutomationExit.
// Exit code = test result.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { format } from 'node:util';
import { launchChromium } from '../../scripts/harness/browser';
import { buildExtension, buildIntegrationTests, integrationRunner } from '../../scripts/harness/build-tests';
import { startCodeServer, type CodeServer } from '../../scripts/harness/code-server';
import { ensureHarness } from '../../scripts/harness/install';
import { repoRoot } from '../../scripts/harness/versions';
import { printSummary, readResult } from './result';

const RUN_TIMEOUT_MS = Number(process.env.WAYPOINT_IT_TIMEOUT_MS ?? 180_000);
const label = 'integration';
/** Marks the extension host's console lines (see runner.ts). */
const HOST_PREFIX = '@@waypoint-host@@ ';
const outputDir = path.join(repoRoot, 'test-output', 'integration');

async function main(): Promise<number> {
  ensureHarness();
  buildExtension();
  await buildIntegrationTests();

  fs.mkdirSync(outputDir, { recursive: true });
  fs.rmSync(path.join(outputDir, 'code-server.log'), { force: true });
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'waypoint-it-'));
  const workspace = path.join(workDir, 'workspace');
  // .waypoint/ makes `workspaceContains:.waypoint` activate the extension.
  fs.mkdirSync(path.join(workspace, '.waypoint'), { recursive: true });
  const resultFile = path.join(workDir, 'result.json');

  let server: CodeServer | undefined;
  const browser = await launchChromium();
  try {
    server = await startCodeServer({
      workDir,
      smokeTestDriver: true,
      env: { WAYPOINT_TEST_RESULT_FILE: resultFile, WAYPOINT_HOST_LOG_PREFIX: HOST_PREFIX },
      logFile: path.join(outputDir, 'code-server.log'),
    });
    const remote = (p: string) => `vscode-remote://127.0.0.1:${server!.port}${p}`;
    const url = server.url(workspace, [
      ['extensionDevelopmentPath', remote(repoRoot)],
      ['extensionTestsPath', remote(integrationRunner)],
      ['skipWelcome', 'true'],
    ]);
    const page = await browser.newPage();
    const exitCode = new Promise<number>((resolve) => {
      void page.exposeFunction('codeAutomationExit', (code: number) => resolve(code));
    });
    const workbenchLog = fs.createWriteStream(path.join(outputDir, 'workbench.log'));
    await page.exposeFunction('codeAutomationLog', (type: string, args: unknown[]) => {
      const text = format(...args);
      if (text.startsWith(HOST_PREFIX)) process.stdout.write(`${text.slice(HOST_PREFIX.length)}\n`);
      else workbenchLog.write(`[${type}] ${text}\n`);
    });
    await page.goto(url, { timeout: 120_000 }); // a loaded machine can take a minute
    const timeout = new Promise<number>((resolve) => setTimeout(() => {
      console.error(`[integration] no result within ${RUN_TIMEOUT_MS} ms; logs in ${outputDir}`);
      resolve(1);
    }, RUN_TIMEOUT_MS).unref());
    const code = await Promise.race([exitCode, timeout]);
    const result = readResult(resultFile);
    printSummary(label, result);
    // Either signal alone could lie (a crashed host, a run with no tests): both must agree.
    return code === 0 && result !== undefined && result.failures === 0 && result.passes > 0 ? 0 : 1;
  } finally {
    await browser.close();
    await server?.stop();
    if (!process.env.WAYPOINT_KEEP_WORKDIR) fs.rmSync(workDir, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(`[integration] ${(e as Error).stack ?? e}`);
    process.exit(1);
  },
);
