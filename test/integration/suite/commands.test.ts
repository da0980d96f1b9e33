import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { activated, manifest } from './extension';

/**
 * Commands other commands and notifications call with an argument (never from the
 * palette or a menu), so package.json does not declare them. Adding one here is a
 * decision: most commands belong in package.json.
 */
const INTERNAL = ['waypoint.revealTask'];

describe('commands', () => {
  before(async () => {
    await activated();
  });

  it('registers every command package.json declares', async () => {
    const declared = manifest().contributes.commands.map((c) => c.command);
    assert.ok(declared.length > 0, 'package.json declares commands');
    const registered = new Set(await vscode.commands.getCommands(true));
    const missing = declared.filter((c) => !registered.has(c));
    assert.deepEqual(missing, [], `declared but never registered: ${missing.join(', ')}`);
  });

  it('registers every command through the one registry, and declares every one it registers', async () => {
    const declared = new Set(manifest().contributes.commands.map((c) => c.command));
    const api = await activated();
    const registered = api.registeredCommands();
    assert.equal(new Set(registered).size, registered.length, 'no command is registered twice');
    const undeclared = registered.filter((c) => !declared.has(c) && !INTERNAL.includes(c));
    assert.deepEqual(undeclared, [], `registered but not declared in package.json: ${undeclared.join(', ')}`);
    const outside = [...declared].filter((c) => !registered.includes(c));
    assert.deepEqual(outside, [], `declared but registered outside the registry: ${outside.join(', ')}`);
    // Nothing else in the extension registers a waypoint.* command on the side (VS Code's own view commands aside).
    const viewIds = manifest().contributes.views.waypoint.map((v) => v.id);
    const live = (await vscode.commands.getCommands(true)).filter((c) => c.startsWith('waypoint.') && !viewIds.some((v) => c.startsWith(`${v}.`)));
    const stray = live.filter((c) => !declared.has(c) && !INTERNAL.includes(c));
    assert.deepEqual(stray, [], `registered but not declared: ${stray.join(', ')}`);
  });

  it('disables the commands that change the workspace while one runs', () => {
    const gated = manifest().contributes.commands.filter((c) => c.enablement === '!waypoint.busy').map((c) => c.command).sort();
    // Connecting, disconnecting or reconnecting the team store reopens the engine: not while a rollback or checkpoint runs.
    assert.deepEqual(gated, [
      'waypoint.connectTeamStore',
      'waypoint.createCheckpoint',
      'waypoint.disconnectTeamStore',
      'waypoint.forkFromCheckpoint',
      'waypoint.prune',
      'waypoint.reconnectTeamStore',
      'waypoint.rollback',
      'waypoint.undoRollback',
    ]);
  });

  it('reports no operation in progress when idle', async () => {
    assert.equal((await activated()).busy(), false);
  });

  it('puts every declared command under the Waypoint category', () => {
    for (const c of manifest().contributes.commands) {
      assert.equal(c.category, 'Waypoint', `${c.command} has category ${String(c.category)}`);
    }
  });

  it('runs Show Store Info without throwing', async () => {
    await vscode.commands.executeCommand('waypoint.showStoreInfo');
  });
});
