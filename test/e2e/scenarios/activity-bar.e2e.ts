import assert from 'node:assert/strict';
import { current } from '../hooks';
import { openWorkbench } from '../session';

describe('activity bar', () => {
  it('shows the Waypoint container with the Tasks view and its welcome', async function () {
    this.timeout(120_000);
    const page = (current.page = await openWorkbench('activity-bar'));
    const icon = page.locator('.activitybar .action-item a[aria-label^="Waypoint"]').first();
    await icon.waitFor({ timeout: 30_000 });
    await icon.click();
    // A container with one view shows the view's name in its own title.
    await page.locator('.part.sidebar .composite.title', { hasText: 'Tasks' }).first().waitFor({ timeout: 15_000 });
    const welcome = page.getByText('No agent tasks recorded in this workspace yet.');
    await welcome.waitFor({ timeout: 15_000 });
    assert.ok(await page.getByRole('button', { name: /Start a Task/ }).isVisible());
  });
});
