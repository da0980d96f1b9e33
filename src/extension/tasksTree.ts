import * as vscode from 'vscode';
import type { CheckpointMeta, SideEffect, Step, Task } from '../core/model/schema';
import { isDeletable, isHeldForRetries, isOpen, isResumable, isReviewable } from '../core/model/taskStates';
import { Disposable } from './disposable';
import { describeStoreOwner, type EngineHost, type HostMode } from './engineHost';
import { listTasks, taskDetail } from './storeReads';
import { checkpointDescription, checkpointName, checkpointTooltipText, effectDescription, resultText, stepDescription, stepShownStatus, stepsProgress, STEP_STATUS_WORD } from './labelText';
import {
  checkpointIcon,
  checkpointLabelOf,
  effectIcon,
  forkedFromText,
  sortTasks,
  STATE_LABEL,
  stepIconOf,
  holdText,
  stepRetryText,
  taskIconOf,
  taskTooltip,
  type ForkOriginView,
} from './presentation';
import { retryState } from '../core/engine/retryPolicy';
import { captureChildren, captureTreeItem, commandsOf, CommandNode, historyRoot, inHistory, isCaptureNode, type CaptureNode, type HistoryDayNode } from './captureNodes';

/**
 * The Tasks view: tasks → steps (plan order) → the checkpoints taken in each step;
 * side effects under the step they were begun in (under the task when begun outside a
 * step). Nodes carry stable ids and their parent (so
 * `reveal` works); children are computed lazily from the store (the in-process
 * engine while this window owns it, the owner's API while it relays), and the view
 * refreshes on the store's change events. Nodes carry what their row shows, so
 * rendering a row never queries anything.
 */
export type TreeNode = TaskNode | StepNode | CheckpointNode | EffectNode | CaptureNode;

export class TaskNode {
  readonly kind = 'task';
  readonly parent = undefined;
  constructor(
    readonly task: Task,
    readonly steps: readonly Step[] = [],
    /** Its latest rollback can be undone (drives the Undo Last Rollback menu item). */
    readonly undoable = false,
    /** For a fork: the original task as the list holds it (null when it was deleted). */
    readonly original: Task | null = null,
  ) {}
  get id(): string {
    return `task:${this.task.id}`;
  }
}

export class StepNode {
  readonly kind = 'step';
  constructor(
    readonly parent: TaskNode,
    readonly step: Step,
    /** It has checkpoints or side effects under it (so the row can be expanded). */
    readonly hasChildren = false,
  ) {}
  get id(): string {
    return `step:${this.step.taskId}:${this.step.id}`;
  }
}

export class CheckpointNode {
  readonly kind = 'checkpoint';
  constructor(
    readonly parent: TaskNode | StepNode | HistoryDayNode,
    readonly checkpoint: CheckpointMeta,
    /** The task's other checkpoints and steps, so the row names a pre-rollback's target by its label, not its id. */
    readonly siblings: readonly CheckpointMeta[] = [],
    readonly steps: readonly Step[] = [],
  ) {}
  get id(): string {
    return `checkpoint:${this.checkpoint.id}`;
  }
}

export class EffectNode {
  readonly kind = 'effect';
  constructor(
    readonly parent: TaskNode | StepNode,
    readonly effect: SideEffect,
  ) {}
  get id(): string {
    return `effect:${this.effect.taskId}:${this.effect.key}`;
  }
}

/** Composite context values matched by regex in package.json `when` clauses. */
export function taskContextValue(t: Task, undoable = false): string {
  const flags = [
    isResumable(t) ? 'resumable' : '',
    isOpen(t) ? 'open' : '',
    isDeletable(t) ? 'deletable' : '',
    isReviewable(t) ? 'reviewable' : '',
    undoable ? 'undoable' : '',
    t.forkedFrom ? 'forked' : '',
    isHeldForRetries(t) ? 'held-retries' : '',
  ].filter(Boolean);
  return `task:${t.state}:${flags.join(':')}`;
}

export class TasksTreeProvider extends Disposable implements vscode.TreeDataProvider<TreeNode> {
  private readonly _onDidChangeTreeData = this.register(new vscode.EventEmitter<TreeNode | undefined>());
  readonly onDidChangeTreeData = this._onDidChangeTreeData.event;
  /** Set when the store cannot be opened, so the view can say why instead of looking empty. */
  private openError: string | undefined;

  constructor(private readonly host: EngineHost) {
    super();
    this.register(host.onDidChange(() => this._onDidChangeTreeData.fire(undefined)));
  }

  /** Says in the view's title bar when this window relays (and to whom); clears it when the window owns the store. */
  bindView(view: vscode.TreeView<TreeNode>): void {
    const show = (m: HostMode) => {
      view.description = m.kind === 'relay' ? `relaying to ${describeStoreOwner(m.owner)}` : m.kind === 'waiting' ? 'waiting for the store' : undefined;
    };
    show(this.host.mode);
    this.register(this.host.onDidChangeMode(show));
  }

  refresh(): void {
    this._onDidChangeTreeData.fire(undefined);
  }

  get lastOpenError(): string | undefined {
    return this.openError;
  }

  async getChildren(node?: TreeNode): Promise<TreeNode[]> {
    try {
      const children = await this.children(node);
      this.openError = undefined;
      return children;
    } catch (e) {
      this.openError = (e as Error).message;
      return [];
    }
  }

  private async children(node?: TreeNode): Promise<TreeNode[]> {
    if (!node) {
      const [{ tasks, stepsByTask }, undoable] = await Promise.all([listTasks(this.host), this.undoableTaskIds()]);
      // The palette's Undo Last Rollback follows the same state as the task menus.
      void vscode.commands.executeCommand('setContext', 'waypoint.canUndoRollback', undoable.size > 0);
      const byId = new Map(tasks.map((t) => [t.id, t]));
      return [
        ...sortTasks(tasks).map((t) => new TaskNode(t, stepsByTask.get(t.id) ?? [], undoable.has(t.id), t.forkedFrom ? (byId.get(t.forkedFrom.taskId) ?? null) : null)),
        ...(await historyRoot(this.host)),
      ];
    }
    if (node instanceof TaskNode) {
      const [d, commands] = await Promise.all([taskDetail(this.host, node.task.id), commandsOf(this.host, node.task.id)]);
      const own = d.checkpoints.filter((c) => c.stepId === null);
      const stepIds = new Set(d.steps.map((s) => s.id));
      const withChildren = new Set([...d.checkpoints.map((c) => c.stepId), ...d.sideEffects.map((e) => e.stepId), ...commands.map((c) => c.stepId)]);
      const cp = (c: CheckpointMeta) => new CheckpointNode(node, c, d.checkpoints, d.steps);
      return [
        ...own.filter((c) => c.kind === 'task_base').map(cp),
        ...d.steps.map((s) => new StepNode(node, s, withChildren.has(s.id))),
        ...own.filter((c) => c.kind !== 'task_base').map(cp),
        // An effect begun outside any step (or in a step no longer in the plan) stays under the task.
        ...d.sideEffects.filter((e) => e.stepId === null || !stepIds.has(e.stepId)).map((e) => new EffectNode(node, e)),
        ...commands.filter((c) => c.stepId === null || !stepIds.has(c.stepId)).map((c) => new CommandNode(node, c)),
      ];
    }
    if (node instanceof StepNode) {
      const [d, commands] = await Promise.all([taskDetail(this.host, node.step.taskId), commandsOf(this.host, node.step.taskId)]);
      return [
        ...d.checkpoints.filter((c) => c.stepId === node.step.id).map((c) => new CheckpointNode(node, c, d.checkpoints, d.steps)),
        ...d.sideEffects.filter((e) => e.stepId === node.step.id).map((e) => new EffectNode(node, e)),
        ...commands.filter((c) => c.stepId === node.step.id).map((c) => new CommandNode(node, c)),
      ];
    }
    if (isCaptureNode(node)) return captureChildren(this.host, node);
    return [];
  }

  private async undoableTaskIds(): Promise<Set<string>> {
    const engine = this.host.current;
    return new Set(engine ? engine.queries.undoableTaskIds() : await (await this.host.api()).undoableTaskIds());
  }

  async resolveTreeItem(item: vscode.TreeItem, node: TreeNode): Promise<vscode.TreeItem> {
    if (node instanceof TaskNode && !item.tooltip) {
      const d = await taskDetail(this.host, node.task.id).catch(() => undefined);
      if (d) item.tooltip = taskTooltip(d.task, d.steps, d.sideEffects, d.task.forkedFrom ? await this.forkOrigin(d.task) : undefined);
    }
    return item;
  }

  /** The fork's original and the label of the checkpoint it started from (read on hover only). */
  private async forkOrigin(t: Task): Promise<ForkOriginView> {
    const from = t.forkedFrom!;
    const o = await taskDetail(this.host, from.taskId).catch(() => undefined);
    const c = o?.checkpoints.find((x) => x.id === from.checkpointId);
    return { original: o ? { id: o.task.id, title: o.task.title, goal: o.task.goal } : null, checkpointLabel: c ? checkpointLabelOf(c, o!.steps, o!.checkpoints) : 'a pruned checkpoint' };
  }

  getParent(node: TreeNode): TreeNode | undefined {
    return node.parent;
  }

  getTreeItem(node: TreeNode): vscode.TreeItem {
    if (isCaptureNode(node)) return captureTreeItem(node);
    if (node instanceof TaskNode) {
      const t = node.task;
      const steps = [...node.steps];
      const item = new vscode.TreeItem(t.title, vscode.TreeItemCollapsibleState.Collapsed);
      item.id = node.id;
      item.iconPath = taskIconOf(t);
      // Short, so the title survives the default sidebar width: state and progress only. Times, the
      // fork's origin, side effects and the last error are in the tooltip (filled in resolveTreeItem, on hover).
      const state = holdText(t, steps) ?? STATE_LABEL[t.state];
      item.description = `${state} · ${stepsProgress(steps)}${t.forkedFrom ? ' · fork' : ''}`;
      item.contextValue = taskContextValue(t, node.undoable);
      const fork = t.forkedFrom ? `, ${forkedFromText(t, { original: node.original, checkpointLabel: 'a checkpoint' }, 60)}` : '';
      item.accessibilityInformation = { label: `Task ${t.title}, ${state}, ${stepsProgress(steps)}${fork}` };
      return item;
    }
    if (node instanceof StepNode) {
      const s = node.step;
      const item = new vscode.TreeItem(s.title, node.hasChildren ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.None);
      item.id = node.id;
      const task = node.parent.task;
      item.iconPath = stepIconOf(s, task);
      item.description = stepDescription(s, task, node.parent.steps, stepRetryText(s));
      const md = new vscode.MarkdownString();
      md.appendMarkdown('**');
      md.appendText(s.title);
      md.appendMarkdown(`** — ${STEP_STATUS_WORD[stepShownStatus(s, task)]}\n\n`);
      if (s.dependsOn.length) md.appendText(`After: ${s.dependsOn.map((d) => node.parent.steps.find((x) => x.id === d)?.title ?? d).join(', ')}\n\n`);
      if (s.summary) md.appendText(`${s.summary}\n\n`);
      if (s.error) md.appendText(`Error: ${s.error.message}${s.error.recoverable ? ' (recoverable)' : ''}\n\n`);
      if (s.attempts) md.appendText(stepRetryText(s));
      item.tooltip = md;
      item.contextValue = `step:${s.status}${retryState(s, Date.now()).exhausted ? ':exhausted' : ''}`;
      return item;
    }
    if (node instanceof CheckpointNode) {
      const c = node.checkpoint;
      const item = new vscode.TreeItem(checkpointName(c, node.siblings, node.steps), vscode.TreeItemCollapsibleState.None);
      item.id = node.id;
      item.iconPath = checkpointIcon(c);
      item.description = checkpointDescription(c);
      item.tooltip = checkpointTooltipText(c, node.siblings, node.steps);
      // A damaged checkpoint (objects lost, marked by verify --repair) offers no rollback or diff.
      item.contextValue = `checkpoint:${c.kind}${c.manifestRef && !c.damaged ? ':restorable' : ''}${inHistory(node.parent) ? ':history' : ''}`;
      return item;
    }
    const e = node.effect;
    const item = new vscode.TreeItem(e.description, vscode.TreeItemCollapsibleState.None);
    item.id = node.id;
    item.iconPath = effectIcon(e.status);
    item.description = effectDescription(e);
    const md = new vscode.MarkdownString();
    md.appendMarkdown('**');
    md.appendText(e.description);
    md.appendMarkdown(`** — key \`${e.key.replace(/`/g, '')}\`\n\n`);
    if (e.status === 'in_doubt') md.appendMarkdown('It was begun but no outcome was recorded before the task stopped. Check whether it happened, then mark it done or failed.\n\n');
    const result = e.status === 'done' ? resultText(e.result) : null;
    if (result) {
      md.appendMarkdown('**Result:** ');
      md.appendText(result);
      md.appendMarkdown('\n\n');
    }
    if (e.error) md.appendText(`Error: ${e.error}`);
    item.tooltip = md;
    item.contextValue = `effect:${e.status}`;
    return item;
  }
}

