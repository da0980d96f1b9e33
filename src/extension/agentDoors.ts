import * as path from 'node:path';
import * as vscode from 'vscode';
import type { Engine } from '../core/engine/engine';
import { Logger } from '../core/log';
import { errorMessage } from '../core/model/errors';
import { applyConnect, codexSnippet, planConnect, type AgentKind, type Launch } from '../mcp/connect';
import { startOwnerEndpoint, type OwnerEndpoint } from '../mcp/owner';
import type { RollbackHandler } from '../mcp/tools';
import { Disposable } from './disposable';
import type { EngineHost } from './engineHost';
import { settings } from './settings';
import { findOnPath } from './resume/agentClis';

/**
 * The extension's doors for agents. While this window owns the store it serves
 * MCP over streamable HTTP on 127.0.0.1 (with a bearer token, and `/rpc` for the
 * CLI), registers that server with VS Code so Copilot agent mode sees Waypoint's
 * tools with no configuration, and offers `Waypoint: Connect an Agent` for the
 * agents that need a config file.
 *
 * While this window relays to another owner, the definition it gives VS Code is
 * the owner's endpoint (its URL and token, from the discovery file), so Copilot
 * keeps working; when this window takes the store over it starts its own
 * endpoint and tells VS Code the definition changed.
 */
export interface DoorEndpoint {
  url: string;
  token: string;
  /** Where the token is written (ours, or the owner's discovery file). */
  discoveryFile: string;
  /** True when the endpoint is another process's (this window relays to it). */
  relayed: boolean;
}

export class AgentDoors extends Disposable {
  private endpoint: OwnerEndpoint | undefined;
  private starting: Promise<OwnerEndpoint | undefined> | undefined;
  private readonly _onDidChangeDefinitions = this.register(new vscode.EventEmitter<void>());

  constructor(
    private readonly host: EngineHost,
    private readonly extensionPath: string,
    private readonly log: vscode.LogOutputChannel,
  ) {
    super();
    // Serve as soon as this window owns the store (at activation, or on taking it over); follow the owner while relaying.
    this.register(
      host.onDidChangeMode((m) => {
        if (m.kind === 'owner') void this.ensureServing();
        else if (m.kind === 'relay') this._onDidChangeDefinitions.fire();
      }),
    );
    const lm = (vscode as unknown as { lm?: { registerMcpServerDefinitionProvider?: typeof vscode.lm.registerMcpServerDefinitionProvider } }).lm;
    if (lm?.registerMcpServerDefinitionProvider) {
      this.register(
        lm.registerMcpServerDefinitionProvider('waypoint', {
          onDidChangeMcpServerDefinitions: this._onDidChangeDefinitions.event,
          provideMcpServerDefinitions: () => this.definitions(),
          resolveMcpServerDefinition: async (def) => ((await this.ensureServing()) ? def : undefined),
        }),
      );
    } else {
      this.log.info('[mcp] this editor has no MCP server definition API; agents connect through Waypoint: Connect an Agent');
    }
    this.register({ dispose: () => void this.endpoint?.close() });
  }

  /** The HTTP endpoint agents should use: ours while this window owns the store, the owner's while it relays. */
  get current(): DoorEndpoint | undefined {
    if (this.endpoint) return { url: this.endpoint.http.url, token: this.endpoint.http.token, discoveryFile: this.endpoint.discoveryFile, relayed: false };
    const m = this.host.mode;
    if (m.kind === 'relay') return { url: m.url, token: m.token, discoveryFile: m.owner.endpoint?.discoveryFile ?? '.waypoint/mcp.json', relayed: true };
    return undefined;
  }

  definitions(): vscode.McpServerDefinition[] {
    const e = this.current;
    if (!e) return [];
    return [new vscode.McpHttpServerDefinition('Waypoint', vscode.Uri.parse(e.url), { Authorization: `Bearer ${e.token}` }, '0.1.0')];
  }

  /** Waits for the store, starts our endpoint if this window owns it, and answers the endpoint agents should use. */
  async ensureServing(): Promise<DoorEndpoint | undefined> {
    try {
      await this.host.api();
    } catch {
      return undefined;
    }
    if (this.host.current) await this.serveOwn();
    return this.current;
  }

  private serveOwn(): Promise<OwnerEndpoint | undefined> {
    this.starting ??= (async () => {
      let engine: Engine;
      try {
        engine = await this.host.get();
      } catch {
        this.starting = undefined;
        return undefined;
      }
      try {
        const sink = new Logger((level, line) => this.log[level](line));
        this.endpoint = await startOwnerEndpoint({ engine, log: sink, agentRollback: settings().agentRollback, rollback: this.rollbackHandler(engine) });
        this.log.info(`[mcp] serving ${this.endpoint.http.url} (token in ${this.endpoint.discoveryFile})`);
        this._onDidChangeDefinitions.fire();
        return this.endpoint;
      } catch (e) {
        this.log.error(`[mcp] could not start the HTTP endpoint: ${errorMessage(e)}`);
        this.starting = undefined;
        return undefined;
      }
    })();
    return this.starting;
  }

  /** Under `ask` the person confirms in a modal; under `allow` the engine rolls back directly (undoable either way). */
  private rollbackHandler(engine: Engine): RollbackHandler {
    return async (req) => {
      const c = engine.queries.checkpoint(req.checkpointId);
      if (!c || c.taskId !== req.taskId) throw new Error(`Unknown checkpoint '${req.checkpointId}' for task ${req.taskId}.`);
      if (req.policy === 'ask') {
        const preview = await engine.rollback({ taskId: req.taskId, checkpointId: req.checkpointId, preview: true });
        const answer = await vscode.window.showWarningMessage(
          `An agent asks to roll back “${engine.task(req.taskId).title}” (${preview.changes.length} file(s)).`,
          { modal: true, detail: `Reason: ${req.reason}\nAgent: ${req.owner.id}\n\nThe current state is saved as a checkpoint first, so this can be undone.` },
          'Roll Back',
        );
        if (answer !== 'Roll Back') return { rolledBack: false, message: 'The person declined the rollback.' };
      }
      const r = await engine.rollback({ taskId: req.taskId, checkpointId: req.checkpointId, reason: `agent ${req.owner.id}: ${req.reason}`.slice(0, 2000) });
      return { rolledBack: true, preRollbackCheckpointId: r.preRollbackCheckpointId ?? undefined, message: `Rolled back ${r.filesWritten + r.filesRemoved} file(s).` };
    };
  }

  /** The CLI shipped in this extension and a Node that runs it, for config files agents read. */
  launch(): Launch {
    const folder = this.host.workspaceFolder;
    if (!folder) throw new Error('Open a folder first.');
    const cli = path.join(this.extensionPath, 'dist', 'cli.js');
    // Inside Electron, execPath is the editor itself; agents need a real Node on PATH then.
    const node = process.versions.electron ? findOnPath('node') : process.execPath;
    if (!node) throw new Error('No Node.js found on PATH; install Node.js 20 or later so agents can run the Waypoint CLI.');
    return { node, cli, workspace: folder.uri.fsPath };
  }

  async connect(): Promise<void> {
    const e = await this.ensureServing();
    const items: (vscode.QuickPickItem & { kind2: AgentKind | 'copilot' | 'other' })[] = [
      {
        label: '$(copilot) GitHub Copilot (agent mode)',
        description: e ? 'connected' : 'not serving',
        detail: e
          ? `Waypoint’s tools are offered to Copilot automatically (MCP over ${e.url}${e.relayed ? ', the endpoint of the process that owns the store' : ''}).`
          : 'Waypoint could not start its MCP endpoint; see the Waypoint log.',
        kind2: 'copilot',
      },
      { label: '$(terminal) Claude Code', detail: 'Write the MCP server to .mcp.json and the hooks to .claude/settings.local.json (merged, never clobbered)', kind2: 'claude-code' },
      { label: '$(file-code) Cursor', detail: 'Write the MCP server to .cursor/mcp.json', kind2: 'cursor' },
      { label: '$(code) Codex', detail: 'Show and copy the ~/.codex/config.toml snippet', kind2: 'codex' },
      { label: '$(plug) Other agent', detail: 'The stdio command, the HTTP URL and where the token is', kind2: 'other' },
    ];
    const pick = await vscode.window.showQuickPick(items, { placeHolder: 'Connect an agent to Waypoint' });
    if (!pick) return;
    if (pick.kind2 === 'copilot') {
      void vscode.window.showInformationMessage(pick.detail ?? '');
      return;
    }
    const launch = this.launch();
    if (pick.kind2 === 'other') {
      const text = [
        '# Connect an agent to Waypoint',
        '',
        'MCP over stdio (the agent starts it; it relays to this window while VS Code owns the store):',
        '',
        '```sh',
        [launch.node, launch.cli, 'mcp', '--workspace', launch.workspace].map((s) => JSON.stringify(s)).join(' '),
        '```',
        '',
        `MCP over streamable HTTP: ${e?.url ?? '(not serving)'}`,
        '',
        `The bearer token is in ${e?.discoveryFile ?? '.waypoint/mcp.json'} (readable only by you; it changes each time the window starts).`,
        '',
      ].join('\n');
      const doc = await vscode.workspace.openTextDocument({ language: 'markdown', content: text });
      await vscode.window.showTextDocument(doc, { preview: true });
      return;
    }
    const plan = planConnect(pick.kind2, launch);
    if (plan.snippet) {
      await vscode.env.clipboard.writeText(codexSnippet(launch));
      const doc = await vscode.workspace.openTextDocument({ language: 'toml', content: plan.snippet });
      await vscode.window.showTextDocument(doc, { preview: true });
      void vscode.window.showInformationMessage('Waypoint: the Codex snippet is copied; add it to ~/.codex/config.toml.');
      return;
    }
    const written = applyConnect(plan);
    void vscode.window.showInformationMessage(
      written.length ? `Waypoint: connected ${pick.label.replace(/^\$\([^)]*\) /, '')} (${written.map((f) => path.relative(launch.workspace, f)).join(', ')}).` : 'Waypoint: already connected; nothing to change.',
    );
  }
}
