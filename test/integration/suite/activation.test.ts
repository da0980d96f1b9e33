import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { activated, report, waypoint } from './extension';

/** The activation budget (issue 4): activation must never do slow work up front. */
const ACTIVATION_BUDGET_MS = 50;

describe('activation', () => {
  it('activates by itself in a workspace that contains .waypoint/', async () => {
    // The launchers open a workspace with a .waypoint/ folder, so the
    // `workspaceContains:.waypoint` event must have activated us without help.
    const folder = vscode.workspace.workspaceFolders?.[0];
    assert.ok(folder, 'the launcher opens a workspace folder');
    await vscode.workspace.fs.stat(vscode.Uri.joinPath(folder.uri, '.waypoint'));
    const deadline = Date.now() + 10_000;
    while (!waypoint().isActive && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(waypoint().isActive, true, 'extension is active');
  });

  it('returns its API from activate()', async () => {
    const api = await activated();
    assert.equal(typeof api.activationMs, 'number');
    assert.ok(Number.isFinite(api.activationMs) && api.activationMs >= 0, `activationMs=${api.activationMs}`);
  });

  it(`activates within ${ACTIVATION_BUDGET_MS} ms`, async () => {
    const { activationMs } = await activated();
    report(`      activation took ${activationMs.toFixed(2)} ms`);
    assert.ok(activationMs <= ACTIVATION_BUDGET_MS, `activation took ${activationMs.toFixed(1)} ms`);
  });
});
