import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import * as vscode from 'vscode';
import { activated, eventually, type WaypointApi } from './extension';

/**
 * Fork Task from Checkpoint and Show Metrics in a real VS Code, against the
 * extension's own engine: the command the Task Timeline calls with { checkpointId },
 * the fork's row linked to the original, Undo, and the metrics document.
 */
describe('fork and metrics', function () {
  this.timeout(60_000);
  let api: WaypointApi;
  let root: string;
  const file = (rel: string) => path.join(root, rel);

  before(async () => {
    api = await activated();
    root = vscode.workspace.workspaceFolders![0].uri.fsPath;
    fs.mkdirSync(file('fork'), { recursive: true });
    fs.writeFileSync(file('fork/f.ts'), 'export const f = 1;\n');
  });

  it('forks from { checkpointId, goal }: the workspace is the checkpoint, the row says where it came from, Undo brings the files back', async () => {
    const engine = await api.engine();
    const { taskId } = await engine.startTask({ goal: 'Original goal for the fork', plan: [{ id: 's1', title: 'First' }, { id: 's2', title: 'Second', dependsOn: ['s1'] }], leaseTtlMs: 3_600_000 });
    await engine.startStep({ taskId, stepId: 's1' });
    fs.writeFileSync(file('fork/f.ts'), 'export const f = 2;\n');
    const { checkpointId } = await engine.completeStep({ taskId, stepId: 's1' });
    await engine.startStep({ taskId, stepId: 's2' });
    fs.writeFileSync(file('fork/f.ts'), 'export const f = 3;\n');
    await engine.completeStep({ taskId, stepId: 's2' });
    const originalEvents = (await engine.events({ taskId })).length;

    const r = (await vscode.commands.executeCommand('waypoint.forkFromCheckpoint', { checkpointId, goal: 'Try s2 another way' })) as { taskId: string } | undefined;
    assert.ok(r?.taskId, 'the command forked (a failure would have returned undefined)');
    assert.equal(fs.readFileSync(file('fork/f.ts'), 'utf8'), 'export const f = 2;\n');
    assert.equal((await engine.events({ taskId })).length, originalEvents, 'the original got no event');
    const row = await eventually(async () => (await api.treeRows()).find((x) => x.id === `task:${r.taskId}`), 'the fork’s row');
    // The row stays short (the title must fit the sidebar); where it came from is in the tooltip and the accessible label.
    assert.match(row.description, / · fork$/);
    assert.doesNotMatch(row.description, /\bs1\b/, 'no step id in the row');
    assert.match(row.contextValue, /:forked/);

    // Confirmed, as the fork notification's Undo is: a bare task id asks first (preview + a question no test answers).
    await vscode.commands.executeCommand('waypoint.undoRollback', { taskId: r.taskId, confirmed: true });
    assert.equal(fs.readFileSync(file('fork/f.ts'), 'utf8'), 'export const f = 3;\n');
    await engine.abandonTask({ taskId: r.taskId });
    await engine.abandonTask({ taskId });
  });

  it('the fork preview is open while the goal is asked and closed once it is given (or on Escape)', async () => {
    const engine = await api.engine();
    fs.writeFileSync(file('fork/g.ts'), 'export const g = 1;\n');
    const { taskId } = await engine.startTask({ goal: 'Preview then fork', plan: [{ id: 's1', title: 'First' }, { id: 's2', title: 'Second', dependsOn: ['s1'] }], leaseTtlMs: 3_600_000 });
    await engine.startStep({ taskId, stepId: 's1' });
    fs.writeFileSync(file('fork/f.ts'), 'export const f = 10;\n');
    const { checkpointId } = await engine.completeStep({ taskId, stepId: 's1' });
    await engine.startStep({ taskId, stepId: 's2' });
    fs.writeFileSync(file('fork/f.ts'), 'export const f = 11;\n');
    fs.writeFileSync(file('fork/g.ts'), 'export const g = 2;\n');
    await engine.completeStep({ taskId, stepId: 's2' });
    const previewTabs = () => vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) => t.label.startsWith('Fork from: '));
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    // The goal box comes up once the preview has opened (up to a second later): press until the command returns.
    const pressUntilSettled = async (run: Thenable<unknown>, command: string) => {
      let settled = false;
      void Promise.resolve(run).then(() => (settled = true), () => (settled = true));
      for (let i = 0; i < 40 && !settled; i++) {
        await sleep(300);
        await vscode.commands.executeCommand(command);
      }
    };

    // Escape at the goal: the preview closes and nothing changes.
    const seq = engine.eventLog.lastSeq;
    const escaped = vscode.commands.executeCommand('waypoint.forkFromCheckpoint', { checkpointId });
    await eventually(() => previewTabs().length > 0, 'the fork preview to open');
    await pressUntilSettled(escaped, 'workbench.action.closeQuickOpen');
    assert.equal(await escaped, undefined);
    await eventually(() => previewTabs().length === 0, 'the preview to close after Escape');
    // The auto checkpoint of the file activity above may land meanwhile; no fork, no rollback may.
    const since = (await engine.events({ afterSeq: seq })).map((e) => e.type);
    assert.deepEqual(since.filter((t) => t !== 'checkpoint.created'), [], `nothing but an auto checkpoint recorded: ${since.join(', ')}`);
    assert.equal(fs.readFileSync(file('fork/f.ts'), 'utf8'), 'export const f = 11;\n');

    // Enter on the proposed goal: the fork is made and its preview is gone.
    const run = vscode.commands.executeCommand('waypoint.forkFromCheckpoint', { checkpointId });
    await eventually(() => previewTabs().length > 0, 'the fork preview to open again');
    await pressUntilSettled(run, 'workbench.action.acceptSelectedQuickOpenItem');
    const r = (await run) as { taskId: string } | undefined;
    assert.ok(r?.taskId, 'forked');
    assert.equal(fs.readFileSync(file('fork/f.ts'), 'utf8'), 'export const f = 10;\n');
    assert.equal(previewTabs().length, 0, `no preview left open: ${vscode.window.tabGroups.all.flatMap((g) => g.tabs).map((t) => t.label).join(', ')}`);
    await vscode.commands.executeCommand('waypoint.undoRollback', { taskId: r.taskId, confirmed: true });
    await engine.abandonTask({ taskId: r.taskId });
    await engine.abandonTask({ taskId });
  });

  it('refuses an unknown checkpoint and changes nothing', async () => {
    const engine = await api.engine();
    const before = engine.eventLog.lastSeq;
    const r = await vscode.commands.executeCommand('waypoint.forkFromCheckpoint', { checkpointId: 'c_does_not_exist' });
    assert.equal(r, undefined);
    assert.equal(engine.eventLog.lastSeq, before);
  });

  it('Show Metrics opens the metrics document, which counts the tasks', async () => {
    await vscode.commands.executeCommand('waypoint.showMetrics');
    const doc = await vscode.workspace.openTextDocument(vscode.Uri.from({ scheme: 'waypoint-events', path: '/Waypoint metrics.md' }));
    const text = doc.getText();
    assert.match(text, /^# Waypoint metrics/);
    assert.match(text, /\| Tasks \| \d+:/);
    assert.match(text, /## Per agent/);
  });
});
