import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { AGENT_RUN_TIMEOUT_MS, agentBinary, agentsDir } from './install';

/**
 * Runs the real Qwen Code offline: its model API is the scripted Chat Completions server
 * (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_MODEL` with auth `openai` chosen in the
 * user settings), its home a fresh folder whose settings turn off usage statistics,
 * telemetry and the update check.
 */
export const QWEN_MODEL = 'qwen3-coder-plus';

export function writeQwenHome(home: string): void {
  const dir = path.join(home, '.qwen');
  fs.mkdirSync(dir, { recursive: true });
  const settings = {
    security: { auth: { selectedType: 'openai' } },
    tools: { todoWrite: { enabled: true } },
    privacy: { usageStatisticsEnabled: false },
    telemetry: { enabled: false },
    general: { enableAutoUpdate: false, disableAutoUpdate: true, disableUpdateNag: true },
  };
  fs.writeFileSync(path.join(dir, 'settings.json'), JSON.stringify(settings, null, 2) + '\n');
}

export interface QwenRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The `-o stream-json` event lines. */
  events: { type?: string; subtype?: string; session_id?: string; is_error?: boolean }[];
  sessionId?: string;
}

/** `qwen -p <prompt> --yolo -o stream-json` (plus `args`, e.g. `--resume <id>`), in `cwd`. */
export async function runQwen(opts: { cwd: string; home: string; baseUrl: string; prompt: string; args?: string[]; env?: Record<string, string>; timeoutMs?: number }): Promise<QwenRun> {
  const bin = agentBinary('qwen-code');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: opts.home,
    USER: process.env.USER ?? 'root',
    LANG: 'C.UTF-8',
    OPENAI_BASE_URL: `${opts.baseUrl}/v1`,
    OPENAI_API_KEY: 'sk-scripted-qwen',
    OPENAI_MODEL: QWEN_MODEL,
    ...opts.env,
  };
  const args = [bin, '-p', opts.prompt, '--yolo', '-o', 'stream-json', ...(opts.args ?? [])];
  const child = spawn(process.execPath, args, { cwd: opts.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? AGENT_RUN_TIMEOUT_MS);
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  clearTimeout(timer);
  const events: QwenRun['events'] = [];
  for (const line of stdout.split('\n')) {
    try {
      if (line.trim().startsWith('{')) events.push(JSON.parse(line) as QwenRun['events'][number]);
    } catch {
      // Not an event line: the test reads only the events.
    }
  }
  return { code, stdout, stderr, events, sessionId: events.find((e) => e.session_id)?.session_id };
}

/** Adds captureHook.cjs (payload capture and the person's edit) on `events` to the project's .qwen/settings.json, after Waypoint's own hooks. */
export function addQwenCaptureHooks(ws: string, events: readonly string[]): void {
  const file = path.join(ws, '.qwen', 'settings.json');
  const config = (fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {}) as { hooks?: Record<string, unknown[]> };
  const hooks = (config.hooks ??= {});
  const command = `node ${JSON.stringify(path.join(agentsDir, 'captureHook.cjs'))}`;
  for (const e of events) (hooks[e] ??= []).push({ hooks: [{ type: 'command', command, timeout: 30 }] });
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(config, null, 2) + '\n');
}

/** Qwen Code 0.24.4's hook events (its HookEventName). */
export const QWEN_ALL_EVENTS = [
  'PreToolUse',
  'PostToolUse',
  'PostToolUseFailure',
  'PostToolBatch',
  'Notification',
  'UserPromptSubmit',
  'UserPromptExpansion',
  'SessionStart',
  'Stop',
  'MessageDisplay',
  'SubagentStart',
  'SubagentStop',
  'PreCompact',
  'PostCompact',
  'SessionEnd',
  'SessionDelete',
  'PermissionRequest',
  'PermissionDenied',
  'StopFailure',
  'TodoCreated',
  'TodoCompleted',
  'InstructionsLoaded',
] as const;
