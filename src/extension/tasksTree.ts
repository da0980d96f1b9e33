import * as vscode from 'vscode';
import type { CheckpointMeta, Task } from '../core/model/schema';
import { Disposable } from './disposable';
import { describeStoreOwner, type EngineHost, type HostMode } from './engineHost';
import { listTasks, taskDetail } from './storeReads';
import { checkpointLabelOf, sortTasks, taskTooltip, type ForkOriginView } from './presentation';
import { CheckpointNode, EffectNode, StepNode, TaskNode, type TreeNode } from './tasksTreeNodes';
import { isOpen } from '../core/model/taskStates';
import { STEP_ACTION_FROM } from './stepActions';
import { captureChildren, captureTreeItem, commandsOf, CommandNode, historyRoot, isCaptureNode } from './captureNodes';
import { safeTooltip } from './treeNode';
import { isShownCheckpoint } from './labelText';

// The nodes live in tasksTreeNodes.ts; re-exported so commands and panels import the view from one place.
export { CheckpointNode, EffectNode, StepNode, TaskNode, taskContextValue, type TreeNode } from './tasksTreeNodes';

/**
 * The Tasks view: tasks → steps (plan order) → the checkpoints taken in each step;
 * side effects under the step they were begun in (under the task when begun outside a
 * step). Nodes carry stable ids and their parent (so
 * `reveal` works); children are computed lazily from the store (the in-process
 * engine while this window owns it, the owner's API while it relays), and the view
 * refreshes on the store's change events. Nodes carry what their row shows, so
 * rendering a row never queries anything.
 */
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
      const team = this.host.team;
      view.description =
        m.kind === 'relay' ? `relaying to ${describeStoreOwner(m.owner)}` : m.kind === 'waiting' ? 'waiting for the store' : team ? `team store ${team.where}` : undefined;
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
      // The palette offers each step action while some open task has a step it applies to.
      for (const [action, from] of Object.entries(STEP_ACTION_FROM)) {
        const any = tasks.some((t) => isOpen(t) && (stepsByTask.get(t.id) ?? []).some((st) => from.includes(st.status)));
        void vscode.commands.executeCommand('setContext', `waypoint.steps.${action}`, any);
      }
      const byId = new Map(tasks.map((t) => [t.id, t]));
      return [
        ...sortTasks(tasks).map((t) => new TaskNode(t, stepsByTask.get(t.id) ?? [], undoable.has(t.id), t.forkedFrom ? (byId.get(t.forkedFrom.taskId) ?? null) : null)),
        ...(await historyRoot(this.host)),
      ];
    }
    if (node instanceof TaskNode) {
      const [d, commands] = await Promise.all([taskDetail(this.host, node.task.id), commandsOf(this.host, node.task.id)]);
      const own = d.checkpoints.filter((c) => c.stepId === null && isShownCheckpoint(c));
      const stepIds = new Set(d.steps.map((s) => s.id));
      const withChildren = new Set([...d.checkpoints.filter(isShownCheckpoint).map((c) => c.stepId), ...d.sideEffects.map((e) => e.stepId), ...commands.map((c) => c.stepId)]);
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
        ...d.checkpoints.filter((c) => c.stepId === node.step.id && isShownCheckpoint(c)).map((c) => new CheckpointNode(node, c, d.checkpoints, d.steps)),
        ...d.sideEffects.filter((e) => e.stepId === node.step.id).map((e) => new EffectNode(node, e)),
        ...commands.filter((c) => c.stepId === node.step.id).map((c) => new CommandNode(node, c)),
      ];
    }
    if (isCaptureNode(node)) return captureChildren(this.host, node);
    return [];
  }

  private async undoableTaskIds(): Promise<Set<string>> {
    return new Set(await (await this.host.api()).undoableTaskIds());
  }

  async resolveTreeItem(item: vscode.TreeItem, node: TreeNode): Promise<vscode.TreeItem> {
    if (node instanceof TaskNode && !item.tooltip) {
      const d = await taskDetail(this.host, node.task.id).catch(() => undefined);
      if (d) item.tooltip = safeTooltip(taskTooltip(d.task, d.steps, d.sideEffects, d.task.forkedFrom ? await this.forkOrigin(d.task) : undefined));
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
    return node.toTreeItem();
  }
}
