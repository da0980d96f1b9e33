import * as vscode from 'vscode';
import { Disposable } from '../disposable';
import type { EngineHost } from '../engineHost';
import { ensureWebviewOptions } from '../review/html';

/**
 * What every panel about one task shares (the review, the timeline): the webview's
 * options, the page's messages handed to `receive`, the engine's changes to this task
 * handed to `taskChanged`, and disposal both ways — closing the panel disposes this,
 * and disposing this closes the panel.
 */
export abstract class TaskPanel extends Disposable {
  private readonly _onDidDispose = this.register(new vscode.EventEmitter<void>());
  readonly onDidDispose = this._onDidDispose.event;

  protected constructor(
    readonly taskId: string,
    readonly panel: vscode.WebviewPanel,
    deps: { host: EngineHost; extensionUri: vscode.Uri },
  ) {
    super();
    ensureWebviewOptions(panel.webview, deps.extensionUri);
    this.register(panel.webview.onDidReceiveMessage((m) => void this.receive(m)));
    this.register(
      deps.host.onDidChange((e) => {
        if (!e || e.taskIds.includes(taskId)) this.taskChanged();
      }),
    );
    this.register(panel.onDidDispose(() => this.dispose()));
  }

  /** A message from the page, not yet parsed: the subclass parses it with its protocol. */
  protected abstract receive(raw: unknown): Promise<void>;

  /** The engine recorded something about this task (or about every task). */
  protected abstract taskChanged(): void;

  override dispose(): void {
    if (this.isDisposed) return;
    this._onDidDispose.fire();
    super.dispose();
    this.panel.dispose();
  }

  reveal(): void {
    this.panel.reveal();
  }
}
