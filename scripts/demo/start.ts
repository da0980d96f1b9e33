// `npm start`: the product working, in one command. Builds and packages the
// extension, installs the VSIX into a fresh code-server, copies the sample project
// into a temp folder as a git repository, has a scripted agent work on it through
// the Waypoint CLI, then serves the workbench on 127.0.0.1 until Ctrl-C.
//
//   npm start                      serve until Ctrl-C
//   npm start -- --screenshot F    open the workbench in Chromium, save F, and exit
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { launchChromium } from '../harness/browser';
import { installExtension, startCodeServer } from '../harness/code-server';
import { ensureHarness } from '../harness/install';
import { repoRoot } from '../harness/versions';
import { vsixPath } from '../../test/package/vsix';
import { cliAvailable } from './cli';
import { runDemoAgent } from './agent';

const log = (line: string) => console.log(`[demo] ${line}`);

function run(cmd: string, args: string[], cwd: string): void {
  const r = spawnSync(cmd, args, { cwd, stdio: ['ignore', 'ignore', 'inherit'] });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (exit ${r.status})`);
}

/** The sample project as a fresh git repository with one commit. */
function makeWorkspace(workDir: string): string {
  const ws = path.join(workDir, 'slugkit');
  fs.cpSync(path.join(__dirname, 'sample-project'), ws, { recursive: true });
  run('git', ['init', '-q', '-b', 'main'], ws);
  // The identity goes into the demo repository's own config (not only this commit), so the
  // review panel's commit works in the demo on a machine with no global git identity.
  run('git', ['config', 'user.name', 'Waypoint Demo'], ws);
  run('git', ['config', 'user.email', 'demo@waypoint.invalid'], ws);
  run('git', ['add', '-A'], ws);
  run('git', ['commit', '-q', '-m', 'slugkit 1.2.0'], ws);
  return ws;
}

async function main(): Promise<void> {
  const shotIdx = process.argv.indexOf('--screenshot');
  const screenshot = shotIdx > 0 ? path.resolve(process.argv[shotIdx + 1] ?? 'demo.png') : undefined;

  ensureHarness();
  log('building and packaging the extension');
  run('npm', ['run', '--silent', 'package'], repoRoot);
  if (!cliAvailable()) {
    throw new Error('dist/cli.js is not the Waypoint CLI yet (this branch predates it): merge main and retry');
  }

  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'waypoint-demo-'));
  const removeWorkDir = () => {
    if (!process.env.WAYPOINT_KEEP_DEMO) fs.rmSync(workDir, { recursive: true, force: true });
  };
  process.once('exit', removeWorkDir);
  const serverOpts = { workDir: path.join(workDir, 'code-server') };
  installExtension(serverOpts, vsixPath);
  const workspace = makeWorkspace(workDir);
  log(`demo workspace: ${workspace}`);
  const { state } = await runDemoAgent(workspace, log);
  if (state !== 'interrupted') log(`warning: expected the task to be interrupted, it is ${state}`);

  // Ctrl-C: the harness kills the server's process group and exits; the 'exit'
  // hook above then removes the work folder.
  const server = await startCodeServer(serverOpts);

  const url = server.url(workspace);
  if (screenshot) {
    const browser = await launchChromium();
    try {
      const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
      await page.goto(url);
      await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
      // What a person does first: open the Waypoint view and expand the demo task.
      await page.locator('.activitybar .action-item a[aria-label^="Waypoint"]').first().click({ timeout: 60_000 });
      const rows = page.locator('.part.sidebar .monaco-list-row');
      await page.locator('.statusbar', { hasText: 'interrupted' }).waitFor({ timeout: 60_000 });
      const task = rows.first();
      await task.waitFor({ timeout: 60_000 });
      if ((await task.getAttribute('aria-expanded')) !== 'true') await task.locator('.monaco-tl-twistie').click();
      const step = rows.filter({ hasText: 'Read slugify' }).first();
      await step.waitFor({ timeout: 15_000 }).catch(() => undefined);
      if ((await step.getAttribute('aria-expanded').catch(() => null)) === 'false') await step.locator('.monaco-tl-twistie').click();
      await page.waitForTimeout(Number(process.env.WAYPOINT_DEMO_SETTLE_MS ?? 2_000));
      await page.screenshot({ path: screenshot });
      log(`screenshot saved to ${screenshot}`);
    } finally {
      await browser.close();
    }
    await server.stop();
    return;
  }
  const keep = process.env.WAYPOINT_KEEP_DEMO
    ? `The demo folder ${workDir} is kept when you stop.`
    : `Ctrl-C removes the demo folder ${workDir}; run with WAYPOINT_KEEP_DEMO=1 to keep it.`;
  console.log(`\nWaypoint demo is running. Open:\n\n  ${url}\n\n${keep}\nPress Ctrl-C to stop.`);
}

main().catch((e) => {
  console.error(`[demo] ${(e as Error).message}`);
  process.exit(1);
});
