import * as vscode from 'vscode';
import { ago, STATE_LABEL, taskIcon } from '../presentation';
import { plural } from '../../core/model/plural';
import { WaypointTreeNode, type TreeRow } from '../treeNode';
import { folderName, type ListedTask, type TeamMachine, type TeamWorkspace } from './teamListing';

/**
 * The Team Store view's nodes: machine → workspace → task. Each carries what its row
 * shows (rendering queries nothing); ids are stable across refreshes so VS Code keeps
 * expansion and selection while the view follows the store live.
 */
export type TeamNode = MachineNode | WorkspaceNode | TeamTaskNode;

export class MachineNode extends WaypointTreeNode {
  readonly kind = 'teamMachine';
  readonly parent = undefined;
  constructor(readonly machine: TeamMachine) {
    super();
  }
  get id(): string {
    return `team-machine:${this.machine.name}`;
  }
  protected row(): TreeRow {
    const m = this.machine;
    const counts = `${plural(m.workspaces.length, 'workspace')} · ${plural(m.taskCount, 'task')}`;
    return {
      label: m.name,
      description: m.here ? `this machine · ${counts}` : counts,
      tooltip: `${m.name}${m.here ? ' (this machine)' : ''}: ${counts} in the team store`,
      icon: new vscode.ThemeIcon(m.here ? 'device-desktop' : 'vm'),
      contextValue: `teamMachine${m.here ? ':here' : ''}`,
      collapsible: m.here ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed,
    };
  }
}

export class WorkspaceNode extends WaypointTreeNode {
  readonly kind = 'teamWorkspace';
  constructor(
    readonly parent: MachineNode,
    readonly workspace: TeamWorkspace,
  ) {
    super();
  }
  get id(): string {
    return `team-workspace:${this.workspace.id}`;
  }
  protected row(): TreeRow {
    const w = this.workspace;
    const md = new vscode.MarkdownString();
    md.appendMarkdown('**');
    md.appendText(folderName(w.path));
    md.appendMarkdown(`**${w.here ? ' — this window' : ''}\n\n`);
    md.appendText(`${w.path}\non ${w.machine}\n${plural(w.tasks.length, 'task')}, last activity ${ago(w.updatedAt)}`);
    return {
      label: folderName(w.path),
      description: w.here ? `this window · ${plural(w.tasks.length, 'task')}` : `${plural(w.tasks.length, 'task')} · ${ago(w.updatedAt)}`,
      tooltip: md,
      icon: new vscode.ThemeIcon(w.here ? 'root-folder-opened' : 'folder'),
      contextValue: `teamWorkspace${w.here ? ':here' : ''}`,
      collapsible: w.here ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed,
      accessibleLabel: `Workspace ${folderName(w.path)} on ${w.machine}${w.here ? ', this window' : ''}, ${plural(w.tasks.length, 'task')}`,
    };
  }
}

export class TeamTaskNode extends WaypointTreeNode {
  readonly kind = 'teamTask';
  constructor(
    readonly parent: WorkspaceNode,
    readonly task: ListedTask,
  ) {
    super();
  }
  get id(): string {
    // A task id is unique only within its workspace's store.
    return `team-task:${this.parent.workspace.id}:${this.task.id}`;
  }
  protected row(): TreeRow {
    const t = this.task;
    const here = this.parent.workspace.here;
    const md = new vscode.MarkdownString(undefined, true);
    md.appendMarkdown('**');
    md.appendText(t.title);
    md.appendMarkdown(`** — ${STATE_LABEL[t.state]}\n\n`);
    md.appendText(t.goal);
    md.appendMarkdown('\n\n');
    for (const [k, v] of [
      ['Agent', t.agent ?? '—'],
      ['Workspace', `${this.parent.workspace.path} on ${this.parent.workspace.machine}`],
      ['Started', new Date(t.createdAt).toLocaleString()],
      ['Last activity', ago(t.updatedAt)],
      ['Attempt', String(t.attempt)],
    ]) {
      md.appendMarkdown(`**${k}:** `);
      md.appendText(v);
      md.appendMarkdown('  \n');
    }
    if (here) md.appendMarkdown('\nClick to show it in the Tasks view.');
    return {
      label: t.title,
      // The Tasks view's words for the state; the team listing holds no steps, so the time stands where progress would.
      description: `${STATE_LABEL[t.state]} · ${t.agent ? `${t.agent} · ` : ''}${ago(t.updatedAt)}`,
      tooltip: md,
      icon: taskIcon(t.state),
      contextValue: `teamTask:${t.state}${here ? ':here' : ''}`,
      command: here ? { command: 'waypoint.revealTask', title: 'Show in the Tasks View', arguments: [t.id] } : undefined,
      accessibleLabel: `Task ${t.title}, ${STATE_LABEL[t.state]}, in ${folderName(this.parent.workspace.path)} on ${this.parent.workspace.machine}`,
    };
  }
}
