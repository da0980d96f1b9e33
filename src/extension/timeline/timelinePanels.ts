import * as vscode from 'vscode';
import { tasksOnly } from '../storeReads';
import { codicon, STATE_LABEL } from '../presentation';
import { TaskPanels } from '../webview/taskPanels';
import { TIMELINE_VIEW_TYPE, TimelinePanel, type TimelineDeps } from './panel';
import { TimelinePageState } from './protocol';
import { TimelineReader } from './timelineReader';

/** One timeline per task (`waypoint.showTimeline`), restored on reload; the panels share one reader. */
export class TimelinePanels extends TaskPanels<TimelinePanel> {
  private readonly deps: TimelineDeps;

  constructor(base: Omit<TimelineDeps, 'reader'>) {
    super({ viewType: TIMELINE_VIEW_TYPE, what: 'Timeline', taskIdOf: (state) => TimelinePageState.safeParse(state).data?.taskId, log: base.log, extensionUri: base.extensionUri });
    this.deps = { ...base, reader: new TimelineReader(base.host) };
  }

  protected create(taskId: string, panel: vscode.WebviewPanel): TimelinePanel {
    return new TimelinePanel(taskId, panel, this.deps);
  }

  protected async taskTitle(taskId: string): Promise<string> {
    const task = (await tasksOnly(this.deps.host)).find((t) => t.id === taskId);
    if (!task) throw new Error(`Unknown task '${taskId}'.`);
    return task.title;
  }

  protected async pick(): Promise<string | undefined> {
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
