import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { current } from '../hooks';
import { cli, openWorkbench, screenshotPath } from '../session';
import { runCommand } from '../workbench';


const git = (cwd: string, ...args: string[]) => {
  const r = spawnSync('git', ['-c', 'user.name=E2E', '-c', 'user.email=e2e@waypoint.invalid', ...args], { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
};

const lines = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `line ${i + 1} ${tag}`).join('\n') + '\n';

/** A git repository with a task waiting for review: a.js has two separate changes, b.js one, c.js is new. */
function reviewFixture(folder: string): string {
  fs.writeFileSync(path.join(folder, 'a.js'), lines(40, 'a'));
  fs.writeFileSync(path.join(folder, 'b.js'), lines(5, 'b'));
  fs.writeFileSync(path.join(folder, '.gitignore'), '.waypoint/\n.vscode/\n');
  git(folder, 'init', '-q', '-b', 'main');
  // The person's identity, as any real repository has it (the hermetic HOME has none).
  git(folder, 'config', 'user.name', 'E2E Person');
  git(folder, 'config', 'user.email', 'e2e@waypoint.invalid');
  git(folder, 'add', '-A');
  git(folder, 'commit', '-q', '-m', 'base');
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
async function setTheme(page: Page, folder: string, theme: string): Promise<void> {
  fs.mkdirSync(path.join(folder, '.vscode'), { recursive: true });
  fs.writeFileSync(path.join(folder, '.vscode', 'settings.json'), JSON.stringify({ 'workbench.colorTheme': theme }));
  await page.waitForTimeout(2_500);
}

describe('review panel', () => {
  it('opens from the palette; rejecting a hunk and approving files commits exactly the approved part', async function () {
    this.timeout(240_000);
    let folder = '';
    let taskId = '';
    const page = (current.page = await openWorkbench('review', {
      prepare: (f) => {
        folder = f;
        taskId = reviewFixture(f);
      },
    }));
    await page.locator('.statusbar', { hasText: 'Review:' }).waitFor({ timeout: 60_000 });
    await runCommand(page, 'Waypoint: Review Changes Before Commit', 60_000, { opensQuickPick: true });
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Polish the modules' }).first().click();
    // The page lives two iframes deep (the webview host frame, then the page's own).
    const view = page.frameLocator('iframe.webview').frameLocator('iframe');
    await view.getByRole('button', { name: 'Approve every included file' }).waitFor({ timeout: 60_000 });
    await view.getByRole('button', { name: /^a\.js, modified/ }).click();
    await view.getByRole('button', { name: 'Approve change 1 in a.js' }).click();
    await view.getByRole('button', { name: 'Reject change 2 in a.js' }).click();
    await view.getByRole('button', { name: 'Approve b.js' }).click();
    await view.getByRole('button', { name: 'Approve c.js' }).click();
    await setTheme(page, folder, 'Default Light Modern');
    await page.screenshot({ path: screenshotPath('review panel light theme') });
    await setTheme(page, folder, 'Default Dark Modern');
    await page.screenshot({ path: screenshotPath('review panel dark theme') });
    await view.getByRole('button', { name: 'Commit the approved changes and revert the rejected ones' }).click();
    const result = view.locator('#result');
    await view.locator('#result.ok, #result.error').waitFor({ timeout: 60_000 });
    assert.equal(await result.getAttribute('class'), 'ok', await result.innerText());
    const log = git(folder, 'log', '-1', '--format=%B');
    assert.match(log, new RegExp(`Waypoint-Task: ${taskId}`));
    const stat = git(folder, 'show', 'HEAD', '--name-only', '--format=');
    assert.deepEqual(stat.trim().split('\n').sort(), ['a.js', 'b.js', 'c.js']);
    const committedA = git(folder, 'show', 'HEAD:a.js');
    assert.match(committedA, /CHANGED NEAR THE TOP/);
    assert.doesNotMatch(committedA, /CHANGED NEAR THE END/);
    assert.doesNotMatch(fs.readFileSync(path.join(folder, 'a.js'), 'utf8'), /CHANGED NEAR THE END/, 'the rejected hunk is reverted in the workspace');
    const detail = cli(folder, 'show', '--task', taskId) as { task: { state: string; commit: string } };
    assert.equal(detail.task.state, 'completed');
    assert.equal(detail.task.commit, git(folder, 'rev-parse', 'HEAD').trim());
  });
});
