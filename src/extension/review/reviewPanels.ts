import * as vscode from 'vscode';
import type { Task } from '../../core/model/schema';
import { WINDOW_OWNER_PREFIX } from '../engineHost';
import { TaskPanels } from '../webview/taskPanels';
import { REVIEW_VIEW_TYPE, ReviewPanel, type ReviewDeps } from './panel';
import { PageState } from './protocol';

const REVIEWABLE: ReadonlySet<Task['state']> = new Set(['waiting_review', 'running', 'interrupted', 'waiting_tool', 'suspended']);

/**
 * One review panel per task (`waypoint.reviewTask`), restored on reload; a
 * notification offers the review when a task starts waiting for one.
 */
export class ReviewPanels extends TaskPanels<ReviewPanel> {
  constructor(private readonly deps: ReviewDeps) {
    super({ viewType: REVIEW_VIEW_TYPE, what: 'Review', taskIdOf: (state) => PageState.safeParse(state).data?.taskId, log: deps.log, extensionUri: deps.extensionUri });
    this.register(
      deps.host.onDidChange((e) => {
        // One window offers it: the one owning the store, or (when a process such as
        // `waypoint mcp` owns it) every window relaying to that process; another window owner offers it itself.
        const m = deps.host.mode;
        if (!(m.kind === 'owner' || (m.kind === 'relay' && !m.owner.ownerId.startsWith(WINDOW_OWNER_PREFIX)))) return;
        for (const ev of e?.events ?? []) if (ev.type === 'task.review_requested' && ev.taskId) void this.offer(ev.taskId);
      }),
    );
  }

  protected create(taskId: string, panel: vscode.WebviewPanel): ReviewPanel {
    return new ReviewPanel(taskId, panel, this.deps);
  }

  protected async taskTitle(taskId: string): Promise<string> {
    // Refuses an unknown id with a clear error, wherever the store is (in-process or the owner's /rpc).
    return (await (await this.deps.host.api()).taskDetail(taskId)).task.title;
  }

  protected async pick(): Promise<string | undefined> {
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
    if (this.panel(taskId)) return;
    const { task } = await (await this.deps.host.api()).taskDetail(taskId);
    const go = await vscode.window.showInformationMessage(`Waypoint: “${task.title}” is ready for review.`, 'Review Changes');
    if (go) await vscode.commands.executeCommand('waypoint.reviewTask', taskId);
  }
}
