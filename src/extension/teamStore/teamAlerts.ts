import * as vscode from 'vscode';
import { alertNotice, redactIn, watchTeamAlerts, type TeamAlert } from '../../core/store/postgres';
import { machineName } from '../../core/store/workspaceIdentity';
import { Disposable } from '../disposable';
import type { EngineHost } from '../engineHost';
import type { TeamStoreConnection } from './teamStoreConnection';

/**
 * Tells the person in this window when a task anywhere in the team store was
 * interrupted because its agent stopped answering (the store-wide lease sweep's
 * NOTIFY). Thin: what to say, and whether to say it, is `alertNotice`'s
 * (src/core/store/postgres/teamAlerts.ts); this class only listens while the window is
 * connected, and shows the notice with a button to the view that lists the task.
 */
export class TeamAlerts extends Disposable {
  private link: { url: string; watch: Promise<{ dispose(): void } | undefined> } | undefined;
  private readonly shown = new Set<string>();

  constructor(
    private readonly teamStore: TeamStoreConnection,
    private readonly host: EngineHost,
    private readonly log: vscode.LogOutputChannel,
  ) {
    super();
    this.register(teamStore.onDidChange(() => void this.relink()));
    this.register({ dispose: () => this.unlink() });
    void this.relink();
  }

  private async relink(): Promise<void> {
    const creds = await this.teamStore.credentials().catch(() => undefined);
    if (creds && this.link?.url === creds.connectionUrl) return;
    this.unlink();
    if (!creds) return;
    const machine = machineName();
    const watch = watchTeamAlerts(creds.connectionUrl, (a) => this.alert(a), {
      onError: (e) => this.log.warn(`[team] alerts from ${creds.url} paused: ${redactIn(e.message, creds.connectionUrl)}`),
      sweeper: { by: `VS Code on ${machine} (pid ${process.pid})`, machine },
    }).catch((e: Error) => {
      this.log.warn(`[team] cannot listen for alerts from ${creds.url}: ${redactIn(e.message, creds.connectionUrl)}`);
      return undefined;
    });
    this.link = { url: creds.connectionUrl, watch };
  }

  private unlink(): void {
    const l = this.link;
    this.link = undefined;
    void l?.watch.then((w) => w?.dispose());
  }

  private alert(a: TeamAlert): void {
    const log = this.host.current?.eventLog;
    const notice = alertNotice(a, {
      ownWorkspaces: new Set(log?.backend === 'postgresql' ? [log.workspace.id] : []),
      shown: this.shown,
      muted: !vscode.workspace.getConfiguration('waypoint').get<boolean>('teamStore.alerts', true),
    });
    if (!notice) return;
    this.log.warn(`[team] ${notice.message}`);
    const show = notice.own ? 'Show in Tasks' : 'Show in Team Store';
    void vscode.window.showWarningMessage(notice.message, show).then((choice) => {
      if (choice === show) void vscode.commands.executeCommand(notice.own ? 'waypoint.tasks.focus' : 'waypoint.team.focus');
    });
  }
}
