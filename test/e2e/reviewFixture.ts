// The review scenarios' shared fixture: a git repository with a task waiting for
// review, made as an agent would (files written, steps reported through the CLI).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { cli } from './session';

export const git = (cwd: string, ...args: string[]): string => {
  const r = spawnSync('git', ['-c', 'user.name=E2E', '-c', 'user.email=e2e@waypoint.invalid', ...args], { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
};

const lines = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `line ${i + 1} ${tag}`).join('\n') + '\n';

/** Makes `folder` (its files already written) a git repository with one base commit, ignoring Waypoint's and VS Code's folders. */
export function initRepo(folder: string): void {
  fs.writeFileSync(path.join(folder, '.gitignore'), '.waypoint/\n.vscode/\n');
  git(folder, 'init', '-q', '-b', 'main');
  // The person's identity, as any real repository has it (the hermetic HOME has none).
  git(folder, 'config', 'user.name', 'E2E Person');
  git(folder, 'config', 'user.email', 'e2e@waypoint.invalid');
  git(folder, 'add', '-A');
  git(folder, 'commit', '-q', '-m', 'base');
}

/** A git repository with a task waiting for review: a.js has two separate changes, b.js one, c.js is new. */
export function reviewFixture(folder: string): string {
  fs.writeFileSync(path.join(folder, 'a.js'), lines(40, 'a'));
  fs.writeFileSync(path.join(folder, 'b.js'), lines(5, 'b'));
  initRepo(folder);
  const { taskId } = cli(folder, 'task', 'start', '--goal', 'Polish the modules', '--agent', 'e2e-agent') as { taskId: string };
  cli(folder, 'step', 'start', '--task', taskId, '--title', 'edit the modules');
  const a = lines(40, 'a').split('\n');
  a[1] = 'line 2 a CHANGED NEAR THE TOP';
  a[37] = 'line 38 a CHANGED NEAR THE END';
  fs.writeFileSync(path.join(folder, 'a.js'), a.join('\n'));
  fs.writeFileSync(path.join(folder, 'b.js'), lines(5, 'b') + 'line 6 b ADDED\n');
  fs.writeFileSync(path.join(folder, 'c.js'), 'module.exports = "new file";\n');
  cli(folder, 'step', 'complete', '--task', taskId, '--step', 's1', '--summary', 'edited a.js and b.js, added c.js');
  cli(folder, 'task', 'complete', '--task', taskId, '--summary', 'ready for review');
  return taskId;
}

/** Switches the colour theme through the workspace's settings, which VS Code applies live. */
export async function setTheme(page: Page, folder: string, theme: string): Promise<void> {
  fs.mkdirSync(path.join(folder, '.vscode'), { recursive: true });
  fs.writeFileSync(path.join(folder, '.vscode', 'settings.json'), JSON.stringify({ 'workbench.colorTheme': theme }));
  await page.waitForTimeout(2_500);
}
