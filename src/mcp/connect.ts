import * as fs from 'node:fs';
import * as path from 'node:path';
import { createTwoFilesPatch } from 'diff';
import { WaypointError, errorMessage } from '../core/model/errors';
import { writeFileAtomicSync } from '../core/store/fsutil';
import { ensurePrivateStoreDir } from '../core/store/storeDir';
import { WorkspaceDirs } from '../core/snapshot/workspaceDirs';
import { recordOwnWrites } from '../core/engine/ownWrites';
import { CLAUDE_PLAN_EVENTS, CLAUDE_TOOLS } from '../hooks/adapters/claudeCode';
import { LAUNCHER_REL, change, isObject, linkRefused, objectField, readJsonObject, readText, refuseLinkedConfig, type FileChange, type Json } from './configFiles';
export { change, isObject, objectField, readJsonObject, readText, refuseLinkedConfig, type FileChange, type Json } from './configFiles';
import { CLINE_HOOKS, OPENCODE_PLUGIN_REL, clineHookFiles, githubHooksFile, mergeCodexHooks, mergeCursorHooks, mergeGeminiSettings, mergeQwenSettings, opencodePluginFile } from './connectHooks';

/**
 * `waypoint connect claude-code|cursor|codex`: writes Waypoint's MCP server (and,
 * for Claude Code, its hooks) into the agent's project configuration. Merges into
 * what is there and never clobbers other entries; running it twice changes
 * nothing; a file that is not valid JSON is reported and left untouched. Only files
 * inside the workspace are written (Codex's config lives in the home directory, so
 * its snippet is printed instead).
 *
 * Formats: Claude Code `.mcp.json` `{mcpServers: {name: {type, command, args}}}`;
 * `.claude/settings.local.json` `{hooks: {Event: [{matcher?, hooks: [{type: 'command', command}]}]}}`;
 * Cursor `.cursor/mcp.json` `{mcpServers: {…}}`; Codex `~/.codex/config.toml`
 * `[mcp_servers.name]` with `command` and `args`.
 */
export type AgentKind = 'claude-code' | 'cursor' | 'codex' | 'vscode' | 'copilot-cli' | 'gemini-cli' | 'cline' | 'qwen-code' | 'opencode';
export const SERVER_KEY = 'waypoint';
/** The extension's id; installed copies live in `<extensions dir>/waypoint-dev.waypoint-<version>[-platform]`. */
export const EXTENSION_ID = 'waypoint-dev.waypoint';

/**
 * Why a launcher and not the CLI's path: the extension lives in a versioned folder
 * (`waypoint-dev.waypoint-0.1.0`) that the next update deletes, and the Node that runs
 * the editor (or a test harness) is not one agents should depend on. So config files
 * name `node` from PATH and a small launcher that Waypoint writes into the store
 * directory (`.waypoint/bin/waypoint.cjs`, which git ignores through the store's own
 * `.gitignore`); the launcher finds the newest installed Waypoint's `dist/cli.js` each
 * time it runs. The shared `.mcp.json` then holds only a relative path, and a
 * teammate who clones the project gets a working server once their own Waypoint
 * writes their own launcher.
 */
export { LAUNCHER_REL };

export interface Launch {
  /** Absolute path of the dist/cli.js this launcher falls back to (and prefers in a development checkout). */
  cli: string;
  workspace: string;
}


export function launchFor(workspace: string, cli?: string): Launch {
  const script = cli ?? (process.argv[1] ? fs.realpathSync(process.argv[1]) : '');
  if (!script || !path.isAbsolute(script)) throw new WaypointError('invalid_input', 'Cannot tell where the waypoint CLI is; pass its path.');
  return { cli: script, workspace: path.resolve(workspace) };
}

export function launcherPath(l: Launch): string {
  return path.join(l.workspace, ...LAUNCHER_REL.split('/'));
}

/** The folder an installed extension's CLI sits in: `<root>/<id>-<version>/dist/cli.js`. */
const VERSIONED_DIR = /^waypoint-dev\.waypoint-(\d+)\.(\d+)\.(\d+)(?:$|[-+])/;

/**
 * The launcher's source. Plain CommonJS with no dependencies (it runs under whatever
 * `node` the agent finds). It prefers the recorded CLI when that is a development
 * checkout (not a versioned folder), else the highest version found in the recorded
 * folder's parent and the usual extension directories, else the recorded CLI if it
 * still exists. It loads the CLI in-process (no second Node start for every hook).
 */
export function launcherSource(l: Launch): string {
  const extDir = path.dirname(path.dirname(l.cli));
  const roots = VERSIONED_DIR.test(path.basename(extDir)) ? [path.dirname(extDir)] : [];
  return `#!/usr/bin/env node
// Written by "Waypoint: Connect an Agent" (or \`waypoint connect\`). Machine-local: it lives in
// .waypoint/, which git ignores. Agent configs run it so they keep working after Waypoint updates.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const RECORDED = ${JSON.stringify(l.cli)};
const VERSIONED = ${VERSIONED_DIR.toString()};
const home = os.homedir();
const roots = ${JSON.stringify(roots)}.concat(
  process.env.VSCODE_EXTENSIONS ? [process.env.VSCODE_EXTENSIONS] : [],
  ['.vscode', '.vscode-insiders', '.vscode-server', '.vscode-server-insiders', '.vscode-oss', '.cursor', '.cursor-server', '.windsurf'].map((d) => path.join(home, d, 'extensions')),
);
function newer(a, b) {
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] > b[i];
  return false;
}
function newestInstalled() {
  let best = null;
  for (const root of roots) {
    let names;
    try {
      names = fs.readdirSync(root);
    } catch {
      continue;
    }
    for (const name of names) {
      const m = VERSIONED.exec(name);
      if (!m) continue;
      const v = [Number(m[1]), Number(m[2]), Number(m[3])];
      const cli = path.join(root, name, 'dist', 'cli.js');
      if ((!best || newer(v, best.v)) && fs.existsSync(cli)) best = { v, cli };
    }
  }
  return best && best.cli;
}
const devCheckout = !VERSIONED.test(path.basename(path.dirname(path.dirname(RECORDED))));
const cli = (devCheckout && fs.existsSync(RECORDED) && RECORDED) || newestInstalled() || (fs.existsSync(RECORDED) && RECORDED);
if (!cli && process.argv[2] === 'hook') {
  // A hook must never fail the agent: without a Waypoint to record with, it answers neutrally.
  const answers = { cursor: '{}', 'gemini-cli': '{}', cline: '{"cancel":false}' };
  process.stderr.write('Waypoint: no installed Waypoint found; this hook recorded nothing.\\n');
  if (answers[process.argv[3]]) process.stdout.write(answers[process.argv[3]] + '\\n');
  process.exit(0);
}
if (!cli) {
  process.stderr.write('Waypoint: no installed Waypoint found (looked for ' + RECORDED + ' and in ' + roots.join(', ') + '). Install the extension, then run "Waypoint: Connect an Agent" again.\\n');
  process.exit(127);
}
process.argv.splice(1, 1, cli);
require(cli);
`;
}

/** The stdio server's arguments for a config that names the launcher by `launcher` (relative or absolute). */
export function mcpArgs(launcher: string, workspace?: string): string[] {
  return [launcher, 'mcp', ...(workspace === undefined ? [] : ['--workspace', workspace])];
}

/** POSIX shell quoting: Claude Code runs hook commands through a shell. */
export function shellQuote(s: string): string {
  return /^[A-Za-z0-9_./:=@+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** settings.local.json is machine-local, so the hook names the launcher by its absolute path (hooks may run from a subdirectory). */
export function hookCommand(l: Launch): string {
  return ['node', launcherPath(l), 'hook', 'claude-code', '--workspace', l.workspace].map(shellQuote).join(' ');
}

const HOOK_MARK = ' hook claude-code ';
export const HOOK_EVENTS = ['SessionStart', 'UserPromptSubmit', 'PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PreCompact', 'Stop', 'SessionEnd', ...CLAUDE_PLAN_EVENTS] as const;
const TOOL_EVENTS = new Set<string>(['PreToolUse', 'PostToolUse', 'PostToolUseFailure']);
// Only the tools the recorder acts on: every matched call costs the agent a hook process.
export const HOOK_MATCHER = [...CLAUDE_TOOLS.edit, ...CLAUDE_TOOLS.shell, ...CLAUDE_TOOLS.todo].join('|');


/**
 * `.mcp.json` / `.cursor/mcp.json`: set mcpServers.waypoint, keep every other server.
 * Both are meant to be committed, so the entry holds no absolute path: `node` from PATH
 * and the launcher named relative to the project (Claude Code starts project servers in
 * the project folder; Cursor expands `${workspaceFolder}`).
 */
export function mergeMcpJson(file: string, entry: Json): FileChange {
  const before = readJsonObject(file);
  const servers = objectField(file, before, 'mcpServers');
  const after = { ...before, mcpServers: { ...servers, [SERVER_KEY]: entry } };
  return change(file, before, after, false);
}

export function claudeServerEntry(): Json {
  return { type: 'stdio', command: 'node', args: mcpArgs(LAUNCHER_REL), env: {} };
}

export function cursorServerEntry(): Json {
  const ws = '${workspaceFolder}';
  return { command: 'node', args: mcpArgs(`${ws}/${LAUNCHER_REL}`, ws), env: {} };
}

/** The launcher itself: rewritten when the recorded CLI moved (it still finds newer installs either way). */
export function launcherChange(l: Launch): FileChange {
  const file = launcherPath(l);
  const content = launcherSource(l);
  return { file, content, changed: readText(file) !== content, local: true };
}

/** `.claude/settings.local.json`: our hook in each event, replacing an older one of ours, keeping the rest. */
export function mergeClaudeSettings(file: string, l: Launch): FileChange {
  const before = readJsonObject(file);
  const hooks = objectField(file, before, 'hooks');
  const command = hookCommand(l);
  const next: Json = { ...hooks };
  for (const event of HOOK_EVENTS) {
    const groups = hooks[event] === undefined ? [] : hooks[event];
    if (!Array.isArray(groups)) throw new WaypointError('invalid_input', `${file}: hooks.${event} is not an array. Fix it; Waypoint left the file untouched.`);
    const kept = groups
      .map((g) => {
        if (!isObject(g) || !Array.isArray(g.hooks)) return g;
        const rest = g.hooks.filter((h) => !(isObject(h) && typeof h.command === 'string' && h.command.includes(HOOK_MARK)));
        return rest.length === g.hooks.length ? g : rest.length ? { ...g, hooks: rest } : null;
      })
      .filter((g) => g !== null);
    const ours = { ...(TOOL_EVENTS.has(event) ? { matcher: HOOK_MATCHER } : {}), hooks: [{ type: 'command', command, timeout: 30 }] };
    next[event] = [...kept, ours];
  }
  return change(file, before, { ...before, hooks: next }, true);
}

const LOCAL_SETTINGS = '.claude/settings.local.json';
/** Lines of a top-level .gitignore that already keep the local settings out (a simple check: these are the forms people write). */
const IGNORES_LOCAL = new Set([LOCAL_SETTINGS, `/${LOCAL_SETTINGS}`, '.claude', '.claude/', '/.claude', '/.claude/', 'settings.local.json', '**/settings.local.json', '*.local.json']);

/**
 * Claude Code keeps settings.local.json out of git by convention, but only when it
 * creates the file itself; Waypoint writes it, so in a git repository it makes sure the
 * top-level .gitignore names it. Only that file: .mcp.json is meant to be shared and the
 * launcher is ignored by the store's own .gitignore.
 */
function ignoreLocalSettings(ws: string): FileChange[] {
  if (!fs.existsSync(path.join(ws, '.git'))) return [];
  const file = path.join(ws, '.gitignore');
  const old = readText(file) ?? '';
  if (old.split(/\r?\n/).some((line) => IGNORES_LOCAL.has(line.trim()))) return [];
  const content = `${old}${old && !old.endsWith('\n') ? '\n' : ''}# machine-local agent settings (Waypoint's hooks name paths on this machine)\n${LOCAL_SETTINGS}\n`;
  return [{ file, content, changed: true, local: false }];
}

/**
 * ~/.codex/config.toml is per-user and serves every project, so the entry names no
 * workspace: Codex starts it in the project's folder, and it walks up from there to the
 * nearest folder Waypoint was set up in (where there is none it says so and exits).
 */
export function codexSnippet(): string {
  const q = (s: string) => JSON.stringify(s); // TOML basic strings share JSON's escapes
  const find = `d=$PWD; while [ ! -f "$d/${LAUNCHER_REL}" ] && [ "$d" != / ]; do d=$(dirname "$d"); done; [ -f "$d/${LAUNCHER_REL}" ] || { echo "Waypoint is not set up in $PWD or above it: run waypoint connect codex there" >&2; exit 1; }; exec node "$d/${LAUNCHER_REL}" mcp --workspace "$d"`;
  return [`[mcp_servers.${SERVER_KEY}]`, `command = "sh"`, `args = [${['-c', find].map(q).join(', ')}]`, ''].join('\n');
}

export interface ConnectPlan {
  agent: AgentKind;
  workspace: string;
  /** Every file the connection needs, the launcher first; `changed` says which would be written. */
  files: FileChange[];
  /** Text to show (Codex: the config.toml snippet). */
  snippet?: string;
}

/** The files `planConnect` may read and write for an agent, relative to the workspace. */
function configFiles(agent: AgentKind, ws: string): string[] {
  const files: Record<AgentKind, string[]> = {
    // .gitignore is read (and may be written) only in a git repository: see ignoreLocalSettings.
    'claude-code': ['.mcp.json', '.claude/settings.local.json', ...(fs.existsSync(path.join(ws, '.git')) ? ['.gitignore'] : [])],
    cursor: ['.cursor/mcp.json', '.cursor/hooks.json'],
    codex: ['.codex/hooks.json'],
    vscode: ['.github/hooks/waypoint.json'],
    'copilot-cli': ['.github/hooks/waypoint.json'],
    'gemini-cli': ['.gemini/settings.json'],
    'qwen-code': ['.qwen/settings.json'],
    opencode: [OPENCODE_PLUGIN_REL],
    cline: CLINE_HOOKS.map((h) => `.clinerules/hooks/${h}`),
  };
  return [LAUNCHER_REL, ...files[agent]];
}

/**
 * Every file the connection would change, read and merged but nothing written. A
 * symbolic link on the way to any of them (the folder or the file) is refused first,
 * before anything is read through it.
 */
export function planConnect(agent: AgentKind, l: Launch): ConnectPlan {
  const ws = l.workspace;
  for (const rel of configFiles(agent, ws)) refuseLinkedConfig(ws, path.join(ws, ...rel.split('/')));
  const launcher = launcherChange(l);
  switch (agent) {
    case 'claude-code':
      return {
        agent,
        workspace: ws,
        files: [launcher, mergeMcpJson(path.join(ws, '.mcp.json'), claudeServerEntry()), mergeClaudeSettings(path.join(ws, '.claude', 'settings.local.json'), l), ...ignoreLocalSettings(ws)],
      };
    case 'cursor':
      return { agent, workspace: ws, files: [launcher, mergeMcpJson(path.join(ws, '.cursor', 'mcp.json'), cursorServerEntry()), mergeCursorHooks(ws)] };
    case 'codex':
      // The MCP snippet goes outside the workspace (printed, not written); the project's hooks file is written.
      return { agent, workspace: ws, files: [launcher, mergeCodexHooks(ws)], snippet: codexSnippet() };
    case 'vscode':
    case 'copilot-cli':
      // One file serves both: VS Code runs `command`, Copilot CLI `bash`/`powershell`.
      return { agent, workspace: ws, files: [launcher, githubHooksFile(ws)] };
    case 'gemini-cli':
      return { agent, workspace: ws, files: [launcher, mergeGeminiSettings(ws)] };
    case 'cline':
      return { agent, workspace: ws, files: [launcher, ...clineHookFiles(ws)] };
    case 'qwen-code':
      return { agent, workspace: ws, files: [launcher, mergeQwenSettings(ws)] };
    case 'opencode':
      return { agent, workspace: ws, files: [launcher, opencodePluginFile(ws)] };
  }
}

/**
 * Writes the plan's changed files atomically; every file was validated before the first
 * write. The launcher goes into the store directory, created private and git-ignored
 * exactly as the store creates it, so it is never committed.
 *
 * Each file's folder is reached the way a rollback reaches it (WorkspaceDirs: opened
 * component by component without following links, on Linux through directory
 * descriptors), so a folder swapped for a link to ~/.cursor after the plan was made
 * cannot take a write outside the workspace; a link at any step is refused again here.
 */
export function applyConnect(plan: ConnectPlan): string[] {
  const changed = plan.files.filter((f) => f.changed);
  for (const f of changed) refuseLinkedConfig(plan.workspace, f.file);
  const written: string[] = [];
  const storeDir = path.join(plan.workspace, '.waypoint');
  const dirs = new WorkspaceDirs([{ name: path.basename(plan.workspace) || 'root', dir: plan.workspace }]);
  try {
    for (const f of changed) {
      if (f.file.startsWith(storeDir + path.sep)) {
        ensurePrivateStoreDir(storeDir);
        try {
          fs.writeFileSync(path.join(storeDir, '.gitignore'), '*\n', { flag: 'wx', mode: 0o600 });
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
        }
      }
      const rel = path.relative(plan.workspace, f.file).split(path.sep);
      const name = rel.pop()!;
      const dir = dirs.dir(0, rel.join('/'), true);
      if (!dir) throw new WaypointError('io', `Cannot create the folder of ${f.file}.`);
      writeInto(dir.io, name, f);
      written.push(f.file);
    }
  } catch (e) {
    if (e instanceof WaypointError) throw e;
    const code = (e as NodeJS.ErrnoException).code;
    throw new WaypointError('io', `Writing the agent configuration failed${written.length ? ` after ${written.map((w) => path.relative(plan.workspace, w)).join(', ')}` : ''}: ${errorMessage(e)}${code === 'ELOOP' ? ' (a symbolic link appeared on the way; nothing was written through it)' : ''}`);
  } finally {
    dirs.close();
  }
  // Waypoint's own writes are no task's work: a running task's review and its agent-only rollback leave them out.
  const shared = changed.filter((f) => written.includes(f.file) && !f.file.startsWith(storeDir + path.sep));
  if (shared.length) {
    ensurePrivateStoreDir(storeDir);
    recordOwnWrites(storeDir, shared.map((f) => ({ file: path.join(realDir(path.dirname(f.file)), path.basename(f.file)), content: f.content })));
  }
  return written;
}

function realDir(dir: string): string {
  try {
    return fs.realpathSync.native(dir);
  } catch {
    return dir;
  }
}

/** A temp file beside the target, created new (never through a link), then renamed over it (a rename replaces a link, never follows it). */
function writeInto(dirIo: string, name: string, f: FileChange): void {
  const target = `${dirIo}/${name}`;
  const st = fs.lstatSync(target, { throwIfNoEntry: false });
  if (st?.isSymbolicLink()) throw linkRefused(f.file);
  if (st && !st.isFile()) throw new WaypointError('unsafe_path', `${f.file} is not a regular file; Waypoint left it untouched.`, { path: f.file });
  writeFileAtomicSync(target, f.content, f.executable ? 0o755 : 0o644, { exactMode: f.executable });
}

/** What the plan would write, for a person to read before anything is: a diff per changed file (a new file in full). */
export function connectPreview(plan: ConnectPlan): string {
  const parts: string[] = [];
  for (const f of plan.files) {
    if (!f.changed) continue;
    const rel = path.relative(plan.workspace, f.file).split(path.sep).join('/');
    const old = readText(f.file);
    const note = `${f.local ? 'machine-local, not committed' : 'shared, no machine paths'}${f.executable ? ', executable' : ''}`;
    parts.push(`# ${rel} (${old === null ? 'new file' : 'changed'}; ${note})`);
    parts.push(createTwoFilesPatch(old === null ? '/dev/null' : `a/${rel}`, `b/${rel}`, old ?? '', f.content, '', '', { context: 3 }).replace(/^=+\n/, ''));
  }
  return parts.join('\n');
}
