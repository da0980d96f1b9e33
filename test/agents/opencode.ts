import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { AGENT_RUN_TIMEOUT_MS, agentBinary, agentsDir } from './install';

/**
 * Runs the real opencode offline: its model is a custom `@ai-sdk/openai-compatible`
 * provider (bundled in the binary: nothing is installed at run time) pointed at the
 * scripted Chat Completions server, declared in the user config of a fresh home. At start
 * opencode fetches https://models.opencode.ai/api.json; OPENCODE_DISABLE_MODELS_FETCH
 * stops that (without it the fetch fails offline, is logged, and the run goes on).
 */
export const OPENCODE_MODEL = 'scripted/scripted-model';

export function writeOpencodeHome(home: string, baseUrl: string): void {
  const dir = path.join(home, '.config', 'opencode');
  fs.mkdirSync(path.join(dir, 'plugins'), { recursive: true });
  const config = {
    $schema: 'https://opencode.ai/config.json',
    provider: {
      scripted: {
        npm: '@ai-sdk/openai-compatible',
        name: 'Scripted',
        options: { baseURL: `${baseUrl}/v1`, apiKey: 'sk-scripted-opencode' },
        models: { 'scripted-model': { name: 'Scripted', tool_call: true } },
      },
    },
    model: OPENCODE_MODEL,
    autoupdate: false,
    share: 'disabled',
  };
  fs.writeFileSync(path.join(dir, 'opencode.json'), JSON.stringify(config, null, 2) + '\n');
  // The capture plugin: global plugins load before the project's, so its hooks run before Waypoint's.
  fs.copyFileSync(path.join(agentsDir, 'opencodeCapture.mjs'), path.join(dir, 'plugins', 'capture.js'));
}

/** Points the home's config at another scripted server (the resumed run's). */
export function setOpencodeServer(home: string, baseUrl: string): void {
  const file = path.join(home, '.config', 'opencode', 'opencode.json');
  const config = JSON.parse(fs.readFileSync(file, 'utf8')) as { provider: { scripted: { options: { baseURL: string } } } };
  config.provider.scripted.options.baseURL = `${baseUrl}/v1`;
  fs.writeFileSync(file, JSON.stringify(config, null, 2) + '\n');
}

export interface OpencodeRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The `--format json` event lines. */
  events: { type?: string; sessionID?: string; error?: unknown }[];
  sessionId?: string;
}

/** `opencode run --format json -m <model> <words…>` (plus `args`, e.g. `-s <id>`), in `cwd`. */
export async function runOpencode(opts: { cwd: string; home: string; prompt: string; args?: string[]; env?: Record<string, string>; timeoutMs?: number }): Promise<OpencodeRun> {
  const bin = agentBinary('opencode');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: opts.home,
    USER: process.env.USER ?? 'root',
    LANG: 'C.UTF-8',
    OPENCODE_DISABLE_MODELS_FETCH: '1',
    OPENCODE_DISABLE_AUTOUPDATE: '1',
    OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
    OPENCODE_DISABLE_SHARE: '1',
    ...opts.env,
  };
  // The words as separate arguments: `opencode run` quotes one argument that holds spaces.
  const args = ['run', '--format', 'json', '-m', OPENCODE_MODEL, ...(opts.args ?? []), ...opts.prompt.split(' ')];
  const child = spawn(bin, args, { cwd: opts.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? AGENT_RUN_TIMEOUT_MS);
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  clearTimeout(timer);
  const events: OpencodeRun['events'] = [];
  for (const line of stdout.split('\n')) {
    try {
      if (line.trim().startsWith('{')) events.push(JSON.parse(line) as OpencodeRun['events'][number]);
    } catch {
      // Not an event line: the test reads only the events.
    }
  }
  return { code, stdout, stderr, events, sessionId: events.find((e) => e.sessionID)?.sessionID };
}
