import * as vscode from 'vscode';
import { Disposable } from '../disposable';
import type { EngineHost } from '../engineHost';
import type { TeamStoreConnection } from './teamStoreConnection';
import { outageCause } from './teamStoreUrl';

/**
 * Says clearly, once per outage, when this window cannot open its workspace's log on
 * the team store (the server is down, unreachable, refuses the password): an error
 * notification with Retry and Show Log. The store link keeps trying by itself; Retry
 * reopens at once. Nothing acknowledged is lost — every event the window was told
 * about is in PostgreSQL already — and the notice says so.
 */
export class TeamStoreHealth extends Disposable {
  /** The outage already told about (its reason), so a link retrying every second does not repeat it. */
  private told: string | undefined;

  constructor(
    private readonly host: EngineHost,
    private readonly connection: TeamStoreConnection,
    private readonly log: vscode.LogOutputChannel,
  ) {
    super();
    this.register(
      host.onDidChangeMode((m) => {
        if (m.kind === 'owner' || m.kind === 'relay') {
          if (this.told) this.log.info('[team] the team store is reachable again');
          this.told = undefined;
        } else if (m.kind === 'waiting' && this.connection.target.kind === 'team' && /team store/i.test(m.reason)) {
          this.tell(m.reason);
        }
      }),
    );
  }

  /** The last outage reason shown (for tests), or undefined while the store is reachable. */
  get outage(): string | undefined {
    return this.told;
  }

  private tell(reason: string): void {
    if (this.told) return;
    this.told = reason;
    const where = this.connection.target.kind === 'team' ? this.connection.target.where : 'the team store';
    void vscode.window
      .showErrorMessage(
        `Waypoint cannot reach the team store at ${where} (${outageCause(reason)}), so this window records nothing until it can. Nothing already recorded is lost; Waypoint keeps trying.`,
        'Retry',
        'Show Log',
        'Disconnect…',
      )
      .then((a) => {
        if (a === 'Retry') void this.host.reopen('retrying the team store');
        else if (a === 'Show Log') this.log.show(true);
        else if (a === 'Disconnect…') void vscode.commands.executeCommand('waypoint.disconnectTeamStore');
      });
  }
}
