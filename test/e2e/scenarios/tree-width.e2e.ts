import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { current } from '../hooks';
import { cli, openWorkbench, screenshotPath } from '../session';

describe('the Tasks view at the default sidebar width', () => {
  it('a hovered task row shows at most two inline actions and its whole title', async function () {
    this.timeout(180_000);
    const title = 'Add a maxLength check';
    const page = (current.page = await openWorkbench('tree-width', {
      prepare: (f) => {
        fs.writeFileSync(path.join(f, 'form.js'), 'module.exports = {};\n');
        const plan = path.join(f, '.waypoint', 'plan.json');
        fs.writeFileSync(plan, JSON.stringify([{ id: 'edit', title: 'Edit form.js' }, { id: 'test', title: 'Run the tests', dependsOn: ['edit'] }]));
        const { taskId } = cli(f, 'task', 'start', '--goal', title, '--plan', plan, '--agent', 'e2e-agent') as { taskId: string };
        cli(f, 'step', 'start', '--task', taskId, '--step', 'edit');
      },
    }));
    await page.locator('.activitybar .action-item a[aria-label^="Waypoint"]').first().click();
    const row = page.locator('.part.sidebar .monaco-list-row', { hasText: title }).first();
    await row.waitFor({ timeout: 60_000 });
    await row.hover();
    await row.locator('.action-label').first().waitFor({ timeout: 15_000 });
    const actions = await row.locator('.actions .action-label').evaluateAll((els) => els.filter((e) => (e as HTMLElement).offsetParent !== null).map((e) => e.getAttribute('aria-label')));
    assert.ok(actions.length >= 1 && actions.length <= 2, `inline actions: ${actions.join(', ')}`);
    // The title is drawn whole: the name ends before the label's clipping box does.
    const fit = await row.locator('.label-name').first().evaluate((el) => {
      const box = el.closest('.monaco-icon-label-container') ?? el.parentElement!;
      return { name: el.getBoundingClientRect().right, box: box.getBoundingClientRect().right, text: el.textContent };
    });
    assert.equal(fit.text, title);
    assert.ok(fit.name <= fit.box + 0.5, `the title is cut: it ends at ${fit.name} px, its box at ${fit.box} px`);
    await page.screenshot({ path: screenshotPath('tasks view default width') });
  });
});
