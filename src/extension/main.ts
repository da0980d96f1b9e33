import * as vscode from 'vscode';

/** What `activate()` returns; tests and other extensions read it via `extension.exports`. */
export interface WaypointApi {
  /** Wall time spent inside `activate()`, in milliseconds (the budget is 50 ms). */
  readonly activationMs: number;
}

/**
 * Composition root. Activation does no slow work: the store (and sql.js's WASM)
 * is opened lazily by the first surface that needs it.
 */
export function activate(context: vscode.ExtensionContext): WaypointApi {
  const started = performance.now();
  const output = vscode.window.createOutputChannel('Waypoint', { log: true });
  context.subscriptions.push(output);
  context.subscriptions.push(
    vscode.commands.registerCommand('waypoint.showStoreInfo', () => {
      output.show(true);
    }),
  );
  const activationMs = performance.now() - started;
  output.info(`[extension] activated in ${activationMs.toFixed(1)} ms`);
  return { activationMs };
}

export function deactivate(): void {
  // Everything is disposed through context.subscriptions.
}
