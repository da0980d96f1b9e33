import * as fs from 'node:fs';
import * as path from 'node:path';
import { WaypointError, errorMessage } from '../core/model/errors';
import { writeFileAtomicSync } from '../core/store/fsutil';
import { EDIT_TOOLS } from './claudeHooks';

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
export type AgentKind = 'claude-code' | 'cursor' | 'codex';
export const SERVER_KEY = 'waypoint';

export interface Launch {
  /** Absolute path of the Node that runs the CLI. */
  node: string;
  /** Absolute path of dist/cli.js. */
  cli: string;
  workspace: string;
}

export interface FileChange {
  file: string;
  /** The content after the merge. */
  content: string;
  changed: boolean;
}

export function launchFor(workspace: string, cli?: string): Launch {
  const script = cli ?? (process.argv[1] ? fs.realpathSync(process.argv[1]) : '');
  if (!script || !path.isAbsolute(script)) throw new WaypointError('invalid_input', 'Cannot tell where the waypoint CLI is; pass its path.');
  return { node: process.execPath, cli: script, workspace: path.resolve(workspace) };
}

export function mcpArgs(l: Launch): string[] {
  return [l.cli, 'mcp', '--workspace', l.workspace];
}

/** POSIX shell quoting: Claude Code runs hook commands through a shell. */
export function shellQuote(s: string): string {
  return /^[A-Za-z0-9_./:=@+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

export function hookCommand(l: Launch): string {
  return [l.node, l.cli, 'hook', 'claude-code', '--workspace', l.workspace].map(shellQuote).join(' ');
}

const HOOK_MARK = ' hook claude-code ';
export const HOOK_EVENTS = ['UserPromptSubmit', 'PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'Stop', 'SessionEnd'] as const;
const TOOL_EVENTS = new Set<string>(['PreToolUse', 'PostToolUse', 'PostToolUseFailure']);
export const HOOK_MATCHER = [...EDIT_TOOLS, 'Bash'].join('|');

type Json = Record<string, unknown>;

function readJsonObject(file: string): Json {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new WaypointError('io', `Cannot read ${file}: ${errorMessage(e)}`);
  }
  if (!text.trim()) return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new WaypointError('invalid_input', `${file} is not valid JSON (${errorMessage(e)}). Fix or remove it; Waypoint left it untouched.`);
  }
  if (!isObject(value)) throw new WaypointError('invalid_input', `${file} does not hold a JSON object. Fix or remove it; Waypoint left it untouched.`);
  return value;
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function objectField(file: string, obj: Json, key: string): Json {
  const v = obj[key];
  if (v === undefined) return {};
  if (!isObject(v)) throw new WaypointError('invalid_input', `${file}: "${key}" is not an object. Fix it; Waypoint left the file untouched.`);
  return v;
}

function change(file: string, before: Json, after: Json): FileChange {
  const content = JSON.stringify(after, null, 2) + '\n';
  let old: string | null = null;
  try {
    old = fs.readFileSync(file, 'utf8');
  } catch {
    // new file
  }
  return { file, content, changed: old === null || JSON.stringify(before) !== JSON.stringify(after) };
}

/** `.mcp.json` / `.cursor/mcp.json`: set mcpServers.waypoint, keep every other server. */
export function mergeMcpJson(file: string, l: Launch, withType: boolean): FileChange {
  const before = readJsonObject(file);
  const servers = objectField(file, before, 'mcpServers');
  const entry = { ...(withType ? { type: 'stdio' } : {}), command: l.node, args: mcpArgs(l), env: {} };
  const after = { ...before, mcpServers: { ...servers, [SERVER_KEY]: entry } };
  return change(file, before, after);
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
  return change(file, before, { ...before, hooks: next });
}

export function codexSnippet(l: Launch): string {
  const q = (s: string) => JSON.stringify(s); // TOML basic strings share JSON's escapes
  return [`[mcp_servers.${SERVER_KEY}]`, `command = ${q(l.node)}`, `args = [${mcpArgs(l).map(q).join(', ')}]`, ''].join('\n');
}

export interface ConnectPlan {
  agent: AgentKind;
  files: FileChange[];
  /** Text to show (Codex: the config.toml snippet). */
  snippet?: string;
}

export function planConnect(agent: AgentKind, l: Launch): ConnectPlan {
  const ws = l.workspace;
  switch (agent) {
    case 'claude-code':
      return { agent, files: [mergeMcpJson(path.join(ws, '.mcp.json'), l, true), mergeClaudeSettings(path.join(ws, '.claude', 'settings.local.json'), l)] };
    case 'cursor':
      return { agent, files: [mergeMcpJson(path.join(ws, '.cursor', 'mcp.json'), l, false)] };
    case 'codex':
      return { agent, files: [], snippet: codexSnippet(l) };
  }
}

/** Writes the plan's changed files atomically; every file was validated before the first write. */
export function applyConnect(plan: ConnectPlan): string[] {
  const written: string[] = [];
  for (const f of plan.files) {
    if (!f.changed) continue;
    fs.mkdirSync(path.dirname(f.file), { recursive: true });
    writeFileAtomicSync(f.file, f.content);
    written.push(f.file);
  }
  return written;
}
