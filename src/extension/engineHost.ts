import * as vscode from 'vscode';
import { Engine, type ChangeEvent } from '../core/engine/engine';
import { Logger } from '../core/log';
import { errorMessage, isWaypointError } from '../core/model/errors';
import { Disposable } from './disposable';
import { settings } from './settings';

/**
 * Owns the engine for the window's workspace. The store (and sql.js's WASM) opens
 * lazily behind one promise, on first use, so activation stays cheap. Engine change
 * events are re-emitted as a VS Code event for the tree and the status bar.
 */
export class EngineHost extends Disposable {
  private opening: Promise<Engine> | undefined;
  private engine: Engine | undefined;
  private readonly _onDidChange = this.register(new vscode.EventEmitter<ChangeEvent | undefined>());
  /** Fires after events are durable; `undefined` means "everything may have changed" (open, close). */
  readonly onDidChange = this._onDidChange.event;

  constructor(
    private readonly log: vscode.LogOutputChannel,
    readonly ownerId: string,
  ) {
    super();
  }

  get workspaceFolder(): vscode.WorkspaceFolder | undefined {
    return vscode.workspace.workspaceFolders?.[0];
  }

  /** The engine if it is already open (never opens it). */
  get current(): Engine | undefined {
    return this.engine;
  }

  /** Opens the engine if needed. Rejects with a readable error when there is no folder or another process owns the store. */
  get(): Promise<Engine> {
    this.opening ??= this.open().catch((e) => {
      this.opening = undefined;
      throw e;
    });
    return this.opening;
  }

  private async open(): Promise<Engine> {
    const folder = this.workspaceFolder;
    if (!folder || folder.uri.scheme !== 'file') {
      throw new Error('Waypoint needs a folder on disk: open a folder to record agent tasks.');
    }
    const s = settings(folder.uri);
    const sink = new Logger((level, line) => this.log[level](line));
    const t0 = performance.now();
    try {
      const engine = await Engine.open({
        workspace: folder.uri.fsPath,
        storeDir: s.storageLocation,
        log: sink,
        owner: { id: this.ownerId, pid: process.pid },
        defaultLeaseTtlMs: s.leaseTtlSeconds * 1000,
        sweepIntervalMs: 15_000,
        snapshots: { excludes: s.excludes, maxFileBytes: Math.round(s.maxFileSizeMB * 1024 * 1024) },
        store: { lock: { waitMs: 3_000 } },
      });
      this.engine = engine;
      this.register(engine.onDidChange((e) => this._onDidChange.fire(e)));
      this.log.info(`[host] engine open for ${folder.uri.fsPath} in ${(performance.now() - t0).toFixed(0)} ms`);
      for (const w of [...engine.store.report.warnings, ...engine.recoveryNotes]) void vscode.window.showWarningMessage(`Waypoint: ${w}`);
      this._onDidChange.fire(undefined);
      return engine;
    } catch (e) {
      if (isWaypointError(e) && e.code === 'locked') this.log.warn(`[host] ${e.message}`);
      else this.log.error(`[host] opening the store failed: ${errorMessage(e)}`);
      throw e;
    }
  }

  override dispose(): void {
    const engine = this.engine;
    this.engine = undefined;
    super.dispose();
    // Closing exports the database; the extension host waits for deactivate's promise.
    void engine?.close().catch((e) => this.log.error(`[host] close failed: ${errorMessage(e)}`));
  }

  async close(): Promise<void> {
    const engine = this.engine;
    this.engine = undefined;
    this.opening = undefined;
    await engine?.close();
  }
}
