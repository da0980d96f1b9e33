import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import * as vscode from 'vscode';
import { activated, eventually, type WaypointApi } from './extension';

/**
 * The everyday surfaces in a real VS Code: the Tasks view, rollback from a
 * checkpoint and its undo, the status bar and auto-checkpoints — all against the
 * extension's own engine on the workspace the launcher opened.
 */
describe('surfaces', function () {
  this.timeout(60_000);
  let api: WaypointApi;
  let root: string;
  const file = (rel: string) => path.join(root, rel);

  before(async () => {
    api = await activated();
    root = vscode.workspace.workspaceFolders![0].uri.fsPath;
    fs.mkdirSync(file('src'), { recursive: true });
    fs.writeFileSync(file('src/app.ts'), 'export const version = 1;\n');
  });

  it('the Tasks view shows a task created through the engine within one refresh', async () => {
    const engine = await api.engine();
    const refreshed = new Promise<void>((resolve) => {
      const d = api.onDidRefreshTree(() => {
        d.dispose();
        resolve();
      });
    });
    const { taskId } = await engine.startTask({ goal: 'Show me in the tree', plan: [{ id: 'edit', title: 'Edit app.ts' }], leaseTtlMs: 3_600_000 });
    await refreshed;
    const rows = await api.treeRows();
    const row = rows.find((r) => r.id === `task:${taskId}`);
    assert.ok(row, `task row present among ${rows.map((r) => r.id).join(', ')}`);
    assert.equal(row.label, 'Show me in the tree');
    assert.equal(row.description, 'running · 0/1 steps', 'short: state and progress, in the one form of progress');
    assert.match(row.contextValue, /^task:running:/);
    const children = await api.treeRows(`task:${taskId}`);
    assert.deepEqual(
      children.map((c) => c.label),
      ['Start of task', 'Edit app.ts'],
    );
    await engine.abandonTask({ taskId });
  });

  it('the status bar follows the task’s state', async () => {
    const engine = await api.engine();
    const { taskId } = await engine.startTask({ goal: 'Status bar task', plan: [{ id: 'a', title: 'A' }, { id: 'b', title: 'B' }], leaseTtlMs: 3_600_000 });
    await engine.startStep({ taskId, stepId: 'a' });
    await eventually(() => api.statusText().includes('Status bar task · 0/2 steps'), 'running text');
    assert.match(api.statusText(), /^\$\(sync~spin\) Status bar task · 0\/2 steps$/);
    await engine.completeStep({ taskId, stepId: 'a' });
    await eventually(() => api.statusText().endsWith('· 1/2 steps'), 'progress 1/2');
    await engine.interruptTask({ taskId, reason: 'test: the agent went away' });
    await eventually(() => /interrupted/.test(api.statusText()), 'interrupted text');
    assert.match(api.statusText(), /^\$\(debug-pause\) .* · interrupted · 1\/2 steps$/);
    await engine.abandonTask({ taskId });
  });

  it('an interrupted task’s step reads as stopped, its side effect sits under it with its result, and no row shows an id', async () => {
    const engine = await api.engine();
    const { taskId } = await engine.startTask({ goal: 'Labels task', plan: [{ id: 'read', title: 'Read the code' }, { id: 'b', title: 'B' }], leaseTtlMs: 3_600_000 });
    await engine.startStep({ taskId, stepId: 'read' });
    await engine.beginSideEffect({ taskId, stepId: 'read', key: 'npm-test-1', kind: 'shell', description: 'npm test' });
    await engine.endSideEffect({ taskId, key: 'npm-test-1', ok: true, result: { exitCode: 0 }, idempotencyKey: 'labels-e1' });
    await engine.interruptTask({ taskId, reason: 'test: the window closed' });
    const children = await eventually(async () => {
      const rows = await api.treeRows(`task:${taskId}`);
      return rows.find((r) => r.id === `step:${taskId}:read` && /^stopped/.test(r.description)) ? rows : undefined;
    }, 'the step to read as stopped');
    assert.deepEqual(children.map((c) => c.label), ['Start of task', 'Read the code', 'B'], 'the side effect is not under the task');
    const base = children[0];
    assert.match(base.description, / · \d+ files?$/, 'a base checkpoint counts its files, it changed nothing');
    const step = children[1];
    assert.doesNotMatch(step.description, /\bread\b/, 'no step id in the row');
    const under = await api.treeRows(`step:${taskId}:read`);
    assert.deepEqual(under.filter((r) => r.id.startsWith('effect:')).map((r) => [r.label, r.description]), [['npm test', 'shell · done']]);
    assert.ok(under.filter((r) => r.id.startsWith('checkpoint:')).every((r) => !/c_[a-z0-9]{5,}/.test(r.label + r.description)), 'no checkpoint id in its rows');
    const doc = await (async () => {
      await vscode.commands.executeCommand('waypoint.showTaskEvents', taskId);
      return eventually(() => vscode.workspace.textDocuments.find((d) => d.uri.scheme === 'waypoint-events' && d.uri.path.includes(taskId)), 'the events document');
    })();
    const text = doc.getText();
    assert.match(text, /^## Step: Read the code/m);
    assert.match(text, /Side effect done: npm test → \{"exitCode":0\}/);
    assert.match(text, /Show Raw JSON/);
    assert.doesNotMatch(text, /"ts": \d+/, 'no raw JSON unless asked for');
    await vscode.commands.executeCommand('workbench.action.closeActiveEditor');
    await engine.abandonTask({ taskId });
  });

  it('Roll Back to Checkpoint restores the files and Undo Last Rollback brings them back', async () => {
    const engine = await api.engine();
    const { taskId, baseCheckpointId } = await engine.startTask({ goal: 'Rollback fixture', leaseTtlMs: 3_600_000 });
    await engine.startStep({ taskId, title: 'agent edit' });
    fs.writeFileSync(file('src/app.ts'), 'export const version = 2; // agent\n');
    fs.writeFileSync(file('src/extra.ts'), 'export const extra = true;\n');
    await engine.completeStep({ taskId, stepId: 's1' });
    await vscode.commands.executeCommand('waypoint.rollback', { taskId, checkpointId: baseCheckpointId, confirmed: true });
    assert.equal(fs.readFileSync(file('src/app.ts'), 'utf8'), 'export const version = 1;\n');
    assert.equal(fs.existsSync(file('src/extra.ts')), false);
    await vscode.commands.executeCommand('waypoint.undoRollback', { taskId, confirmed: true });
    assert.equal(fs.readFileSync(file('src/app.ts'), 'utf8'), 'export const version = 2; // agent\n');
    assert.equal(fs.readFileSync(file('src/extra.ts'), 'utf8'), 'export const extra = true;\n');
    await engine.abandonTask({ taskId });
  });

  it('auto-checkpoints capture an edit written from outside the editor', async () => {
    const engine = await api.engine();
    const { taskId } = await engine.startTask({ goal: 'Auto checkpoint fixture', leaseTtlMs: 3_600_000 });
    const before = engine.queries.checkpoints(taskId).length;
    fs.writeFileSync(file('src/outside.ts'), `export const written = ${Date.now()};\n`);
    // The watcher's event arrives asynchronously; earlier events may produce an auto checkpoint first.
    const cp = await eventually(async () => {
      await api.flushAutoCheckpoint();
      for (const c of engine.queries.checkpoints(taskId).filter((x) => x.kind === 'auto')) {
        const content = await engine.workspaceSnapshots!.fileAt(c, 'src/outside.ts');
        if (content?.toString().startsWith('export const written')) return c;
      }
      return undefined;
    }, 'an auto checkpoint holding src/outside.ts');
    assert.ok(engine.queries.checkpoints(taskId).length > before);
    assert.match(cp.label ?? '', /file change/);
    await engine.abandonTask({ taskId });
  });

  it('serves checkpoint content read-only through the waypoint: scheme', async () => {
    const engine = await api.engine();
    const { taskId, baseCheckpointId } = await engine.startTask({ goal: 'Content provider fixture' });
    const doc = await vscode.workspace.openTextDocument(vscode.Uri.from({ scheme: 'waypoint', path: `/${baseCheckpointId}/src/app.ts` }));
    assert.match(doc.getText(), /export const version/);
    await assert.rejects(Promise.resolve(vscode.workspace.fs.writeFile(doc.uri, new Uint8Array([1]))));
    await engine.abandonTask({ taskId });
  });
});
