import * as vscode from 'vscode';
import type { Engine } from '../core/engine/engine';
import type { AgentDoors } from './agentDoors';
import type { AttentionAlerts } from './attention';
import type { AutoCheckpoints } from './autoCheckpoints';
import type { EngineHost } from './engineHost';
import type { ShownContent } from './review/panel';
import type { ResumeFlow } from './resume/resumeFlow';
import { onDidShowChoice } from './rollbackPreview';
import type { FileDecisionMsg } from './review/protocol';
import type { ApplyReviewResult } from '../core/review/applyReview';
import type { ReviewPanels } from './review/reviewPanels';
import type { TaskStatusBar } from './statusBar';
import type { TasksTreeProvider, TreeNode } from './tasksTree';
import type { TimelineShown } from './timeline/panel';
import type { TimelineModel } from './timeline/protocol';
import type { TimelinePanels } from './timeline/timelinePanels';
import type { WorkspaceOperations } from './workspaceOperations';
import type { TeamStoreConnection } from './teamStore/teamStoreConnection';
import type { TeamNode, TeamTreeProvider } from './teamStore/teamTree';
import type { TeamStoreHealth } from './teamStore/teamStoreHealth';

/**
 * What the integration tests look into: the rendered status bar text, the tree's rows,
 * a panel's first frame, the alert check. None of it is an API another extension
 * should build on (it names internals and changes with the UI), so `activate()` adds
 * it only in test mode — see `probesEnabled`.
 */
export interface WaypointTestProbes {
  /** Milliseconds `activate()` took (it does no slow work: the store opens lazily). */
  readonly activationMs: number;
  /** The process's CPU time over the same stretch (user + system, every thread), in milliseconds. */
  readonly activationCpuMs: number;
  /** The in-process engine for this window's workspace, opened on first call (rejects while this window relays). */
  engine(): Promise<Engine>;
  /** The relay status bar item's text ('' while this window owns the store). */
  storeStatusText(): string;
  /** The Tasks view's description (says when the window relays). */
  treeDescription(): string;
  /** The status bar item's current text ('' when hidden). */
  statusText(): string;
  /** Takes the pending auto checkpoint now instead of after the quiet period. */
  flushAutoCheckpoint(): Promise<void>;
  /** Resolves once every terminal command begun so far has its start and end recorded. */
  commandsSettled(): Promise<void>;
  /** The Tasks view's rows under a node id (root when omitted), as VS Code renders them. */
  treeRows(parentId?: string): Promise<{ id: string; label: string; description: string; contextValue: string }[]>;
  /** The MCP server definitions this window offers VS Code (empty until the store is open). */
  mcpServerDefinitions(): vscode.McpServerDefinition[];
  /** Opens a task's review panel and resolves once the page reports it has drawn the goal and the file list. */
  openReview(taskId: string): Promise<ShownContent>;
  /** Resolves when the next rollback preview's file list is on screen (its diff open first); `at` is wall-clock time. */
  nextRollbackPreview(): Promise<{ files: number; at: number }>;
  /** Applies decisions from a task's open review panel, as its Commit button does (through the owner when this window relays). */
  applyReview(taskId: string, message: string, decisions: FileDecisionMsg[], finish?: boolean): Promise<ApplyReviewResult | undefined>;
  /** Opens a task's timeline and resolves once the page reports it has drawn it. */
  openTimeline(taskId: string): Promise<TimelineShown>;
  /** An open timeline's last report from its page, and the model the host last sent it; undefined when none is open. */
  timelineState(taskId: string): { shown: TimelineShown | undefined; model: TimelineModel | undefined } | undefined;
  /** Fires when the Tasks view refreshes (after engine changes). */
  onDidRefreshTree: vscode.Event<void>;
  /** Runs the alert check now (optionally as if at `now`); resolves with the keys of the alerts it raised. */
  checkAlerts(now?: number): Promise<string[]>;
  /** The keys of every alert already shown in this workspace. */
  shownAlerts(): string[];
  /** Whether a workspace-changing operation is queued or running (what `waypoint.busy` says). */
  busy(): boolean;
  /** Every command id the one registry registered. */
  registeredCommands(): readonly string[];
  /** Connect to Team Store after its two input boxes: tests, then saves the URL and the password (or refuses with the message a person would see). */
  connectTeamStore(url: string, password: string): Promise<{ ok: true } | { ok: false; message: string }>;
  /** Disconnect from Team Store, without its confirmation. */
  disconnectTeamStore(): Promise<boolean>;
  /** Which store this window's engine writes to: the team store's URL (no password), or undefined. */
  teamStoreInUse(): { url: string; where: string } | undefined;
  /** The Team Store view's rows under a node id (root when omitted), its state, description and message. */
  teamTreeRows(parentId?: string): Promise<{ id: string; label: string; description: string; contextValue: string; icon: string }[]>;
  teamView(): { state: string; description: string; message: string };
  /** Fires when the Team Store view refreshes (a NOTIFY from the store, a reconnect). */
  onDidRefreshTeamTree: vscode.Event<void>;
  /** The team-store outage the window last told the person about (Retry / Show Log), or undefined while it is reachable. */
  teamStoreOutage(): string | undefined;
  /** This extension's log folder (the output channel's file is under its parent): a test greps it for secrets. */
  logDir(): string;
  /** The deliveries Resume Task last offered ("Open in Chat", "Start Claude Code in a Terminal", …). */
  resumeOffered(): readonly string[];
}

/** Set by a harness that runs the packaged VSIX (not the development path), where VS Code's mode is not Test. */
export const PROBES_ENV = 'WAYPOINT_TEST_PROBES';

/**
 * Probes exist when VS Code runs the extension under a test runner
 * (`--extensionTestsPath`, which the integration harness passes to code-server and to
 * Electron), or when a harness that installs the VSIX says so explicitly.
 */
export function probesEnabled(context: Pick<vscode.ExtensionContext, 'extensionMode'>, env: NodeJS.ProcessEnv = process.env): boolean {
  return context.extensionMode === vscode.ExtensionMode.Test || env[PROBES_ENV] === '1';
}

export interface ProbeSources {
  activationMs: number;
  activationCpuMs: number;
  host: EngineHost;
  tree: TasksTreeProvider;
  view: vscode.TreeView<TreeNode>;
  statusBar: TaskStatusBar;
  auto: AutoCheckpoints;
  review: ReviewPanels;
  timeline: TimelinePanels;
  doors: AgentDoors;
  alerts: AttentionAlerts;
  operations: WorkspaceOperations;
  commandIds: readonly string[];
  resume: ResumeFlow;
  teamStore: TeamStoreConnection;
  teamTree: TeamTreeProvider;
  teamView: vscode.TreeView<TeamNode>;
  logDir: string;
  teamHealth: TeamStoreHealth;
}

export function testProbes(s: ProbeSources): WaypointTestProbes {
  const { host, tree, view, statusBar, auto, review, timeline, doors, alerts } = s;
  return {
    activationMs: s.activationMs,
    activationCpuMs: s.activationCpuMs,
    engine: () => host.get(),
    storeStatusText: () => statusBar.storeText,
    treeDescription: () => view.description ?? '',
    statusText: () => statusBar.text,
    flushAutoCheckpoint: () => auto.flush(),
    commandsSettled: () => auto.commandsSettled(),
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
    nextRollbackPreview: () =>
      new Promise((resolve) => {
        const d = onDidShowChoice((shown) => {
          d.dispose();
          resolve(shown);
        });
      }),
    applyReview: async (taskId, message, decisions, finish) => {
      const panel = review.panel(taskId);
      if (!panel) throw new Error(`No review panel open for ${taskId}`);
      return panel.apply(message, decisions, finish);
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
    treeRows: async (parentId) => {
      const find = async (id: string, under?: TreeNode): Promise<TreeNode | undefined> => {
        for (const n of await tree.getChildren(under)) {
          if (n.id === id) return n;
          // Only down the branch that can hold the id: a task's steps and commands, a step's commands, the history's days.
          const taskOfId = /^(?:step|command):([^:]+):/.exec(id)?.[1];
          const descend =
            (n.kind === 'task' && taskOfId === n.task.id) || (n.kind === 'step' && id.startsWith(`command:${n.step.taskId}:`)) || (n.kind === 'history' && id.startsWith('history:'));
          if (descend) {
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
    busy: () => s.operations.busy,
    registeredCommands: () => s.commandIds,
    resumeOffered: () => s.resume.lastOffered,
    connectTeamStore: (url, password) => s.teamStore.connect(url, password),
    disconnectTeamStore: () => s.teamStore.disconnect(false),
    teamStoreInUse: () => host.team,
    teamTreeRows: async (parentId) => {
      const find = async (id: string, under?: TeamNode): Promise<TeamNode | undefined> => {
        for (const n of await s.teamTree.getChildren(under)) {
          if (n.id === id) return n;
          if (n.kind !== 'teamTask') {
            const hit = await find(id, n);
            if (hit) return hit;
          }
        }
        return undefined;
      };
      const parent = parentId ? await find(parentId) : undefined;
      if (parentId && !parent) return [];
      return (await s.teamTree.getChildren(parent)).map((n) => {
        const item = s.teamTree.getTreeItem(n);
        const icon = item.iconPath instanceof vscode.ThemeIcon ? item.iconPath.id : '';
        return { id: n.id, label: String(typeof item.label === 'object' ? item.label.label : item.label), description: String(item.description ?? ''), contextValue: item.contextValue ?? '', icon };
      });
    },
    teamView: () => ({ state: s.teamTree.state, description: s.teamView.description ?? '', message: s.teamView.message ?? '' }),
    onDidRefreshTeamTree: (listener, thisArg, disposables) => s.teamTree.onDidChangeTreeData(() => listener.call(thisArg, undefined), undefined, disposables),
    logDir: () => s.logDir,
    teamStoreOutage: () => s.teamHealth.outage,
  };
}
