import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { current } from '../hooks';
import { git, reviewFixture, setTheme } from '../reviewFixture';
import { cli, openWorkbench, screenshotPath } from '../session';
import { notification, runCommand } from '../workbench';

/** What a refused commit must leave exactly as it was: the files' bytes, git's view of them, HEAD, the index, the task. */
function snapshot(folder: string, taskId: string): unknown {
  const files = Object.fromEntries(['a.js', 'b.js', 'c.js'].map((f) => [f, fs.existsSync(path.join(folder, f)) ? fs.readFileSync(path.join(folder, f), 'base64') : null]));
  const detail = cli(folder, 'show', '--task', taskId) as { task: { state: string; commit: string | null }; steps?: { id: string; status: string }[] };
  return {
    files,
    status: git(folder, 'status', '--porcelain'),
    head: git(folder, 'rev-parse', 'HEAD'),
    index: git(folder, 'ls-files', '-s'),
    task: { state: detail.task.state, commit: detail.task.commit, steps: (detail.steps ?? []).map((s) => [s.id, s.status]) },
  };
}

describe('review panel', () => {
  it('no git identity: told so, nothing changes; set it from the notification and the same decisions commit exactly the approved hunks', async function () {
    this.timeout(300_000);
    let folder = '';
    let taskId = '';
    const page = (current.page = await openWorkbench('review', {
      prepare: (f) => {
        folder = f;
        taskId = reviewFixture(f);
        // A repository with no identity (the hermetic HOME has none), and git told never to guess one.
        git(f, 'config', '--unset', 'user.name');
        git(f, 'config', '--unset', 'user.email');
        git(f, 'config', 'user.useConfigOnly', 'true');
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
    await view.getByRole('button', { name: 'Leave change 2 in a.js out of this commit' }).click();
    await view.getByRole('button', { name: 'Approve b.js' }).click();
    await view.getByRole('button', { name: 'Approve c.js' }).click();
    await view.locator('#decided', { hasText: 'Left out, kept in the working tree: 1 file' }).waitFor();
    await setTheme(page, folder, 'Default Light Modern');
    await page.screenshot({ path: screenshotPath('review panel light theme') });
    await setTheme(page, folder, 'Default Dark Modern');
    await page.screenshot({ path: screenshotPath('review panel dark theme') });

    const before = snapshot(folder, taskId);
    const headBefore = git(folder, 'rev-parse', 'HEAD').trim();
    await view.getByRole('button', { name: /^Commit the approved changes/ }).click();
    // Told where a person looks: a notification with the way out, not only text in the page.
    const toast = await notification(page, 'git does not know who you are', 60_000);
    await view.locator('#result.error').waitFor({ timeout: 30_000 });
    await page.screenshot({ path: screenshotPath('review commit refused no git identity') });
    assert.deepEqual(snapshot(folder, taskId), before, 'the working tree, git status, HEAD, the index and the task are as they were');

    // The way out: set the identity from the notification; it commits again with the same decisions.
    await toast.getByRole('button', { name: 'Set Identity…' }).click();
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ timeout: 15_000 });
    await input.fill('E2E Person');
    await page.keyboard.press('Enter');
    await page.locator('.quick-input-widget', { hasText: 'user.email' }).waitFor({ timeout: 15_000 });
    await input.fill('e2e@waypoint.invalid');
    await page.keyboard.press('Enter');

    await view.locator('#committed-title', { hasText: 'Committed' }).waitFor({ timeout: 90_000 });
    assert.equal(git(folder, 'rev-parse', 'HEAD~1').trim(), headBefore, 'exactly one new commit');
    const sha = git(folder, 'rev-parse', 'HEAD').trim();
    assert.match(git(folder, 'log', '-1', '--format=%B'), new RegExp(`Waypoint-Task: ${taskId}`));
    assert.equal(git(folder, 'log', '-1', '--format=%an <%ae>').trim(), 'E2E Person <e2e@waypoint.invalid>');
    assert.deepEqual(git(folder, 'show', 'HEAD', '--name-only', '--format=').trim().split('\n').sort(), ['a.js', 'b.js', 'c.js']);
    const committedA = git(folder, 'show', 'HEAD:a.js');
    assert.match(committedA, /CHANGED NEAR THE TOP/);
    assert.doesNotMatch(committedA, /CHANGED NEAR THE END/);
    assert.match(fs.readFileSync(path.join(folder, 'a.js'), 'utf8'), /CHANGED NEAR THE END/, 'the left-out hunk stays in the working tree');
    assert.equal(git(folder, 'status', '--porcelain', '--', 'a.js'), ' M a.js\n');
    const detail = cli(folder, 'show', '--task', taskId) as { task: { state: string; commit: string } };
    assert.equal(detail.task.state, 'completed');
    assert.equal(detail.task.commit, sha);

    // The panel shows the committed state, not the decisions with Commit enabled.
    await view.locator('.committed', { hasText: sha.slice(0, 10) }).waitFor();
    assert.equal(await view.getByRole('button', { name: /^Commit the approved changes/ }).count(), 0);
    await view.getByRole('button', { name: new RegExp(`^Undo commit ${sha.slice(0, 10)}`) }).waitFor();
    await page.screenshot({ path: screenshotPath('review panel committed state') });
  });
});
