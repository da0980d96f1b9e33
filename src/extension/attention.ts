import * as vscode from 'vscode';
import { Disposable } from './disposable';
import type { EngineHost } from './engineHost';
import { settings } from './settings';
import { tasksOnly } from './storeReads';

/**
 * Seed 003's alerts: a task interrupted for longer than the attention delay raises
 * one notification (Resume / Show / Dismiss). Each interruption is announced once
 * per window; the check runs on engine changes and on a slow timer, since time
 * passing is the trigger.
 */
export class AttentionAlerts extends Disposable {
  private readonly announced = new Set<string>();

  constructor(private readonly host: EngineHost) {
    super();
    this.register(host.onDidChange(() => void this.check()));
    const timer = setInterval(() => void this.check(), 60_000);
    this.register({ dispose: () => clearInterval(timer) });
  }

  async check(now = Date.now()): Promise<void> {
    const delayMin = settings().attentionDelayMinutes;
    const mode = this.host.mode.kind;
    if (delayMin <= 0 || (mode !== 'owner' && mode !== 'relay')) return;
    const interrupted = await tasksOnly(this.host, { states: ['interrupted'] }).catch(() => []);
    for (const t of interrupted) {
      const since = t.interruption?.at ?? t.updatedAt;
      const key = `${t.id}:${t.attempt}`;
      if (now - since < delayMin * 60_000 || this.announced.has(key)) continue;
      this.announced.add(key);
      void vscode.window
        .showWarningMessage(`Waypoint: “${t.title}” has been interrupted for ${Math.round((now - since) / 60_000)} min (${t.interruption?.reason ?? 'no reason recorded'}).`, 'Resume', 'Show', 'Dismiss')
        .then((choice) => {
          if (choice === 'Resume') void vscode.commands.executeCommand('waypoint.resumeTask', t.id);
          else if (choice === 'Show') void vscode.commands.executeCommand('waypoint.revealTask', t.id);
        });
    }
  }
}
