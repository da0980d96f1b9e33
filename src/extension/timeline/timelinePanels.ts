import * as vscode from 'vscode';
import { Disposable } from '../disposable';
import { tasksOnly } from '../storeReads';
import { codicon, STATE_LABEL } from '../presentation';
import { TaskNode } from '../tasksTree';
import { TIMELINE_VIEW_TYPE, TimelinePanel, type TimelineDeps } from './panel';
import { createPagePanel, panelTitle } from '../review/html';
import { TimelinePageState } from './protocol';
import { TimelineReader } from './timelineReader';

/**
 * One timeline per task: opening again focuses it. Panels survive a window reload
 * through the serializer (the page keeps its task id in webview state).
 */
export class TimelinePanels extends Disposable {
  private readonly panels = new Map<string, TimelinePanel>();

  private readonly deps: TimelineDeps;

  constructor(base: Omit<TimelineDeps, 'reader'>) {
    super();
    const deps = (this.deps = { ...base, reader: new TimelineReader(base.host) });
    this.register(
      vscode.window.registerWebviewPanelSerializer(TIMELINE_VIEW_TYPE, {
        deserializeWebviewPanel: async (panel, state) => {
          const parsed = TimelinePageState.safeParse(state);
          if (!parsed.success) {
            deps.log.warn('[timeline] a restored panel had no valid state; closing it');
            panel.dispose();
            return;
          }
          this.adopt(parsed.data.taskId, panel);
        },
      }),
    );
    this.register({ dispose: () => [...this.panels.values()].forEach((p) => p.dispose()) });
  }

  /** `waypoint.showTimeline`: a task id (status bar, other commands), a tree node, or nothing (quick pick). */
  async open(arg?: unknown): Promise<TimelinePanel | undefined> {
    const taskId = arg instanceof TaskNode ? arg.task.id : typeof arg === 'string' ? arg : await this.pick();
    if (!taskId) return undefined;
    // Refuses an unknown id with a clear error before any panel opens.
    const task = (await tasksOnly(this.deps.host)).find((t) => t.id === taskId);
    if (!task) throw new Error(`Unknown task '${taskId}'.`);
    const existing = this.panels.get(taskId);
    if (existing) {
      existing.reveal();
      return existing;
    }
    const panel = createPagePanel(TIMELINE_VIEW_TYPE, panelTitle('Timeline', task.title), this.deps.extensionUri);
    return this.adopt(taskId, panel);
  }

  panel(taskId: string): TimelinePanel | undefined {
    return this.panels.get(taskId);
  }

  private adopt(taskId: string, panel: vscode.WebviewPanel): TimelinePanel {
    const p = new TimelinePanel(taskId, panel, this.deps);
    this.panels.set(taskId, p);
    p.onDidDispose(() => {
      if (this.panels.get(taskId) === p) this.panels.delete(taskId);
    });
    return p;
  }

  private async pick(): Promise<string | undefined> {
    const tasks = (await tasksOnly(this.deps.host)).sort((a, b) => b.updatedAt - a.updatedAt);
    if (!tasks.length) {
      void vscode.window.showInformationMessage('Waypoint: no task is recorded in this workspace yet. Start one, or connect an agent.');
      return undefined;
    }
    const pick = await vscode.window.showQuickPick(
      tasks.map((t) => ({ label: `$(${codicon(t.state)}) ${t.title}`, description: STATE_LABEL[t.state], detail: t.goal !== t.title ? t.goal.slice(0, 200) : undefined, id: t.id })),
      { placeHolder: 'Show the timeline of which task?', matchOnDescription: true, matchOnDetail: true },
    );
    return pick?.id;
  }
}
