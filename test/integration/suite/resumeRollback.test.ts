import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import * as vscode from 'vscode';
import { activated, eventually, report, type WaypointApi } from './extension';

/**
 * Resume and rollback as the person meets them in a real VS Code: Escape at the
 * delivery choice leaves the task as it was; the rollback preview is open before
 * the decision and closed after it; undo restores files and step states; Undo
 * Last Rollback is offered only when there is one.
 */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('resume and rollback', function () {
  this.timeout(90_000);
  let api: WaypointApi;
  let root: string;
  const file = (rel: string) => path.join(root, rel);

  before(async () => {
    api = await activated();
    root = vscode.workspace.workspaceFolders![0].uri.fsPath;
    fs.mkdirSync(file('src'), { recursive: true });
    fs.writeFileSync(file('src/resume.ts'), 'export const r = 1;\n');
  });

  async function interruptedTask() {
    const engine = await api.engine();
    const { taskId } = await engine.startTask({ goal: 'Resume me', agent: 'demo-agent', plan: [{ id: 'a', title: 'A' }, { id: 'b', title: 'B', dependsOn: ['a'] }], leaseTtlMs: 3_600_000 });
    await engine.startStep({ taskId, stepId: 'a' });
    await engine.completeStep({ taskId, stepId: 'a' });
    // No drift since the last checkpoint, so the flow goes straight to the delivery choice.
    await engine.checkpoint({ taskId, label: 'settled' });
    await engine.interruptTask({ taskId, reason: 'test: the agent went away' });
    return { engine, taskId };
  }

  it('Resume Task, then Escape at the delivery choice: the task, its attempt and its events are unchanged', async () => {
    const { engine, taskId } = await interruptedTask();
    const before = engine.queries.task(taskId);
    const events = (await engine.events()).length;
    const run = vscode.commands.executeCommand('waypoint.resumeTask', taskId);
    await sleep(1_500); // the picker is up
    await vscode.commands.executeCommand('workbench.action.closeQuickOpen');
    assert.equal(await run, undefined);
    const after = engine.queries.task(taskId);
    assert.equal(after.state, 'interrupted');
    assert.equal(after.attempt, before.attempt);
    assert.equal((await engine.events()).length, events, 'no event appended');
    await engine.abandonTask({ taskId });
  });

  it('Resume Task by Copy to Clipboard hands over the prompt and leaves the task interrupted (same attempt) until the agent picks it up', async () => {
    // Set before the task's last checkpoint: the settings file it writes would otherwise be drift (and the drift question a dialog).
    const config = vscode.workspace.getConfiguration('waypoint');
    await config.update('resumeDelivery', 'clipboard', vscode.ConfigurationTarget.Workspace);
    const { engine, taskId } = await interruptedTask();
    try {
      await vscode.env.clipboard.writeText('');
      const ctx = (await vscode.commands.executeCommand('waypoint.resumeTask', taskId)) as { task: { attempt: number } } | undefined;
      assert.ok(ctx);
      // Copying resumes nothing: the agent that reads the prompt resumes the task with its first call.
      assert.equal(engine.queries.task(taskId).state, 'interrupted');
      assert.equal(engine.queries.task(taskId).attempt, 1);
      const prompt = await vscode.env.clipboard.readText();
      assert.match(prompt, /# Resume task: Resume me/);
      assert.match(prompt, /waypoint_task_resume/);
    } finally {
      await config.update('resumeDelivery', undefined, vscode.ConfigurationTarget.Workspace);
    }
    await engine.abandonTask({ taskId });
  });

  async function rolledBackTask() {
    const engine = await api.engine();
    fs.writeFileSync(file('src/app2.ts'), 'export const v = 1;\n');
    fs.rmSync(file('src/two.ts'), { force: true });
    const { taskId } = await engine.startTask({ goal: 'Rollback and undo', plan: [{ id: 'one', title: 'One' }, { id: 'two', title: 'Two', dependsOn: ['one'] }], leaseTtlMs: 3_600_000 });
    await engine.startStep({ taskId, stepId: 'one' });
    fs.writeFileSync(file('src/app2.ts'), 'export const v = 2;\n');
    const one = await engine.completeStep({ taskId, stepId: 'one' });
    await engine.startStep({ taskId, stepId: 'two' });
    fs.writeFileSync(file('src/app2.ts'), 'export const v = 3;\n');
    fs.writeFileSync(file('src/two.ts'), 'export const two = true;\n');
    await engine.completeStep({ taskId, stepId: 'two' });
    return { engine, taskId, target: one.checkpointId };
  }

  it('the rollback preview is open before the decision, names the same file on both sides, and Escape closes it changing nothing', async () => {
    const { engine, taskId, target } = await rolledBackTask();
    const run = vscode.commands.executeCommand('waypoint.rollback', { taskId, checkpointId: target });
    const tab = await eventually(() => vscode.window.tabGroups.all.flatMap((g) => g.tabs).find((t) => t.label.startsWith('Roll back to “After step: One” (')), 'the preview tab');
    report(`preview tab: ${tab.label}`);
    assert.ok(!tab.label.includes(target), 'no checkpoint id in the title');
    // The multi-file diff's tab input (not in the typed API yet) lists each file's two sides: one path each.
    const diffs = (tab.input as { textDiffs?: { original: vscode.Uri; modified: vscode.Uri }[] }).textDiffs;
    report(`multi-diff tab input lists ${diffs?.length ?? 'no'} file diffs`);
    if (diffs) for (const d of diffs) assert.equal(d.original.path, d.modified.path);
    await sleep(1_500); // the file list opens once the diff has
    await vscode.commands.executeCommand('workbench.action.closeQuickOpen');
    report('closed the quick pick');
    assert.equal(await run, undefined);
    report('rollback returned');
    assert.equal(fs.readFileSync(file('src/app2.ts'), 'utf8'), 'export const v = 3;\n');
    assert.deepEqual(engine.queries.steps(taskId).map((s) => s.status), ['completed', 'completed']);
    await eventually(() => !vscode.window.tabGroups.all.flatMap((g) => g.tabs).some((t) => t.label === tab.label), 'the preview closed');
    await engine.abandonTask({ taskId });
  });

  it('rollback from the tree asks whose changes go when the person edited the task’s files too; “only the agent’s” shows the merge and keeps the person’s edits', async () => {
    const engine = await api.engine();
    const lines = (edit: Record<number, string> = {}) => Array.from({ length: 20 }, (_, i) => `${edit[i] ?? `line ${i}`}\n`).join('');
    fs.writeFileSync(file('src/shared.ts'), lines());
    fs.rmSync(file('src/mine.ts'), { force: true });
    const { taskId, baseCheckpointId } = await engine.startTask({ goal: 'Whose changes', leaseTtlMs: 3_600_000 });
    const s = await engine.startStep({ taskId, title: 'agent edits' });
    fs.writeFileSync(file('src/shared.ts'), lines({ 3: 'agent' }));
    await engine.completeStep({ taskId, stepId: s.stepId });
    // The person, with no step open: a line of their own in the agent's file, and a file of their own.
    fs.writeFileSync(file('src/shared.ts'), lines({ 3: 'agent', 15: 'mine' }));
    fs.writeFileSync(file('src/mine.ts'), 'export const mine = true;\n');
    await engine.checkpoint({ taskId, label: 'the person’s edits' });
    const run = vscode.commands.executeCommand('waypoint.rollback', { taskId, checkpointId: baseCheckpointId });
    let settled = false;
    void Promise.resolve(run).then(() => (settled = true), () => (settled = true));
    let mergedSide: vscode.Uri | undefined;
    // Enter on the first choice (only the agent's), then on the file list once the preview is open.
    for (let i = 0; i < 60 && !settled; i++) {
      await sleep(300);
      // One file: VS Code's diff editor, titled "<file> (<preview title>)".
      const tab = vscode.window.tabGroups.all.flatMap((g) => g.tabs).find((t) => t.label.includes('Roll back the agent’s changes since'));
      if (tab?.input instanceof vscode.TabInputTextDiff && tab.input.modified.path.endsWith('/src/shared.ts')) mergedSide ??= tab.input.modified;
      await vscode.commands.executeCommand('workbench.action.acceptSelectedQuickOpenItem');
    }
    const r = (await run) as { mode: string; merged?: string[] } | undefined;
    assert.equal(r?.mode, 'agent-only', 'the first choice is the agent’s changes only');
    assert.deepEqual(r?.merged, ['src/shared.ts']);
    assert.equal(fs.readFileSync(file('src/shared.ts'), 'utf8'), lines({ 15: 'mine' }), 'the agent’s line reverted, the person’s kept');
    assert.equal(fs.readFileSync(file('src/mine.ts'), 'utf8'), 'export const mine = true;\n', 'the person’s file kept');
    if (mergedSide) {
      report(`merged side of the preview: ${mergedSide.toString()}`);
      assert.equal((await vscode.workspace.openTextDocument(mergedSide)).getText(), lines({ 15: 'mine' }), 'the preview showed what the file became');
    } else assert.fail('the preview of the agent’s changes did not open with the merged file');
    await vscode.commands.executeCommand('waypoint.undoRollback', { taskId, confirmed: true });
    assert.equal(fs.readFileSync(file('src/shared.ts'), 'utf8'), lines({ 3: 'agent', 15: 'mine' }));
    await engine.abandonTask({ taskId });
  });

  it('checkpoint content is served under the workspace file’s own path (both sides of a comparison name one file)', async () => {
    const { engine, taskId, target } = await rolledBackTask();
    const uri = vscode.Uri.file(file('src/app2.ts'));
    const doc = await vscode.workspace.openTextDocument(uri.with({ scheme: 'waypoint', query: target }));
    assert.equal(doc.getText(), 'export const v = 2;\n');
    assert.equal(doc.uri.path, uri.path);
    await engine.abandonTask({ taskId });
  });

  it('Undo Last Rollback restores the files and the step states, and is offered only while there is one', async () => {
    const { engine, taskId, target } = await rolledBackTask();
    const row = async () => (await api.treeRows()).find((r) => r.id === `task:${taskId}`);
    await eventually(async () => (await row())?.contextValue.includes(':undoable') === false, 'no undo offered before a rollback');
    await vscode.commands.executeCommand('waypoint.rollback', { taskId, checkpointId: target, confirmed: true });
    assert.equal(fs.readFileSync(file('src/app2.ts'), 'utf8'), 'export const v = 2;\n');
    assert.equal(fs.existsSync(file('src/two.ts')), false);
    assert.deepEqual(engine.queries.steps(taskId).map((s) => s.status), ['completed', 'abandoned']);
    await eventually(async () => (await row())?.contextValue.includes(':undoable'), 'undo offered after the rollback');
    await vscode.commands.executeCommand('waypoint.undoRollback', { taskId, confirmed: true });
    assert.equal(fs.readFileSync(file('src/app2.ts'), 'utf8'), 'export const v = 3;\n');
    assert.equal(fs.readFileSync(file('src/two.ts'), 'utf8'), 'export const two = true;\n');
    assert.deepEqual(engine.queries.steps(taskId).map((s) => s.status), ['completed', 'completed'], 'the step the rollback abandoned is completed again');
    await eventually(async () => (await row())?.contextValue.includes(':undoable') === false, 'no undo offered after the undo');
    await engine.abandonTask({ taskId });
  });
});
