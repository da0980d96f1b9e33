import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { AGENT_RUN_TIMEOUT_MS, agentBinary, agentsDir } from './install';

/**
 * Runs the real Cline CLI offline: its model API is the scripted Chat Completions server,
 * set up as Cline's `openai` provider (`cline auth -p openai -b <url>/v1`, which it stores
 * as openai-compatible), in a fresh home. A prompt runs with `--json` (no terminal); a
 * session resumes only in Cline's terminal UI (`--id`), so that run gets a pseudo-terminal
 * (`script`) and the prompt typed into it.
 */
export const CLINE_MODEL = 'gpt-scripted';

export interface ClineRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

function clineEnv(home: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: home, USER: process.env.USER ?? 'root', LANG: 'C.UTF-8', TERM: 'xterm-256color', ...extra };
}

function run(cmd: string, args: string[], o: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number; onStart?: (write: (s: string) => void, output: () => string) => void; until?: () => boolean }): Promise<ClineRun> {
  const child = spawn(cmd, args, { cwd: o.cwd, env: o.env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  o.onStart?.((s) => child.stdin.write(s), () => stdout);
  if (!o.onStart) child.stdin.end();
  const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs);
  // A terminal session never exits on its own: it is ended once `until` says its work is done.
  const poll = o.until
    ? setInterval(() => {
        if (o.until!()) child.kill('SIGTERM');
      }, 1_000)
    : undefined;
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      clearTimeout(timer);
      if (poll) clearInterval(poll);
      resolve({ code, stdout, stderr });
    }),
  );
}

/** `cline auth`: the scripted server as the `openai` provider, in this home. */
export function authCline(o: { cwd: string; home: string; baseUrl: string }): Promise<ClineRun> {
  return run(agentBinary('cline'), ['auth', '-p', 'openai', '-k', 'sk-scripted-cline', '-m', CLINE_MODEL, '-b', `${o.baseUrl}/v1`], { cwd: o.cwd, env: clineEnv(o.home), timeoutMs: 60_000 });
}

/** `cline --json -P openai -m <model> <prompt>` in `cwd`. */
export function runCline(o: { cwd: string; home: string; prompt: string; env?: Record<string, string>; timeoutMs?: number }): Promise<ClineRun> {
  return run(agentBinary('cline'), ['--json', '-P', 'openai', '-m', CLINE_MODEL, o.prompt], { cwd: o.cwd, env: clineEnv(o.home, o.env), timeoutMs: o.timeoutMs ?? AGENT_RUN_TIMEOUT_MS });
}

/** The session a run started: Cline's newest session record in this home. */
export function lastClineSession(home: string): string | undefined {
  const dir = path.join(home, '.cline', 'data', 'sessions');
  const ids = fs.existsSync(dir) ? fs.readdirSync(dir).sort() : [];
  return ids.at(-1);
}

/**
 * `cline --id <session>` in its terminal UI (under `script`, a pseudo-terminal): the prompt
 * is typed once the UI is up, and the run ended once `done` says the turn is over.
 */
export function resumeCline(o: { cwd: string; home: string; session: string; prompt: string; done: () => boolean; env?: Record<string, string>; timeoutMs?: number }): Promise<ClineRun> {
  const cmd = [agentBinary('cline'), '-P', 'openai', '-m', CLINE_MODEL, '--id', o.session].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
  return run('script', ['-qfec', cmd, '/dev/null'], {
    cwd: o.cwd,
    env: clineEnv(o.home, o.env),
    timeoutMs: o.timeoutMs ?? AGENT_RUN_TIMEOUT_MS,
    onStart: (write, output) => {
      // A prompt typed before the UI has drawn its input box is lost: wait for its footer
      // (the auto-approve line), or 30 s on a machine too slow to say so.
      const since = Date.now();
      const ready = setInterval(() => {
        if (!output().includes('Auto-approve') && Date.now() - since < 30_000) return;
        clearInterval(ready);
        setTimeout(() => write(o.prompt), 1_500);
        setTimeout(() => write('\r'), 2_500);
      }, 250);
    },
    until: o.done,
  });
}

/** Cline 3.0.65's hook events (what `.clinerules/hooks/<Event>` may name). */
export const CLINE_ALL_EVENTS = ['TaskStart', 'TaskResume', 'TaskCancel', 'TaskComplete', 'UserPromptSubmit', 'PreToolUse', 'PostToolUse', 'PreCompact'] as const;

/**
 * captureHook.cjs (payload capture and the person's edit) as Cline's global hooks
 * (`~/.cline/hooks/<Event>`), which Cline runs beside the project's own: the project's
 * `.clinerules/hooks/<Event>` files are Waypoint's.
 */
export function addClineCaptureHooks(home: string, events: readonly string[], env: Record<string, string>): void {
  const dir = path.join(home, '.cline', 'hooks');
  fs.mkdirSync(dir, { recursive: true });
  const exports = Object.entries(env)
    .map(([k, v]) => `export ${k}='${v.replace(/'/g, `'\\''`)}'\n`)
    .join('');
  for (const e of events) {
    const file = path.join(dir, e);
    fs.writeFileSync(file, `#!/bin/sh\n${exports}exec node '${path.join(agentsDir, 'captureHook.cjs')}'\n`);
    fs.chmodSync(file, 0o755);
  }
}

/**
 * Cline starts a hub daemon (`--cline-hub-daemon --cwd <workspace>`) that outlives the run;
 * the suite ends the ones it started, found by their workspace under `root`, and waits
 * (at most 10 s) until they are gone, so they write nothing into a folder being removed.
 */
export async function stopClineHubs(root: string): Promise<number> {
  const pids: number[] = [];
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    let args: string[];
    try {
      args = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    const cwd = args[args.indexOf('--cwd') + 1] ?? '';
    if (!args.includes('--cline-hub-daemon') || !cwd.startsWith(root + path.sep)) continue;
    try {
      process.kill(Number(pid), 'SIGTERM');
      pids.push(Number(pid));
    } catch {
      // Gone already.
    }
  }
  const alive = (pid: number) => fs.existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  for (const until = Date.now() + 10_000; pids.some(alive) && Date.now() < until; ) await new Promise((r) => setTimeout(r, 100));
  return pids.length;
}
