import * as vscode from 'vscode';
import type { CheckpointMeta, TerminalCommand } from '../core/model/schema';
import { checkpointUri, EMPTY_SIDE } from './checkpointFs';
import type { EngineHost } from './engineHost';
import { localTime } from './resume/words';
import { CheckpointNode, CommandFileNode, CommandNode, HistoryDayNode, HistoryNode, type CaptureNode } from './tasksTreeNodes';

export { CommandFileNode, CommandNode, HistoryDayNode, HistoryNode, isCaptureNode, type CaptureNode } from './tasksTreeNodes';
import { taskDetail } from './storeReads';
import { isShownCheckpoint } from './labelText';

/**
 * Tree rows for what Waypoint captures without an agent's help: a task's
 * terminal commands ("command → files changed", with the exit code), and the
 * Workspace history (one row per day, its checkpoints under it, the footprint in the
 * row's description). Kept beside tasksTree.ts, which only routes these nodes here; the
 * nodes themselves are with every other tree node, in tasksTreeNodes.ts.
 */
/** A task's terminal commands, in either mode (the engine in-process, or the owner's API). */
export async function commandsOf(host: EngineHost, taskId: string): Promise<TerminalCommand[]> {
  return (await host.api()).commands(taskId);
}

/** The Workspace history row, or nothing while there is no history (the view shows only tasks then). */
export async function historyRoot(host: EngineHost): Promise<HistoryNode[]> {
  const footprint = await (await host.api()).history();
  return footprint.days.length ? [new HistoryNode(footprint)] : [];
}

export async function captureChildren(host: EngineHost, node: CaptureNode): Promise<(CaptureNode | CheckpointNode)[]> {
  if (node instanceof HistoryNode) return node.footprint.days.map((d) => new HistoryDayNode(node, d));
  if (node instanceof HistoryDayNode) {
    const d = await taskDetail(host, node.day.taskId);
    // Newest first: the change a person wants to undo is usually the last one.
    return d.checkpoints.filter(isShownCheckpoint).reverse().map((c) => new CheckpointNode(node, c, d.checkpoints, d.steps));
  }
  if (node instanceof CommandNode) {
    const c = node.command;
    return [
      ...c.changed.map((p) => new CommandFileNode(node, p, 'changed' as const)),
      ...c.created.map((p) => new CommandFileNode(node, p, 'created' as const)),
      ...c.deleted.map((p) => new CommandFileNode(node, p, 'deleted' as const)),
    ].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }
  return [];
}

export function bytesText(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;

/** How a command's outcome reads: its exit code, or that it is still running. */
export function commandOutcome(c: TerminalCommand): string {
  if (c.endedAt === null) return 'running';
  return c.exitCode === null ? 'exit code unknown' : `exit ${c.exitCode}`;
}

function commandIcon(c: TerminalCommand): vscode.ThemeIcon {
  if (c.endedAt === null) return new vscode.ThemeIcon('terminal', new vscode.ThemeColor('charts.blue'));
  if (c.exitCode === 0) return new vscode.ThemeIcon('terminal', new vscode.ThemeColor('testing.iconPassed'));
  if (c.exitCode === null) return new vscode.ThemeIcon('terminal');
  return new vscode.ThemeIcon('terminal', new vscode.ThemeColor('testing.iconFailed'));
}

const FILE_ICON: Record<CommandFileNode['action'], vscode.ThemeIcon> = {
  changed: new vscode.ThemeIcon('diff-modified', new vscode.ThemeColor('gitDecoration.modifiedResourceForeground')),
  created: new vscode.ThemeIcon('diff-added', new vscode.ThemeColor('gitDecoration.addedResourceForeground')),
  deleted: new vscode.ThemeIcon('diff-removed', new vscode.ThemeColor('gitDecoration.deletedResourceForeground')),
};

export function captureTreeItem(node: CaptureNode, now = Date.now()): vscode.TreeItem {
  if (node instanceof CommandNode) {
    const c = node.command;
    const line = c.commandLine.split('\n')[0] || '(command)';
    const item = new vscode.TreeItem(line.length > 80 ? `${line.slice(0, 79)}…` : line, c.filesTotal ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.None);
    item.id = node.id;
    item.iconPath = commandIcon(c);
    const files = c.endedAt === null ? '' : c.filesTotal ? ` → ${plural(c.filesTotal, 'file')} changed` : ' → no files changed';
    item.description = `${commandOutcome(c)}${files}`;
    const who = c.owner === 'agent' ? `the agent${c.agent ? ` (${c.agent})` : ''}, in its terminal “${c.terminal}”` : `you, in terminal “${c.terminal}”`;
    const md = new vscode.MarkdownString();
    md.appendCodeblock(c.commandLine, 'shellscript');
    md.appendText(`Run by ${who}${c.cwd ? ` in ${c.cwd}` : ''}, ${localTime(c.startedAt, now)}. ${commandOutcome(c)[0].toUpperCase()}${commandOutcome(c).slice(1)}.\n\n`);
    md.appendText(
      c.owner === 'agent'
        ? 'Its changes are the agent’s: an agent-only rollback reverts them and the review counts them as the task’s.'
        : 'Its changes are yours: an agent-only rollback keeps them and the review marks them as your own edits.',
    );
    if (c.filesTotal > c.changed.length + c.created.length + c.deleted.length) md.appendText(`\n\n${c.filesTotal} files in all; the first 500 of each kind are listed.`);
    item.tooltip = md;
    item.contextValue = `command:${c.owner}${c.endedAt === null ? ':running' : ''}`;
    item.accessibilityInformation = { label: `Terminal command ${line}, ${item.description}` };
    return item;
  }
  if (node instanceof CommandFileNode) {
    const c = node.parent.command;
    const item = new vscode.TreeItem(node.path, vscode.TreeItemCollapsibleState.None);
    item.id = node.id;
    item.iconPath = FILE_ICON[node.action];
    item.description = node.action;
    // The command's own change: before and after it, as its two checkpoints hold the file.
    if (c.beforeCheckpointId && c.afterCheckpointId) {
      const left = node.action === 'created' ? checkpointUri(EMPTY_SIDE, node.path) : checkpointUri(c.beforeCheckpointId, node.path);
      const right = node.action === 'deleted' ? checkpointUri(EMPTY_SIDE, node.path) : checkpointUri(c.afterCheckpointId, node.path);
      item.command = { command: 'vscode.diff', title: 'Show the Command’s Change', arguments: [left, right, `${node.path} (${c.commandLine.slice(0, 40)})`] };
    }
    item.contextValue = `commandFile:${node.action}`;
    return item;
  }
  if (node instanceof HistoryNode) {
    const f = node.footprint;
    const item = new vscode.TreeItem('Workspace history', vscode.TreeItemCollapsibleState.Collapsed);
    item.id = node.id;
    item.iconPath = new vscode.ThemeIcon('history');
    item.description = `${plural(f.days.length, 'day')} · ${plural(f.checkpoints, 'checkpoint')} · ${bytesText(f.bytes)}`;
    item.tooltip = new vscode.MarkdownString(
      'Changes made while no task ran, checkpointed after a quiet period (one record per day), so you can roll back work an agent did not report. ' +
        `Old days are dropped by themselves: see the \`waypoint.history.*\` settings (age and size). Stored: ${bytesText(f.bytes)} of new content.`,
    );
    item.contextValue = 'history';
    return item;
  }
  const d = node.day;
  const today = new Date(now);
  const isToday = d.day === `${today.getFullYear()}-${String(today.getMonth() + 1).padStart(2, '0')}-${String(today.getDate()).padStart(2, '0')}`;
  const item = new vscode.TreeItem(isToday ? `Today (${d.day})` : d.day, vscode.TreeItemCollapsibleState.Collapsed);
  item.id = node.id;
  item.iconPath = new vscode.ThemeIcon('calendar');
  item.description = `${plural(d.checkpoints, 'checkpoint')} · ${bytesText(d.bytes)}`;
  item.tooltip = `${d.title}: ${plural(d.checkpoints, 'checkpoint')}, last ${localTime(d.lastAt, now)}. Roll back to one of its checkpoints to undo what came after it.`;
  item.contextValue = 'historyDay';
  return item;
}

/** Whether a checkpoint row sits in the Workspace history (no fork from it: it is no task's). */
export const inHistory = (parent: unknown, _c?: CheckpointMeta): boolean => parent instanceof HistoryDayNode;
