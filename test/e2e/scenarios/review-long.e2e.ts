import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { FrameLocator } from 'playwright-core';
import { current } from '../hooks';
import { git, initRepo } from '../reviewFixture';
import { cli, openWorkbench, screenshotPath } from '../session';
import { runCommand } from '../workbench';

const TASK_FILES = 150;
const reviewPage = (page: import('playwright-core').Page): FrameLocator => page.frameLocator('iframe.webview').frameLocator('iframe');

/**
 * A listing longer than the page's first message (its first files come in `init`, the rest
 * in `listed` after the first frame): every file must still be there, in its section, decided
 * by Approve all, kept across a window reload and committed.
 */
describe('review panel: a long listing', () => {
  it('lists all 150 files of the task and the person’s own edits, keeps decisions on the later ones across a reload, and commits them all', async function () {
    this.timeout(600_000);
    let folder = '';
    let taskId = '';
    const page = (current.page = await openWorkbench('review-long', {
      prepare: (f) => {
        folder = f;
        fs.writeFileSync(path.join(f, 'mine.txt'), 'mine\n');
        initRepo(f);
        ({ taskId } = cli(f, 'task', 'start', '--goal', 'Add many modules', '--agent', 'e2e-agent') as { taskId: string });
        cli(f, 'step', 'start', '--task', taskId, '--title', 'write the modules');
        fs.mkdirSync(path.join(f, 'many'));
        for (let i = 0; i < TASK_FILES; i++) fs.writeFileSync(path.join(f, 'many', `m${String(i).padStart(3, '0')}.js`), `module.exports = ${i};\n`);
        cli(f, 'step', 'complete', '--task', taskId, '--step', 's1', '--summary', `wrote ${TASK_FILES} modules`);
        // The person's own edit while no step is open: listed after the task's files, excluded unless included.
        fs.writeFileSync(path.join(f, 'mine.txt'), 'mine, edited by the person\n');
        cli(f, 'task', 'complete', '--task', taskId, '--summary', 'ready for review');
      },
    }));
    await page.locator('.statusbar', { hasText: 'Review:' }).waitFor({ timeout: 180_000 });
    await runCommand(page, 'Waypoint: Review Changes Before Commit', 60_000, { opensQuickPick: true });
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Add many modules' }).first().click();
    let view = reviewPage(page);
    await view.locator('h2', { hasText: `Files changed by the task (${TASK_FILES})` }).waitFor({ timeout: 120_000 });
    const drift = await view.locator('h2', { hasText: 'Your own edits during the task (1)' }).count();
    assert.equal(drift, 1, 'the person’s own edit is listed in its own section');

    // The last of the task's files (sent after the first frame) is drawn when scrolled to.
    const last = `many/m${TASK_FILES - 1}.js`;
    await scrollUntil(view, `[data-nav="file"][aria-label^="${last},"]`);
    await scrollUntil(view, '[data-nav="file"][aria-label^="mine.txt,"]');
    assert.equal(await view.locator('.files [data-nav="file"]').count(), TASK_FILES + drift, 'every listed file has its row');

    await view.getByRole('button', { name: 'Approve every included file' }).click();
    await view.locator('#decided', { hasText: `${TASK_FILES} files decided` }).waitFor({ timeout: 30_000 });
    await page.screenshot({ path: screenshotPath('review long listing all approved') });

    // A window reload gives the panel back; the decisions on files that arrive after the first frame are kept.
    await runCommand(page, 'Developer: Reload Window');
    await page.locator('.monaco-workbench').waitFor({ timeout: 120_000 });
    await page.locator('.tab', { hasText: 'Review: Add many modules' }).waitFor({ timeout: 120_000 });
    view = reviewPage(page);
    await view.locator('#decided', { hasText: `${TASK_FILES} files decided` }).waitFor({ timeout: 120_000 });
    await scrollUntil(view, `[data-nav="file"][aria-label^="${last},"][aria-label$="approved"]`);

    await view.getByRole('button', { name: /^Commit the approved changes/ }).click();
    await view.locator('#committed-title, #result.error').first().waitFor({ timeout: 120_000 });
    assert.equal(await view.locator('#committed-title').count(), 1, await view.locator('#result').innerText());
    const committed = git(folder, 'show', 'HEAD', '--name-only', '--format=').trim().split('\n');
    assert.equal(committed.length, TASK_FILES, committed.join(' '));
    assert.ok(committed.every((p) => p.startsWith('many/')), 'only the task’s files');
    assert.match(git(folder, 'log', '-1', '--format=%B'), new RegExp(`Waypoint-Task: ${taskId}`));
    assert.match(git(folder, 'status', '--porcelain'), /mine\.txt/, 'the person’s own edit stays uncommitted');
  });
});

/** Scrolls the page down until `selector` is drawn (rows are drawn a chunk at a time as they near the viewport). */
async function scrollUntil(view: FrameLocator, selector: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (await view.locator(selector).count()) return;
    await view.locator('body').evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
    await new Promise((r) => setTimeout(r, 200));
  }
  const rows = view.locator('[data-nav="file"]');
  const n = await rows.count();
  assert.fail(`${selector} never drawn (${n} rows drawn, the last: ${n ? await rows.nth(n - 1).getAttribute('aria-label') : 'none'})`);
}
