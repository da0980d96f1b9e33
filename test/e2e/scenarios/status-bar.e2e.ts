import assert from 'node:assert/strict';
import pkg from '../../../package.json';
import { current } from '../hooks';
import { interruptedTaskFixture, openWorkbench } from '../session';

describe('status bar', () => {
  it('shows an interrupted task with a warning and offers to resume it', async function () {
    this.timeout(120_000);
    const page = (current.page = await openWorkbench('status-bar', { prepare: (f) => void interruptedTaskFixture(f) }));
    // Extension status bar entries get the DOM id "<publisher>.<name>.<item id>".
    const item = page.locator(`.statusbar [id^="${pkg.publisher}.${pkg.name}"]`).first();
    await item.waitFor({ timeout: 30_000 });
    await page.waitForFunction((sel) => /interrupted/.test(document.querySelector(sel)?.textContent ?? ''), `.statusbar [id^="${pkg.publisher}.${pkg.name}"]`, { timeout: 30_000 });
    assert.match(await item.innerText(), /Make app\.js return 2 · interrupted/);
    const cls = (await item.getAttribute('class')) ?? '';
    assert.match(cls, /warning-kind|has-background-color/, `warning background (${cls})`);
  });
});
