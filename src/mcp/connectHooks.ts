import * as path from 'node:path';
import { WaypointError } from '../core/model/errors';
import { CODEX_TOOLS } from '../hooks/adapters/codex';
import { GEMINI_TOOLS } from '../hooks/adapters/gemini';
import { OPENCODE_TOOLS } from '../hooks/adapters/opencode';
import { QWEN_TOOLS } from '../hooks/adapters/qwenCode';
import { HOOK_AGENTS, type HookAgent } from '../hooks/agents';
import { LAUNCHER_REL, change, isObject, objectField, readJsonObject, readText, type FileChange, type Json } from './configFiles';

/**
 * The hook configurations `waypoint connect <agent>` writes for the agents other than
 * Claude Code (connect.ts has its settings). Each merges into what is there, replaces
 * an older entry of Waypoint's (recognised by its ` hook <agent>` command), keeps every
 * other hook, and refuses (changing nothing) a file that is not what the agent expects.
 *
 * These files sit in the project and may be committed, so their command finds the
 * launcher itself (sharedHookCommand): from a subfolder, and in a teammate's clone where
 * the git-ignored launcher is missing until their own Waypoint writes it.
 */
// Built on call: connect.ts and this module import each other, so LAUNCHER_REL is not there yet at load.
const PROJECT_VARS: Partial<Record<HookAgent, string>> = { 'gemini-cli': 'GEMINI_PROJECT_DIR', 'qwen-code': 'QWEN_PROJECT_DIR' };
const run = (agent: HookAgent) => sharedHookCommand(agent, PROJECT_VARS[agent]);

/**
 * A hook command for a config that is committed and so runs on every teammate's machine,
 * from whatever folder the agent is in: POSIX sh that walks up from the agent's project
 * folder (`projectVar`, where the agent sets one) or its working directory to the nearest
 * folder whose `.waypoint/bin/waypoint.cjs` exists and records there. Where there is none
 * (a fresh clone, a teammate without Waypoint) it reads the event, prints the agent's
 * neutral answer and exits 0: a hook must never fail the agent.
 */
export function sharedHookCommand(agent: HookAgent, projectVar?: string): string {
  const start = projectVar ? `\${${projectVar}:-$PWD}` : '$PWD';
  const answer = HOOK_AGENTS[agent].stdout;
  return (
    `d=${start}; while [ ! -f "$d/${LAUNCHER_REL}" ] && [ "$d" != / ] && [ "$d" != . ]; do d=$(dirname "$d"); done; ` +
    `if [ -f "$d/${LAUNCHER_REL}" ] && command -v node >/dev/null 2>&1; then exec node "$d/${LAUNCHER_REL}" hook ${agent} --workspace "$d"; fi; ` +
    `cat >/dev/null; ${answer ? `printf '%s\\n' '${answer}'; ` : ''}exit 0`
  );
}
const ours = (agent: HookAgent) => (h: unknown) => isObject(h) && typeof h.command === 'string' && h.command.includes(` hook ${agent}`);

/** Claude-shaped `{hooks: {Event: [{matcher?, hooks: [{type, command}]}]}}` (Codex, Gemini CLI, Qwen Code). */
function mergeGroups(file: string, before: Json, agent: HookAgent, events: readonly string[], toolEvents: ReadonlySet<string>, matcher: string, extra: Json | ((event: string) => Json) = {}): Json {
  const hooks = objectField(file, before, 'hooks');
  const next: Json = { ...hooks };
  const others = (groups: unknown[]) =>
    groups
      .map((g) => {
        if (!isObject(g) || !Array.isArray(g.hooks)) return g;
        const rest = g.hooks.filter((h) => !ours(agent)(h));
        return rest.length === g.hooks.length ? g : rest.length ? { ...g, hooks: rest } : null;
      })
      .filter((g) => g !== null);
  for (const event of events) {
    const groups = hooks[event] === undefined ? [] : hooks[event];
    if (!Array.isArray(groups)) throw new WaypointError('invalid_input', `${file}: hooks.${event} is not an array. Fix it; Waypoint left the file untouched.`);
    next[event] = [...others(groups), { ...(toolEvents.has(event) ? { matcher } : {}), hooks: [{ type: 'command', command: run(agent), ...(typeof extra === 'function' ? extra(event) : extra) }] }];
  }
  // An event Waypoint no longer registers (Gemini's PreCompress) loses an entry an older connect wrote there.
  for (const [event, groups] of Object.entries(hooks)) {
    if ((events as readonly string[]).includes(event) || !Array.isArray(groups)) continue;
    const kept = others(groups);
    if (kept.length === groups.length) continue;
    if (kept.length) next[event] = kept;
    else delete next[event];
  }
  return { ...before, hooks: next };
}

export const CODEX_HOOK_EVENTS = ['SessionStart', 'UserPromptSubmit', 'PreToolUse', 'PostToolUse', 'PreCompact', 'Stop', 'SessionEnd'] as const;
/**
 * `.codex/hooks.json` (Codex also reads `[hooks]` in config.toml; the project file is the one Waypoint may write).
 * Codex caps a SessionEnd hook at 3 seconds and says so on every run when asked for more.
 */
export function mergeCodexHooks(ws: string): FileChange {
  const file = path.join(ws, '.codex', 'hooks.json');
  const before = readJsonObject(file);
  const matcher = [...CODEX_TOOLS.edit, ...CODEX_TOOLS.shell, ...CODEX_TOOLS.todo].join('|');
  const timeout = (event: string) => ({ timeout: event === 'SessionEnd' ? 3 : 30 });
  return change(file, before, mergeGroups(file, before, 'codex', CODEX_HOOK_EVENTS, new Set(['PreToolUse', 'PostToolUse']), matcher, timeout), false);
}

/**
 * No PreCompress: Gemini CLI 0.61 fires it before every model request (the compression
 * threshold is checked after the hook), so a hook there would start a process per request
 * to learn nothing; a manual `/compress` is rare enough to go uncounted.
 */
export const GEMINI_HOOK_EVENTS = ['SessionStart', 'BeforeAgent', 'BeforeTool', 'AfterTool', 'AfterAgent', 'SessionEnd'] as const;
/** `.gemini/settings.json`: hooks beside whatever else the project sets (Gemini's timeout is in milliseconds). */
export function mergeGeminiSettings(ws: string): FileChange {
  const file = path.join(ws, '.gemini', 'settings.json');
  const before = readJsonObject(file);
  const matcher = [...GEMINI_TOOLS.edit, ...GEMINI_TOOLS.shell, ...GEMINI_TOOLS.todo].join('|');
  return change(file, before, mergeGroups(file, before, 'gemini-cli', GEMINI_HOOK_EVENTS, new Set(['BeforeTool', 'AfterTool']), matcher, { name: 'waypoint', timeout: 30_000 }), false);
}

/**
 * Qwen Code's Claude Code-shaped events. No Notification, MessageDisplay, PostToolBatch or
 * TodoCreated/TodoCompleted: they repeat what the tool hooks say or say nothing about work
 * done. Qwen Code sets QWEN_PROJECT_DIR (the session's cwd) for its hooks.
 */
export const QWEN_HOOK_EVENTS = ['SessionStart', 'UserPromptSubmit', 'PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PreCompact', 'Stop', 'StopFailure', 'SessionEnd'] as const;
/** `.qwen/settings.json`: hooks beside whatever else the project sets (Qwen's timeout is in seconds). */
export function mergeQwenSettings(ws: string): FileChange {
  const file = path.join(ws, '.qwen', 'settings.json');
  const before = readJsonObject(file);
  const matcher = [...QWEN_TOOLS.edit, ...QWEN_TOOLS.shell, ...QWEN_TOOLS.todo].join('|');
  return change(file, before, mergeGroups(file, before, 'qwen-code', QWEN_HOOK_EVENTS, new Set(['PreToolUse', 'PostToolUse', 'PostToolUseFailure']), matcher, { timeout: 30 }), false);
}

export const CURSOR_HOOK_EVENTS = ['beforeSubmitPrompt', 'beforeShellExecution', 'afterShellExecution', 'afterFileEdit', 'afterAgentResponse', 'stop'] as const;
/** `.cursor/hooks.json`: `{version: 1, hooks: {event: [{command}]}}`. */
export function mergeCursorHooks(ws: string): FileChange {
  const file = path.join(ws, '.cursor', 'hooks.json');
  const before = readJsonObject(file);
  const hooks = objectField(file, before, 'hooks');
  const next: Json = { ...hooks };
  for (const event of CURSOR_HOOK_EVENTS) {
    const list = hooks[event] === undefined ? [] : hooks[event];
    if (!Array.isArray(list)) throw new WaypointError('invalid_input', `${file}: hooks.${event} is not an array. Fix it; Waypoint left the file untouched.`);
    next[event] = [...list.filter((h) => !ours('cursor')(h)), { command: run('cursor') }];
  }
  return change(file, before, { version: 1, ...before, hooks: next }, false);
}

export const GITHUB_HOOK_EVENTS = ['SessionStart', 'UserPromptSubmit', 'PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PreCompact', 'Stop', 'SessionEnd'] as const;
/**
 * `.github/hooks/waypoint.json`, Waypoint's own file, read by VS Code's agent hooks and by
 * Copilot CLI alike. PascalCase event names make Copilot CLI send payloads that name
 * their event; each entry carries VS Code's `command` and Copilot CLI's `bash`/`powershell`.
 */
export function githubHooksFile(ws: string): FileChange {
  const file = path.join(ws, '.github', 'hooks', 'waypoint.json');
  const before = readJsonObject(file);
  // PowerShell keeps the plain relative launcher: the walk-up is POSIX sh.
  const entry = { type: 'command', command: run('vscode'), bash: run('copilot-cli'), powershell: `node ${LAUNCHER_REL} hook copilot-cli`, timeout: 30, timeoutSec: 30 };
  const hooks = Object.fromEntries(GITHUB_HOOK_EVENTS.map((e) => [e, [entry]]));
  return change(file, before, { version: 1, hooks }, false);
}

export const CLINE_HOOKS = ['TaskStart', 'TaskResume', 'TaskCancel', 'TaskComplete', 'UserPromptSubmit', 'PreToolUse', 'PostToolUse', 'PreCompact'] as const;
const CLINE_MARK = '# Written by Waypoint (waypoint connect cline)';
/**
 * `.clinerules/hooks/<Hook>`: Cline runs each as a program with the event on stdin. The
 * script finds the project from its own place, so it holds no machine path. A hook file
 * Waypoint did not write is never replaced.
 */
export function clineHookFiles(ws: string): FileChange[] {
  const content = `#!/bin/sh\n${CLINE_MARK}: records this Cline task in Waypoint; always exits 0.\ndir=$(cd "$(dirname "$0")/../.." && pwd)\nif [ ! -f "$dir/${LAUNCHER_REL}" ] || ! command -v node >/dev/null 2>&1; then cat >/dev/null; printf '%s\\n' '${HOOK_AGENTS.cline.stdout}'; exit 0; fi\nexec node "$dir/${LAUNCHER_REL}" hook cline --workspace "$dir"\n`;
  return CLINE_HOOKS.map((hook) => {
    const file = path.join(ws, '.clinerules', 'hooks', hook);
    const old = readText(file);
    if (old !== null && !old.includes(CLINE_MARK)) throw new WaypointError('invalid_input', `${file} is a Cline hook Waypoint did not write; left untouched. Call '${run('cline')}' from it to record with Waypoint.`);
    return { file, content, changed: old !== content, local: false, executable: true };
  });
}

export const OPENCODE_PLUGIN_REL = '.opencode/plugins/waypoint.js';
/** The plugin hooks opencode awaits that the plugin hands on (awaited too, so a checkpoint is taken before the tool runs). */
export const OPENCODE_PLUGIN_HOOKS = ['chat.message', 'tool.execute.before', 'tool.execute.after', 'experimental.text.complete'] as const;
/** The events it hands on: the end of a turn, a failed turn, a compaction, a tool call that threw (its part in state `error`). */
export const OPENCODE_PLUGIN_EVENTS = ['session.idle', 'session.error', 'session.compacted', 'message.part.updated'] as const;
const OPENCODE_MARK = '// Written by Waypoint (waypoint connect opencode)';
/**
 * `.opencode/plugins/waypoint.js`: opencode has no hook commands, it loads the plugins in
 * that folder and awaits their hooks. This one hands each hook Waypoint records to
 * `node .waypoint/bin/waypoint.cjs hook opencode` (JSON on stdin), only for the tools the
 * adapter records. It finds the project from its own place, so it holds no machine path;
 * where the launcher or node is missing (a teammate without Waypoint) it does nothing.
 * opencode does not wait for event handlers before it exits, so events (the turn's end
 * among them) are handed on synchronously. A subagent's session (its `session.created`
 * names a `parentID`) is handed on with `parentSessionID`, the session it works for. A
 * plugin file Waypoint did not write is never replaced.
 */
export function opencodePluginFile(ws: string): FileChange {
  const tools = [...OPENCODE_TOOLS.edit, ...OPENCODE_TOOLS.shell, ...OPENCODE_TOOLS.todo];
  const q = (list: readonly string[]) => list.map((x) => JSON.stringify(x)).join(', ');
  const content = `${OPENCODE_MARK}: records this project's opencode sessions in Waypoint.
// It hands each hook below to 'waypoint hook opencode' and never changes what opencode does;
// where Waypoint is not set up (no ${LAUNCHER_REL}, or no node) it does nothing.
import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const launcher = join(root, ...${JSON.stringify(LAUNCHER_REL.split('/'))});
const argv = () => [launcher, "hook", "opencode", "--workspace", root];
const TOOLS = new Set([${q(tools)}]);
const EVENTS = new Set([${q(OPENCODE_PLUGIN_EVENTS)}]);
const MAX = 20000;
const clip = (v, depth = 0) =>
  typeof v === "string" ? (v.length > MAX ? v.slice(0, MAX) + "…" : v)
  : !v || typeof v !== "object" || depth > 8 ? v
  : Array.isArray(v) ? v.slice(0, 500).map((x) => clip(x, depth + 1))
  : Object.fromEntries(Object.entries(v).map(([k, x]) => [k, clip(x, depth + 1)]));
// A subagent (the task tool) runs in a session of its own: its payloads name the session it works for.
const parents = new Map();
const rootOf = (id) => {
  let root = id;
  for (let i = 0; i < 100 && parents.has(root); i++) root = parents.get(root);
  return root;
};
const sessionOf = (p) => p.input?.sessionID ?? p.event?.properties?.sessionID;
// A subagent's prompt, answers and end are not the session's turns: only its tool calls are handed on.
const wanted = (p) => !parents.has(sessionOf(p)) || p.hook.startsWith("tool.") || p.event?.type === "message.part.updated";
const payload = (p) => {
  const id = sessionOf(p);
  const root = typeof id === "string" ? rootOf(id) : id;
  return JSON.stringify(clip(root !== id ? { ...p, parentSessionID: root } : p));
};

// Awaited by opencode: the call waits for the record (at most 30 s), then goes on.
function send(p) {
  if (!wanted(p) || !existsSync(launcher)) return Promise.resolve();
  return new Promise((resolve) => {
    try {
      const child = spawn("node", argv(), { cwd: root, stdio: ["pipe", "ignore", "ignore"] });
      const timer = setTimeout(() => child.kill(), 30000);
      const done = () => { clearTimeout(timer); resolve(); };
      child.on("error", done);
      child.on("close", done);
      child.stdin.on("error", () => {});
      child.stdin.end(payload(p));
    } catch { resolve(); }
  });
}

// Not awaited by opencode, which may exit right after: recorded before the handler returns.
function sendNow(p) {
  if (!wanted(p) || !existsSync(launcher)) return;
  try { spawnSync("node", argv(), { cwd: root, input: payload(p), stdio: ["pipe", "ignore", "ignore"], timeout: 30000 }); } catch {}
}

const failedTool = (e) => e.type !== "message.part.updated" || (e.properties?.part?.type === "tool" && e.properties.part.state?.status === "error" && TOOLS.has(e.properties.part.tool));

export const WaypointPlugin = async ({ directory }) => ({
  "chat.message": (input, output) => send({ hook: "chat.message", directory, input, output }),
  "tool.execute.before": (input, output) => (TOOLS.has(input.tool) ? send({ hook: "tool.execute.before", directory, input, output }) : undefined),
  "tool.execute.after": (input, output) => (TOOLS.has(input.tool) ? send({ hook: "tool.execute.after", directory, input, output }) : undefined),
  "experimental.text.complete": (input, output) => send({ hook: "experimental.text.complete", directory, input, output }),
  event: async ({ event }) => {
    const info = event?.type === "session.created" ? event.properties?.info : undefined;
    if (info?.parentID && info.id) parents.set(info.id, info.parentID);
    if (event && EVENTS.has(event.type) && failedTool(event)) sendNow({ hook: "event", directory, event });
  },
});
`;
  const file = path.join(ws, ...OPENCODE_PLUGIN_REL.split('/'));
  const old = readText(file);
  if (old !== null && !old.includes(OPENCODE_MARK)) throw new WaypointError('invalid_input', `${file} is an opencode plugin Waypoint did not write; left untouched.`);
  return { file, content, changed: old !== content, local: false };
}
