import * as vscode from 'vscode';
import { errorMessage } from '../../core/model/errors';
import type { EngineHost } from '../engineHost';
import { TaskPanel } from '../webview/taskPanel';
import { parseInbound } from '../webview/parseInbound';
import { panelTitle } from '../review/html';
import { timelineHtml } from './html';
import { firstScreen } from './firstScreen';
import { diffTimeline } from './patch';
import type { TimelineReader } from './timelineReader';
import { TimelineHostMessage, TimelinePageMessage, type CheckpointAction, type TimelineModel } from './protocol';
import { OneMoreRun } from '../rerun';

export const TIMELINE_VIEW_TYPE = 'waypoint.timeline';
/** A model older than this when the page first says `ready` is rebuilt and sent whole. */
const EMBEDDED_FRESH_MS = 10_000;
/** Engine changes arrive in bursts (a step's start writes a checkpoint too): one patch per burst. */
const PATCH_DELAY_MS = 200;
const FORK_COMMAND = 'waypoint.forkFromCheckpoint';

export interface TimelineDeps {
  host: EngineHost;
  /** Shared by the panels: a task's history is read once, then only what is new. */
  reader: TimelineReader;
  log: vscode.LogOutputChannel;
  extensionUri: vscode.Uri;
}

export interface TimelineShown {
  steps: number;
  attempts: number;
  /** Wall-clock time (ms since the epoch) of the frame that drew it, as the page saw it. */
  at: number;
  /** Milliseconds from the page's navigation start to that frame. */
  pageMs: number;
  /** False for the first screen drawn before the whole model arrived. */
  whole: boolean;
}

/**
 * The host side of one task's timeline. The first model is written into the page's
 * document; after the page says `ready` (nothing is posted before), engine changes
 * for this task become `patch` messages: the difference from the model the page
 * holds, never a reload. Checkpoint actions go through the existing commands.
 */
export class TimelinePanel extends TaskPanel {
  private ready = false;
  /** The model the page holds (or will, once it says `ready`). */
  private model: TimelineModel | undefined;
  private embeddedAt = 0;
  /** The document carried only the first screen of `model`: the rest is posted as soon as the page is ready. */
  private embeddedPart = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly updates = new OneMoreRun(() => this.patchPage(), () => this.isDisposed);
  private forkAvailable: Promise<boolean> | undefined;
  /** The page's last report of what it drew. */
  lastShown: TimelineShown | undefined;
  private readonly _onDidShow = this.register(new vscode.EventEmitter<TimelineShown>());
  /** Fires each time the page reports it has drawn the timeline: first content, then each patch. */
  readonly onDidShow = this._onDidShow.event;

  constructor(
    taskId: string,
    panel: vscode.WebviewPanel,
    private readonly deps: TimelineDeps,
  ) {
    super(taskId, panel, deps);
    this.register({ dispose: () => clearTimeout(this.timer) });
    void this.load();
  }

  protected taskChanged(): void {
    this.schedule();
  }

  /** The model the page was last sent (tests). */
  get current(): TimelineModel | undefined {
    return this.model;
  }

  private async build(): Promise<TimelineModel> {
    const model = await this.deps.reader.model(this.taskId);
    const title = panelTitle('Timeline', model.task.title);
    if (this.panel.title !== title) this.panel.title = title;
    return model;
  }

  private async load(): Promise<void> {
    let first: TimelineModel | undefined;
    try {
      first = await this.build();
      this.model = first;
      this.embeddedAt = Date.now();
    } catch (e) {
      this.deps.log.warn(`[timeline] building ${this.taskId} failed: ${errorMessage(e)}`);
    }
    if (this.isDisposed) return;
    // Only the first screen travels in the document: less to parse, validate and draw before the page paints.
    const part = first && firstScreen(first);
    this.embeddedPart = !!part?.pending;
    this.panel.webview.html = timelineHtml(this.panel.webview, this.deps.extensionUri, 'Waypoint timeline', part);
  }

  private post(msg: TimelineHostMessage): void {
    if (!this.ready || this.isDisposed) return;
    void this.panel.webview.postMessage(msg);
  }

  protected async receive(raw: unknown): Promise<void> {
    const msg = parseInbound(TimelinePageMessage, raw, 'page', (line) => this.deps.log.warn(line), 'timeline');
    if (!msg) return;
    try {
      switch (msg.type) {
        case 'ready': {
          this.ready = true;
          // A hidden tab shown again reloads the page from the same document: the embedded model may be old.
          const fresh = this.model && Date.now() - this.embeddedAt <= EMBEDDED_FRESH_MS;
          this.embeddedAt = 0;
          const part = this.embeddedPart;
          this.embeddedPart = false;
          if (!fresh) await this.sendWhole();
          else {
            // The page holds the first screen: the whole model now, then any change since as a patch.
            if (part && this.model) this.post({ type: 'init', model: this.model });
            this.schedule();
          }
          return;
        }
        case 'shown':
          this.lastShown = { steps: msg.steps, attempts: msg.attempts, at: msg.at, pageMs: msg.pageMs, whole: msg.whole };
          this._onDidShow.fire(this.lastShown);
          return;
        case 'refresh':
          return await this.sendWhole();
        case 'checkpoint':
          return await this.checkpointAction(msg.action, msg.checkpointId);
        case 'showEvents':
          await vscode.commands.executeCommand('waypoint.showTaskEvents', this.taskId);
          return;
        case 'step':
          // Only this task's steps: the page cannot make the host act on anything else.
          if (!this.model?.steps.some((x) => x.id === msg.stepId)) throw new Error(`Step ${msg.stepId} is not in this task's timeline.`);
          await vscode.commands.executeCommand(`waypoint.${msg.action}Step`, { taskId: this.taskId, stepId: msg.stepId });
          return;
      }
    } catch (e) {
      this.deps.log.error(`[timeline] ${msg.type} failed: ${errorMessage(e)}`);
      this.post({ type: 'error', text: errorMessage(e).slice(0, 4_000) });
    }
  }

  private async sendWhole(): Promise<void> {
    this.model = await this.build();
    this.post({ type: 'init', model: this.model });
  }

  private schedule(): void {
    if (!this.ready || this.isDisposed) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.update(), PATCH_DELAY_MS);
  }

  /** Rebuilds and posts the difference; one at a time, and a change during one runs one more. */
  update(): Promise<void> {
    return this.updates.run();
  }

  private async patchPage(): Promise<void> {
    try {
      const next = await this.build();
      const prev = this.model;
      this.model = next;
      if (!prev) this.post({ type: 'init', model: next });
      else {
        const patch = diffTimeline(prev, next);
        if (patch) this.post({ type: 'patch', patch });
      }
    } catch (e) {
      this.deps.log.warn(`[timeline] updating ${this.taskId} failed: ${errorMessage(e)}`);
    }
  }

  private async checkpointAction(action: CheckpointAction, checkpointId: string): Promise<void> {
    // Only this task's checkpoints: the page cannot make the host act on anything else.
    const c = this.model?.checkpoints.find((x) => x.id === checkpointId);
    if (!c) throw new Error(`Checkpoint ${checkpointId} is not in this task's timeline.`);
    if (!c.restorable) throw new Error('That checkpoint has no intact snapshot to compare with, roll back to or fork from.');
    switch (action) {
      case 'compare':
        await vscode.commands.executeCommand('waypoint.compareWithWorkspace', { taskId: this.taskId, checkpointId });
        return;
      case 'rollback':
        await vscode.commands.executeCommand('waypoint.rollback', { taskId: this.taskId, checkpointId });
        return;
      case 'fork':
        // The fork command comes with its own feature; until it is there, say so plainly.
        this.forkAvailable ??= Promise.resolve(vscode.commands.getCommands(true)).then((all) => all.includes(FORK_COMMAND));
        if (!(await this.forkAvailable)) {
          this.forkAvailable = undefined;
          throw new Error('Forking from a checkpoint is not available in this version of Waypoint.');
        }
        await vscode.commands.executeCommand(FORK_COMMAND, { checkpointId });
        return;
    }
  }
}
