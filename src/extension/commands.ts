import * as vscode from 'vscode';
import { z } from 'zod';
import type { EngineApi } from '../core/engine/api';
import { notCapturedLine } from '../core/engine/engine';
import type { ResumeContext } from '../core/engine/resumeContext';
import { errorMessage, WaypointError } from '../core/model/errors';
import type { SideEffect, Step, Task, TaskState } from '../core/model/schema';
import { Disposable } from './disposable';
import type { EngineHost } from './engineHost';
import { eventsUri, metricsUri, storageUri } from './eventsDocument';
import { isDeletable, isHeldForRetries, isOpen, isResumable, isWorking } from '../core/model/taskStates';
import { ago, progressText, STATE_LABEL, codicon } from './presentation';
import { retryPolicySetting } from './settings';
import { listTasks, taskDetail } from './storeReads';
import { EffectNode, StepNode, TaskNode, type TasksTreeProvider, type TreeNode } from './tasksTree';
import type { ReviewPanels } from './review/reviewPanels';
import type { TimelinePanels } from './timeline/timelinePanels';
import { WorkspaceCommands } from './workspaceCommands';
import type { WorkspaceOperations } from './workspaceOperations';
import type { AgentDoors } from './agentDoors';
import { reportFailure } from './errorPolicy';
import { ResumeFlow } from './resume/resumeFlow';
import { describeStop } from './resume/words';
import { plural } from '../core/model/plural';
import type { TeamStoreConnection } from './teamStore/teamStoreConnection';
import type { TeamTreeProvider } from './teamStore/teamTree';
import { displayText } from '../core/model/displayText';
import { StepActions } from './stepActions';
import { checkpointWithStep } from './labelText';

/**
 * Every command, registered through one place that turns failures into readable
 * messages (never an unhandled rejection) and logs them with their area. Handlers
 * accept what VS Code hands them: a tree node (inline actions), a task id (status
 * bar), or nothing (the palette → a quick pick).
 */
type Handler = (...args: unknown[]) => unknown;

/** Command arguments an alert's button passes (parsed, never cast: they could come from anywhere). */
const EffectRef = z.strictObject({ taskId: z.string().min(1).max(64), key: z.string().min(1).max(256) });
const StepRef = z.strictObject({ taskId: z.string().min(1).max(64), stepId: z.string().min(1).max(128) });

/** What the command registry is built over: the services main.ts composes, by name (not eight positional arguments). */
export interface CommandsContext {
  host: EngineHost;
  tree: TasksTreeProvider;
  view: vscode.TreeView<TreeNode>;
  log: vscode.LogOutputChannel;
  review: ReviewPanels;
  timeline: TimelinePanels;
  operations: WorkspaceOperations;
  doors: AgentDoors;
  teamStore: TeamStoreConnection;
  teamTree: TeamTreeProvider;
}

export class Commands extends Disposable {
  /** The Resume Task hand-off (its last offered deliveries are a test probe). */
  readonly resume: ResumeFlow;
  private readonly host: EngineHost;
  private readonly tree: TasksTreeProvider;
  private readonly view: vscode.TreeView<TreeNode>;
  private readonly log: vscode.LogOutputChannel;
  private readonly operations: WorkspaceOperations;
  /** Every command id this registry registered (each one exactly once, here). */
  readonly ids: readonly string[];
  constructor(ctx: CommandsContext) {
    super();
    const { host, log, review, timeline, operations, doors } = ctx;
    this.host = host;
    this.tree = ctx.tree;
    this.view = ctx.view;
    this.log = log;
    this.operations = operations;
    const ws = new WorkspaceCommands({
      host,
      folder: () => {
        const f = this.host.workspaceFolder;
        if (!f) throw new Error('Open a folder first.');
        return f;
      },
      pickTask: (arg, filter, placeHolder) => this.resolveTask(arg, filter, placeHolder),
      operations,
    });
    this.resume = new ResumeFlow({ host, log, operations, owner: () => this.leaseOwner(), folder: () => this.host.workspaceFolder });
    const steps = new StepActions({ host, owner: () => this.leaseOwner() });
    const table: Record<string, Handler> = {
      'waypoint.rollback': (a) => ws.rollback(a),
      'waypoint.undoRollback': (a) => ws.undo(a),
      'waypoint.compareWithWorkspace': (a) => ws.compareWithWorkspace(a),
      'waypoint.compareWithPrevious': (a) => ws.compareWithPrevious(a),
      'waypoint.showStorage': () => this.showStorage(),
      'waypoint.prune': () => ws.prune(),
      'waypoint.startTask': () => this.startTask(),
      'waypoint.resumeTask': (a) => this.resumeTask(a),
      'waypoint.grantAttempts': (a) => this.grantAttempts(a),
      'waypoint.completeStep': (a) => steps.run('complete', a),
      'waypoint.skipStep': (a) => steps.run('skip', a),
      'waypoint.failStep': (a) => steps.run('fail', a),
      'waypoint.retryStep': (a) => steps.run('retry', a),
      'waypoint.completeTask': (a) => this.completeTask(a),
      'waypoint.abandonTask': (a) => this.abandonTask(a),
      'waypoint.deleteTask': (a) => this.deleteTask(a),
      'waypoint.createCheckpoint': (a) => this.createCheckpoint(a),
      'waypoint.showTaskEvents': (a) => this.showEvents(a),
      'waypoint.copyResumeContext': (a) => this.copyResumeContext(a),
      'waypoint.markSideEffectDone': (a) => this.settleEffect(a, true),
      'waypoint.markSideEffectFailed': (a) => this.settleEffect(a, false),
      'waypoint.refresh': () => this.tree.refresh(),
      'waypoint.revealTask': (a) => this.revealTask(a),
      'waypoint.showStoreInfo': () => this.log.show(true),
      'waypoint.reviewTask': (a) => review.open(a),
      'waypoint.showTimeline': (a) => timeline.open(a),
      'waypoint.forkFromCheckpoint': (a) => ws.fork(a),
      'waypoint.revealForkOrigin': (a) => this.revealForkOrigin(a),
      'waypoint.showMetrics': () => this.showMetrics(),
      'waypoint.connectTeamStore': () => ctx.teamStore.connectInteractively(),
      'waypoint.disconnectTeamStore': () => ctx.teamStore.disconnect(),
      'waypoint.reconnectTeamStore': () => this.reconnectTeamStore(ctx.teamStore, ctx.teamTree),
      'waypoint.refreshTeamStore': () => ctx.teamTree.refresh(),
      'waypoint.connectAgent': (agent?: unknown) => doors.connect(agent === 'claude-code' || agent === 'cursor' || agent === 'codex' ? agent : undefined),
    };
    this.ids = Object.keys(table);
    for (const [id, fn] of Object.entries(table)) {
      this.register(vscode.commands.registerCommand(id, (...args: unknown[]) => this.run(id, () => fn(...args))));
    }
  }

  /** The one wrapper: errors become messages per the one policy (errorPolicy.ts: refusals are warnings, surprises are errors with Show Log). */
  private async run(id: string, fn: () => unknown): Promise<unknown> {
    try {
      return await fn();
    } catch (e) {
      // Engine errors name tasks, steps and checkpoints by id (the CLI's --json wants that); a toast names them by title.
      const names = await idNames(this.host, errorMessage(e)).catch(() => undefined);
      reportFailure(this.log, "commands", id, e, names);
      return undefined;
    }
  }

  /** Reopens the window's store on the team store (after an outage), with progress, and refreshes the Team Store view. */
  private async reconnectTeamStore(teamStore: TeamStoreConnection, teamTree: TeamTreeProvider): Promise<void> {
    const t = teamStore.target;
    if (t.kind !== 'team') {
      void vscode.window.showInformationMessage('Waypoint: this window is not connected to a team store.', 'Connect to Team Store…').then((a) => a && vscode.commands.executeCommand('waypoint.connectTeamStore'));
      return;
    }
    await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: `Waypoint: reconnecting to the team store at ${t.where}…` }, async () => {
      await this.host.reopen('reconnecting to the team store');
      teamTree.refresh();
      await this.host.api();
    });
  }

  /** The engine API wherever the store is: in-process while this window owns it, the owner's while it relays. */
  private engine(): Promise<EngineApi> {
    return this.host.api();
  }

  /** This window drives what it starts or resumes, also through another owner (whose sweep then watches our pid). */
  private leaseOwner(): { id: string; pid: number } {
    return { id: this.host.ownerId, pid: process.pid };
  }

  private async task(taskId: string): Promise<Task> {
    return (await taskDetail(this.host, taskId)).task;
  }

  /** Resolves a command argument to a task, asking with a quick pick when there is none. */
  private async resolveTask(arg: unknown, filter: (t: Task) => boolean, placeHolder: string): Promise<Task | undefined> {
    if (arg instanceof TaskNode) return this.task(arg.task.id);
    if (typeof arg === 'string') return this.task(arg);
    const { tasks, stepsByTask } = await listTasks(this.host);
    const candidates = tasks.filter(filter);
    if (candidates.length === 0) {
      void vscode.window.showInformationMessage(`Waypoint: no task to choose from (${placeHolder.toLowerCase()}).`);
      return undefined;
    }
    // One candidate is the answer: a picker of one only adds a keypress (the next prompt or message names the task).
    if (candidates.length === 1) return candidates[0];
    return this.pickTask(stepsByTask, candidates, placeHolder);
  }

  private async pickTask(stepsByTask: Map<string, Step[]>, tasks: Task[], placeHolder: string): Promise<Task | undefined> {
    const items = tasks.map((t) => ({
      label: `$(${codicon(t.state)}) ${t.title}`,
      description: `${STATE_LABEL[t.state]} · ${progressText(t, stepsByTask.get(t.id) ?? [])}`,
      detail: t.interruption ? describeStop(t, Date.now()) : `${t.agent ? `${t.agent} · ` : ''}updated ${ago(t.updatedAt)}`,
      task: t,
    }));
    const pick = await vscode.window.showQuickPick(items, { placeHolder, matchOnDescription: true, matchOnDetail: true });
    return pick?.task;
  }

  private async startTask(): Promise<string | undefined> {
    const goal = await vscode.window.showInputBox({
      title: 'Waypoint: Start Task (1/2)',
      prompt: 'What should the agent achieve? Waypoint records this task so you can roll back, resume and review it.',
      placeHolder: 'e.g. Add input validation to the signup form',
      validateInput: (v) => (v.trim() ? undefined : 'Describe the goal'),
      ignoreFocusOut: true,
    });
    if (!goal) return undefined;
    const planText = await vscode.window.showInputBox({
      title: 'Waypoint: Start Task (2/2)',
      prompt: 'Optional plan: step titles separated by ";" (each step follows the previous one). Leave empty for no plan.',
      placeHolder: 'Read the code; Make the change; Run the tests',
      ignoreFocusOut: true,
    });
    if (planText === undefined) return undefined;
    const titles = planText
      .split(';')
      .map((s) => s.trim())
      .filter(Boolean);
    const plan = titles.map((title, i) => ({ id: `step-${i + 1}`, title, ...(i ? { dependsOn: [`step-${i}`] } : {}) }));
    const engine = await this.engine();
    const r = await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: 'Waypoint: taking the task’s base checkpoint…' }, () =>
      engine.startTask({ goal: goal.trim(), plan, agent: 'manual', owner: this.leaseOwner(), retry: retryPolicySetting() }),
    );
    await this.revealTask(r.taskId);
    void vscode.window.showInformationMessage(`Waypoint: started task “${displayText((await this.task(r.taskId)).title)}”.`);
    return r.taskId;
  }

  private async resumeTask(arg: unknown): Promise<ResumeContext | undefined> {
    const task = await this.resolveTask(arg, isResumable, 'Choose a task to resume');
    if (!task) return undefined;
    return this.resume.run(task);
  }

  private async copyResumeContext(arg: unknown): Promise<void> {
    const task = await this.resolveTask(arg, () => true, 'Copy the resume context of which task?');
    if (!task) return;
    const ctx = await (await this.engine()).resumeContext(task.id);
    await vscode.env.clipboard.writeText(ctx.markdown);
    void vscode.window.showInformationMessage(`Waypoint: resume context of “${displayText(task.title)}” copied.`);
  }

  private async completeTask(arg: unknown): Promise<TaskState | undefined> {
    const task = await this.resolveTask(arg, isWorking, 'Choose a task the agent has finished');
    if (!task) return undefined;
    const summary = await vscode.window.showInputBox({ title: `Complete “${displayText(task.title)}”`, prompt: 'Optional summary of what was done', ignoreFocusOut: true });
    if (summary === undefined) return undefined;
    const r = await (await this.engine()).requestReview({ taskId: task.id, summary: summary || undefined });
    return r.state;
  }

  private async abandonTask(arg: unknown): Promise<TaskState | undefined> {
    const task = await this.resolveTask(arg, isOpen, 'Choose a task to abandon');
    if (!task) return undefined;
    const ok = await vscode.window.showWarningMessage(
      `Abandon “${displayText(task.title)}”?`,
      { modal: true, detail: 'The task stops being tracked as work in progress. Its record and checkpoints are kept; workspace files are not changed.' },
      'Abandon',
    );
    if (ok !== 'Abandon') return undefined;
    return (await (await this.engine()).abandonTask({ taskId: task.id, reason: 'abandoned in VS Code' })).state;
  }

  private async deleteTask(arg: unknown): Promise<boolean> {
    const task = await this.resolveTask(arg, isDeletable, 'Choose a task to delete');
    if (!task) return false;
    const ok = await vscode.window.showWarningMessage(
      `Delete “${displayText(task.title)}”?`,
      { modal: true, detail: 'Its steps, side effects and checkpoints disappear from Waypoint (the event log keeps the history). Workspace files are not changed.' },
      'Delete',
    );
    if (ok !== 'Delete') return false;
    await (await this.engine()).deleteTask({ taskId: task.id });
    return true;
  }

  private async createCheckpoint(arg: unknown): Promise<string | undefined> {
    const task = await this.resolveTask(arg, isOpen, 'Checkpoint which task?');
    if (!task) return undefined;
    const label = await vscode.window.showInputBox({ title: `Waypoint: Create Checkpoint of “${displayText(task.title)}”`, prompt: 'Optional label', ignoreFocusOut: true });
    if (label === undefined) return undefined;
    const engine = await this.engine();
    const r = await this.operations.run('checkpoint', () =>
      engine.checkpoint({ taskId: task.id, label: label || undefined }),
      vscode.ProgressLocation.Window,
    );
    void vscode.window.setStatusBarMessage(`$(git-commit) Waypoint checkpoint taken: ${plural(r.filesChanged, 'file')} changed`, 4000);
    if (r.notCapturedCount) {
      // The paths are in the log (the engine writes them there); the notice only says how many and where to look.
      this.log.warn(notCapturedLine(r.checkpointId, r));
      void vscode.window.showWarningMessage(`Waypoint: the checkpoint did not capture ${plural(r.notCapturedCount, 'path')} (unreadable, over the size limit, or with names it cannot record). No rollback to it deletes or changes them; the paths are in the Waypoint log.`);
    }
    return r.checkpointId;
  }

  private async showEvents(arg: unknown): Promise<void> {
    const task = await this.resolveTask(arg, () => true, 'Show the events of which task?');
    if (!task) return;
    const doc = await vscode.workspace.openTextDocument(eventsUri(task.id));
    await vscode.window.showTextDocument(doc, { preview: true });
  }

  /** The metrics in VS Code's Markdown preview (themed, read-only), refreshed as the store changes. */
  private async showMetrics(): Promise<void> {
    await vscode.commands.executeCommand('markdown.showPreview', metricsUri());
  }

  /** From a fork's row: selects the task it was forked from. */
  private async revealForkOrigin(arg: unknown): Promise<void> {
    const task = await this.resolveTask(arg, (t) => t.forkedFrom !== null, 'Reveal the original of which fork?');
    if (!task?.forkedFrom) return;
    const original = task.forkedFrom.taskId;
    const exists = await taskDetail(this.host, original).then(
      () => true,
      () => false,
    );
    if (!exists) {
      void vscode.window.showInformationMessage(`Waypoint: “${displayText(task.title)}” was forked from task ${original}, which has been deleted.`);
      return;
    }
    await this.revealTask(original);
  }

  private async showStorage(): Promise<void> {
    const doc = await vscode.workspace.openTextDocument(storageUri());
    await vscode.window.showTextDocument(doc, { preview: true });
  }

  private async settleEffect(arg: unknown, ok: boolean): Promise<void> {
    const e = await this.effectOf(arg);
    let error: string | undefined;
    if (!ok) {
      error = await vscode.window.showInputBox({ prompt: `Why did “${e.description}” fail?`, value: 'did not happen (checked by hand)', ignoreFocusOut: true });
      if (error === undefined) return;
    }
    await (await this.engine()).endSideEffect({ taskId: e.taskId, key: e.key, ok, error: error || undefined, result: ok ? 'confirmed by hand' : undefined, by: 'person' });
  }

  /** A side effect from the tree, or `{taskId, key}` (an alert's button). */
  private async effectOf(arg: unknown): Promise<SideEffect> {
    if (arg instanceof EffectNode) return arg.effect;
    const ref = EffectRef.safeParse(arg);
    if (!ref.success) throw new Error('Choose a side effect in the Waypoint view.');
    const found = (await taskDetail(this.host, ref.data.taskId)).sideEffects.find((x) => x.key === ref.data.key);
    if (!found) throw new WaypointError('not_found', `Task ${ref.data.taskId} has no side effect '${ref.data.key}'.`);
    return found;
  }

  /**
   * The person's answer to a step that used its attempts: how many more it may try.
   * From a held task, its step; from a step, that step; from an alert, `{taskId, stepId}`.
   */
  private async grantAttempts(arg: unknown): Promise<number | undefined> {
    let taskId: string | undefined;
    let stepId: string | undefined;
    if (arg instanceof StepNode) [taskId, stepId] = [arg.step.taskId, arg.step.id];
    else if (arg instanceof TaskNode || typeof arg === 'string') taskId = arg instanceof TaskNode ? arg.task.id : arg;
    else if (arg !== undefined) {
      const ref = StepRef.safeParse(arg);
      if (!ref.success) throw new Error('Choose a task or step in the Waypoint view.');
      [taskId, stepId] = [ref.data.taskId, ref.data.stepId];
    } else {
      const task = await this.resolveTask(undefined, isHeldForRetries, 'Choose a task whose step used its attempts');
      taskId = task?.id;
    }
    if (!taskId) return undefined;
    const d = await taskDetail(this.host, taskId);
    stepId ??= d.task.hold?.stepId ?? undefined;
    if (!stepId) {
      const pick = await vscode.window.showQuickPick(
        d.steps.filter((s) => s.status === 'failed' || s.status === 'pending').map((s) => ({ label: s.title, description: `attempt ${s.attempts} of ${s.maxAttempts}`, step: s })),
        { placeHolder: 'Choose the step to grant more attempts' },
      );
      stepId = pick?.step.id;
    }
    const step = d.steps.find((s) => s.id === stepId);
    if (!step) return undefined;
    const answer = await vscode.window.showInputBox({
      title: `Waypoint: Grant More Attempts — ${step.title}`,
      prompt: `“${displayText(step.title)}” used ${step.attempts} of ${plural(step.maxAttempts, 'attempt')}${step.error ? `; last error: ${step.error.message.slice(0, 200)}` : ''}. How many more may it try?`,
      value: '1',
      validateInput: (v) => (/^\d+$/.test(v.trim()) && Number(v) >= 1 && Number(v) <= 100 ? undefined : 'A whole number from 1 to 100'),
      ignoreFocusOut: true,
    });
    if (answer === undefined) return undefined;
    const r = await (await this.engine()).grantAttempts({ taskId, stepId: step.id, attempts: Number(answer.trim()), reason: 'granted in VS Code', owner: this.leaseOwner() });
    void vscode.window.showInformationMessage(`Waypoint: “${displayText(step.title)}” may try ${plural(r.attempts, 'more time', 'more times')} (${r.maxAttempts} in all); the task is ${r.state.replace('_', ' ')}. Tell the agent to continue.`);
    return r.maxAttempts;
  }

  private async revealTask(arg: unknown): Promise<void> {
    const id = arg instanceof TaskNode ? arg.task.id : typeof arg === 'string' ? arg : undefined;
    if (!id) return;
    const d = await taskDetail(this.host, id);
    const node = new TaskNode(d.task, d.steps);
    await this.view.reveal(node, { select: true, focus: false, expand: true });
  }
}

/** Names for the engine ids an error message mentions: each task's title, its steps' titles and its checkpoints' names. */
async function idNames(host: EngineHost, message: string): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  for (const taskId of new Set(message.match(/\bt_[0-9a-z]{15}\b/g) ?? [])) {
    const d = await taskDetail(host, taskId).catch(() => undefined);
    if (!d) continue;
    names.set(taskId, d.task.title);
    for (const s of d.steps) names.set(s.id, s.title);
    for (const c of d.checkpoints) names.set(c.id, checkpointWithStep(c, d.checkpoints, d.steps));
  }
  return names;
}
