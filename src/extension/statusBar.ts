import * as vscode from 'vscode';
import type { Engine } from '../core/engine/engine';
import type { Task } from '../core/model/schema';
import { Disposable } from './disposable';
import type { EngineHost } from './engineHost';
import { ago } from './presentation';

/**
 * One status bar item for the task that matters now: a running task shows its
 * progress, an interrupted one asks to be resumed, one waiting for review offers
 * the review. Hidden when there is nothing to show. Updated from engine change
 * events, plus a slow tick so "last checkpoint 3 min ago" stays honest.
 */
export class TaskStatusBar extends Disposable {
  private readonly item = this.register(vscode.window.createStatusBarItem('waypoint.task', vscode.StatusBarAlignment.Left, 50));

  constructor(private readonly host: EngineHost) {
    super();
    this.item.name = 'Waypoint Task';
    this.register(host.onDidChange(() => this.update()));
    const tick = setInterval(() => this.update(), 30_000);
    this.register({ dispose: () => clearInterval(tick) });
    this.update();
  }

  /** The task the status bar speaks for (exposed for tests). */
  static pick(engine: Engine): Task | undefined {
    const tasks = engine.tasks();
    const newest = (xs: Task[]) => xs.sort((a, b) => b.updatedAt - a.updatedAt)[0];
    return (
      newest(tasks.filter((t) => t.state === 'running' || t.state === 'waiting_tool' || t.state === 'planning')) ??
      newest(tasks.filter((t) => t.state === 'interrupted')) ??
      newest(tasks.filter((t) => t.state === 'waiting_review'))
    );
  }

  get text(): string {
    return this.item.text;
  }

  update(): void {
    const engine = this.host.current;
    const task = engine ? TaskStatusBar.pick(engine) : undefined;
    if (!engine || !task) {
      this.item.hide();
      return;
    }
    const steps = engine.queries.steps(task.id);
    const done = steps.filter((s) => s.status === 'completed' || s.status === 'skipped').length;
    const current = steps.find((s) => s.status === 'in_progress');
    const last = task.lastCheckpointId ? engine.queries.checkpoint(task.lastCheckpointId) : null;
    const title = task.title.length > 40 ? `${task.title.slice(0, 39)}…` : task.title;
    const count = steps.length ? ` · ${done}/${steps.length}` : '';
    this.item.backgroundColor = undefined;
    const tip = new vscode.MarkdownString();
    tip.appendMarkdown('**');
    tip.appendText(task.title);
    tip.appendMarkdown('**\n\n');
    if (task.state === 'interrupted') {
      this.item.text = `$(debug-pause) ${title} · interrupted`;
      this.item.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
      this.item.command = { title: 'Resume Task', command: 'waypoint.resumeTask', arguments: [task.id] };
      tip.appendText(`Interrupted: ${task.interruption?.reason ?? 'unknown reason'}\n\n`);
      tip.appendMarkdown('Click to resume.');
    } else if (task.state === 'waiting_review') {
      this.item.text = `$(eye) Review: ${title}${count}`;
      this.item.command = { title: 'Review Changes', command: 'waypoint.reviewTask', arguments: [task.id] };
      tip.appendMarkdown('The agent is done. Click to review the changes before committing.');
    } else {
      this.item.text = `$(sync~spin) ${title}${count}`;
      this.item.command = { title: 'Show Task', command: 'waypoint.revealTask', arguments: [task.id] };
      tip.appendText(current ? `Current step: ${current.title}` : 'No step in progress');
    }
    if (last) tip.appendText(`\n\nLast checkpoint: ${ago(last.createdAt)}`);
    this.item.tooltip = tip;
    this.item.accessibilityInformation = { label: `Waypoint task ${task.title}, ${task.state.replace('_', ' ')}${count}` };
    this.item.show();
  }
}
