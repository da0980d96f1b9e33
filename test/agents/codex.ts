import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { AGENT_RUN_TIMEOUT_MS, agentBinary, agentsDir } from './install';

/**
 * Runs the real Codex binary offline: its model is a custom provider whose base_url is
 * the scripted Responses server, its CODEX_HOME a fresh folder holding that config, and
 * its own traffic (update check, analytics, feedback) off in the same file.
 *
 * - Model `gpt-5.5`: a model the binary knows (its bundled catalogue), so it offers the
 *   tools that model gets — freeform `apply_patch`, `exec_command` — as a user's would;
 *   an unknown name falls back to metadata that offers neither.
 * - `tools.update_plan.enabled`: Codex 0.171 leaves its plan tool out of the request
 *   unless this is set; the suite turns it on to see what the plan becomes.
 * - No approvals and no sandbox (`approval_policy = "never"`, `danger-full-access`): the
 *   Landlock/seccomp sandbox needs kernel features a CI container may not grant, and the
 *   suite must run unattended.
 * - `--dangerously-bypass-hook-trust`: Codex runs a project's hooks only once the person
 *   has reviewed and trusted them (the TUI asks); exec has no one to ask.
 */
export const CODEX_MODEL = 'gpt-5.5';

export function writeCodexConfig(codexHome: string, ws: string, baseUrl: string): void {
  fs.mkdirSync(codexHome, { recursive: true });
  const q = (s: string) => JSON.stringify(s); // TOML basic strings share JSON's escapes
  const toml = [
    `model = ${q(CODEX_MODEL)}`,
    'model_provider = "scripted"',
    'approval_policy = "never"',
    'sandbox_mode = "danger-full-access"',
    'check_for_update_on_startup = false',
    '',
    '[model_providers.scripted]',
    'name = "Scripted model"',
    `base_url = ${q(`${baseUrl}/v1`)}`,
    'wire_api = "responses"',
    'env_key = "SCRIPTED_OPENAI_KEY"',
    '',
    '[tools.update_plan]',
    'enabled = true',
    '',
    '[analytics]',
    'enabled = false',
    '',
    '[feedback]',
    'enabled = false',
    '',
    `[projects.${q(ws)}]`,
    'trust_level = "trusted"',
    '',
  ].join('\n');
  fs.writeFileSync(path.join(codexHome, 'config.toml'), toml);
}

export interface CodexRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The `--json` event lines. */
  events: { type?: string; thread_id?: string; item?: { type?: string; text?: string; message?: string } }[];
  threadId?: string;
}

/** `codex exec` (or `codex exec resume <id>` when `resume` names a session) with the prompt, in `cwd`. */
export async function runCodex(opts: { cwd: string; home: string; codexHome: string; prompt: string; resume?: string; env?: Record<string, string>; timeoutMs?: number }): Promise<CodexRun> {
  const bin = agentBinary('codex');
  fs.mkdirSync(opts.home, { recursive: true });
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: opts.home, USER: process.env.USER ?? 'root', LANG: 'C.UTF-8', CODEX_HOME: opts.codexHome, SCRIPTED_OPENAI_KEY: 'sk-scripted', ...opts.env };
  const flags = ['--json', '--skip-git-repo-check', '--dangerously-bypass-hook-trust'];
  const args = opts.resume ? ['exec', 'resume', ...flags, opts.resume, opts.prompt] : ['exec', ...flags, opts.prompt];
  const child = spawn(bin, args, { cwd: opts.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? AGENT_RUN_TIMEOUT_MS);
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  clearTimeout(timer);
  const events: CodexRun['events'] = [];
  for (const line of stdout.split('\n')) {
    try {
      if (line.trim()) events.push(JSON.parse(line) as CodexRun['events'][number]);
    } catch {
      // Not an event line (a banner): the test reads only the events.
    }
  }
  return { code, stdout, stderr, events, threadId: events.find((e) => e.type === 'thread.started')?.thread_id };
}

/**
 * Adds captureHook.cjs (payload capture and the person's edit) on `events` to the project's
 * .codex/hooks.json, after Waypoint's own hooks, so on a PreToolUse Waypoint has opened
 * the call before the person writes.
 */
export function addCodexCaptureHooks(ws: string, events: readonly string[]): void {
  const file = path.join(ws, '.codex', 'hooks.json');
  const config = (fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : { hooks: {} }) as { hooks: Record<string, unknown[]> };
  const command = `node ${JSON.stringify(path.join(agentsDir, 'captureHook.cjs'))}`;
  for (const e of events) (config.hooks[e] ??= []).push({ hooks: [{ type: 'command', command, timeout: e === 'SessionEnd' ? 3 : 30 }] });
  fs.writeFileSync(file, JSON.stringify(config, null, 2) + '\n');
}

/** Every hook event Codex 0.171's binary names (its hook output structs and messages): captured to learn what the real one sends. */
export const CODEX_ALL_EVENTS = ['SessionStart', 'SessionEnd', 'UserPromptSubmit', 'PreToolUse', 'PostToolUse', 'PermissionRequest', 'PreCompact', 'PostCompact', 'Stop', 'SubagentStart', 'SubagentStop', 'Notification'] as const;
