import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import * as vscode from 'vscode';
import { checkpointUri } from '../../../src/extension/checkpointFs';
import { activated, eventually, waypoint, type WaypointApi } from './extension';

/**
 * Runs only in the launcher's `folders` pass: the window opens a `.code-workspace` of
 * two folders (`workspace`, not a git repository, and `second`, which holds a nested
 * git repository). One store, in the first folder, supervises both: a task's changes in
 * both folders belong to it, show as `folder/…`, and roll back together; a CLI started
 * in the second folder finds the same store; a folder added while the window is open is
 * captured from then on.
 */
const enabled = process.env.WAYPOINT_IT_FOLDERS === '1';

describe('two folders: one store supervises every folder of the window', function () {
  this.timeout(90_000);
  let api: WaypointApi;
  let app: string;
  let second: string;
  let cli: string;
  const run = async (cwd: string, ...args: string[]) => JSON.parse((await promisify(execFile)(process.execPath, [cli, ...args, '--workspace', cwd, '--json'], { timeout: 30_000 })).stdout) as unknown;
  const read = (p: string) => fs.readFileSync(p, 'utf8');

  before(async function () {
    if (!enabled) this.skip();
    api = await activated();
    const folders = vscode.workspace.workspaceFolders!;
    assert.equal(folders.length, 2);
    app = folders[0]!.uri.fsPath;
    second = folders[1]!.uri.fsPath;
    cli = path.join(waypoint().extensionPath, 'dist', 'cli.js');
  });

  it('opens one store with both folders as roots, and links the second folder to it', async () => {
    const engine = await api.engine();
    assert.deepEqual(engine.workspaceSnapshots?.roots.map((r) => r.name), ['workspace', 'second']);
    assert.equal(engine.storeDir, path.join(app, '.waypoint'));
    const link = JSON.parse(read(path.join(second, '.waypoint', 'link.json'))) as { store: string };
    assert.equal(link.store, path.join(app, '.waypoint'));
    assert.equal(read(path.join(second, '.waypoint', '.gitignore')), '*\n');
  });

  it('a task that changes both folders checkpoints, shows and rolls back both', async () => {
    const engine = await api.engine();
    const { taskId, baseCheckpointId } = await engine.startTask({ goal: 'Change both folders', plan: [{ id: 's', title: 'edit' }] });
    await engine.startStep({ taskId, stepId: 's' });
    fs.writeFileSync(path.join(app, 'app.txt'), 'app two\n');
    fs.writeFileSync(path.join(second, 'lib.txt'), 'lib two\n');
    fs.writeFileSync(path.join(second, 'nested', 'vendored.txt'), 'vendored two\n');
    const head = read(path.join(second, 'nested', '.git', 'HEAD'));
    await engine.completeStep({ taskId, stepId: 's' });
    const d = await engine.diff({ from: baseCheckpointId! });
    assert.deepEqual(d.changes.map((c) => c.path).sort(), ['second/lib.txt', 'second/nested/vendored.txt', 'workspace/app.txt']);
    // The checkpoint's side of a comparison names the file in its own folder and reads the checkpoint's content.
    const uri = checkpointUri(baseCheckpointId!, 'second/lib.txt');
    assert.equal(uri.path, vscode.Uri.file(path.join(second, 'lib.txt')).path);
    assert.equal(Buffer.from(await vscode.workspace.fs.readFile(uri)).toString('utf8'), 'lib one\n');
    // The window's Roll Back command restores both folders in one rollback.
    await vscode.commands.executeCommand('waypoint.rollback', { taskId, checkpointId: baseCheckpointId, confirmed: true });
    assert.equal(read(path.join(app, 'app.txt')), 'app one\n');
    assert.equal(read(path.join(second, 'lib.txt')), 'lib one\n');
    assert.equal(read(path.join(second, 'nested', 'vendored.txt')), 'vendored one\n');
    assert.equal(read(path.join(second, 'nested', '.git', 'HEAD')), head, 'the nested repository’s .git is left alone');
    // A CLI started in the second folder reaches the same store (through this window, its owner).
    const tasks = (await run(second, 'tasks')) as { id: string }[];
    assert.ok(tasks.some((t) => t.id === taskId), 'the CLI in the second folder sees the window’s task');
    assert.equal(fs.existsSync(path.join(second, '.waypoint', 'waypoint.db')), false, 'no second store');
    await engine.abandonTask({ taskId });
  });

  it('a folder added while the window is open is captured from then on', async () => {
    const third = path.join(path.dirname(app), 'third');
    fs.mkdirSync(third, { recursive: true });
    fs.writeFileSync(path.join(third, 'docs.txt'), 'docs\n');
    assert.ok(vscode.workspace.updateWorkspaceFolders(2, 0, { uri: vscode.Uri.file(third) }));
    const engine = await eventually(async () => {
      const e = await api.engine().catch(() => undefined);
      return e && e.workspaceSnapshots?.roots.length === 3 ? e : undefined;
    }, 'the store to reopen with the third folder', 30_000);
    const { taskId, baseCheckpointId } = await engine.startTask({ goal: 'After the third folder', plan: [{ id: 's', title: 's' }] });
    const m = await engine.workspaceSnapshots!.load(engine.queries.checkpoint(baseCheckpointId!)!);
    assert.ok(m.has('third/docs.txt'), 'the new folder is in the next checkpoint');
    assert.ok(fs.existsSync(path.join(third, '.waypoint', 'link.json')), 'and linked to the store');
    await engine.abandonTask({ taskId });
  });
});
