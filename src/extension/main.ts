import * as vscode from 'vscode';

/**
 * Composition root. Activation does no slow work: the store (and sql.js's WASM)
 * is opened lazily by the first surface that needs it.
 */
export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel('Waypoint', { log: true });
  context.subscriptions.push(output);
  output.info('[extension] activated');
  context.subscriptions.push(
    vscode.commands.registerCommand('waypoint.showStoreInfo', () => {
      output.show(true);
    }),
  );
}

export function deactivate(): void {
  // Everything is disposed through context.subscriptions.
}
