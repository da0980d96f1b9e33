import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { AGENT_RUN_TIMEOUT_MS, agentBinary, agentsDir } from './install';

/**
 * Runs the real GitHub Copilot CLI offline, as its own `copilot help environment` describes:
 * `COPILOT_OFFLINE=true` (no GitHub sign-in, telemetry, web tools, GitHub MCP server or
 * auto-update) with a BYOK provider — `COPILOT_PROVIDER_BASE_URL` pointing at the scripted
 * OpenAI Responses server (`COPILOT_PROVIDER_TYPE=openai`, `COPILOT_PROVIDER_WIRE_API=responses`).
 *
 * - Model `gpt-5.5`: a model the CLI knows, so it offers the tools a user of that model gets
 *   (freeform `apply_patch`, `bash`, `sql` for its todos).
 * - `COPILOT_ALLOW_ALL=true` (exactly "true"): allows every tool and trusts the working folder,
 *   which is what loads the project's hooks (`.github/hooks/*.json`) in a headless run.
 * - Its home (`HOME`, so `~/.copilot`) is a fresh folder; the single-file binary unpacks its
 *   JavaScript into `~/.cache/copilot` there on first run.
 */
export const COPILOT_MODEL = 'gpt-5.5';

export interface CopilotRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The `--output-format json` event lines. */
  events: { type?: string; sessionId?: string; data?: Record<string, unknown> }[];
  sessionId?: string;
}

/** `copilot -p <prompt>` (with `--resume <id>` when `resume` names a session), in `cwd`. */
export async function runCopilot(opts: { cwd: string; home: string; baseUrl: string; prompt: string; resume?: string; env?: Record<string, string>; timeoutMs?: number }): Promise<CopilotRun> {
  const bin = agentBinary('copilot-cli');
  fs.mkdirSync(opts.home, { recursive: true });
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: opts.home,
    USER: process.env.USER ?? 'root',
    LANG: 'C.UTF-8',
    COPILOT_OFFLINE: 'true',
    COPILOT_AUTO_UPDATE: 'false',
    COPILOT_ALLOW_ALL: 'true',
    COPILOT_MODEL,
    COPILOT_PROVIDER_TYPE: 'openai',
    COPILOT_PROVIDER_WIRE_API: 'responses',
    COPILOT_PROVIDER_BASE_URL: `${opts.baseUrl}/v1`,
    COPILOT_PROVIDER_API_KEY: 'sk-scripted',
    ...opts.env,
  };
  const args = ['-p', opts.prompt, '--allow-all', '--no-auto-update', '--output-format', 'json', ...(opts.resume ? [`--resume=${opts.resume}`] : [])];
  const child = spawn(bin, args, { cwd: opts.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? AGENT_RUN_TIMEOUT_MS);
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  clearTimeout(timer);
  const events: CopilotRun['events'] = [];
  for (const line of stdout.split('\n')) {
    try {
      if (line.trim().startsWith('{')) events.push(JSON.parse(line) as CopilotRun['events'][number]);
    } catch {
      // Not an event line: the test reads only the events.
    }
  }
  return { code, stdout, stderr, events, sessionId: events.find((e) => e.type === 'result')?.sessionId };
}

/**
 * Adds captureHook.cjs (payload capture and the person's edit) on `events` to Waypoint's
 * `.github/hooks/waypoint.json`, after Waypoint's own entry, so on a PreToolUse Waypoint has
 * opened the call before the person writes.
 */
export function addCopilotCaptureHooks(ws: string, events: readonly string[]): void {
  const file = path.join(ws, '.github', 'hooks', 'waypoint.json');
  const config = JSON.parse(fs.readFileSync(file, 'utf8')) as { hooks: Record<string, unknown[]> };
  const command = `node ${JSON.stringify(path.join(agentsDir, 'captureHook.cjs'))}`;
  for (const e of events) (config.hooks[e] ??= []).push({ type: 'command', bash: command, timeoutSec: 30 });
  fs.writeFileSync(file, JSON.stringify(config, null, 2) + '\n');
}

/** The hook events Copilot CLI documents, in the PascalCase form whose payloads name their event: captured to learn what the real one sends. */
export const COPILOT_ALL_EVENTS = ['SessionStart', 'SessionEnd', 'UserPromptSubmit', 'PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PreCompact', 'Stop', 'SubagentStart', 'SubagentStop', 'ErrorOccurred', 'Notification', 'PermissionRequest'] as const;
