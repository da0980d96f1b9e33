import * as vscode from 'vscode';
import { Disposable } from './disposable';

/** The context key package.json's `enablement: !waypoint.busy` reads on commands that change the workspace. */
export const BUSY_CONTEXT_KEY = 'waypoint.busy';

/**
 * The one runner for what changes the workspace from the extension: rollback, undo,
 * fork, checkpoint, prune and the review's commit. Like the git extension's
 * `Repository.run`, it
 *  - serializes them (two rollbacks, or a rollback racing a commit, would each read a
 *    workspace the other is rewriting; the engine's lock would refuse one midway),
 *  - shows progress with the operation's title,
 *  - sets `waypoint.busy` while any is queued or running, so their commands are
 *    disabled in menus and the palette instead of queueing up behind a long one.
 * It rethrows what `fn` throws: the caller's surface applies the error policy
 * (errorPolicy.ts — commands through their one wrapper, the review page with its own
 * way out), so a failure is reported exactly once.
 */
export class WorkspaceOperations extends Disposable {
  private tail: Promise<unknown> = Promise.resolve();
  private pending = 0;
  private readonly changed = this.register(new vscode.EventEmitter<boolean>());
  /** Fires true when the first operation is queued and false when the last one ends. */
  readonly onDidChangeBusy = this.changed.event;

  get busy(): boolean {
    return this.pending > 0;
  }

  run<T>(title: string, fn: () => Promise<T>, location: vscode.ProgressLocation = vscode.ProgressLocation.Notification): Promise<T> {
    if (this.pending++ === 0) this.setBusy(true);
    const result = this.tail.then(() => vscode.window.withProgress({ location, title: `Waypoint: ${title}` }, () => fn()));
    // The chain waits for each operation to settle, whatever its outcome, before the next starts.
    this.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result.finally(() => {
      if (--this.pending === 0) this.setBusy(false);
    });
  }

  private setBusy(busy: boolean): void {
    void vscode.commands.executeCommand('setContext', BUSY_CONTEXT_KEY, busy);
    this.changed.fire(busy);
  }

  override dispose(): void {
    if (this.pending > 0) void vscode.commands.executeCommand('setContext', BUSY_CONTEXT_KEY, false);
    super.dispose();
  }
}
