import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { current } from '../hooks';
import { interruptedTaskFixture, openWorkbench, screenshotPath } from '../session';

describe('rollback from the tree', () => {
  it('the inline Roll Back action on a checkpoint row shows the diff and a file list, Enter changes the file on disk, Undo brings it back', async function () {
    this.timeout(180_000);
    let folder = '';
    const page = (current.page = await openWorkbench('rollback', {
      prepare: (f) => {
        folder = f;
        interruptedTaskFixture(f);
      },
    }));
    assert.equal(fs.readFileSync(path.join(folder, 'src', 'app.js'), 'utf8'), 'module.exports = 2; // edited by the agent\n');
    await page.locator('.activitybar .action-item a[aria-label^="Waypoint"]').first().click();
    const rows = page.locator('.part.sidebar .monaco-list-row');
    // Task → its step "Edit app.js" → the checkpoint taken before it.
    await rows.filter({ hasText: 'Make app.js return 2' }).first().click();
    await rows.filter({ hasText: 'Edit app.js' }).first().click();
    const cpRow = rows.filter({ hasText: 'Before step' }).first();
    await cpRow.waitFor({ timeout: 15_000 });
    await cpRow.hover();
    await cpRow.locator('.action-label[aria-label="Roll Back to Checkpoint"]').click();
    // The diff opens first, and the file list beside it is not modal: the diff can be read before deciding.
    const pick = page.locator('.quick-input-widget', { hasText: 'Roll back 1 file to' });
    await pick.waitFor({ timeout: 30_000 });
    await page.locator('.monaco-diff-editor').first().waitFor({ timeout: 30_000 });
    assert.equal(await page.locator('.monaco-dialog-box').count(), 0, 'no modal dialog over the diff');
    const title = await pick.locator('.quick-input-title').innerText();
    assert.doesNotMatch(title, /c_[0-9a-z]{15}/, 'no checkpoint id in the title');
    assert.equal(await pick.locator('.quick-input-list .monaco-list-row', { hasText: 'src/app.js' }).count(), 1);
    await page.screenshot({ path: screenshotPath('rollback preview with the file list') });
    await page.keyboard.press('Enter');
    const done = page.locator('.notifications-toasts', { hasText: 'rolled back' });
    await done.waitFor({ timeout: 30_000 });
    assert.equal(fs.readFileSync(path.join(folder, 'src', 'app.js'), 'utf8'), 'module.exports = 1;\n');
    // The preview is closed, not left open and out of date.
    await page.locator('.monaco-diff-editor').first().waitFor({ state: 'detached', timeout: 15_000 });
    await done.getByRole('button', { name: 'Undo' }).click();
    await page.locator('.notifications-toasts', { hasText: 'undid the rollback' }).waitFor({ timeout: 30_000 });
    assert.equal(fs.readFileSync(path.join(folder, 'src', 'app.js'), 'utf8'), 'module.exports = 2; // edited by the agent\n');
  });
});
