import assert from 'node:assert/strict';
import { current } from '../hooks';
import { cli, interruptedTaskFixture, openWorkbench } from '../session';
import { runCommand } from '../workbench';

describe('resume from the palette', () => {
  it('Waypoint: Resume Task on an interrupted task delivers the resume prompt', async function () {
    this.timeout(180_000);
    let folder = '';
    let taskId = '';
    const page = (current.page = await openWorkbench('resume', {
      prepare: (f) => {
        folder = f;
        taskId = interruptedTaskFixture(f).taskId;
      },
    }));
    // Wait until the extension has opened the store and marked the task interrupted.
    await page.locator('.statusbar', { hasText: 'interrupted' }).waitFor({ timeout: 60_000 });
    await runCommand(page, 'Waypoint: Resume Task', 60_000, { opensQuickPick: true });
    const taskRow = page.locator('.quick-input-list .monaco-list-row', { hasText: 'Make app.js return 2' }).first();
    await taskRow.waitFor({ timeout: 15_000 });
    await page.keyboard.press('Enter');
    const copyRow = page.locator('.quick-input-list .monaco-list-row', { hasText: 'Copy to Clipboard' }).first();
    await copyRow.waitFor({ timeout: 15_000 });
    await copyRow.click();
    await page.locator('.notifications-toasts', { hasText: 'resume context copied' }).waitFor({ timeout: 15_000 });
    const prompt = await page.evaluate(() => navigator.clipboard.readText());
    assert.match(prompt, /# Resume task: Make app\.js return 2/);
    assert.match(prompt, /\[x\] `edit` Edit app\.js/);
    assert.match(prompt, /`test` Run the tests/);
    // The task runs again, as a new attempt (read through the CLI, which relays to the editor).
    const detail = cli(folder, 'show', '--task', taskId) as { task: { state: string; attempt: number } };
    assert.equal(detail.task.state, 'running');
    assert.equal(detail.task.attempt, 2);
  });
});
