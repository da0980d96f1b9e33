import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import * as vscode from 'vscode';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { activated, waypoint, type WaypointApi } from './extension';

/**
 * The agent doors from inside the editor: the MCP server definition VS Code gets
 * is a real, authenticated HTTP endpoint an SDK client can use, and the CLI run
 * beside the editor relays to the window that owns the store.
 */
describe('agent doors', function () {
  this.timeout(60_000);
  let api: WaypointApi;
  before(async () => {
    api = await activated();
  });

  it('the MCP provider offers an HTTP definition that an SDK client can call', async () => {
    const endpoint = await api.mcpEndpoint();
    assert.ok(endpoint, 'this window serves MCP');
    const defs = api.mcpServerDefinitions();
    assert.equal(defs.length, 1);
    const def = defs[0] as vscode.McpHttpServerDefinition;
    assert.ok(def instanceof vscode.McpHttpServerDefinition, 'an HTTP definition');
    assert.match(def.uri.toString(), /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    assert.match(def.headers.Authorization, /^Bearer .{20,}/);
    const engine = await api.engine();
    const { taskId } = await engine.startTask({ goal: 'Seen over MCP' });
    const client = new Client({ name: 'integration-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(def.uri.toString(true)), { requestInit: { headers: def.headers } }));
    try {
      const r = (await client.callTool({ name: 'waypoint_task_status', arguments: { taskId } })) as { isError?: boolean; structuredContent?: Record<string, unknown> };
      assert.notEqual(r.isError, true);
      assert.equal((r.structuredContent?.task as { id?: string } | undefined)?.id ?? r.structuredContent?.taskId, taskId);
    } finally {
      await client.close();
    }
    // Without the token the same endpoint refuses.
    const res = await fetch(def.uri.toString(true), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(res.status, 401);
    await engine.abandonTask({ taskId });
  });

  it('Connect an Agent shows the changes as a diff first; dismissing the question writes nothing', async () => {
    const ws = vscode.workspace.workspaceFolders![0].uri.fsPath;
    const target = path.join(ws, '.cursor', 'mcp.json');
    const launcher = path.join(ws, '.waypoint', 'bin', 'waypoint.cjs');
    assert.ok(!fs.existsSync(target) && !fs.existsSync(launcher), 'the test starts unconnected');
    let settled = false;
    const done = Promise.resolve(vscode.commands.executeCommand('waypoint.connectAgent', 'cursor')).finally(() => (settled = true));
    const previewTab = () => vscode.window.tabGroups.all.flatMap((g) => g.tabs).find((t) => t.label.startsWith('Waypoint: Connect Cursor'));
    for (let i = 0; i < 100 && !previewTab(); i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(previewTab(), 'the multi-file diff of what would be written is open');
    assert.ok(!fs.existsSync(target), 'nothing written while the question is open');
    // Dismissing the notification answers "no" (as Cancel or Escape does); it appears once the diff is up.
    for (let i = 0; i < 100 && !settled; i++) {
      await vscode.commands.executeCommand('notifications.clearAll');
      await new Promise((r) => setTimeout(r, 200));
    }
    await done;
    assert.ok(!fs.existsSync(target) && !fs.existsSync(launcher), 'nothing written');
    assert.equal(previewTab(), undefined, 'the preview is closed afterwards');
  });

  it('the CLI beside the editor relays to this window instead of failing on the lock', async () => {
    await api.mcpEndpoint();
    const engine = await api.engine();
    const { taskId } = await engine.startTask({ goal: 'Listed by the CLI' });
    const cli = path.join(waypoint().extensionPath, 'dist', 'cli.js');
    const ws = vscode.workspace.workspaceFolders![0].uri.fsPath;
    const { stdout } = await promisify(execFile)(process.execPath, [cli, 'tasks', '--workspace', ws, '--json'], { timeout: 30_000 });
    const tasks = JSON.parse(stdout) as { id: string }[];
    assert.ok(tasks.some((t) => t.id === taskId), 'the CLI sees the task through the owner');
    const started = await promisify(execFile)(process.execPath, [cli, 'step', 'start', '--task', taskId, '--title', 'from the CLI', '--workspace', ws, '--json'], { timeout: 30_000 });
    const stepId = (JSON.parse(started.stdout) as { stepId: string }).stepId;
    assert.equal(engine.queries.step(taskId, stepId)?.status, 'in_progress', 'the CLI’s write landed in the window’s engine');
    await engine.abandonTask({ taskId });
  });
});
