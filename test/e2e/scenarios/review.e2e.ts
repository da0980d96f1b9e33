import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { current } from '../hooks';
import { git, reviewFixture, setTheme } from '../reviewFixture';
import { cli, openWorkbench, screenshotPath } from '../session';
import { runCommand } from '../workbench';

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
