import type { TaskListing } from '../../core/store/eventLog';

/**
 * The all-workspaces listing of the team store, grouped for the Team Store view:
 * machine → workspace → tasks. Plain Node (no `vscode`), so the grouping and its
 * order are unit-tested (test/unit/teamListing.test.ts).
 */

export type ListedTask = TaskListing['task'];

export interface TeamWorkspace {
  id: string;
  machine: string;
  path: string;
  /** This window's own workspace (same machine, same folder). */
  here: boolean;
  /** Its most recent task activity: workspaces are listed newest first. */
  updatedAt: number;
  tasks: ListedTask[];
}

export interface TeamMachine {
  name: string;
  /** The machine this window runs on. */
  here: boolean;
  workspaces: TeamWorkspace[];
  taskCount: number;
}

/** Where this window is, to mark its machine and workspace. */
export interface HereRef {
  machine: string;
  /** The window's store folder's workspace path (its first folder on disk), if any. */
  workspacePath?: string;
  /** The workspace id, when this window owns its store and knows it. */
  workspaceId?: string;
}

/**
 * Groups listings by machine, then workspace. This machine first, then by name; a
 * machine's workspaces newest activity first; tasks keep the order they are given in
 * (the caller sorts them as the Tasks view does).
 */
export function groupByMachine(listings: readonly TaskListing[], here: HereRef): TeamMachine[] {
  const machines = new Map<string, Map<string, TeamWorkspace>>();
  for (const l of listings) {
    let byWs = machines.get(l.workspace.machine);
    if (!byWs) machines.set(l.workspace.machine, (byWs = new Map()));
    let ws = byWs.get(l.workspace.id);
    if (!ws) {
      const isHere = here.workspaceId ? l.workspace.id === here.workspaceId : l.workspace.machine === here.machine && l.workspace.path === here.workspacePath;
      byWs.set(l.workspace.id, (ws = { id: l.workspace.id, machine: l.workspace.machine, path: l.workspace.path, here: isHere, updatedAt: 0, tasks: [] }));
    }
    ws.tasks.push(l.task);
    ws.updatedAt = Math.max(ws.updatedAt, l.task.updatedAt);
  }
  return [...machines.entries()]
    .map(([name, byWs]) => {
      const workspaces = [...byWs.values()].sort((a, b) => Number(b.here) - Number(a.here) || b.updatedAt - a.updatedAt || a.path.localeCompare(b.path));
      return { name, here: name === here.machine, workspaces, taskCount: workspaces.reduce((n, w) => n + w.tasks.length, 0) };
    })
    .sort((a, b) => Number(b.here) - Number(a.here) || a.name.localeCompare(b.name));
}

/** The last segment of a workspace path (POSIX or Windows: the store holds paths from every machine). */
export function folderName(p: string): string {
  const parts = p.split(/[\\/]+/).filter(Boolean);
  return parts[parts.length - 1] ?? p;
}
