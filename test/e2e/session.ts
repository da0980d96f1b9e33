// One code-server + Chromium for the whole UI suite, with the PACKAGED extension
// installed into a fresh extensions dir: what a person gets from the VSIX, nothing
// from the source tree. Each scenario opens its own page on its own workspace.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { launchChromium } from '../../scripts/harness/browser';
import { installExtension, startCodeServer, type CodeServer } from '../../scripts/harness/code-server';
import { ensureHarness } from '../../scripts/harness/install';
import { repoRoot } from '../../scripts/harness/versions';
import { vsixPath } from '../package/vsix';

export const outputDir = path.join(repoRoot, 'test-output', 'e2e');

interface Session {
  server: CodeServer;
  browser: Browser;
  workDir: string;
}

let session: Session | undefined;

export async function startSession(): Promise<void> {
  ensureHarness();
  // Always repackage: a stale VSIX would test yesterday's extension.
  const pack = spawnSync('npm', ['run', '--silent', 'package'], { cwd: repoRoot, stdio: ['ignore', 'ignore', 'inherit'] });
  if (pack.status !== 0) throw new Error(`npm run package failed (exit ${pack.status})`);
  fs.rmSync(outputDir, { recursive: true, force: true });
  fs.mkdirSync(outputDir, { recursive: true });
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'waypoint-e2e-'));
  const opts = { workDir, logFile: path.join(outputDir, 'code-server.log') };
  installExtension(opts, vsixPath);
  const browser = await launchChromium();
  try {
    // A closed page's extension host lingers for the reconnection grace time (3 h by
    // default) in case the browser comes back; a short one lets a closed window's host
    // exit as a desktop window's does (the two-windows scenario relies on it).
    session = { server: await startCodeServer({ ...opts, env: { CODE_SERVER_RECONNECTION_GRACE_TIME: '5' } }), browser, workDir };
  } catch (e) {
    await browser.close();
    throw e;
  }
}

export async function stopSession(): Promise<void> {
  const s = session;
  session = undefined;
  if (!s) return;
  await s.browser.close();
  await s.server.stop();
  if (!process.env.WAYPOINT_KEEP_WORKDIR) fs.rmSync(s.workDir, { recursive: true, force: true });
}

export function extensionsDir(): string {
  if (!session) throw new Error('e2e session not started');
  return session.server.extensionsDir;
}

/** The folder openWorkbench(name) opens (a second window on the same folder passes the same name). */
export function workspaceFolder(name: string): string {
  if (!session) throw new Error('e2e session not started');
  return path.join(session.workDir, 'workspaces', name);
}

/** A fresh workspace folder (with `.waypoint/` unless told otherwise) opened in a new page. */
export async function openWorkbench(name: string, opts: { waypointDir?: boolean; prepare?: (folder: string) => void } = {}): Promise<Page> {
  if (!session) throw new Error('e2e session not started');
  const folder = workspaceFolder(name);
  fs.mkdirSync(folder, { recursive: true });
  if (opts.waypointDir !== false) fs.mkdirSync(path.join(folder, '.waypoint'), { recursive: true });
  fs.writeFileSync(path.join(folder, 'README.md'), `# ${name}\n`);
  opts.prepare?.(folder);
  const page = await session.browser.newPage({ viewport: { width: 1400, height: 900 } });
  await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new URL(session.server.url(folder)).origin });
  // Generous: on a machine shared by many test runs the workbench can take a minute to load.
  await page.goto(session.server.url(folder), { timeout: 120_000 });
  await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
  // The extension host and its extensions come up after the workbench paints.
  await page.locator('.statusbar').waitFor();
  return page;
}

/** Runs the freshly built CLI (dist/cli.js) against a workspace, as an agent would, and parses its --json output. */
export function cli(folder: string, ...args: string[]): Record<string, unknown> {
  const r = spawnSync(process.execPath, [path.join(repoRoot, 'dist', 'cli.js'), ...args, '--workspace', folder, '--json'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`waypoint ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

/** A task driven through the CLI: two steps that edit src/app.js, then silence until its lease lapses. */
export function interruptedTaskFixture(folder: string): { taskId: string; stepStartCheckpoint: string } {
  fs.mkdirSync(path.join(folder, 'src'), { recursive: true });
  fs.writeFileSync(path.join(folder, 'src', 'app.js'), 'module.exports = 1;\n');
  const plan = path.join(folder, '.waypoint', 'plan.json');
  fs.writeFileSync(plan, JSON.stringify([{ id: 'edit', title: 'Edit app.js' }, { id: 'test', title: 'Run the tests', dependsOn: ['edit'] }]));
  const { taskId } = cli(folder, 'task', 'start', '--goal', 'Make app.js return 2', '--plan', plan, '--agent', 'e2e-agent', '--lease-ttl', '12') as { taskId: string };
  const { checkpointId } = cli(folder, 'step', 'start', '--task', taskId, '--step', 'edit') as { checkpointId: string };
  fs.writeFileSync(path.join(folder, 'src', 'app.js'), 'module.exports = 2; // edited by the agent\n');
  cli(folder, 'step', 'complete', '--task', taskId, '--step', 'edit', '--summary', 'app.js returns 2');
  cli(folder, 'step', 'start', '--task', taskId, '--step', 'test');
  // Then silence: once the 12 s lease lapses, the next opener (the extension) marks the task interrupted.
  // (12 s, not 1: on a machine shared by several builds the agent's own CLI calls were seen over 6 s apart.)
  const lapse = Date.now() + 12_500;
  while (Date.now() < lapse) spawnSync('sleep', ['0.5']);
  return { taskId, stepStartCheckpoint: checkpointId };
}

export function screenshotPath(title: string): string {
  return path.join(outputDir, `${title.replace(/[^a-z0-9]+/gi, '-').replace(/^-|-$/g, '').toLowerCase()}.png`);
}
