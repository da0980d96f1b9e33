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
