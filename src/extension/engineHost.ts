import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { EngineApi } from '../core/engine/api';
import { Engine, type ChangeEvent } from '../core/engine/engine';
import { Logger } from '../core/log';
import { WaypointError, errorMessage } from '../core/model/errors';
import type { LockInfo } from '../core/store/ownerLock';
import { StoreLink, type LinkMode } from '../ownership/storeLink';
import { writeStoreRoots } from '../ownership/storeRoots';
import { writeBackgroundSettings } from '../ownership/backgroundStart';
import type { SnapshotRoot } from '../core/snapshot';
import { sameRoots, windowRoots } from './windowFolders';
import { Disposable } from './disposable';
import { retryPolicySetting, settings } from './settings';
import type { TeamStoreCredentials } from './teamStore/teamStoreConnection';

/** The owner lock's id for a VS Code window, so another window can say whom it relays to. */
export const WINDOW_OWNER_PREFIX = 'vscode-window:';

/** Who owns the store, in words for the status bar and the view. */
export function describeStoreOwner(lock: LockInfo): string {
  const [kind] = lock.ownerId.split(':');
  const what = lock.ownerId.startsWith(WINDOW_OWNER_PREFIX) ? 'another VS Code window' : kind === 'waypoint-serve' ? 'waypoint serve' : kind === 'waypoint-mcp' ? 'waypoint mcp' : 'another process';
  return `${what} (pid ${lock.pid})`;
}

export type HostMode = { kind: 'closed' | 'starting' | 'owner' } | { kind: 'relay'; owner: LockInfo; url: string; token: string } | { kind: 'waiting'; reason: string };

/**
 * The window's way to the workspace's store. It owns the store when it can (the
 * engine in-process: the fast path every surface takes while owning), and when
 * another process owns it — another window, `waypoint serve`, an agent's
 * `waypoint mcp` — it relays through that owner (`api`), shows whom it relays to,
 * and takes the store over without a reload when the owner goes away (see
 * StoreLink). The store (and sql.js's WASM) opens lazily, behind one promise, so
 * activation stays cheap. Store changes in either mode are re-emitted as a VS Code
 * event for the tree, the status bar and the other surfaces.
 */
export class EngineHost extends Disposable {
  private link: StoreLink | undefined;
  /** Set by close(): a late refresh during shutdown must not open the store again. */
  private closed = false;
  private readonly _onDidChange = this.register(new vscode.EventEmitter<ChangeEvent | undefined>());
  /** Fires after events are durable; `undefined` means "everything may have changed" (open, a mode switch). */
  readonly onDidChange = this._onDidChange.event;
  private readonly _onDidChangeMode = this.register(new vscode.EventEmitter<HostMode>());
  /** Fires when the window starts owning, starts relaying (or follows a new owner), or waits. */
  readonly onDidChangeMode = this._onDidChangeMode.event;

  /** The roots the open store was opened with (every folder of the window on disk; see windowFolders.ts). */
  private rootsNow: SnapshotRoot[] = [];

  /** The team store the open engine writes to (its URL without a password), or undefined for the embedded store. */
  private teamNow: TeamStoreCredentials | undefined;
  /** Reopens run one after another: a second Connect while the first reopen still closes waits for it. */
  private reopening: Promise<void> = Promise.resolve();

  constructor(
    private readonly log: vscode.LogOutputChannel,
    readonly ownerId: string,
    /** The team store to open the workspace's log on (read at each open), or undefined for the embedded store. */
    private readonly teamStore: () => Promise<TeamStoreCredentials | undefined> = async () => undefined,
  ) {
    super();
    // A folder added or removed while the window is open: the store is opened again with
    // the new folders, so a folder added is captured from the next checkpoint on (older
    // checkpoints never saw it, and a rollback to one of them leaves it as it is).
    this.register(vscode.workspace.onDidChangeWorkspaceFolders(() => void this.followFolders()));
  }

  /** The store's home folder: the window's first folder on disk. */
  get workspaceFolder(): vscode.WorkspaceFolder | undefined {
    return vscode.workspace.workspaceFolders?.find((f) => f.uri.scheme === 'file');
  }

  /** The folders this window's store captures, as snapshot roots (their names prefix every path in a multi-root window). */
  get roots(): readonly SnapshotRoot[] {
    return this.rootsNow;
  }

  /** The engine if this window owns the store and it is open (never opens it). */
  get current(): Engine | undefined {
    return this.link?.engine;
  }

  /** The team store this window's engine writes to while it owns the store (undefined: the embedded store, or relaying). */
  get team(): { url: string; where: string } | undefined {
    return this.link?.engine && this.teamNow ? { url: this.teamNow.url, where: this.teamNow.where } : undefined;
  }

  get mode(): HostMode {
    return toHostMode(this.link?.mode ?? { kind: 'starting' });
  }

  /** The engine API wherever the store is: in-process while owning, the owner's `/rpc` while relaying. */
  async api(): Promise<EngineApi> {
    const link = this.ensureLink();
    await link.ready();
    return link.api;
  }

  /**
   * The in-process engine, for what only the owner can do (the review panel's
   * apply and commit, an agent's rollback request). While relaying it rejects with
   * a readable error naming the owner.
   */
  async get(): Promise<Engine> {
    const link = this.ensureLink();
    const m = await link.ready();
    if (m.kind === 'owner') return m.engine;
    throw new WaypointError(
      'locked',
      `This window relays to the Waypoint store's owner, ${describeStoreOwner(m.owner)}; this needs the window that owns the store. It opens here by itself if that owner goes away.`,
    );
  }

  /** Starts owning or relaying (the first call opens the store or finds its owner). */
  start(): Promise<unknown> {
    return this.api();
  }

  private ensureLink(): StoreLink {
    if (this.link) return this.link;
    if (this.isDisposed || this.closed) throw new Error('Waypoint is shutting down.');
    const folder = this.workspaceFolder;
    if (!folder || folder.uri.scheme !== 'file') {
      throw new Error('Waypoint needs a folder on disk: open a folder to record agent tasks.');
    }
    const s = settings(folder.uri);
    const sink = new Logger((level, line) => this.log[level](line));
    const workspace = folder.uri.fsPath;
    const storeDir = path.resolve(workspace, s.storageLocation);
    const { roots, skipped } = windowRoots();
    this.rootsNow = roots;
    for (const k of skipped) this.log.info(`[host] folder ${k.dir} is not a root of its own: ${k.reason}`);
    this.linkFolders(storeDir, roots);
    // What a CLI or hook call started outside this window reads to decide on a background owner
    // (now if the store exists, else once this window has opened it).
    const recordSettings = () => {
      try {
        if (fs.existsSync(storeDir)) writeBackgroundSettings(storeDir, { enabled: s.backgroundOwner.enabled, idleMinutes: s.backgroundOwner.idleMinutes });
      } catch (e) {
        this.log.warn(`[host] could not record the background owner settings in ${storeDir}: ${errorMessage(e)}`);
      }
    };
    recordSettings();
    const link = new StoreLink({
      storeDir,
      log: sink,
      // A background owner started by an agent's call before this window opened gives the store to the window.
      takeFromBackground: true,
      openEngine: async () => {
        const t0 = performance.now();
        // Read at every open (a takeover, a reopen after Connect): the password lives only in memory.
        const team = await this.teamStore();
        const engine = await Engine.open({
          ...(team ? { teamStore: team.connectionUrl } : {}),
          workspace,
          storeDir: s.storageLocation,
          log: sink,
          owner: { id: this.ownerId, pid: process.pid },
          defaultLeaseTtlMs: s.leaseTtlSeconds * 1000,
          sweepIntervalMs: 15_000,
          // Tasks started through this owner (MCP, a relaying CLI) without a policy of their own get the settings'.
          retry: retryPolicySetting(s),
          snapshots: { roots, excludes: s.excludes, maxFileBytes: Math.round(s.maxFileSizeMB * 1024 * 1024) },
          // A short wait: when another process holds the store the link relays to it instead.
          // Unique per process: code-server hands every window the same sessionId, and the lock's
          // id is how a stalled owner learns that another one took over.
          store: { lock: { waitMs: 250, ownerId: `${WINDOW_OWNER_PREFIX}${this.ownerId}:${randomUUID()}` } },
        });
        this.teamNow = team;
        recordSettings();
        this.log.info(`[host] engine open for ${roots.map((r) => r.dir).join(', ')} on ${team ? `the team store ${team.url}` : 'the embedded store'} in ${(performance.now() - t0).toFixed(0)} ms`);
        for (const w of [...engine.eventLog.warnings, ...engine.recoveryNotes]) void vscode.window.showWarningMessage(`Waypoint: ${w}`);
        return engine;
      },
    });
    this.register({ dispose: () => void link.close().catch((e) => this.log.error(`[host] close failed: ${errorMessage(e)}`)) });
    // The store calls its listeners as a commit becomes durable, before the operation that
    // made it returns. The window's surfaces (the status bar and the alerts each read every
    // task, the tree lists them again) would make every acknowledgment wait for them: an
    // auto checkpoint in a store of 1,000 tasks took 37 ms in the window against 11 ms in
    // plain Node. They hear of each change right after, in order, off the operation's path.
    const pending: (ChangeEvent | undefined)[] = [];
    link.onDidChange((e) => {
      if (pending.push(e) > 1) return;
      setImmediate(() => {
        for (const x of pending.splice(0)) this._onDidChange.fire(x);
      });
    });
    let was: LinkMode['kind'] = link.mode.kind;
    link.onDidChangeMode((m) => {
      // Owning, then neither owning nor closing: this window was stalled past its lease (a
      // debugger, a suspended laptop) and another process took the store over. Say so once.
      if (was === 'owner' && m.kind !== 'owner' && m.kind !== 'closed' && !this.closed) {
        void vscode.window.showWarningMessage(
          'Waypoint: this window was paused past its lease and another process took the store over. Nothing it acknowledged is lost; it now relays to the new owner.',
        );
      }
      was = m.kind;
      this._onDidChangeMode.fire(toHostMode(m));
    });
    this.link = link;
    link.start();
    return link;
  }

  /**
   * Writes the store's folder list and links every other folder to it, so an agent's
   * CLI or `waypoint mcp` started in any folder of the window finds this store (see
   * storeRoots.ts). A folder that cannot be linked is still captured; only a CLI
   * started inside it would not find this store, which the log says.
   */
  private linkFolders(storeDir: string, roots: readonly SnapshotRoot[]): void {
    try {
      for (const p of writeStoreRoots(storeDir, roots)) this.log.warn(`[host] could not link folder ${p.folder} to the store: ${p.problem}`);
    } catch (e) {
      this.log.warn(`[host] could not record the window's folders in ${storeDir}: ${errorMessage(e)}`);
    }
  }

  /** Reopens the store with the window's folders when they changed (see the constructor). */
  private async followFolders(): Promise<void> {
    if (this.closed || this.isDisposed || !this.link) return;
    if (sameRoots(windowRoots().roots, this.rootsNow)) return;
    await this.reopen('the window\'s folders changed');
  }

  /**
   * Closes the store and opens it again, on the store the settings name now: after
   * Connect or Disconnect, and to retry a team store that was unreachable (its log,
   * once it gave up, refuses writes until reopened). Everything acknowledged is in
   * the store already, so reopening loses nothing.
   */
  reopen(why: string): Promise<void> {
    const run = async () => {
      if (this.closed || this.isDisposed) return;
      const old = this.link;
      this.link = undefined;
      this.teamNow = undefined;
      this.log.info(`[host] ${why}: opening the store again`);
      await old?.close().catch((e) => this.log.warn(`[host] closing the store to reopen it: ${errorMessage(e)}`));
      if (this.closed || this.isDisposed || this.link) return;
      try {
        this.ensureLink();
        this._onDidChange.fire(undefined);
      } catch (e) {
        this.log.warn(`[host] ${errorMessage(e)}`);
        this._onDidChangeMode.fire({ kind: 'closed' });
      }
    };
    this.reopening = this.reopening.then(run, run);
    return this.reopening;
  }

  /** Waits for the store to export and release its lock (deactivate), so the next owner finds it clean. */
  async close(): Promise<void> {
    this.closed = true;
    const link = this.link;
    this.link = undefined;
    await link?.close();
  }
}

function toHostMode(m: LinkMode): HostMode {
  if (m.kind === 'relay') return { kind: 'relay', owner: m.owner, url: m.discovery.url, token: m.discovery.token };
  if (m.kind === 'waiting') return { kind: 'waiting', reason: m.reason };
  return { kind: m.kind };
}
