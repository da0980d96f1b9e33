import * as vscode from 'vscode';
import { randomUUID } from 'node:crypto';
import type { EngineApi } from '../core/engine/api';
import type { Engine } from '../core/engine/engine';
import { AgentDoors } from './agentDoors';
import { AttentionAlerts } from './attention';
import { AutoCheckpoints } from './autoCheckpoints';
import { CheckpointFileSystem } from './checkpointFs';
import { Commands } from './commands';
import { EngineHost } from './engineHost';
import { EventsDocumentProvider } from './eventsDocument';
import { ReviewPanels } from './review/reviewPanels';
import type { ShownContent } from './review/panel';
import { TaskStatusBar } from './statusBar';
import type { TimelineShown } from './timeline/panel';
import type { TimelineModel } from './timeline/protocol';
import { TimelinePanels } from './timeline/timelinePanels';
import { TasksTreeProvider, type TreeNode } from './tasksTree';

/** What other extensions (and our integration tests) get from `activate()`. */
export interface WaypointApi {
  /** Milliseconds `activate()` took (it does no slow work: the store opens lazily). */
  readonly activationMs: number;
  /** The engine for this window's workspace, opened on first call (rejects while this window relays to another owner). */
  engine(): Promise<Engine>;
  /** The engine API wherever the store is: in-process while this window owns it, the owner's while it relays. */
  api(): Promise<EngineApi>;
  /** Whether this window owns the store or relays to another process (with its pid and endpoint). */
  storeMode(): { kind: string; ownerPid?: number; ownerId?: string; url?: string };
  /** Fires when this window starts owning or relaying. */
  onDidChangeStoreMode: vscode.Event<{ kind: string }>;
  /** The relay status bar item's text ('' while this window owns the store). */
  storeStatusText(): string;
  /** The Tasks view's description (says when the window relays). */
  treeDescription(): string;
  /** The status bar item's current text ('' when hidden). */
  statusText(): string;
  /** Takes the pending auto checkpoint now instead of after the quiet period. */
  flushAutoCheckpoint(): Promise<void>;
  /** The Tasks view's rows under a node id (root when omitted), as VS Code renders them. */
  treeRows(parentId?: string): Promise<{ id: string; label: string; description: string; contextValue: string }[]>;
  /** The MCP server definitions this window offers VS Code (empty until the store is open). */
  mcpServerDefinitions(): vscode.McpServerDefinition[];
  /** The MCP endpoint this window offers: its own while it owns the store, the owner's while it relays. */
  mcpEndpoint(): Promise<{ url: string; token: string; relayed: boolean } | undefined>;
  /** Opens a task's review panel and resolves once the page reports it has drawn the goal and the file list: their count, and the wall-clock time of that frame. */
  openReview(taskId: string): Promise<ShownContent>;
  /** Opens a task's timeline and resolves once the page reports it has drawn it: its steps and attempts, and the wall-clock time of that frame. */
  openTimeline(taskId: string): Promise<TimelineShown>;
  /** An open timeline's last report from its page (what it drew), and the model the host last sent it; undefined when none is open. */
  timelineState(taskId: string): { shown: TimelineShown | undefined; model: TimelineModel | undefined } | undefined;
  /** Fires when the Tasks view refreshes (after engine changes). */
  onDidRefreshTree: vscode.Event<void>;
  /** Runs the alert check now (optionally as if at `now`); resolves with the keys of the alerts it raised. */
  checkAlerts(now?: number): Promise<string[]>;
  /** The keys of every alert already shown in this workspace. */
  shownAlerts(): string[];
}

/**
 * Composition root: builds the services in dependency order and hands each to the
 * context's subscriptions, so they are disposed in reverse. No business logic here,
 * and no slow work before the first paint.
 */
export function activate(context: vscode.ExtensionContext): WaypointApi {
  const t0 = performance.now();
  const log = vscode.window.createOutputChannel('Waypoint', { log: true });
  context.subscriptions.push(log);
  const host = new EngineHost(log, `vscode:${vscode.env.sessionId ?? randomUUID()}`);
  context.subscriptions.push(host);
  activeHost = host;
  const tree = new TasksTreeProvider(host);
  context.subscriptions.push(tree);
  const view = vscode.window.createTreeView<TreeNode>('waypoint.tasks', { treeDataProvider: tree, showCollapseAll: true });
  context.subscriptions.push(view);
  tree.bindView(view);
  const statusBar = new TaskStatusBar(host);
  context.subscriptions.push(statusBar);
  context.subscriptions.push(new EventsDocumentProvider(host));
  context.subscriptions.push(new CheckpointFileSystem(host));
  const auto = new AutoCheckpoints(host, log);
  context.subscriptions.push(auto);
  const doors = new AgentDoors(host, context.extensionPath, log);
  context.subscriptions.push(doors);
  context.subscriptions.push(vscode.commands.registerCommand('waypoint.connectAgent', (agent?: unknown) => doors.connect(agent === 'claude-code' || agent === 'cursor' || agent === 'codex' ? agent : undefined).catch((e) => void vscode.window.showErrorMessage(`Waypoint: ${(e as Error).message}`))));
  const review = new ReviewPanels({ host, log, extensionUri: context.extensionUri });
  context.subscriptions.push(review);
  const timeline = new TimelinePanels({ host, log, extensionUri: context.extensionUri });
  context.subscriptions.push(timeline);
  context.subscriptions.push(new Commands(host, tree, view, log, review, timeline));
  const alerts = new AttentionAlerts(host, context.workspaceState);
  context.subscriptions.push(alerts);
  // Open the store (or find its owner) in the background once the window is up, so
  // the view and the status bar show the truth without waiting for a click.
  const warm = setTimeout(() => void host.start().catch(() => undefined), 0);
  context.subscriptions.push({ dispose: () => clearTimeout(warm) });
  const activationMs = performance.now() - t0;
  log.info(`[extension] activated in ${activationMs.toFixed(1)} ms`);
  return {
    activationMs,
    engine: () => host.get(),
    api: () => host.api(),
    storeMode: () => {
      const m = host.mode;
      return m.kind === 'relay' ? { kind: m.kind, ownerPid: m.owner.pid, ownerId: m.owner.ownerId, url: m.url } : { kind: m.kind };
    },
    onDidChangeStoreMode: (listener, thisArg, disposables) => host.onDidChangeMode((m) => listener.call(thisArg, { kind: m.kind }), undefined, disposables),
    storeStatusText: () => statusBar.storeText,
    treeDescription: () => view.description ?? '',
    statusText: () => statusBar.text,
    flushAutoCheckpoint: () => auto.flush(),
    openReview: async (taskId) => {
      const panel = await review.open(taskId);
      if (!panel) throw new Error(`No review panel for ${taskId}`);
      return new Promise<ShownContent>((resolve) => {
        const d = panel.onDidShowContent((shown) => {
          d.dispose();
          resolve(shown);
        });
      });
    },
    openTimeline: async (taskId) => {
      const panel = await timeline.open(taskId);
      if (!panel) throw new Error(`No timeline for ${taskId}`);
      return new Promise<TimelineShown>((resolve) => {
        const d = panel.onDidShow((shown) => {
          d.dispose();
          resolve(shown);
        });
      });
    },
    timelineState: (taskId) => {
      const panel = timeline.panel(taskId);
      return panel && { shown: panel.lastShown, model: panel.current };
    },
    mcpServerDefinitions: () => doors.definitions(),
    mcpEndpoint: async () => {
      const e = await doors.ensureServing();
      return e && { url: e.url, token: e.token, relayed: e.relayed };
    },
    treeRows: async (parentId) => {
      const find = async (id: string, under?: TreeNode): Promise<TreeNode | undefined> => {
        for (const n of await tree.getChildren(under)) {
          if (n.id === id) return n;
          if (id.startsWith(`step:`) && n.kind === 'task') {
            const hit = await find(id, n);
            if (hit) return hit;
          }
        }
        return undefined;
      };
      const parent = parentId ? await find(parentId) : undefined;
      if (parentId && !parent) return [];
      return (await tree.getChildren(parent)).map((n) => {
        const item = tree.getTreeItem(n);
        return { id: n.id, label: String(typeof item.label === 'object' ? item.label.label : item.label), description: String(item.description ?? ''), contextValue: item.contextValue ?? '' };
      });
    },
    onDidRefreshTree: (listener, thisArg, disposables) => tree.onDidChangeTreeData(() => listener.call(thisArg, undefined), undefined, disposables),
    checkAlerts: async (now) => (await alerts.check(now)).map((a) => a.key),
    shownAlerts: () => alerts.shown(),
  };
}

let activeHost: EngineHost | undefined;

/** Waits for the store to export and release its lock, so the next owner finds it clean. */
export async function deactivate(): Promise<void> {
  await activeHost?.close();
  activeHost = undefined;
}
