import * as vscode from 'vscode';
import { plural } from '../core/model/plural';
import { errorMessage } from '../core/model/errors';
import { Disposable } from './disposable';
import type { EngineHost } from './engineHost';
import { settings } from './settings';

/** A prune walks every history day's checkpoints: at most this often after a record, and once an hour regardless. */
const PRUNE_EVERY_MS = 10 * 60_000;
const PRUNE_TIMER_MS = 60 * 60_000;
/** The first prune waits for the window to settle (no slow work before the first paint). */
const FIRST_PRUNE_MS = 60_000;

/**
 * Keeps Workspace history within its budget by itself: whole days past
 * `waypoint.history.maxAgeDays`, then the oldest days until the history fits
 * `waypoint.history.maxMB` (the engine's pruneHistory; today is never dropped). Runs
 * in the background while this window owns the store, after history is recorded
 * (throttled) and on an hourly timer; a relaying window leaves it to the owner.
 */
export class HistoryRetention extends Disposable {
  private lastRun = 0;
  private running: Promise<void> | undefined;

  constructor(
    private readonly host: EngineHost,
    private readonly log: vscode.LogOutputChannel,
  ) {
    super();
    const first = setTimeout(() => void this.run(), FIRST_PRUNE_MS);
    const every = setInterval(() => void this.run(), PRUNE_TIMER_MS);
    first.unref?.();
    every.unref?.();
    this.register({ dispose: () => (clearTimeout(first), clearInterval(every)) });
  }

  /** History was just recorded: prune if the last run was long enough ago. */
  recorded(): void {
    if (Date.now() - this.lastRun >= PRUNE_EVERY_MS) void this.run();
  }

  /** Prunes now (tests, and the timers); one run at a time. */
  run(): Promise<void> {
    this.running ??= this.prune().finally(() => (this.running = undefined));
    return this.running;
  }

  private async prune(): Promise<void> {
    const folder = this.host.workspaceFolder;
    // Only the window that owns the store keeps its history's retention (a relaying one would ask the owner again).
    if (this.host.mode.kind !== 'owner' || !folder) return;
    this.lastRun = Date.now();
    const s = settings(folder.uri).history;
    try {
      const r = await (await this.host.api()).pruneHistory({ maxAgeDays: s.maxAgeDays, maxBytes: Math.round(s.maxMB * 1024 * 1024) });
      if (r.dropped.length) this.log.info(`[history] dropped ${plural(r.dropped.length, 'day')} (${r.dropped.map((d) => `${d.taskId}: ${d.reason}`).join('; ')}); ${r.bytesFreed} bytes freed`);
    } catch (e) {
      this.log.warn(`[history] retention failed: ${errorMessage(e)}`);
    }
  }
}
