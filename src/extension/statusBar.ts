import * as vscode from 'vscode';
import type { Task } from '../core/model/schema';
import { isLive } from '../core/model/taskStates';
import { Disposable } from './disposable';
import { describeStoreOwner, type EngineHost, type HostMode } from './engineHost';
import { ago } from './presentation';
import { stepsProgress } from './labelText';
import { retryState } from '../core/engine/retryPolicy';
import { taskDetail, tasksOnly } from './storeReads';
import { displayText } from '../core/model/displayText';
import { safeTooltip } from './treeNode';
import { OneMoreRun } from './rerun';

/**
 * One status bar item for the task that matters now: a running task shows its
 * progress, an interrupted one asks to be resumed, one waiting for review offers
 * the review. Hidden when there is nothing to show. Updated from engine change
 * events, plus a slow tick so "last checkpoint 3 min ago" stays honest.
 *
 * A second item says when this window relays to another process that owns the
 * store (and to whom); it disappears when this window owns the store again.
 */
export class TaskStatusBar extends Disposable {
  private readonly item = this.register(vscode.window.createStatusBarItem('waypoint.task', vscode.StatusBarAlignment.Left, 50));
  private readonly storeItem = this.register(vscode.window.createStatusBarItem('waypoint.store', vscode.StatusBarAlignment.Left, 49));
  /** Updates run one at a time; a change during one schedules exactly one more. */
  private readonly redraws = new OneMoreRun(async () => {
    try {
      await this.redraw();
    } catch {
      // No store (yet), or the owner did not answer: show nothing rather than something stale.
      this.item.hide();
    }
  }, () => this.isDisposed);

  constructor(private readonly host: EngineHost) {
    super();
    this.item.name = 'Waypoint Task';
    this.storeItem.name = 'Waypoint Store Owner';
    this.register(host.onDidChange(() => void this.update()));
    this.register(host.onDidChangeMode((m) => this.showMode(m)));
    const tick = setInterval(() => void this.update(), 30_000);
    this.register({ dispose: () => clearInterval(tick) });
    this.showMode(host.mode);
    void this.update();
  }

  /** The relay item's text ('' when this window owns the store). */
  get storeText(): string {
    return this.storeItem.text;
  }

  private showMode(m: HostMode): void {
    if (m.kind !== 'relay') {
      this.storeItem.hide();
      this.storeItem.text = '';
      return;
    }
    const who = describeStoreOwner(m.owner);
    this.storeItem.text = `$(radio-tower) Waypoint: relaying to ${who}`;
    this.storeItem.tooltip = `This window does not own the Waypoint store: ${who} does, at ${m.url}. Everything here goes through it, and this window takes the store over by itself if it goes away.`;
    this.storeItem.command = 'waypoint.showStoreInfo';
    this.storeItem.accessibilityInformation = { label: `Waypoint relays to ${who}` };
    this.storeItem.show();
  }

  /** The task the status bar speaks for (exposed for tests). */
  static pick(tasks: Task[]): Task | undefined {
    const newest = (xs: Task[]) => xs.sort((a, b) => b.updatedAt - a.updatedAt)[0];
    return (
      newest(tasks.filter((t) => t.hold)) ??
      newest(tasks.filter(isLive)) ??
      newest(tasks.filter((t) => t.state === 'interrupted')) ??
      newest(tasks.filter((t) => t.state === 'waiting_review'))
    );
  }

  get text(): string {
    return this.item.text;
  }

  /** Re-reads the store and redraws; resolves when the item shows the store as it is now. */
  update(): Promise<void> {
    return this.redraws.run();
  }

  private async redraw(): Promise<void> {
    if (this.host.mode.kind === 'starting' && !this.host.current) {
      this.item.hide();
      return;
    }
    const task = TaskStatusBar.pick(await tasksOnly(this.host));
    if (!task) {
      this.item.hide();
      return;
    }
    const detail = await taskDetail(this.host, task.id);
    const steps = detail.steps;
    const current = steps.find((s) => s.status === 'in_progress');
    const last = task.lastCheckpointId ? detail.checkpoints.find((c) => c.id === task.lastCheckpointId) : undefined;
    const title = displayText(task.title.length > 40 ? `${task.title.slice(0, 39)}…` : task.title);
    // Progress in the same words as the tree and the tooltip.
    const count = steps.length ? ` · ${stepsProgress(steps)}` : '';
    this.item.backgroundColor = undefined;
    const tip = new vscode.MarkdownString();
    tip.appendMarkdown('**');
    tip.appendText(task.title);
    tip.appendMarkdown('**\n\n');
    if (task.hold) {
      // A task waiting for a person outranks live work: nothing moves until they decide.
      this.item.text = `$(person) ${title} · waits for you`;
      this.item.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
      this.item.command =
        task.hold.cause === 'retries_exhausted'
          ? { title: 'Grant More Attempts', command: 'waypoint.grantAttempts', arguments: [{ taskId: task.id, stepId: task.hold.stepId }] }
          : { title: 'Show Task', command: 'waypoint.revealTask', arguments: [task.id] };
      tip.appendText(`Waits for you: ${task.hold.reason}\n\n`);
      tip.appendMarkdown(task.hold.cause === 'retries_exhausted' ? 'Click to grant more attempts (or skip the step or abandon the task from the Waypoint view).' : 'Click to show the task: settle each side effect in doubt, then resume it.');
    } else if (task.state === 'interrupted') {
      this.item.text = `$(debug-pause) ${title} · interrupted${count}`;
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
      // A step inside its retry backoff: when it may start again, and which attempt that is.
      const waiting = steps.map((s) => ({ s, r: retryState(s, Date.now()) })).find((x) => x.r.retryAt !== null);
      if (waiting) tip.appendText(`\n\n${waiting.s.title} failed; it may retry at ${new Date(waiting.r.retryAt!).toLocaleTimeString()} (attempt ${waiting.s.attempts + 1} of ${waiting.s.maxAttempts})`);
    }
    if (last) tip.appendText(`\n\nLast checkpoint: ${ago(last.createdAt)}`);
    // A command link, trusted for this one command only, so the tooltip leads to the timeline.
    tip.appendMarkdown(`\n\n[$(type-hierarchy) Show Task Timeline](command:waypoint.showTimeline?${encodeURIComponent(JSON.stringify([task.id]))} "Steps, attempts and checkpoints of this task over time")`);
    tip.isTrusted = { enabledCommands: ['waypoint.showTimeline'] };
    tip.supportThemeIcons = true;
    this.item.tooltip = safeTooltip(tip);
    this.item.accessibilityInformation = { label: `Waypoint task ${displayText(task.title)}, ${task.hold ? 'waits for you' : task.state.replace('_', ' ')}${count}` };
    this.item.show();
  }
}
