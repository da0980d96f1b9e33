import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { runDemoAgent } from '../../../scripts/demo/agent';
import { current } from '../hooks';
import { git, initRepo } from '../reviewFixture';
import { cli, openWorkbench, screenshotPath, workspaceFolder } from '../session';
import { runCommand } from '../workbench';

const demoProject = path.join(__dirname, '..', '..', '..', 'scripts', 'demo', 'sample-project');

type Detail = { task: { state: string; commit: string | null }; steps: { id: string; status: string; attempts: number; summary: string | null }[] };
const detail = (folder: string, taskId: string) => cli(folder, 'show', '--task', taskId) as unknown as Detail;

/**
 * A task as an agent leaves it when it goes away mid-plan: "edit" done, "test" and
 * "lint" in progress, "docs" not begun; its lease lapses, so the window finds it interrupted.
 */
function stoppedTaskFixture(folder: string): string {
  fs.mkdirSync(path.join(folder, 'src'), { recursive: true });
  fs.writeFileSync(path.join(folder, 'src', 'app.js'), 'module.exports = 1;\n');
  const plan = path.join(folder, '.waypoint', 'plan.json');
  fs.writeFileSync(
    plan,
    JSON.stringify([
      { id: 'edit', title: 'Edit app.js' },
      { id: 'test', title: 'Run the tests', dependsOn: ['edit'] },
      { id: 'lint', title: 'Run the linter', dependsOn: ['edit'] },
      { id: 'docs', title: 'Write the docs', dependsOn: ['edit'] },
    ]),
  );
  const { taskId } = cli(folder, 'task', 'start', '--goal', 'Make app.js return 2', '--plan', plan, '--agent', 'e2e-agent', '--lease-ttl', '6') as { taskId: string };
  cli(folder, 'step', 'start', '--task', taskId, '--step', 'edit');
  fs.writeFileSync(path.join(folder, 'src', 'app.js'), 'module.exports = 2; // edited by the agent\n');
  cli(folder, 'step', 'complete', '--task', taskId, '--step', 'edit', '--summary', 'app.js returns 2');
  cli(folder, 'step', 'start', '--task', taskId, '--step', 'test');
  cli(folder, 'step', 'start', '--task', taskId, '--step', 'lint');
  const lapse = Date.now() + 6_500;
  while (Date.now() < lapse) spawnSync('sleep', ['0.5']);
  return taskId;
}

describe('review and steps', () => {
  it('the demo: Review, Approve all, Commit with a step in progress and "finish" unticked makes one commit; the steps stay as they were', async function () {
    this.timeout(360_000);
    // The demo's own workspace and agent (npm start): the sample project, its task interrupted mid-step.
    const name = 'demo-review';
    const folder = workspaceFolder(name);
    fs.mkdirSync(folder, { recursive: true });
    fs.cpSync(demoProject, folder, { recursive: true });
    initRepo(folder);
    const { taskId, state } = await runDemoAgent(folder, () => undefined, { leaseTtlS: 15 });
    assert.equal(state, 'interrupted');
    const before = detail(folder, taskId);
    assert.deepEqual(
      before.steps.map((s) => [s.id, s.status]),
      [
        ['read', 'completed'],
        ['max-length', 'completed'],
        ['tests', 'in_progress'],
        ['docs', 'pending'],
      ],
    );
    const headBefore = git(folder, 'rev-parse', 'HEAD').trim();
    const page = (current.page = await openWorkbench(name, {
      // openWorkbench writes a README of its own: the demo's stays as the demo has it.
      prepare: (f) => void git(f, 'checkout', '--', 'README.md'),
    }));
    await page.locator('.statusbar', { hasText: 'interrupted' }).waitFor({ timeout: 60_000 });
    await runCommand(page, 'Waypoint: Review Changes Before Commit', 60_000, { opensQuickPick: true });
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'maxLength' }).first().click();
    const view = page.frameLocator('iframe.webview').frameLocator('iframe');
    await view.getByRole('button', { name: 'Approve every included file' }).click({ timeout: 60_000 });
    // Before the commit the summary says what will be committed, not that it was.
    const decided = view.locator('#decided');
    await decided.filter({ hasText: 'To commit: 2 files' }).waitFor({ timeout: 30_000 });
    assert.doesNotMatch(await decided.innerText(), /Committed/);
    const finish = view.locator('#finish');
    assert.equal(await finish.isChecked(), false, '"Finish the task" is unticked: its plan is not done');
    await view.locator('.finish', { hasText: 'the task is interrupted: resume it to finish it' }).waitFor();
    await page.screenshot({ path: screenshotPath('review demo approve all before commit') });

    await view.getByRole('button', { name: /^Commit the approved changes/ }).click();
    await view.locator('#committed-title, #result.error').first().waitFor({ timeout: 120_000 });
    assert.equal(await view.locator('#committed-title').count(), 1, await view.locator('#result').innerText());
    await view.locator('#committed-title', { hasText: 'Committed' }).waitFor();
    const sha = git(folder, 'rev-parse', 'HEAD').trim();
    assert.equal(git(folder, 'rev-parse', 'HEAD~1').trim(), headBefore, 'exactly one new commit');
    assert.deepEqual(git(folder, 'show', 'HEAD', '--name-only', '--format=').trim().split('\n').sort(), ['src/slugify.js', 'test/slugify.test.js']);
    const body = git(folder, 'log', '-1', '--format=%B');
    assert.match(body, new RegExp(`Waypoint-Task: ${taskId}`));
    // The default message is about the change (the files it commits), not the agent's notes to itself.
    assert.match(body, /^2 files changed: .*\n\n(?:Added|Modified):\n- (?:src\/slugify\.js|test\/slugify\.test\.js)$/m);
    assert.doesNotMatch(body, /no length limit yet/);
    assert.equal(body.split('\n').filter((l) => l.includes(taskId)).length, 1, 'the task id only in the trailer');
    const after = detail(folder, taskId);
    assert.deepEqual(after.steps, before.steps, "the task's steps are untouched");
    assert.equal(after.task.state, 'interrupted', 'the task stays as it was');
    assert.equal(after.task.commit, null);
    assert.equal(await page.locator('.notification-list-item', { hasText: 'nothing was committed' }).count(), 0, 'no refusal anywhere');
    await view.locator('.committed', { hasText: sha.slice(0, 10) }).waitFor();
    await page.screenshot({ path: screenshotPath('review demo committed with a step in progress') });

    // Source Control shows it: the working tree is clean for the committed files, and the graph lists the commit.
    await page.locator('.activitybar .action-item a[aria-label^="Source Control"]').first().click();
    const subject = git(folder, 'log', '-1', '--format=%s').trim();
    await page.locator('.part.sidebar', { hasText: subject.slice(0, 30) }).waitFor({ timeout: 60_000 });
    assert.equal(git(folder, 'status', '--porcelain', '--', 'src', 'test'), '');
    await page.screenshot({ path: screenshotPath('review demo source control shows the commit') });
  });

  it('finishing the task from the review lists its open steps with buttons; settled there, the commit completes the task', async function () {
    this.timeout(300_000);
    let folder = '';
    let taskId = '';
    const page = (current.page = await openWorkbench('review-finish', {
      prepare: (f) => {
        folder = f;
        fs.writeFileSync(path.join(f, 'app.js'), 'module.exports = 1;\n');
        initRepo(f);
        const plan = path.join(f, '.waypoint', 'plan.json');
        fs.writeFileSync(plan, JSON.stringify([{ id: 'edit', title: 'Edit app.js' }, { id: 'test', title: 'Run the tests', dependsOn: ['edit'] }, { id: 'docs', title: 'Write the docs', dependsOn: ['edit'] }]));
        ({ taskId } = cli(f, 'task', 'start', '--goal', 'Make app.js return 2', '--plan', plan, '--agent', 'e2e-agent', '--lease-ttl', '3600') as { taskId: string });
        cli(f, 'step', 'start', '--task', taskId, '--step', 'edit');
        fs.writeFileSync(path.join(f, 'app.js'), 'module.exports = 2;\n');
        cli(f, 'step', 'complete', '--task', taskId, '--step', 'edit');
        cli(f, 'step', 'start', '--task', taskId, '--step', 'test');
      },
    }));
    await page.locator('.statusbar', { hasText: 'Make app.js return 2' }).waitFor({ timeout: 60_000 });
    await runCommand(page, 'Waypoint: Review Changes Before Commit', 60_000, { opensQuickPick: true });
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Make app.js return 2' }).first().click();
    const view = page.frameLocator('iframe.webview').frameLocator('iframe');
    await view.getByRole('button', { name: 'Approve every included file' }).click({ timeout: 60_000 });
    const commit = view.getByRole('button', { name: /^Commit the approved changes/ });
    assert.equal(await commit.isEnabled(), true, 'unticked: the commit does not wait for the steps');
    await view.locator('#finish').check();
    const open = view.getByRole('group', { name: 'Steps to settle before finishing' });
    await open.waitFor();
    assert.match(await open.innerText(), /Run the tests\s+— in progress/);
    assert.match(await open.innerText(), /Write the docs\s+— pending/);
    assert.equal(await commit.isEnabled(), false, 'ticked: Commit waits until the open steps are settled');
    await page.screenshot({ path: screenshotPath('review finish lists the open steps') });
    await open.getByRole('button', { name: 'Complete step Run the tests' }).click();
    await open.locator('li', { hasText: 'Run the tests' }).waitFor({ state: 'detached', timeout: 30_000 });
    await open.getByRole('button', { name: 'Skip step Write the docs' }).click();
    await open.waitFor({ state: 'detached', timeout: 30_000 });
    assert.equal(await view.locator('#finish').isChecked(), true);
    await commit.click();
    await view.locator('#committed-title', { hasText: 'Committed' }).waitFor({ timeout: 120_000 });
    const d = detail(folder, taskId);
    assert.equal(d.task.state, 'completed');
    assert.equal(d.task.commit, git(folder, 'rev-parse', 'HEAD').trim());
    assert.deepEqual(
      d.steps.map((s) => [s.id, s.status]),
      [
        ['edit', 'completed'],
        ['test', 'completed'],
        ['docs', 'skipped'],
      ],
    );
  });

  it('a step is completed from the Tasks view, failed and skipped from the timeline, on an interrupted task', async function () {
    this.timeout(300_000);
    let folder = '';
    let taskId = '';
    const page = (current.page = await openWorkbench('step-actions', {
      prepare: (f) => {
        folder = f;
        taskId = stoppedTaskFixture(f);
      },
    }));
    await page.locator('.statusbar', { hasText: 'interrupted' }).waitFor({ timeout: 60_000 });
    await page.locator('.activitybar .action-item a[aria-label^="Waypoint"]').first().click();
    const rows = page.locator('.part.sidebar .monaco-list-row');
    await rows.filter({ hasText: 'Make app.js return 2' }).first().click();
    const testRow = rows.filter({ hasText: 'Run the tests' }).first();
    await testRow.waitFor({ timeout: 30_000 });
    await testRow.hover();
    // The row's inline actions follow its state: in progress → Complete and Fail, no Skip or Retry.
    await testRow.locator('.action-label[aria-label="Complete Step"]').waitFor();
    assert.equal(await testRow.locator('.action-label[aria-label="Fail Step"]').count(), 1);
    assert.equal(await testRow.locator('.action-label[aria-label="Skip Step"]').count(), 0);
    await page.screenshot({ path: screenshotPath('tasks view step actions') });
    await testRow.locator('.action-label[aria-label="Complete Step"]').click();
    const deadline = Date.now() + 30_000;
    while (detail(folder, taskId).steps.find((s) => s.id === 'test')!.status !== 'completed') {
      if (Date.now() > deadline) throw new Error('the step was not completed from the Tasks view');
      await page.waitForTimeout(300);
    }

    // The timeline: expand a step, act on it with the buttons its state allows.
    await runCommand(page, 'Waypoint: Show Task Timeline', 60_000, { opensQuickPick: true });
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Make app.js return 2' }).first().click();
    const view = page.frameLocator('iframe.webview').frameLocator('iframe');
    await view.getByRole('listitem', { name: /^Step Run the tests, completed/ }).waitFor({ timeout: 60_000 });
    await view.getByRole('listitem', { name: /^Step Run the linter, in progress/ }).click();
    const lint = view.getByRole('group', { name: 'Actions for step Run the linter' });
    assert.deepEqual(await lint.getByRole('button').allInnerTexts(), ['Complete Step', 'Fail Step']);
    await page.screenshot({ path: screenshotPath('task timeline step actions') });
    await lint.getByRole('button', { name: 'Fail Step Run the linter' }).click();
    const reason = page.locator('.quick-input-widget', { hasText: 'Why did it fail?' });
    await reason.waitFor({ timeout: 30_000 });
    await page.locator('.quick-input-widget input').fill('the linter is not set up here');
    await page.keyboard.press('Enter');
    await view.getByRole('listitem', { name: /^Step Run the linter, failed/ }).waitFor({ timeout: 30_000 });
    await view.getByRole('listitem', { name: /^Step Write the docs, pending/ }).click();
    await view.getByRole('group', { name: 'Actions for step Write the docs' }).getByRole('button', { name: 'Skip Step Write the docs' }).click();
    await view.getByRole('listitem', { name: /^Step Write the docs, skipped/ }).waitFor({ timeout: 30_000 });

    const d = detail(folder, taskId);
    assert.deepEqual(
      d.steps.map((s) => [s.id, s.status]),
      [
        ['edit', 'completed'],
        ['test', 'completed'],
        ['lint', 'failed'],
        ['docs', 'skipped'],
      ],
    );
    assert.equal(d.task.state, 'interrupted', 'a person settling steps does not become the task’s driver');
    await page.screenshot({ path: screenshotPath('task timeline steps settled by hand') });
  });
});
