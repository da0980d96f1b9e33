import * as vscode from 'vscode';
import { randomUUID } from 'node:crypto';
import type { EngineApi } from '../core/engine/api';
import { AgentDoors } from './agentDoors';
import { AttentionAlerts } from './attention';
import { AutoCheckpoints } from './autoCheckpoints';
import { CheckpointFileSystem } from './checkpointFs';
import { Commands } from './commands';
import { EngineHost } from './engineHost';
import { EventsDocumentProvider } from './eventsDocument';
import { ReviewPanels } from './review/reviewPanels';
import { TaskStatusBar } from './statusBar';
import { TimelinePanels } from './timeline/timelinePanels';
import { TasksTreeProvider, type TreeNode } from './tasksTree';
import { probesEnabled, testProbes } from './testProbes';
import { WorkspaceOperations } from './workspaceOperations';
import { TeamStoreConnection } from './teamStore/teamStoreConnection';
import { TeamStoreHealth } from './teamStore/teamStoreHealth';
import { TeamTreeProvider, type TeamNode } from './teamStore/teamTree';
import { TeamAlerts } from './teamStore/teamAlerts';

/**
 * What other extensions get from `activate()`: only what an outside extension should
 * build on — the engine API wherever the store lives, which window owns it, and the
 * MCP endpoint to hand an agent. Everything the tests look into is in
 * `WaypointTestProbes` (testProbes.ts), present only in test mode.
 */
export interface WaypointApi {
  /** The engine API wherever the store is: in-process while this window owns it, the owner's while it relays. */
  api(): Promise<EngineApi>;
  /** Whether this window owns the store or relays to another process (with its pid and endpoint). */
  storeMode(): { kind: string; ownerPid?: number; ownerId?: string; url?: string };
  /** Fires when this window starts owning or relaying. */
  onDidChangeStoreMode: vscode.Event<{ kind: string }>;
  /** The MCP endpoint this window offers: its own while it owns the store, the owner's while it relays. */
  mcpEndpoint(): Promise<{ url: string; token: string; relayed: boolean } | undefined>;
}

/**
 * Composition root: builds the services in dependency order and hands each to the
 * context's subscriptions, so they are disposed in reverse. No business logic here,
 * and no slow work before the first paint.
 */
export function activate(context: vscode.ExtensionContext): WaypointApi {
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const log = vscode.window.createOutputChannel('Waypoint', { log: true });
  context.subscriptions.push(log);
  const teamStore = new TeamStoreConnection(context.secrets, log);
  context.subscriptions.push(teamStore);
  const host = new EngineHost(log, `vscode:${vscode.env.sessionId ?? randomUUID()}`, () => teamStore.credentials());
  context.subscriptions.push(host);
  // Connect, Disconnect, a hand-edited URL, a new password: the engine reopens on the store named now.
  context.subscriptions.push(teamStore.onDidChange(() => void host.reopen('the team store setting changed')));
  const teamHealth = new TeamStoreHealth(host, teamStore, log);
  context.subscriptions.push(teamHealth);
  activeHost = host;
  const tree = new TasksTreeProvider(host);
  context.subscriptions.push(tree);
  const view = vscode.window.createTreeView<TreeNode>('waypoint.tasks', { treeDataProvider: tree, showCollapseAll: true });
  context.subscriptions.push(view);
  tree.bindView(view);
  const teamTree = new TeamTreeProvider(teamStore, host, log);
  context.subscriptions.push(teamTree);
  const teamView = vscode.window.createTreeView<TeamNode>('waypoint.team', { treeDataProvider: teamTree, showCollapseAll: true });
  context.subscriptions.push(teamView);
  teamTree.bindView(teamView);
  context.subscriptions.push(new TeamAlerts(teamStore, host, log));
  const statusBar = new TaskStatusBar(host);
  context.subscriptions.push(statusBar);
  context.subscriptions.push(new EventsDocumentProvider(host));
  context.subscriptions.push(new CheckpointFileSystem(host));
  const auto = new AutoCheckpoints(host, log);
  context.subscriptions.push(auto);
  const operations = new WorkspaceOperations();
  context.subscriptions.push(operations);
  const doors = new AgentDoors(host, context.extensionPath, log, operations);
  context.subscriptions.push(doors);
  const review = new ReviewPanels({ host, log, extensionUri: context.extensionUri, operations });
  context.subscriptions.push(review);
  const timeline = new TimelinePanels({ host, log, extensionUri: context.extensionUri });
  context.subscriptions.push(timeline);
  const commands = new Commands({ host, tree, view, log, review, timeline, operations, doors, teamStore, teamTree });
  context.subscriptions.push(commands);
  const alerts = new AttentionAlerts(host, context.workspaceState);
  context.subscriptions.push(alerts);
  // Open the store (or find its owner) in the background once the window is up, so
  // the view and the status bar show the truth without waiting for a click.
  const warm = setTimeout(() => void host.start().catch(() => undefined), 0);
  context.subscriptions.push({ dispose: () => clearTimeout(warm) });
  const activationMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const activationCpuMs = (cpu.user + cpu.system) / 1000;
  log.info(`[extension] activated in ${activationMs.toFixed(1)} ms`);
  const api: WaypointApi = {
    api: () => host.api(),
    storeMode: () => {
      const m = host.mode;
      return m.kind === 'relay' ? { kind: m.kind, ownerPid: m.owner.pid, ownerId: m.owner.ownerId, url: m.url } : { kind: m.kind };
    },
    onDidChangeStoreMode: (listener, thisArg, disposables) => host.onDidChangeMode((m) => listener.call(thisArg, { kind: m.kind }), undefined, disposables),
    mcpEndpoint: async () => {
      const e = await doors.ensureServing();
      return e && { url: e.url, token: e.token, relayed: e.relayed };
    },
  };
  if (!probesEnabled(context)) return api;
  return { ...api, ...testProbes({ activationMs, activationCpuMs, host, tree, view, statusBar, auto, review, timeline, doors, alerts, operations, commandIds: commands.ids, resume: commands.resume, teamStore, teamTree, teamView, logDir: context.logUri.fsPath, teamHealth }) };
}

let activeHost: EngineHost | undefined;

/** Waits for the store to export and release its lock, so the next owner finds it clean. */
export async function deactivate(): Promise<void> {
  await activeHost?.close();
  activeHost = undefined;
}
