import * as vscode from 'vscode';
import type { CheckpointMeta, SideEffect, Step, Task } from '../core/model/schema';
import { isDeletable, isHeldForRetries, isOpen, isResumable, isReviewable } from '../core/model/taskStates';
import { retryState } from '../core/engine/retryPolicy';
import { checkpointDescription, checkpointName, checkpointTooltipText, effectDescription, resultText, stepDescription, stepShownStatus, stepsProgress, STEP_STATUS_WORD } from './labelText';
import { checkpointIcon, effectIcon, forkedFromText, holdText, STATE_LABEL, stepIconOf, stepRetryText, taskIconOf } from './presentation';
import { WaypointTreeNode, type TreeRow } from './treeNode';
import type { HistoryDay, HistoryFootprint } from '../core/engine/history';
import type { TerminalCommand } from '../core/model/schema';

/**
 * The Tasks view's nodes: a task, its steps (plan order), the checkpoints taken in
 * each step, and side effects under the step they were begun in. Each carries what
 * its row shows and says it once, in `row()` (see WaypointTreeNode).
 */
export type TreeNode = TaskNode | StepNode | CheckpointNode | EffectNode | CaptureNode;

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

export class TaskNode extends WaypointTreeNode {
  readonly kind = 'task';
  readonly parent = undefined;
  constructor(
    readonly task: Task,
    readonly steps: readonly Step[] = [],
    /** Its latest rollback can be undone (drives the Undo Last Rollback menu item). */
    readonly undoable = false,
    /** For a fork: the original task as the list holds it (null when it was deleted). */
    readonly original: Task | null = null,
  ) {
    super();
  }
  get id(): string {
    return `task:${this.task.id}`;
  }
  protected row(): TreeRow {
    const t = this.task;
    // Short, so the title survives the default sidebar width: state and progress only. Times, the
    // fork's origin, side effects and the last error are in the tooltip (filled in resolveTreeItem, on hover).
    const state = holdText(t, this.steps) ?? STATE_LABEL[t.state];
    const progress = stepsProgress(this.steps);
    const fork = t.forkedFrom ? `, ${forkedFromText(t, { original: this.original, checkpointLabel: 'a checkpoint' }, 60)}` : '';
    return {
      label: t.title,
      description: `${state} · ${progress}${t.forkedFrom ? ' · fork' : ''}`,
      icon: taskIconOf(t),
      contextValue: taskContextValue(t, this.undoable),
      collapsible: vscode.TreeItemCollapsibleState.Collapsed,
      accessibleLabel: `Task ${t.title}, ${state}, ${progress}${fork}`,
    };
  }
}

export class StepNode extends WaypointTreeNode {
  readonly kind = 'step';
  constructor(
    readonly parent: TaskNode,
    readonly step: Step,
    /** It has checkpoints or side effects under it (so the row can be expanded). */
    readonly hasChildren = false,
  ) {
    super();
  }
  get id(): string {
    return `step:${this.step.taskId}:${this.step.id}`;
  }
  protected row(): TreeRow {
    const s = this.step;
    const task = this.parent.task;
    const steps = this.parent.steps;
    const md = new vscode.MarkdownString();
    md.appendMarkdown('**');
    md.appendText(s.title);
    md.appendMarkdown(`** — ${STEP_STATUS_WORD[stepShownStatus(s, task)]}\n\n`);
    if (s.dependsOn.length) md.appendText(`After: ${s.dependsOn.map((d) => steps.find((x) => x.id === d)?.title ?? d).join(', ')}\n\n`);
    if (s.summary) md.appendText(`${s.summary}\n\n`);
    if (s.error) md.appendText(`Error: ${s.error.message}${s.error.recoverable ? ' (recoverable)' : ''}\n\n`);
    if (s.attempts) md.appendText(stepRetryText(s));
    return {
      label: s.title,
      description: stepDescription(s, task, steps, stepRetryText(s)),
      tooltip: md,
      icon: stepIconOf(s, task),
      // `:open` while its task is not final: a person may then complete, skip, fail or retry it by hand.
      contextValue: `step:${s.status}${retryState(s, Date.now()).exhausted ? ':exhausted' : ''}${isOpen(task) ? ':open' : ''}`,
      collapsible: this.hasChildren ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.None,
    };
  }
}

export class CheckpointNode extends WaypointTreeNode {
  readonly kind = 'checkpoint';
  constructor(
    readonly parent: TaskNode | StepNode | HistoryDayNode,
    readonly checkpoint: CheckpointMeta,
    /** The task's other checkpoints and steps, so the row names a pre-rollback's target by its label, not its id. */
    readonly siblings: readonly CheckpointMeta[] = [],
    readonly steps: readonly Step[] = [],
  ) {
    super();
  }
  get id(): string {
    return `checkpoint:${this.checkpoint.id}`;
  }
  protected row(): TreeRow {
    const c = this.checkpoint;
    return {
      label: checkpointName(c, this.siblings, this.steps),
      description: checkpointDescription(c),
      tooltip: checkpointTooltipText(c, this.siblings, this.steps),
      icon: checkpointIcon(c),
      // A damaged checkpoint (objects lost, marked by verify --repair) offers no rollback or diff.
      contextValue: `checkpoint:${c.kind}${c.manifestRef && !c.damaged ? ':restorable' : ''}${this.parent.kind === 'historyDay' ? ':history' : ''}`,
    };
  }
}

export class EffectNode extends WaypointTreeNode {
  readonly kind = 'effect';
  constructor(
    readonly parent: TaskNode | StepNode,
    readonly effect: SideEffect,
  ) {
    super();
  }
  get id(): string {
    return `effect:${this.effect.taskId}:${this.effect.key}`;
  }
  protected row(): TreeRow {
    const e = this.effect;
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
    return { label: e.description, description: effectDescription(e), tooltip: md, icon: effectIcon(e.status), contextValue: `effect:${e.status}` };
  }
}

/** Rows of what Waypoint captures without an agent (terminal commands, the workspace history); captureNodes.ts lists and labels them. */
export type CaptureNode = CommandNode | CommandFileNode | HistoryNode | HistoryDayNode;

export class CommandNode {
  readonly kind = 'command';
  constructor(
    readonly parent: TaskNode | StepNode,
    readonly command: TerminalCommand,
  ) {}
  get id(): string {
    return `command:${this.command.taskId}:${this.command.id}`;
  }
}

export class CommandFileNode {
  readonly kind = 'commandFile';
  constructor(
    readonly parent: CommandNode,
    readonly path: string,
    readonly action: 'changed' | 'created' | 'deleted',
  ) {}
  get id(): string {
    return `${this.parent.id}:file:${this.path}`;
  }
}

export class HistoryNode {
  readonly kind = 'history';
  readonly parent = undefined;
  readonly id = 'history';
  constructor(readonly footprint: HistoryFootprint) {}
}

export class HistoryDayNode {
  readonly kind = 'historyDay';
  constructor(
    readonly parent: HistoryNode,
    readonly day: HistoryDay,
  ) {}
  get id(): string {
    return `history:${this.day.taskId}`;
  }
}

export function isCaptureNode(n: unknown): n is CaptureNode {
  return n instanceof CommandNode || n instanceof CommandFileNode || n instanceof HistoryNode || n instanceof HistoryDayNode;
}
