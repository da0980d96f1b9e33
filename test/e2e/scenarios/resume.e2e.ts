import assert from 'node:assert/strict';
import { current } from '../hooks';
import { cli, interruptedTaskFixture, openWorkbench, screenshotPath } from '../session';
import { notification, runCommand } from '../workbench';

describe('resume from the palette', () => {
  it('Waypoint: Resume Task: the only resumable task is not asked for; Escape at the delivery choice changes nothing; Copy delivers the prompt and leaves the task interrupted', async function () {
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
    // One resumable task: the command goes straight to how to hand it over, with no "which task?" picker.
    const chooseTask = () => runCommand(page, 'Waypoint: Resume Task', 60_000, { opensQuickPick: true });
    await chooseTask();
    // The delivery picker has a title and says the state in words; Escape there changes nothing.
    const picker = page.locator('.quick-input-widget', { hasText: 'Resume “Make app.js return 2”' });
    await picker.waitFor({ timeout: 15_000 });
    assert.doesNotMatch(await picker.innerText(), /lease of|\d{4}-\d\d-\d\dT/);
    // Why the task stopped is the picker's own line (its title), not text beside the first choice.
    assert.match(await picker.locator('.quick-input-title').innerText(), /^Resume “Make app\.js return 2” · e2e-agent stopped reporting/);
    assert.doesNotMatch(await picker.locator('.quick-input-list .monaco-list-row').first().innerText(), /stopped|went away/);
    await page.screenshot({ path: screenshotPath('resume delivery picker') });
    await page.keyboard.press('Escape');
    await picker.waitFor({ state: 'hidden', timeout: 15_000 });
    const unchanged = cli(folder, 'show', '--task', taskId) as { task: { state: string; attempt: number } };
    assert.equal(unchanged.task.state, 'interrupted');
    assert.equal(unchanged.task.attempt, 1);
    await chooseTask();
    const copyRow = page.locator('.quick-input-list .monaco-list-row', { hasText: 'Copy to Clipboard' }).first();
    await copyRow.waitFor({ timeout: 15_000 });
    await copyRow.click();
    await notification(page, 'resume prompt of', 15_000);
    const prompt = await page.evaluate(() => navigator.clipboard.readText());
    assert.match(prompt, /# Resume task: Make app\.js return 2/);
    assert.match(prompt, /\[x\] `edit` Edit app\.js/);
    assert.match(prompt, /`test` Run the tests/);
    assert.match(prompt, /not resumed yet: before anything else call `waypoint_task_resume`/);
    // Copying is not resuming: nobody drives the task until the agent that gets the prompt calls in.
    const detail = cli(folder, 'show', '--task', taskId) as { task: { state: string; attempt: number } };
    assert.equal(detail.task.state, 'interrupted');
    assert.equal(detail.task.attempt, 1);
  });
});
