import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { localApi } from '../core/engine/api';
import type { Engine } from '../core/engine/engine';
import { Logger } from '../core/log';
import { errorMessage } from '../core/model/errors';
import { applyConnect, launcherPath, planConnect, type AgentKind, type ConnectPlan, type Launch } from '../mcp/connect';
import { startOwnerEndpoint, type OwnerEndpoint } from '../mcp/owner';
import type { RollbackHandler } from '../mcp/tools';
import { agentRollbackHandler } from '../mcp/headlessRollback';
import type { WorkspaceOperations } from './workspaceOperations';
import { Disposable } from './disposable';
import type { EngineHost } from './engineHost';
import { settings } from './settings';
import { ChangesPreview, type PreviewFile } from './rollbackPreview';
import { plural } from '../core/model/plural';
import { displayText } from '../core/model/displayText';
import { ownerWords } from './labelText';

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
  private providerRegistered = false;
  /** Proposed contents shown by the connect preview, by URI. */
  private readonly proposed = new Map<string, string>();
  private previewCount = 0;

  constructor(
    private readonly host: EngineHost,
    private readonly extensionPath: string,
    private readonly log: vscode.LogOutputChannel,
    private readonly operations: WorkspaceOperations,
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
      this.providerRegistered = true;
    } else {
      this.log.info('[mcp] this editor has no MCP server definition API; agents connect through Waypoint: Connect an Agent');
    }
    this.register(
      vscode.workspace.registerTextDocumentContentProvider(PREVIEW_SCHEME, { provideTextDocumentContent: (uri) => this.proposed.get(uri.toString()) ?? '' }),
    );
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

  /**
   * Under `ask` the person confirms in a modal; under `allow` the engine rolls back directly
   * (undoable either way), in the window's queue of workspace operations like every other.
   */
  private rollbackHandler(engine: Engine): RollbackHandler {
    return agentRollbackHandler(engine, {
      ask: async (req) => {
        const preview = await localApi(engine).rollbackPreview({ taskId: req.taskId, checkpointId: req.checkpointId });
        const answer = await vscode.window.showWarningMessage(
          `An agent asks to roll back “${displayText(engine.task(req.taskId).title)}” (${plural(preview.changes.length, 'file')}).`,
          { modal: true, detail: `Reason: ${displayText(req.reason, { multiline: true })}\nAgent: ${ownerWords(req.owner.id)}\n\nThe current state is saved as a checkpoint first, so this can be undone.` },
          'Roll Back',
        );
        return answer === 'Roll Back' ? null : { rolledBack: false, message: 'The person declined the rollback.' };
      },
      run: (fn) => this.operations.run('rolling back for an agent…', fn),
    });
  }

  /** The CLI shipped in this extension; config files reach it through the workspace's launcher (see LAUNCHER_REL). */
  launch(): Launch {
    const folder = this.host.workspaceFolder;
    if (!folder) throw new Error('Open a folder first.');
    return { cli: path.join(this.extensionPath, 'dist', 'cli.js'), workspace: folder.uri.fsPath };
  }

  /** Copilot needs no file: say what is really there (the provider, the chat, a language model) instead of a generic line. */
  private async copilotStatus(e: DoorEndpoint | undefined): Promise<{ description: string; detail: string }> {
    const commands = new Set(await vscode.commands.getCommands(true));
    const chat = commands.has('workbench.action.chat.open');
    const copilot = vscode.extensions.getExtension('GitHub.copilot-chat') ?? vscode.extensions.getExtension('GitHub.copilot');
    let models = 0;
    try {
      models = (await vscode.lm.selectChatModels()).length;
    } catch {
      // no language-model API (or AI features are off): counted as none
    }
    const provider = this.providerRegistered ? 'MCP provider registered' : 'this editor has no MCP provider API';
    const serving = e ? `serving ${e.url}${e.relayed ? ' (the owning window’s endpoint)' : ''}` : 'not serving (see the Waypoint log)';
    const agent = !chat ? 'no Chat in this editor' : !copilot ? 'Copilot Chat is not installed' : models ? `Copilot Chat installed, ${plural(models, 'model')} available` : 'Copilot Chat installed, no language model available (signed out, or AI features off)';
    const ready = this.providerRegistered && !!e && chat && !!copilot && models > 0;
    return { description: ready ? 'ready, nothing to write' : 'not ready', detail: `${provider} · ${serving} · ${agent}` };
  }

  async connect(agent?: AgentKind): Promise<void> {
    const e = await this.ensureServing();
    if (!agent) {
      const copilot = await this.copilotStatus(e);
      const items: (vscode.QuickPickItem & { kind2: AgentKind | 'copilot' | 'other' })[] = [
        { label: '$(copilot) GitHub Copilot (agent mode)', ...copilot, kind2: 'copilot' },
        { label: '$(terminal) Claude Code', detail: 'Preview, then write .mcp.json (shared, no machine paths) and .claude/settings.local.json (local hooks)', kind2: 'claude-code' },
        { label: '$(github) Copilot agent hooks (VS Code, Copilot CLI)', detail: 'Preview, then write .github/hooks/waypoint.json: records every edit, terminal command and todo list', kind2: 'vscode' },
        { label: '$(file-code) Cursor', detail: 'Preview, then write .cursor/mcp.json and .cursor/hooks.json (shared, no machine paths)', kind2: 'cursor' },
        { label: '$(code) Codex', detail: 'Preview, then write .codex/hooks.json; show and copy the ~/.codex/config.toml snippet', kind2: 'codex' },
        { label: '$(sparkle) Gemini CLI', detail: 'Preview, then write the hooks into .gemini/settings.json', kind2: 'gemini-cli' },
        { label: '$(hubot) Qwen Code', detail: 'Preview, then write the hooks into .qwen/settings.json', kind2: 'qwen-code' },
        { label: '$(rocket) opencode', detail: 'Preview, then write the plugin .opencode/plugins/waypoint.js', kind2: 'opencode' },
        { label: '$(robot) Cline', detail: 'Preview, then write hook scripts into .clinerules/hooks/', kind2: 'cline' },
        { label: '$(plug) Other agent', detail: 'The stdio command, the HTTP URL and where the token is', kind2: 'other' },
      ];
      const pick = await vscode.window.showQuickPick(items, { title: 'Waypoint: Connect an Agent', placeHolder: 'Which agent should report to Waypoint?', matchOnDetail: true });
      if (!pick) return;
      if (pick.kind2 === 'copilot') {
        void vscode.window.showInformationMessage(`Waypoint and Copilot: ${pick.detail ?? ''}`);
        return;
      }
      if (pick.kind2 === 'other') return this.showOther(e);
      agent = pick.kind2;
    }
    const launch = this.launch();
    const plan = planConnect(agent, launch);
    if (!(await this.confirmWrite(plan))) return;
    const written = applyConnect(plan);
    if (plan.snippet) {
      await vscode.env.clipboard.writeText(plan.snippet);
      const doc = await vscode.workspace.openTextDocument({ language: 'toml', content: plan.snippet });
      await vscode.window.showTextDocument(doc, { preview: true });
      void vscode.window.showInformationMessage('Waypoint: the Codex snippet is copied; add it to ~/.codex/config.toml.');
      return;
    }
    void vscode.window.showInformationMessage(
      written.length ? `Waypoint: connected ${AGENT_NAMES[agent]} (${written.map((f) => path.relative(launch.workspace, f)).join(', ')}).` : 'Waypoint: already connected; nothing to change.',
    );
  }

  /**
   * Shows every file the plan would change as a diff against what is there now, then
   * asks (non-modal, so the diffs stay readable). Cancel, Escape or closing the
   * message writes nothing. True when there is nothing to write.
   */
  private async confirmWrite(plan: ConnectPlan): Promise<boolean> {
    const changed = plan.files.filter((f) => f.changed);
    if (!changed.length) return true;
    const stamp = ++this.previewCount;
    const files: PreviewFile[] = changed.map((f) => {
      const key = path.relative(plan.workspace, f.file).split(path.sep).join('/');
      const exists = fs.existsSync(f.file);
      const proposed = vscode.Uri.from({ scheme: PREVIEW_SCHEME, path: `/${key}`, query: `proposed=${stamp}` });
      this.proposed.set(proposed.toString(), f.content);
      const left = exists ? vscode.Uri.file(f.file) : vscode.Uri.from({ scheme: PREVIEW_SCHEME, path: `/${key}`, query: `empty=${stamp}` });
      return { key, left, right: proposed, action: exists ? 'revert' : 'restore' };
    });
    const preview = await ChangesPreview.open(`Waypoint: Connect ${AGENT_NAMES[plan.agent]}`, files, (key) => vscode.Uri.file(path.join(plan.workspace, key)));
    try {
      const list = changed.map((f) => `${path.relative(plan.workspace, f.file)}${f.local ? ' (machine-local, not committed)' : ' (shared, no machine paths)'}`).join(', ');
      const answer = await vscode.window.showInformationMessage(`Waypoint will write ${list}. Review the diff, then:`, 'Write These Files', 'Cancel');
      return answer === 'Write These Files';
    } finally {
      await preview.close();
      for (const f of files) this.proposed.delete(f.right.toString());
    }
  }

  private async showOther(e: DoorEndpoint | undefined): Promise<void> {
    const launch = this.launch();
    const text = [
      '# Connect an agent to Waypoint',
      '',
      'MCP over stdio (the agent starts it; it relays to this window while VS Code owns the store). After `Waypoint: Connect an Agent` wrote the launcher, use it: it keeps working after Waypoint updates.',
      '',
      '```sh',
      ['node', launcherPath(launch), 'mcp', '--workspace', launch.workspace].map((s) => JSON.stringify(s)).join(' '),
      '```',
      '',
      `MCP over streamable HTTP: ${e?.url ?? '(not serving)'}`,
      '',
      `The bearer token is in ${e?.discoveryFile ?? '.waypoint/mcp.json'} (readable only by you; it changes each time the window starts).`,
      '',
    ].join('\n');
    const doc = await vscode.workspace.openTextDocument({ language: 'markdown', content: text });
    await vscode.window.showTextDocument(doc, { preview: true });
  }
}

const AGENT_NAMES: Record<AgentKind, string> = { 'claude-code': 'Claude Code', cursor: 'Cursor', codex: 'Codex', vscode: 'VS Code agent hooks', 'copilot-cli': 'Copilot CLI', 'gemini-cli': 'Gemini CLI', cline: 'Cline', 'qwen-code': 'Qwen Code', opencode: 'opencode' };
/** Read-only documents for the preview's right side (the proposed content) and a missing file's empty left side. */
const PREVIEW_SCHEME = 'waypoint-connect';
