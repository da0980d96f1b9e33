import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { FrameLocator, Page } from 'playwright-core';
import { current } from '../hooks';
import { git, reviewFixture, setTheme } from '../reviewFixture';
import { cli, openWorkbench, screenshotPath } from '../session';
import { runCommand } from '../workbench';

/** The page lives two iframes deep (the webview host frame, then the page's own). */
const reviewPage = (page: Page): FrameLocator => page.frameLocator('iframe.webview').frameLocator('iframe');

/** The accessible name of whatever has keyboard focus inside the review page. */
async function focusedLabel(view: FrameLocator): Promise<string> {
  return (await view.locator(':focus').getAttribute('aria-label')) ?? '';
}

async function expectFocus(view: FrameLocator, pattern: RegExp): Promise<void> {
  const deadline = Date.now() + 60_000;
  let last = '';
  while (Date.now() < deadline) {
    last = await focusedLabel(view).catch(() => '');
    if (pattern.test(last)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`focus should be on ${pattern}, is on "${last}"`);
}

/** The file heads' accessible names say each file's decision, as a screen reader reads them. */
async function fileLabel(view: FrameLocator, file: string): Promise<string> {
  return (await view.locator(`[data-nav="file"][aria-label^="${file},"]`).getAttribute('aria-label')) ?? '';
}

describe('review panel: keyboard, reload, high contrast', () => {
  it('decides every change with keys alone, keeps the decisions across a window reload, and commits exactly the approved hunks', async function () {
    this.timeout(900_000); // many steps, each waiting on a busy editor
    let folder = '';
    let taskId = '';
    const page = (current.page = await openWorkbench('review-keyboard', {
      prepare: (f) => {
        folder = f;
        taskId = reviewFixture(f);
      },
    }));
    await page.locator('.statusbar', { hasText: 'Review:' }).waitFor({ timeout: 180_000 }); // generous: a loaded machine
    await runCommand(page, 'Waypoint: Review Changes Before Commit', 60_000, { opensQuickPick: true });
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Polish the modules' }).first().click();
    let view = reviewPage(page);
    await view.locator('h1', { hasText: 'Polish the modules' }).waitFor({ timeout: 120_000 });
    // Line counts stream in after the list: wait for them, as a person would see them fill in.
    await view.locator('[data-nav="file"][aria-label^="a.js, modified, 2 added, 2 removed lines"]').waitFor({ timeout: 90_000 });

    // Focus the page (not any control in it), then only keys.
    await view.locator('.goal').click();
    await page.keyboard.press('j');
    await expectFocus(view, /^a\.js, modified, 2 added, 2 removed lines, undecided$/);
    await page.keyboard.press('n'); // next change: expands a.js and focuses its first hunk when it arrives
    await expectFocus(view, /^Change 1 of 2 in a\.js, .*undecided$/);
    await page.keyboard.press('a');
    await expectFocus(view, /^Change 2 of 2 in a\.js, .*undecided$/); // moved on to the next item
    await page.keyboard.press('d'); // discard: removed from the working tree
    await expectFocus(view, /^b\.js, modified/);
    assert.match(await fileLabel(view, 'a.js'), /partly approved$/);
    assert.match((await view.locator('[data-nav="hunk"][data-index="0"]').getAttribute('aria-label')) ?? '', /approved$/);
    assert.match((await view.locator('[data-nav="hunk"][data-index="1"]').getAttribute('aria-label')) ?? '', /discarded$/);
    await page.keyboard.press('p'); // previous change: back to a.js's second hunk
    await expectFocus(view, /^Change 2 of 2 in a\.js, .*discarded$/);
    await page.keyboard.press('j');
    await expectFocus(view, /^b\.js, modified/);
    await page.keyboard.press('Shift+A'); // the whole file, then on to the next file
    await expectFocus(view, /^c\.js, added/);
    await page.keyboard.press('a');
    assert.match(await fileLabel(view, 'b.js'), /approved$/);
    assert.match(await fileLabel(view, 'c.js'), /approved$/);
    assert.match(await view.locator('[role="status"].sr-only').innerText(), /c\.js approved/, 'the decision is announced to screen readers');
    await view.locator('#decided', { hasText: '3 files decided' }).waitFor();

    // Readable in high contrast (dark and light): a person looks at these.
    await setTheme(page, folder, 'Default High Contrast');
    await page.screenshot({ path: screenshotPath('review panel high contrast theme') });
    await setTheme(page, folder, 'Default High Contrast Light');
    await page.screenshot({ path: screenshotPath('review panel high contrast light theme') });

    // A window reload gives the panel back, for the same task, with the same decisions.
    await runCommand(page, 'Developer: Reload Window');
    await page.locator('.monaco-workbench').waitFor({ timeout: 120_000 });
    await page.locator('.tab', { hasText: 'Review: Polish the modules' }).waitFor({ timeout: 120_000 });
    view = reviewPage(page);
    await view.locator('h1', { hasText: 'Polish the modules' }).waitFor({ timeout: 120_000 });
    await view.locator('[data-nav="hunk"][data-index="1"]').waitFor({ timeout: 90_000 }); // a.js stayed expanded
    assert.match(await fileLabel(view, 'a.js'), /partly approved$/);
    assert.match(await fileLabel(view, 'b.js'), /approved$/);
    assert.match(await fileLabel(view, 'c.js'), /approved$/);
    assert.match((await view.locator('[data-nav="hunk"][data-index="0"]').getAttribute('aria-label')) ?? '', /approved$/);
    assert.match((await view.locator('[data-nav="hunk"][data-index="1"]').getAttribute('aria-label')) ?? '', /discarded$/);
    await view.locator('#decided', { hasText: '3 files decided' }).waitFor();

    // Commit with keys: c to the message, Ctrl+Enter.
    await view.locator('.goal').click();
    await page.keyboard.press('j');
    await expectFocus(view, /^a\.js/);
    await page.keyboard.press('c');
    assert.equal(await view.locator(':focus').getAttribute('id'), 'message');
    await page.keyboard.press('Control+Enter');
    // The panel switches to the committed state (or shows why not).
    await view.locator('#committed-title, #result.error').first().waitFor({ timeout: 120_000 });
    assert.equal(await view.locator('#committed-title').count(), 1, await view.locator('#result').innerText());

    assert.match(git(folder, 'log', '-1', '--format=%B'), new RegExp(`Waypoint-Task: ${taskId}`));
    assert.deepEqual(git(folder, 'show', 'HEAD', '--name-only', '--format=').trim().split('\n').sort(), ['a.js', 'b.js', 'c.js']);
    const committedA = git(folder, 'show', 'HEAD:a.js');
    assert.match(committedA, /CHANGED NEAR THE TOP/);
    assert.doesNotMatch(committedA, /CHANGED NEAR THE END/);
    assert.match(git(folder, 'show', 'HEAD:b.js'), /line 6 b ADDED/);
    assert.doesNotMatch(fs.readFileSync(path.join(folder, 'a.js'), 'utf8'), /CHANGED NEAR THE END/, 'the discarded hunk is removed from the working tree');
    const detail = cli(folder, 'show', '--task', taskId) as { task: { state: string; commit: string } };
    assert.equal(detail.task.state, 'completed');
    assert.equal(detail.task.commit, git(folder, 'rev-parse', 'HEAD').trim());
  });
});
