import * as vscode from 'vscode';
import { Disposable } from './disposable';
import type { EngineHost } from './engineHost';
import { settings } from './settings';

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
    this.register(host.onDidChange(() => this.check()));
    const timer = setInterval(() => this.check(), 60_000);
    this.register({ dispose: () => clearInterval(timer) });
  }

  check(now = Date.now()): void {
    const engine = this.host.current;
    const delayMin = settings().attentionDelayMinutes;
    if (!engine || delayMin <= 0) return;
    for (const t of engine.tasks({ states: ['interrupted'] })) {
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
