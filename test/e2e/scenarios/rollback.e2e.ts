import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { current } from '../hooks';
import { interruptedTaskFixture, openWorkbench } from '../session';

describe('rollback from the tree', () => {
  it('the inline Roll Back action on a checkpoint row, confirmed, changes the file on disk', async function () {
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
    const dialog = page.locator('.monaco-dialog-box');
    await dialog.waitFor({ timeout: 30_000 });
    assert.match(await dialog.innerText(), /Roll back 1 file/);
    await dialog.getByRole('button', { name: 'Roll Back' }).click();
    await page.locator('.notifications-toasts', { hasText: 'rolled back' }).waitFor({ timeout: 30_000 });
    assert.equal(fs.readFileSync(path.join(folder, 'src', 'app.js'), 'utf8'), 'module.exports = 1;\n');
  });
});
