import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { AGENT_RUN_TIMEOUT_MS, agentBinary, agentsDir } from './install';

/**
 * Runs the real Gemini CLI offline: its model API is the scripted Gemini server
 * (`GOOGLE_GEMINI_BASE_URL`, honoured with the API-key auth, `GEMINI_API_KEY`), its home a
 * fresh folder whose user settings turn off usage statistics, telemetry and the update
 * check, and trust the workspace folder.
 *
 * - Auth `gemini-api-key` chosen in the settings: with only the base URL set, 0.61 picks
 *   its `gateway` auth, which non-interactive mode refuses ("Invalid auth method selected").
 * - The workspace is trusted (`trustedFolders.json`): in an untrusted folder Gemini CLI
 *   drops `--yolo` back to asking, and a headless run cannot be asked.
 * - Project hooks run after a one-time warning on stderr (it then trusts them itself,
 *   `~/.gemini/trusted_hooks.json`).
 */
export const GEMINI_MODEL = 'gemini-2.5-flash';

export function writeGeminiHome(home: string, ws: string): void {
  const dir = path.join(home, '.gemini');
  fs.mkdirSync(dir, { recursive: true });
  const settings = {
    security: { auth: { selectedType: 'gemini-api-key' } },
    privacy: { usageStatisticsEnabled: false },
    telemetry: { enabled: false },
    general: { disableAutoUpdate: true, disableUpdateNag: true },
  };
  fs.writeFileSync(path.join(dir, 'settings.json'), JSON.stringify(settings, null, 2) + '\n');
  fs.writeFileSync(path.join(dir, 'trustedFolders.json'), JSON.stringify({ [ws]: 'TRUST_FOLDER' }, null, 2) + '\n');
}

export interface GeminiRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The `-o stream-json` event lines. */
  events: { type?: string; session_id?: string; tool_name?: string; status?: string; role?: string; content?: string }[];
  sessionId?: string;
}

/** `gemini -p <prompt> --yolo` (with `--resume <id>` when `resume` names a session), in `cwd`. */
export async function runGemini(opts: { cwd: string; home: string; baseUrl: string; prompt: string; resume?: string; env?: Record<string, string>; timeoutMs?: number }): Promise<GeminiRun> {
  const bin = agentBinary('gemini-cli');
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: opts.home, USER: process.env.USER ?? 'root', LANG: 'C.UTF-8', GEMINI_API_KEY: 'scripted-gemini-key', GOOGLE_GEMINI_BASE_URL: opts.baseUrl, ...opts.env };
  const args = [bin, '-p', opts.prompt, '--yolo', '-m', GEMINI_MODEL, '-o', 'stream-json', ...(opts.resume ? ['--resume', opts.resume] : [])];
  const child = spawn(process.execPath, args, { cwd: opts.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? AGENT_RUN_TIMEOUT_MS);
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  clearTimeout(timer);
  const events: GeminiRun['events'] = [];
  for (const line of stdout.split('\n')) {
    try {
      if (line.trim().startsWith('{')) events.push(JSON.parse(line) as GeminiRun['events'][number]);
    } catch {
      // Not an event line: the test reads only the events.
    }
  }
  return { code, stdout, stderr, events, sessionId: events.find((e) => e.type === 'init')?.session_id };
}

/**
 * Adds captureHook.cjs (payload capture and the person's edit) on `events` to the project's
 * .gemini/settings.json, after Waypoint's own hooks.
 */
export function addGeminiCaptureHooks(ws: string, events: readonly string[]): void {
  const file = path.join(ws, '.gemini', 'settings.json');
  const config = JSON.parse(fs.readFileSync(file, 'utf8')) as { hooks: Record<string, unknown[]> };
  const command = `node ${JSON.stringify(path.join(agentsDir, 'captureHook.cjs'))}`;
  for (const e of events) (config.hooks[e] ??= []).push({ hooks: [{ type: 'command', name: 'capture', command, timeout: 30_000 }] });
  fs.writeFileSync(file, JSON.stringify(config, null, 2) + '\n');
}

/**
 * Gemini CLI 0.61's hook events (its HookEventName), but for the model ones (BeforeModel,
 * AfterModel, BeforeToolSelection: whole requests and streamed chunks, which Waypoint does
 * not use).
 */
export const GEMINI_ALL_EVENTS = ['SessionStart', 'SessionEnd', 'BeforeAgent', 'AfterAgent', 'BeforeTool', 'AfterTool', 'PreCompress', 'Notification'] as const;
