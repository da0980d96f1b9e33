import assert from 'node:assert/strict';
import { current } from '../hooks';
import { openWorkbench } from '../session';
import { runCommand } from '../workbench';

describe('command palette', () => {
  it('Waypoint: Show Log opens the Waypoint output channel', async function () {
    this.timeout(120_000);
    const page = (current.page = await openWorkbench('palette'));
    await runCommand(page, 'Waypoint: Show Log');
    // The command reveals the extension's log channel, whose first line says it
    // activated: proof that the VSIX alone (no source tree) loads and runs.
    const panel = page.locator('.part.panel');
    await panel.waitFor();
    const lines = panel.locator('.view-lines');
    await lines.filter({ hasText: '[extension] activated' }).first().waitFor({ timeout: 30_000 });
    // Monaco renders spaces as no-break spaces.
    const text = (await lines.first().innerText()).replace(/\u00a0/g, ' ');
    assert.match(text, /\[extension\] activated in [\d.]+ ms/);
  });
});
