import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { current } from '../hooks';
import { cli, interruptedTaskFixture, openWorkbench, screenshotPath } from '../session';
import { notification } from '../workbench';

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
    const done = await notification(page, 'rolled back');
    assert.equal(fs.readFileSync(path.join(folder, 'src', 'app.js'), 'utf8'), 'module.exports = 1;\n');
    // The preview is closed, not left open and out of date.
    await page.locator('.monaco-diff-editor').first().waitFor({ state: 'detached', timeout: 15_000 });
    await done.getByRole('button', { name: 'Undo' }).click();
    await notification(page, 'undid the rollback');
    assert.equal(fs.readFileSync(path.join(folder, 'src', 'app.js'), 'utf8'), 'module.exports = 2; // edited by the agent\n');
  });

  it('when the person edited the task’s files too, Roll Back asks whose changes go; “only the agent’s” keeps the person’s lines and files', async function () {
    this.timeout(180_000);
    let folder = '';
    const lines = (edit: Record<number, string> = {}) => Array.from({ length: 12 }, (_, i) => `${edit[i] ?? `// line ${i}`}\n`).join('');
    const page = (current.page = await openWorkbench('rollback-whose', {
      prepare: (f) => {
        folder = f;
        fs.mkdirSync(path.join(f, 'src'), { recursive: true });
        fs.writeFileSync(path.join(f, 'src', 'app.js'), lines());
        const { taskId } = cli(f, 'task', 'start', '--goal', 'Tidy app.js', '--agent', 'e2e-agent') as { taskId: string };
        const { stepId } = cli(f, 'step', 'start', '--task', taskId, '--title', 'Agent edits app.js') as { stepId: string };
        fs.writeFileSync(path.join(f, 'src', 'app.js'), lines({ 2: 'module.exports = 2; // the agent' }));
        cli(f, 'step', 'complete', '--task', taskId, '--step', stepId, '--summary', 'app.js returns 2');
        // The person, with no step open: a line of their own in the agent's file, and a file of their own.
        fs.writeFileSync(path.join(f, 'src', 'app.js'), lines({ 2: 'module.exports = 2; // the agent', 9: '// my note' }));
        fs.writeFileSync(path.join(f, 'NOTES.md'), 'my notes\n');
        cli(f, 'checkpoint', '--task', taskId, '--label', 'my edits');
      },
    }));
    await page.locator('.activitybar .action-item a[aria-label^="Waypoint"]').first().click();
    const rows = page.locator('.part.sidebar .monaco-list-row');
    await rows.filter({ hasText: 'Tidy app.js' }).first().click();
    const cpRow = rows.filter({ hasText: 'Start of task' }).first();
    await cpRow.waitFor({ timeout: 15_000 });
    // The task row's tooltip (shown under the pointer after the click) can lie over the checkpoint row: away with it first.
    await page.mouse.move(0, 0);
    await page.keyboard.press('Escape');
    await cpRow.hover();
    await cpRow.locator('.action-label[aria-label="Roll Back to Checkpoint"]').click();
    const ask = page.locator('.quick-input-widget', { hasText: 'you edited' });
    await ask.waitFor({ timeout: 30_000 });
    assert.equal(await ask.locator('.quick-input-list .monaco-list-row').count(), 2, 'two choices: the agent’s changes only, or everything');
    assert.match(await ask.locator('.quick-input-list .monaco-list-row').first().innerText(), /Only the Agent’s Changes/);
    await page.screenshot({ path: screenshotPath('rollback asks whose changes go') });
    await page.keyboard.press('Enter');
    const pick = page.locator('.quick-input-widget', { hasText: 'Roll back the agent’s changes in 1 file' });
    await pick.waitFor({ timeout: 30_000 });
    await page.locator('.monaco-diff-editor').first().waitFor({ timeout: 30_000 });
    await page.screenshot({ path: screenshotPath('rollback of only the agent’s changes, with its diff') });
    await page.keyboard.press('Enter');
    await notification(page, 'rolled back');
    assert.equal(fs.readFileSync(path.join(folder, 'src', 'app.js'), 'utf8'), lines({ 9: '// my note' }), 'the agent’s line reverted, the person’s kept');
    assert.equal(fs.readFileSync(path.join(folder, 'NOTES.md'), 'utf8'), 'my notes\n', 'the person’s file kept');
  });
});
