import * as vscode from 'vscode';
import { Disposable } from '../disposable';
import { checkTeamStore } from './teamStoreCheck';
import { parseTeamStoreUrl, secretKey, withPassword, type ParsedTeamStoreUrl } from './teamStoreUrl';

export const TEAM_STORE_SETTING = 'teamStore.url';

/** What the window is set to: no team store, a usable one, or a setting that is refused (and why). */
export type TeamStoreTarget =
  | { kind: 'none' }
  | { kind: 'team'; url: string; identity: string; where: string }
  | { kind: 'invalid'; message: string };

/** The team store with its password, in memory only: what the engine and the view connect with. */
export interface TeamStoreCredentials {
  /** The connection string (password included when one is kept): never log it, never write it anywhere. */
  connectionUrl: string;
  /** The setting's URL, without a password: safe to show. */
  url: string;
  where: string;
  identity: string;
}

/**
 * The window's link to a team store: the `waypoint.teamStore.url` setting (no
 * password: a URL holding one is refused) and the password in `context.secrets`,
 * keyed by the server and user so it is never sent to another server. Connect tests
 * the connection before saving anything; Disconnect removes both. Fires
 * `onDidChange` when the target or its password changes, so the engine reopens on
 * the right store and the Team Store view follows.
 */
export class TeamStoreConnection extends Disposable {
  private readonly _onDidChange = this.register(new vscode.EventEmitter<TeamStoreTarget>());
  readonly onDidChange = this._onDidChange.event;
  /** The last refused setting told about, so a hand-edited bad URL is reported once, not at every read. */
  private toldInvalid: string | undefined;

  constructor(
    private readonly secrets: vscode.SecretStorage,
    private readonly log: vscode.LogOutputChannel,
  ) {
    super();
    this.register(
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration(`waypoint.${TEAM_STORE_SETTING}`)) this.changed();
      }),
    );
    // Another window (same secret storage) connected or disconnected with a new password.
    this.register(secrets.onDidChange((e) => e.key.startsWith('waypoint.teamStore.password:') && this.changed()));
  }

  /** What the setting says, validated (never throws). */
  get target(): TeamStoreTarget {
    const raw = vscode.workspace.getConfiguration('waypoint').get<string>(TEAM_STORE_SETTING, '');
    if (typeof raw !== 'string' || !raw.trim()) return { kind: 'none' };
    const p = parseTeamStoreUrl(raw);
    if (!p.ok) return { kind: 'invalid', message: `The setting waypoint.teamStore.url is not used: ${p.message}` };
    return { kind: 'team', url: p.url, identity: p.identity, where: p.where };
  }

  /**
   * The store to connect to, with its password put back in, or undefined for the
   * embedded store. A refused setting gives undefined too (the workspace keeps its
   * embedded store) and says why once, with a way to fix it.
   */
  async credentials(): Promise<TeamStoreCredentials | undefined> {
    const t = this.target;
    if (t.kind === 'invalid') {
      this.tellInvalid(t.message);
      return undefined;
    }
    this.toldInvalid = undefined;
    if (t.kind === 'none') return undefined;
    const password = await this.secrets.get(secretKey(t.identity));
    return { connectionUrl: withPassword(t.url, password), url: t.url, where: t.where, identity: t.identity };
  }

  private tellInvalid(message: string): void {
    if (this.toldInvalid === message) return;
    this.toldInvalid = message;
    this.log.warn(`[team] ${message}; this workspace uses its embedded store`);
    void vscode.window.showErrorMessage(`Waypoint: ${message} This workspace keeps using its own embedded store until it is fixed.`, 'Connect to Team Store…', 'Open Settings').then((a) => {
      if (a === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', `waypoint.${TEAM_STORE_SETTING}`);
      else if (a) void vscode.commands.executeCommand('waypoint.connectTeamStore');
    });
  }

  /** `Waypoint: Connect to Team Store`: asks for the URL and the password, tests them with progress, and only then saves. */
  async connectInteractively(): Promise<boolean> {
    const t = this.target;
    let value = t.kind === 'team' ? t.url : '';
    for (;;) {
      const url = await vscode.window.showInputBox({
        title: 'Waypoint: Connect to Team Store (1/2)',
        prompt: 'The PostgreSQL URL, without the password (you are asked for it next). TLS parameters such as sslmode and sslrootcert go in the URL.',
        placeHolder: 'postgresql://alice@db.example:5432/waypoint?sslmode=verify-full',
        value,
        ignoreFocusOut: true,
        validateInput: (v) => {
          const p = parseTeamStoreUrl(v);
          return p.ok ? undefined : { message: p.message, severity: vscode.InputBoxValidationSeverity.Error };
        },
      });
      if (url === undefined) return false;
      const parsed = parseTeamStoreUrl(url);
      if (!parsed.ok) return false; // the input box does not accept it; unreachable
      const password = await vscode.window.showInputBox({
        title: 'Waypoint: Connect to Team Store (2/2)',
        prompt: `Password for ${parsed.identity}. Kept in VS Code’s secret storage, never in settings or the workspace. Leave empty to use ~/.pgpass or no password.`,
        password: true,
        ignoreFocusOut: true,
      });
      if (password === undefined) return false;
      const r = await this.connect(parsed, password);
      if (r.ok) {
        void vscode.window.showInformationMessage(
          `Waypoint: connected to the team store at ${parsed.where}. This workspace's tasks are recorded there from now on; tasks recorded before stay in its embedded store.`,
        );
        return true;
      }
      const again = await vscode.window.showErrorMessage(`Waypoint: ${r.message} Nothing was saved.`, 'Try Again', 'Show Log');
      if (again === 'Show Log') this.log.show(true);
      if (again !== 'Try Again') return false;
      value = parsed.url;
    }
  }

  /**
   * Tests the URL and password against the server (it must answer, accept them, and
   * hold or let Waypoint create its schema), then saves the password in secret storage
   * and the URL in the setting. A failure saves nothing.
   */
  async connect(url: string | ParsedTeamStoreUrl, password: string): Promise<{ ok: true } | { ok: false; message: string }> {
    const parsed = typeof url === 'string' ? parseTeamStoreUrl(url) : url;
    if (!parsed.ok) return { ok: false, message: parsed.message };
    const connectionUrl = withPassword(parsed.url, password);
    const failure = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Waypoint: testing the connection to ${parsed.where}…` },
      () => checkTeamStore(connectionUrl, parsed.where),
    );
    if (failure) {
      this.log.warn(`[team] connecting to ${parsed.url} failed (${failure.kind}): ${failure.message}`);
      return { ok: false, message: failure.message };
    }
    const key = secretKey(parsed.identity);
    if (password) await this.secrets.store(key, password);
    else await this.secrets.delete(key);
    const before = this.target;
    await vscode.workspace.getConfiguration('waypoint').update(TEAM_STORE_SETTING, parsed.url, this.settingTarget());
    this.log.info(`[team] connected to ${parsed.url}${password ? ' (password in secret storage)' : ''}`);
    // Same URL as before (a new password): the setting did not change, so say so here.
    if (before.kind === 'team' && before.url === parsed.url) this.changed();
    return { ok: true };
  }

  /** `Waypoint: Disconnect from Team Store`: forgets the URL and its password; the workspace goes back to its embedded store. */
  async disconnect(confirm = true): Promise<boolean> {
    const t = this.target;
    if (t.kind === 'none') {
      void vscode.window.showInformationMessage('Waypoint: this window is not connected to a team store.');
      return false;
    }
    if (confirm) {
      const ok = await vscode.window.showWarningMessage(
        t.kind === 'team' ? `Disconnect from the team store at ${t.where}?` : 'Clear the team store setting?',
        {
          modal: true,
          detail: "This window goes back to the workspace's embedded store. Everything recorded in the team store stays there; the saved password is removed from secret storage.",
        },
        'Disconnect',
      );
      if (ok !== 'Disconnect') return false;
    }
    if (t.kind === 'team') await this.secrets.delete(secretKey(t.identity));
    const c = vscode.workspace.getConfiguration('waypoint');
    const i = c.inspect<string>(TEAM_STORE_SETTING);
    // Cleared wherever it is set, or the setting from another level would take over.
    if (i?.workspaceFolderValue !== undefined && vscode.workspace.workspaceFolders?.[0]) {
      await vscode.workspace.getConfiguration('waypoint', vscode.workspace.workspaceFolders[0].uri).update(TEAM_STORE_SETTING, undefined, vscode.ConfigurationTarget.WorkspaceFolder);
    }
    if (i?.workspaceValue !== undefined) await c.update(TEAM_STORE_SETTING, undefined, vscode.ConfigurationTarget.Workspace);
    if (i?.globalValue !== undefined) await c.update(TEAM_STORE_SETTING, undefined, vscode.ConfigurationTarget.Global);
    this.log.info(`[team] disconnected${t.kind === 'team' ? ` from ${t.url}` : ''}`);
    return true;
  }

  /** Where Connect saves the URL: where it is already set (a workspace may name its team's store), else the user's settings. */
  private settingTarget(): vscode.ConfigurationTarget {
    const i = vscode.workspace.getConfiguration('waypoint').inspect<string>(TEAM_STORE_SETTING);
    if (i?.workspaceValue !== undefined) return vscode.ConfigurationTarget.Workspace;
    return vscode.ConfigurationTarget.Global;
  }

  private changed(): void {
    this._onDidChange.fire(this.target);
  }
}
