import * as vscode from 'vscode';
import { errorMessage } from '../../core/model/errors';
import type { Disposable as CoreDisposable } from '../../core/store/eventLog';
import { PgProjectionReader, redactIn, watchTeamStore } from '../../core/store/postgres';
import { machineName } from '../../core/store/workspaceIdentity';
import { Disposable } from '../disposable';
import type { EngineHost } from '../engineHost';
import { sortTasks } from '../presentation';
import { groupByMachine, type HereRef } from './teamListing';
import type { TeamStoreConnection, TeamStoreCredentials } from './teamStoreConnection';
import { MachineNode, TeamTaskNode, WorkspaceNode, type TeamNode } from './teamTreeNodes';

export { MachineNode, TeamTaskNode, WorkspaceNode, type TeamNode } from './teamTreeNodes';

/** The view's state, also the `waypoint.teamStore.state` context key its welcome content and menus follow. */
export type TeamViewState = 'disconnected' | 'connected' | 'unreachable' | 'invalid';

/** The newest tasks shown: the view stays quick on a store of tens of thousands (`waypoint tasks --all` lists them all). */
export const TEAM_VIEW_LIMIT = 2000;
/** Commits come in bursts (a checkpoint, a step): one refresh per burst. */
const REFRESH_DEBOUNCE_MS = 250;
/** While the store is unreachable, look again this often (the watcher reconnects by itself, but says nothing when it does). */
const RETRY_MS = 10_000;

/**
 * The Team Store view: every workspace in the team store, grouped by machine
 * (machine → workspace → tasks), with the Tasks view's state icons and words. It
 * reads the store directly (its own small pool, whole-store scope), whether this
 * window owns its workspace's store or relays, and follows it live through
 * LISTEN/NOTIFY (`watchTeamStore`): a commit anywhere refreshes it, debounced, and
 * only while the view is visible (a hidden view refreshes when shown).
 */
export class TeamTreeProvider extends Disposable implements vscode.TreeDataProvider<TeamNode> {
  private readonly _onDidChangeTreeData = this.register(new vscode.EventEmitter<TeamNode | undefined>());
  readonly onDidChangeTreeData = this._onDidChangeTreeData.event;
  private view: vscode.TreeView<TeamNode> | undefined;
  private stateNow: TeamViewState = 'disconnected';
  /** The reader and watcher for the credentials they were opened with; replaced when the connection changes. */
  private link: { creds: TeamStoreCredentials; reader: Promise<PgProjectionReader>; watch: Promise<CoreDisposable | undefined> } | undefined;
  private debounce: NodeJS.Timeout | undefined;
  private retry: NodeJS.Timeout | undefined;
  /** A change arrived while the view was hidden. */
  private stale = false;
  /** Bumped on every reset: a listing begun on an old connection does not land in the new one. */
  private generation = 0;

  constructor(
    private readonly connection: TeamStoreConnection,
    private readonly host: EngineHost,
    private readonly log: vscode.LogOutputChannel,
  ) {
    super();
    this.register(connection.onDidChange(() => void this.reset()));
    // This window's own workspace is marked: which one it is can change with the store (owner, id).
    this.register(host.onDidChangeMode(() => this.refresh()));
    this.register({ dispose: () => void this.closeLink() });
    this.setState(connection.target.kind === 'none' ? 'disconnected' : connection.target.kind === 'invalid' ? 'invalid' : 'connected');
  }

  bindView(view: vscode.TreeView<TeamNode>): void {
    this.view = view;
    this.register(
      view.onDidChangeVisibility((e) => {
        if (e.visible && this.stale) this.refresh();
      }),
    );
    this.describe();
  }

  get state(): TeamViewState {
    return this.stateNow;
  }

  refresh(): void {
    this.stale = false;
    this._onDidChangeTreeData.fire(undefined);
  }

  getTreeItem(node: TeamNode): vscode.TreeItem {
    return node.toTreeItem();
  }

  getParent(node: TeamNode): TeamNode | undefined {
    return node.parent;
  }

  async getChildren(node?: TeamNode): Promise<TeamNode[]> {
    if (node instanceof MachineNode) return node.machine.workspaces.map((w) => new WorkspaceNode(node, w));
    if (node instanceof WorkspaceNode) return sortTasks(node.workspace.tasks).map((t) => new TeamTaskNode(node, t));
    if (node) return [];
    return this.roots();
  }

  private async roots(): Promise<TeamNode[]> {
    const generation = this.generation;
    const creds = await this.connection.credentials();
    if (!creds) {
      this.setState(this.connection.target.kind === 'invalid' ? 'invalid' : 'disconnected');
      this.setMessage(undefined);
      return [];
    }
    try {
      const reader = await this.ensureLink(creds).reader;
      const listings = await reader.listTasks({ allWorkspaces: true, limit: TEAM_VIEW_LIMIT });
      if (generation !== this.generation) return [];
      this.clearRetry();
      this.setState('connected');
      this.setMessage(listings.length >= TEAM_VIEW_LIMIT ? `Showing the ${TEAM_VIEW_LIMIT.toLocaleString()} most recently active tasks (waypoint tasks --all lists every one).` : undefined);
      return groupByMachine(listings, this.here()).map((m) => new MachineNode(m));
    } catch (e) {
      if (generation !== this.generation) return [];
      const why = redactIn(errorMessage(e), creds.connectionUrl);
      this.log.warn(`[team] reading the team store ${creds.url} failed: ${why}`);
      this.setState('unreachable');
      this.setMessage(`Cannot read the team store at ${creds.where}: ${why}`);
      // A reader that never opened is thrown away, so the next look connects afresh.
      await this.closeLink();
      this.scheduleRetry();
      return [];
    }
  }

  /** This window's machine and workspace, to mark them (by id while this window owns a team-store workspace). */
  private here(): HereRef {
    const log = this.host.current?.eventLog;
    let machine: string;
    try {
      machine = machineName();
    } catch {
      machine = '';
    }
    return {
      machine: log?.backend === 'postgresql' ? log.workspace.machine : machine,
      workspacePath: this.host.workspaceFolder?.uri.fsPath,
      workspaceId: log?.backend === 'postgresql' ? log.workspace.id : undefined,
    };
  }

  private ensureLink(creds: TeamStoreCredentials): NonNullable<TeamTreeProvider['link']> {
    if (this.link && this.link.creds.connectionUrl === creds.connectionUrl) return this.link;
    void this.closeLink();
    const reader = PgProjectionReader.open(creds.connectionUrl, { connectTimeoutMs: 10_000 });
    const watch = reader.then(
      () =>
        watchTeamStore(
          creds.connectionUrl,
          () => this.changed(),
          (e) => {
            this.log.warn(`[team] live updates from ${creds.url} stopped: ${redactIn(e.message, creds.connectionUrl)}`);
            this.setState('unreachable');
            this.scheduleRetry();
          },
        ),
      () => undefined,
    );
    this.link = { creds, reader, watch };
    return this.link;
  }

  private async closeLink(): Promise<void> {
    const l = this.link;
    this.link = undefined;
    if (!l) return;
    (await l.watch.catch(() => undefined))?.dispose();
    await (await l.reader.catch(() => undefined))?.close();
  }

  /** A commit somewhere in the store: refresh soon (now if visible; when shown, if hidden). */
  private changed(): void {
    if (this.view && !this.view.visible) {
      this.stale = true;
      return;
    }
    clearTimeout(this.debounce);
    this.debounce = setTimeout(() => this.refresh(), REFRESH_DEBOUNCE_MS);
  }

  private scheduleRetry(): void {
    if (this.retry || this.isDisposed) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      this.refresh();
    }, RETRY_MS);
  }

  private clearRetry(): void {
    clearTimeout(this.retry);
    this.retry = undefined;
  }

  private async reset(): Promise<void> {
    this.generation++;
    this.clearRetry();
    await this.closeLink();
    const t = this.connection.target;
    this.setState(t.kind === 'none' ? 'disconnected' : t.kind === 'invalid' ? 'invalid' : 'connected');
    this.setMessage(undefined);
    this.refresh();
  }

  private setState(s: TeamViewState): void {
    this.stateNow = s;
    void vscode.commands.executeCommand('setContext', 'waypoint.teamStore.state', s);
    this.describe();
  }

  private setMessage(m: string | undefined): void {
    if (this.view) this.view.message = m;
  }

  private describe(): void {
    if (!this.view) return;
    const t = this.connection.target;
    this.view.description = t.kind === 'team' ? (this.stateNow === 'unreachable' ? `${t.where} (unreachable)` : t.where) : undefined;
  }

  override dispose(): void {
    clearTimeout(this.debounce);
    this.clearRetry();
    super.dispose();
  }
}
