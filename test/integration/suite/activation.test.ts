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

  // activate() is synchronous, so its wall time is its work plus any moment the OS gave
  // the CPU to another process (code-server, Chromium and the harness share two cores
  // here: once a 72 ms wall time with 10-13 ms in every other run). Its process CPU time
  // leaves those out but counts other threads (GC helpers). Slow work up front (a store
  // opened before the first paint) raises both, so the budget holds for the smaller.
  it(`activates within ${ACTIVATION_BUDGET_MS} ms`, async () => {
    const { activationMs, activationCpuMs } = await activated();
    report(`      activation took ${activationMs.toFixed(2)} ms (${activationCpuMs.toFixed(2)} ms of CPU)`);
    assert.ok(Math.min(activationMs, activationCpuMs) <= ACTIVATION_BUDGET_MS, `activation took ${activationMs.toFixed(1)} ms, ${activationCpuMs.toFixed(1)} ms of CPU`);
  });
});
