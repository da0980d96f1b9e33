import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { activated, manifest } from './extension';

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

  it('puts every declared command under the Waypoint category', () => {
    for (const c of manifest().contributes.commands) {
      assert.equal(c.category, 'Waypoint', `${c.command} has category ${String(c.category)}`);
    }
  });

  it('runs Show Store Info without throwing', async () => {
    await vscode.commands.executeCommand('waypoint.showStoreInfo');
  });
});
