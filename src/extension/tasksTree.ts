import * as vscode from 'vscode';
import type { Engine } from '../core/engine/engine';
import type { CheckpointMeta, SideEffect, Step, Task } from '../core/model/schema';
import { Disposable } from './disposable';
import type { EngineHost } from './engineHost';
import { CHECKPOINT_LABEL, ago, checkpointIcon, effectIcon, isResumable, progressText, sortTasks, STATE_LABEL, stepIcon, taskIcon, taskTooltip } from './presentation';

/**
 * The Tasks view: tasks → steps (plan order) → the checkpoints taken in each step;
 * side effects under their task. Nodes carry stable ids and their parent (so
 * `reveal` works); children are computed lazily from the engine's projections, and
 * the view refreshes on the engine's change events — never by polling.
 */
export type TreeNode = TaskNode | StepNode | CheckpointNode | EffectNode;

export class TaskNode {
  readonly kind = 'task';
  readonly parent = undefined;
  constructor(readonly task: Task) {}
  get id(): string {
    return `task:${this.task.id}`;
  }
}

export class StepNode {
  readonly kind = 'step';
  constructor(
    readonly parent: TaskNode,
    readonly step: Step,
  ) {}
  get id(): string {
    return `step:${this.step.taskId}:${this.step.id}`;
  }
}

export class CheckpointNode {
  readonly kind = 'checkpoint';
  constructor(
    readonly parent: TaskNode | StepNode,
    readonly checkpoint: CheckpointMeta,
  ) {}
  get id(): string {
    return `checkpoint:${this.checkpoint.id}`;
  }
}

export class EffectNode {
  readonly kind = 'effect';
  constructor(
    readonly parent: TaskNode,
    readonly effect: SideEffect,
  ) {}
  get id(): string {
    return `effect:${this.effect.taskId}:${this.effect.key}`;
  }
}

/** Composite context values matched by regex in package.json `when` clauses. */
export function taskContextValue(t: Task): string {
  const flags = [
    isResumable(t) ? 'resumable' : '',
    t.state === 'completed' || t.state === 'abandoned' ? '' : 'open',
    t.state === 'running' || t.state === 'waiting_tool' || t.state === 'planning' ? '' : 'deletable',
    t.state === 'waiting_review' || t.state === 'running' || t.state === 'interrupted' ? 'reviewable' : '',
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

  refresh(): void {
    this._onDidChangeTreeData.fire(undefined);
  }

  get lastOpenError(): string | undefined {
    return this.openError;
  }

  private async engine(): Promise<Engine | undefined> {
    try {
      const e = await this.host.get();
      this.openError = undefined;
      return e;
    } catch (e) {
      this.openError = (e as Error).message;
      return undefined;
    }
  }

  /** Steps of every task, read in one query when the root is listed (one query per row was the cost at 1,000 tasks). */
  private stepsByTask = new Map<string, Step[]>();

  private stepsOf(engine: Engine, taskId: string): Step[] {
    return this.stepsByTask.get(taskId) ?? engine.queries.steps(taskId);
  }

  async getChildren(node?: TreeNode): Promise<TreeNode[]> {
    const engine = await this.engine();
    if (!engine) return [];
    if (!node) {
      this.stepsByTask = new Map();
      for (const s of engine.queries.allSteps()) {
        const list = this.stepsByTask.get(s.taskId);
        if (list) list.push(s);
        else this.stepsByTask.set(s.taskId, [s]);
      }
      return sortTasks(engine.tasks()).map((t) => new TaskNode(t));
    }
    if (node instanceof TaskNode) {
      const id = node.task.id;
      const checkpoints = engine.queries.checkpoints(id).filter((c) => c.stepId === null);
      return [
        ...checkpoints.filter((c) => c.kind === 'task_base').map((c) => new CheckpointNode(node, c)),
        ...engine.queries.steps(id).map((s) => new StepNode(node, s)),
        ...checkpoints.filter((c) => c.kind !== 'task_base').map((c) => new CheckpointNode(node, c)),
        ...engine.queries.sideEffects(id).map((e) => new EffectNode(node, e)),
      ];
    }
    if (node instanceof StepNode) {
      return engine.queries
        .checkpoints(node.step.taskId)
        .filter((c) => c.stepId === node.step.id)
        .map((c) => new CheckpointNode(node, c));
    }
    return [];
  }

  resolveTreeItem(item: vscode.TreeItem, node: TreeNode): vscode.TreeItem {
    const engine = this.host.current;
    if (node instanceof TaskNode && engine && !item.tooltip) {
      item.tooltip = taskTooltip(node.task, engine.queries.steps(node.task.id), engine.queries.sideEffects(node.task.id));
    }
    return item;
  }

  getParent(node: TreeNode): TreeNode | undefined {
    return node.parent;
  }

  getTreeItem(node: TreeNode): vscode.TreeItem {
    const engine = this.host.current;
    if (node instanceof TaskNode) {
      const t = node.task;
      const steps = engine ? this.stepsOf(engine, t.id) : [];
      const item = new vscode.TreeItem(t.title, vscode.TreeItemCollapsibleState.Collapsed);
      item.id = node.id;
      item.iconPath = taskIcon(t.state);
      item.description = `${STATE_LABEL[t.state]} · ${progressText(t, steps)}`;
      // The tooltip (side effects, last error) is filled in resolveTreeItem, on hover only.
      item.contextValue = taskContextValue(t);
      item.accessibilityInformation = { label: `Task ${t.title}, ${STATE_LABEL[t.state]}, ${progressText(t, steps)}` };
      return item;
    }
    if (node instanceof StepNode) {
      const s = node.step;
      const hasCheckpoints = (engine?.queries.checkpoints(s.taskId) ?? []).some((c) => c.stepId === s.id);
      const item = new vscode.TreeItem(s.title, hasCheckpoints ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.None);
      item.id = node.id;
      item.iconPath = stepIcon(s.status);
      const deps = s.dependsOn.length ? ` · after ${s.dependsOn.join(', ')}` : '';
      const timing = s.startedAt ? ` · ${s.endedAt ? `${Math.max(1, Math.round((s.endedAt - s.startedAt) / 1000))} s` : ago(s.startedAt)}` : '';
      item.description = `${s.id} · ${s.status.replace('_', ' ')}${s.attempts > 1 ? ` (attempt ${s.attempts})` : ''}${deps}${timing}`;
      const md = new vscode.MarkdownString();
      md.appendMarkdown('**');
      md.appendText(s.title);
      md.appendMarkdown(`** — ${s.status.replace('_', ' ')}\n\n`);
      if (s.summary) md.appendText(`${s.summary}\n\n`);
      if (s.error) md.appendText(`Error: ${s.error.message}${s.error.recoverable ? ' (recoverable)' : ''}`);
      item.tooltip = md;
      item.contextValue = `step:${s.status}`;
      return item;
    }
    if (node instanceof CheckpointNode) {
      const c = node.checkpoint;
      const label = c.label ?? CHECKPOINT_LABEL[c.kind];
      const item = new vscode.TreeItem(label, vscode.TreeItemCollapsibleState.None);
      item.id = node.id;
      item.iconPath = checkpointIcon(c);
      item.description = `${new Date(c.createdAt).toLocaleTimeString()} · ${c.filesChanged} file${c.filesChanged === 1 ? '' : 's'} changed`;
      item.tooltip = `${CHECKPOINT_LABEL[c.kind]} ${c.id}\n${new Date(c.createdAt).toLocaleString()}\n${c.files} files tracked, ${c.filesChanged} changed`;
      item.contextValue = `checkpoint:${c.kind}${c.manifestRef ? ':restorable' : ''}`;
      return item;
    }
    const e = node.effect;
    const item = new vscode.TreeItem(e.description, vscode.TreeItemCollapsibleState.None);
    item.id = node.id;
    item.iconPath = effectIcon(e.status);
    item.description = `${e.kind} · ${e.status === 'in_doubt' ? 'IN DOUBT' : e.status}${e.resolvedBy === 'person' ? ' (by you)' : ''}`;
    const md = new vscode.MarkdownString();
    md.appendMarkdown('**');
    md.appendText(e.description);
    md.appendMarkdown(`** — key \`${e.key.replace(/`/g, '')}\`\n\n`);
    if (e.status === 'in_doubt') md.appendMarkdown('It was begun but no outcome was recorded before the task stopped. Check whether it happened, then mark it done or failed.\n\n');
    if (e.error) md.appendText(`Error: ${e.error}`);
    item.tooltip = md;
    item.contextValue = `effect:${e.status}`;
    return item;
  }
}

