import * as vscode from 'vscode';
import type { SideEffect } from '../core/model/schema';
import { decideAlerts, rememberShown, type Alert } from './alertRules';
import { Disposable } from './disposable';
import type { EngineHost } from './engineHost';
import { settings } from './settings';
import { tasksOnly } from './storeReads';

/** workspaceState key of the alert keys already shown (so a reload does not repeat them). */
const SHOWN_KEY = 'waypoint.alerts.shown';

/**
 * Alerts that reach a person: a task interrupted too long, a
 * failed task, a side effect in doubt too long, a review waiting too long, a step
 * that used its attempts. What to raise is decided by alertRules.ts; this class
 * reads the store (the in-process engine, or the owner's API while this window
 * relays, so every window of the workspace alerts), shows each alert once with
 * buttons that run the action, and remembers it in workspaceState. It checks on
 * engine changes and on a slow timer, since time passing is the trigger.
 */
export class AttentionAlerts extends Disposable {
  /** Checks run one after another: two at once would both see an alert as not yet shown. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly host: EngineHost,
    private readonly state: vscode.Memento,
  ) {
    super();
    this.register(host.onDidChange(() => void this.check()));
    this.register(host.onDidChangeMode(() => void this.check()));
    const timer = setInterval(() => void this.check(), 60_000);
    this.register({ dispose: () => clearInterval(timer) });
  }

  /** The keys of the alerts shown in this workspace (oldest first), as remembered across reloads. */
  shown(): string[] {
    return this.state.get<string[]>(SHOWN_KEY, []);
  }

  /** Raises what is due at `now`; resolves with the alerts it raised. */
  check(now?: number): Promise<Alert[]> {
    const run = this.queue.then(() => this.raise(now ?? Date.now())).catch(() => [] as Alert[]); // no store yet, or the owner did not answer: the next check tries again
    this.queue = run;
    return run;
  }

  private async raise(now: number): Promise<Alert[]> {
    const mode = this.host.mode.kind;
    if (mode !== 'owner' && mode !== 'relay') return [];
    const tasks = await tasksOnly(this.host);
    const effects: SideEffect[] = await (await this.host.api()).sideEffectsInDoubt();
    const shown = this.state.get<string[]>(SHOWN_KEY, []);
    const alerts = decideAlerts({ tasks, effects, now, thresholds: settings().alerts, shown: new Set(shown) });
    if (!alerts.length) return [];
    // Remembered before they are shown: a reload while one is on screen does not show it twice.
    await this.state.update(SHOWN_KEY, rememberShown(shown, alerts.map((a) => a.key)));
    for (const a of alerts) this.show(a);
    return alerts;
  }

  private show(a: Alert): void {
    const show = a.severity === 'error' ? vscode.window.showErrorMessage : vscode.window.showWarningMessage;
    void show(a.message, ...a.actions.map((x) => x.title)).then((choice) => {
      const action = a.actions.find((x) => x.title === choice);
      if (action) void vscode.commands.executeCommand(action.command, ...action.args);
    });
  }
}
