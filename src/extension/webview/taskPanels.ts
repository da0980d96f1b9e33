import * as vscode from 'vscode';
import { Disposable } from '../disposable';
import { createPagePanel, panelTitle } from '../review/html';
import { TaskNode } from '../tasksTree';
import type { TaskPanel } from './taskPanel';

export interface TaskPanelsKind {
  viewType: string;
  /** The panel's title before the task's ("Review", "Timeline"). */
  what: string;
  /** The task id in the page's webview state (parsed with the page's schema), so a reloaded window restores the panel; undefined when the state does not parse. */
  taskIdOf: (state: unknown) => string | undefined;
  log: vscode.LogOutputChannel;
  extensionUri: vscode.Uri;
}

/**
 * One panel of a kind per task: opening again focuses it. Panels survive a window
 * reload through the serializer (the page keeps its task id in webview state); a
 * restored panel whose state does not parse is closed, not guessed at.
 */
export abstract class TaskPanels<P extends TaskPanel> extends Disposable {
  private readonly panels = new Map<string, P>();

  protected constructor(private readonly kind: TaskPanelsKind) {
    super();
    this.register(
      vscode.window.registerWebviewPanelSerializer(kind.viewType, {
        deserializeWebviewPanel: async (panel, state) => {
          const taskId = kind.taskIdOf(state);
          if (!taskId) {
            kind.log.warn(`[${kind.what.toLowerCase()}] a restored panel had no valid state; closing it`);
            panel.dispose();
            return;
          }
          this.adopt(taskId, panel);
        },
      }),
    );
    this.register({ dispose: () => [...this.panels.values()].forEach((p) => p.dispose()) });
  }

  /** A panel's new host object for a task's webview panel. */
  protected abstract create(taskId: string, panel: vscode.WebviewPanel): P;

  /** The task's title; refuses an unknown id with a clear error, before any panel opens. */
  protected abstract taskTitle(taskId: string): Promise<string>;

  /** Asks which task (no argument given); undefined when the person cancels or none fits. */
  protected abstract pick(): Promise<string | undefined>;

  /** The command's argument: a task id (status bar, other commands), a tree node, or nothing (quick pick). */
  async open(arg?: unknown): Promise<P | undefined> {
    const taskId = arg instanceof TaskNode ? arg.task.id : typeof arg === 'string' ? arg : await this.pick();
    if (!taskId) return undefined;
    const title = await this.taskTitle(taskId);
    const existing = this.panels.get(taskId);
    if (existing) {
      existing.reveal();
      return existing;
    }
    return this.adopt(taskId, createPagePanel(this.kind.viewType, panelTitle(this.kind.what, title), this.kind.extensionUri));
  }

  /** The open panel of a task (tests, and the host). */
  panel(taskId: string): P | undefined {
    return this.panels.get(taskId);
  }

  private adopt(taskId: string, panel: vscode.WebviewPanel): P {
    const p = this.create(taskId, panel);
    this.panels.set(taskId, p);
    p.onDidDispose(() => {
      if (this.panels.get(taskId) === p) this.panels.delete(taskId);
    });
    return p;
  }
}
