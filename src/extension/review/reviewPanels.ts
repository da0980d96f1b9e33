import * as vscode from 'vscode';
import type { Task } from '../../core/model/schema';
import { Disposable } from '../disposable';
import { WINDOW_OWNER_PREFIX } from '../engineHost';
import { TaskNode } from '../tasksTree';
import { createPagePanel, panelTitle } from './html';
import { REVIEW_VIEW_TYPE, ReviewPanel, type ReviewDeps } from './panel';
import { PageState } from './protocol';

const REVIEWABLE: ReadonlySet<Task['state']> = new Set(['waiting_review', 'running', 'interrupted', 'waiting_tool', 'suspended']);

/**
 * One review panel per task: opening again focuses it. Panels survive a window
 * reload through the serializer (the page keeps its task id in webview state), and
 * a notification offers the review when a task starts waiting for one.
 */
export class ReviewPanels extends Disposable {
  private readonly panels = new Map<string, ReviewPanel>();

  constructor(private readonly deps: ReviewDeps) {
    super();
    this.register(
      vscode.window.registerWebviewPanelSerializer(REVIEW_VIEW_TYPE, {
        deserializeWebviewPanel: async (panel, state) => {
          const parsed = PageState.safeParse(state);
          if (!parsed.success) {
            deps.log.warn('[review] a restored panel had no valid state; closing it');
            panel.dispose();
            return;
          }
          this.adopt(parsed.data.taskId, panel);
        },
      }),
    );
    this.register(
      deps.host.onDidChange((e) => {
        // One window offers it: the one owning the store, or (when a process such as
        // `waypoint mcp` owns it) every window relaying to that process; another window owner offers it itself.
        const m = deps.host.mode;
        if (!(m.kind === 'owner' || (m.kind === 'relay' && !m.owner.ownerId.startsWith(WINDOW_OWNER_PREFIX)))) return;
        for (const ev of e?.events ?? []) if (ev.type === 'task.review_requested' && ev.taskId) void this.offer(ev.taskId);
      }),
    );
    this.register({ dispose: () => [...this.panels.values()].forEach((p) => p.dispose()) });
  }

  /** `waypoint.reviewTask`: a task id (status bar), a tree node, or nothing (quick pick). */
  async open(arg?: unknown): Promise<ReviewPanel | undefined> {
    const taskId = arg instanceof TaskNode ? arg.task.id : typeof arg === 'string' ? arg : await this.pick();
    if (!taskId) return undefined;
    // Refuses an unknown id with a clear error, wherever the store is (in-process or the owner's /rpc).
    const { task } = await (await this.deps.host.api()).taskDetail(taskId);
    const existing = this.panels.get(taskId);
    if (existing) {
      existing.reveal();
      return existing;
    }
    const panel = createPagePanel(REVIEW_VIEW_TYPE, panelTitle('Review', task.title), this.deps.extensionUri);
    return this.adopt(taskId, panel);
  }

  /** The open panel of a task (tests, and the host's apply). */
  panel(taskId: string): ReviewPanel | undefined {
    return this.panels.get(taskId);
  }

  private adopt(taskId: string, panel: vscode.WebviewPanel): ReviewPanel {
    const p = new ReviewPanel(taskId, panel, this.deps);
    this.panels.set(taskId, p);
    p.onDidDispose(() => {
      if (this.panels.get(taskId) === p) this.panels.delete(taskId);
    });
    return p;
  }

  private async pick(): Promise<string | undefined> {
    const tasks = (await (await this.deps.host.api()).tasks()).filter((t) => REVIEWABLE.has(t.state) && t.baseCheckpointId);
    if (!tasks.length) {
      void vscode.window.showInformationMessage('Waypoint: no task has changes waiting for review.');
      return undefined;
    }
    const pick = await vscode.window.showQuickPick(
      tasks.map((t) => ({ label: t.title, description: t.state.replace('_', ' '), detail: t.goal !== t.title ? t.goal.slice(0, 200) : undefined, id: t.id })),
      { placeHolder: 'Review the changes of which task?' },
    );
    return pick?.id;
  }

  private async offer(taskId: string): Promise<void> {
    if (this.panels.has(taskId)) return;
    const { task } = await (await this.deps.host.api()).taskDetail(taskId);
    const go = await vscode.window.showInformationMessage(`Waypoint: “${task.title}” is ready for review.`, 'Review Changes');
    if (go) await vscode.commands.executeCommand('waypoint.reviewTask', taskId);
  }
}
