// How a person drives the workbench: the command palette, views, the status bar.
// Selectors from shared/vscode-e2e.md, verified against code-server 4.139.1.
import type { Locator, Page } from 'playwright-core';

/**
 * F1, type the command's label, wait for its row, Enter. The palette lists the
 * commands known when it opens, and extensions register theirs only after the
 * workbench has painted, so an early attempt is closed and retried, as a person would.
 */
export async function runCommand(page: Page, label: string, timeoutMs = 60_000, opts: { opensQuickPick?: boolean } = {}): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const input = page.locator('.quick-input-widget input');
  const row = page.locator('.quick-input-list .monaco-list-row', { hasText: label }).first();
  for (;;) {
    await page.keyboard.press('F1');
    await input.waitFor();
    await input.fill(`>${label}`);
    try {
      await row.waitFor({ timeout: 3000 });
      break;
    } catch (e) {
      await page.keyboard.press('Escape');
      if (Date.now() > deadline) throw e;
    }
  }
  await page.keyboard.press('Enter');
  // A command that asks with its own quick pick keeps the widget open.
  if (!opts.opensQuickPick) await page.locator('.quick-input-widget').waitFor({ state: 'hidden' });
}

/**
 * The notification holding `text`, once shown: as a toast or, failing that within
 * `timeoutMs`, in the notification center, which this opens. VS Code keeps a fourth
 * toast within 800 ms out of sight (its spam protection) and lists it only in the
 * center; a loaded machine bunches an operation's progress, its result and an alert
 * together. The returned locator holds the notification's buttons either way.
 */
export async function notification(page: Page, text: string, timeoutMs = 30_000): Promise<Locator> {
  const toast = page.locator('.notifications-toasts .notification-list-item', { hasText: text }).first();
  try {
    await toast.waitFor({ timeout: timeoutMs });
    return toast;
  } catch {
    await runCommand(page, 'Notifications: Show Notifications');
    const item = page.locator('.notifications-center .notification-list-item', { hasText: text }).first();
    await item.waitFor({ timeout: 10_000 });
    console.log(`      (“${text}” was not shown as a toast; it is in the notification center)`);
    return item;
  }
}
