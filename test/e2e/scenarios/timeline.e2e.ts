import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { current } from '../hooks';
import { setTheme } from '../reviewFixture';
import { cli, openWorkbench, screenshotPath } from '../session';
import { runCommand } from '../workbench';
import { isShownCheckpoint } from '../../../src/extension/labelText';
import type { CheckpointMeta } from '../../../src/core/model/schema';

/**
 * A task driven through the CLI as an agent would: a four-step plan (two steps after
 * the first, one after both), a step that fails once and passes on its second
 * attempt, a shell command recorded as a side effect, and a step still running.
 */
function timelineFixture(folder: string): string {
  fs.mkdirSync(path.join(folder, 'src'), { recursive: true });
  fs.writeFileSync(path.join(folder, 'src', 'app.js'), 'module.exports = 1;\n');
  const plan = path.join(folder, '.waypoint', 'plan.json');
  fs.writeFileSync(
    plan,
    JSON.stringify([
      { id: 'read', title: 'Read the code' },
      { id: 'fix', title: 'Fix the bug', dependsOn: ['read'] },
      { id: 'docs', title: 'Update the docs', dependsOn: ['read'] },
      { id: 'test', title: 'Run the tests', dependsOn: ['fix', 'docs'] },
    ]),
  );
  const { taskId } = cli(folder, 'task', 'start', '--goal', 'Fix the off-by-one bug', '--plan', plan, '--agent', 'e2e-agent', '--lease-ttl', '3600') as { taskId: string };
  cli(folder, 'step', 'start', '--task', taskId, '--step', 'read');
  cli(folder, 'step', 'complete', '--task', taskId, '--step', 'read');
  cli(folder, 'step', 'start', '--task', taskId, '--step', 'fix');
  fs.writeFileSync(path.join(folder, 'src', 'app.js'), 'module.exports = 3; // first try\n');
  cli(folder, 'step', 'fail', '--task', taskId, '--step', 'fix', '--error', 'the unit tests still fail', '--recoverable');
  cli(folder, 'step', 'start', '--task', taskId, '--step', 'fix', '--wait');
  fs.writeFileSync(path.join(folder, 'src', 'app.js'), 'module.exports = 2; // fixed\n');
  cli(folder, 'effect', 'begin', '--task', taskId, '--step', 'fix', '--key', 'npm-test-1', '--kind', 'shell', '--description', 'npm test');
  cli(folder, 'effect', 'end', '--task', taskId, '--key', 'npm-test-1', '--ok');
  cli(folder, 'step', 'complete', '--task', taskId, '--step', 'fix');
  cli(folder, 'step', 'start', '--task', taskId, '--step', 'docs');
  return taskId;
}

/**
 * The checkpoints the timeline lists: every one but an auto checkpoint that changed
 * nothing (the tree and the timeline leave those out, one rule in labelText.ts).
 */
function shownCheckpoints(folder: string, taskId: string): number {
  return (cli(folder, 'show', '--task', taskId) as { checkpoints: CheckpointMeta[] }).checkpoints.filter(isShownCheckpoint).length;
}

/**
 * The task's shown checkpoint count once it has grown past `before` and then stayed the
 * same for longer than the auto-checkpoint quiet period (2 s) plus a checkpoint's own time.
 */
async function settledCheckpoints(folder: string, taskId: string, before: number): Promise<number> {
  const count = () => shownCheckpoints(folder, taskId);
  const deadline = Date.now() + 60_000;
  let last = count();
  let since = Date.now();
  for (;;) {
    await new Promise((r) => setTimeout(r, 500));
    const n = count();
    if (n !== last) [last, since] = [n, Date.now()];
    if (last > before && Date.now() - since > 4_000) return last;
    if (Date.now() > deadline) throw new Error(`the settings writes were not checkpointed as the task's (${last} checkpoints, ${before} before)`);
  }
}

describe('task timeline', () => {
  it('opens from the palette: steps, attempts and checkpoints are shown, keyboard reaches the checkpoint actions, and it follows the task live', async function () {
    this.timeout(240_000);
    let folder = '';
    let taskId = '';
    const page = (current.page = await openWorkbench('timeline', {
      prepare: (f) => {
        folder = f;
        taskId = timelineFixture(f);
      },
    }));
    await page.locator('.statusbar', { hasText: 'Fix the off-by-one bug' }).waitFor({ timeout: 60_000 });
    await runCommand(page, 'Waypoint: Show Task Timeline', 60_000, { opensQuickPick: true });
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Fix the off-by-one bug' }).first().click();
    const view = page.frameLocator('iframe.webview').frameLocator('iframe');
    await view.getByRole('heading', { name: 'Dependency graph' }).waitFor({ timeout: 60_000 });
    await view.getByRole('heading', { name: 'Fix the off-by-one bug' }).waitFor();
    assert.match(await view.getByRole('img', { name: /^Dependency graph: 4 steps in 3 layers/ }).getAttribute('aria-label') ?? '', /4 steps in 3 layers/);

    // Steps with their attempts: the failed first try and the passing second one.
    const fix = view.getByRole('listitem', { name: /^Step Fix the bug, completed, 2 attempts/ });
    await fix.waitFor();
    assert.match((await fix.getAttribute('aria-label')) ?? '', / by the waypoint command line/, 'who ran it, in words');
    await view.getByRole('listitem', { name: /^Step Update the docs, in progress, 1 attempt/ }).waitFor();
    await view.getByRole('listitem', { name: /^Step Run the tests, pending, 0 attempts/ }).waitFor();
    await fix.focus();
    await page.keyboard.press('Enter');
    const attempts = view.getByRole('list', { name: 'Attempts of Fix the bug' });
    await attempts.waitFor();
    const text = await attempts.innerText();
    assert.match(text, /Attempt 1: failed \(recoverable\)/);
    assert.match(text, /the unit tests still fail/);
    assert.match(text, /Attempt 2: completed/);

    // Checkpoints: the task's base and each step's, in a list the keyboard reaches.
    const detail = cli(folder, 'show', '--task', taskId) as { task: { correlationId: string } };
    const shown = shownCheckpoints(folder, taskId);
    await view.getByRole('heading', { name: `Checkpoints (${shown})` }).waitFor();
    assert.ok(shown >= 5);
    // Ids are for tooltips: the correlation id is in the title's tooltip, not in the page's text.
    await view.locator(`h1[title*="${detail.task.correlationId}"]`).waitFor();
    assert.equal(await view.getByText(detail.task.correlationId).count(), 0);
    await view.getByRole('listitem', { name: /^Shell command npm test, done/ }).waitFor();

    await setTheme(page, folder, 'Default Light Modern');
    await page.screenshot({ path: screenshotPath('task timeline light theme') });
    await setTheme(page, folder, 'Default Dark Modern');
    await page.screenshot({ path: screenshotPath('task timeline dark theme') });
    // The theme is a workspace setting: .vscode/settings.json, written while the docs step
    // runs, is the task's own file activity, checkpointed once the watcher has been quiet
    // for its period. The open timeline redraws with each such checkpoint; wait until the
    // last one is drawn, so the rows the keyboard acts on below are the ones that stay.
    const settled = await settledCheckpoints(folder, taskId, shown);
    await view.getByRole('heading', { name: `Checkpoints (${settled})` }).waitFor({ timeout: 30_000 });

    // Arrow keys move row by row; Enter on a checkpoint opens its actions.
    const base = view.getByRole('listitem', { name: /^Checkpoint Start of task/ });
    await base.scrollIntoViewIfNeeded();
    await base.click();
    const menu = view.getByRole('menu');
    await menu.waitFor();
    assert.deepEqual(await menu.getByRole('menuitem').allInnerTexts(), ['Compare with Workspace', 'Roll Back to Checkpoint', 'Fork Task from Checkpoint']);
    await page.keyboard.press('Escape');
    await menu.waitFor({ state: 'detached' });
    await page.keyboard.press('ArrowUp');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('Enter');
    await menu.waitFor();
    await page.screenshot({ path: screenshotPath('task timeline checkpoint actions') });
    // Compare: VS Code's diff editor opens on the task's base against the workspace.
    await page.keyboard.press('Enter');
    await page.locator('.tabs-container .tab', { hasText: '↔' }).first().waitFor({ timeout: 30_000 });

    // Live: the agent finishes the docs step; the open timeline shows it without a reload.
    await page.locator('.tabs-container .tab', { hasText: 'Timeline:' }).first().click();
    cli(folder, 'step', 'complete', '--task', taskId, '--step', 'docs');
    await view.getByRole('listitem', { name: /^Step Update the docs, completed, 1 attempt/ }).waitFor({ timeout: 30_000 });

    // Fork Task from Checkpoint: the fork command shows what the workspace becomes and asks for the new
    // task's goal (prefilled from the original's); Enter starts a task linked to this one.
    await page.locator('.tabs-container .tab', { hasText: 'Timeline:' }).first().click();
    await base.click();
    await menu.waitFor();
    const tasksBefore = (cli(folder, 'tasks') as unknown as unknown[]).length;
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('Enter');
    const goalBox = page.locator('.quick-input-widget input');
    await goalBox.waitFor({ state: 'visible', timeout: 30_000 });
    assert.match(await goalBox.inputValue(), /^Fork of: /);
    await page.screenshot({ path: screenshotPath('task timeline fork here asks for the goal') });
    await goalBox.press('Enter');
    const deadline = Date.now() + 30_000;
    let fork: { forkedFrom?: { taskId: string; checkpointId: string } | null } | undefined;
    for (;;) {
      const tasks = cli(folder, 'tasks') as unknown as { forkedFrom?: { taskId: string; checkpointId: string } | null }[];
      fork = tasks.find((t) => t.forkedFrom);
      if (tasks.length > tasksBefore && fork) break;
      if (Date.now() > deadline) throw new Error(`Fork Task from Checkpoint started no linked task (${tasks.length} tasks, ${tasksBefore} before)`);
      await page.waitForTimeout(250);
    }
    assert.equal(fork.forkedFrom!.taskId, taskId, 'the fork links to the task the timeline shows');
  });
});
