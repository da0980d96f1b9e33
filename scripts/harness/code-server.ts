// Starts code-server hermetically: its own HOME, XDG dirs, TMPDIR, user-data and
// extensions dirs under one work folder, bound to a free loopback port. code-server
// writes a config with a random password into HOME and VS Code's server drops
// sockets into TMPDIR, so sharing the person's would leak state between runs.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { codeServerEntry, nodeBin } from './versions';

/** Settings that keep the workbench quiet and offline-friendly. */
const quietSettings = {
  'workbench.startupEditor': 'none',
  'workbench.tips.enabled': false,
  'extensions.autoCheckUpdates': false,
  'extensions.autoUpdate': false,
  'extensions.ignoreRecommendations': true,
  'telemetry.telemetryLevel': 'off',
  'chat.disableAIFeatures': true,
  'update.mode': 'none',
  'security.workspace.trust.enabled': false,
};

export interface CodeServerOptions {
  /** Everything the server writes goes under here. */
  workDir: string;
  /** Defaults to `<workDir>/extensions` (fresh, so only what the test installs is there). */
  extensionsDir?: string;
  /** Extra environment; the extension host inherits the server's. */
  env?: NodeJS.ProcessEnv;
  settings?: Record<string, unknown>;
  /** Needed for the `payload` (extensionDevelopmentPath / extensionTestsPath) to be honoured. */
  smokeTestDriver?: boolean;
  /** Where the server's own output goes; defaults to `<workDir>/code-server.log`. */
  logFile?: string;
}

export interface CodeServer {
  readonly port: number;
  readonly origin: string;
  readonly logFile: string;
  readonly extensionsDir: string;
  /** A workbench URL for a folder, optionally with a test payload. */
  url(folder: string, payload?: [string, string][]): string;
  /** Kills the server's whole process group (file watchers included) and waits for it. */
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

interface Layout {
  env: NodeJS.ProcessEnv;
  baseArgs: string[];
  extensionsDir: string;
}

function layout(opts: CodeServerOptions): Layout {
  const dir = (name: string) => {
    const p = path.join(opts.workDir, name);
    fs.mkdirSync(p, { recursive: true });
    return p;
  };
  const home = dir('home');
  const userData = dir('user-data');
  const extensionsDir = opts.extensionsDir ?? dir('extensions');
  fs.mkdirSync(extensionsDir, { recursive: true });
  fs.mkdirSync(path.join(userData, 'User'), { recursive: true });
  fs.writeFileSync(
    path.join(userData, 'User', 'settings.json'),
    JSON.stringify({ ...quietSettings, ...opts.settings }, null, 2),
  );
  const config = path.join(opts.workDir, 'config.yaml');
  fs.writeFileSync(config, 'cert: false\n');
  return {
    extensionsDir,
    env: {
      ...process.env,
      HOME: home,
      XDG_CONFIG_HOME: dir('xdg-config'),
      XDG_DATA_HOME: dir('xdg-data'),
      XDG_CACHE_HOME: dir('xdg-cache'),
      TMPDIR: dir('tmp'),
      ...opts.env,
    },
    baseArgs: [
      '--config', config, '--auth', 'none',
      '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust',
      '--extensions-dir', extensionsDir, '--user-data-dir', userData,
    ],
  };
}

/** `code-server --install-extension` into the same hermetic layout a later start uses. */
export function installExtension(opts: CodeServerOptions, vsix: string): void {
  const { env, baseArgs } = layout(opts);
  const r = spawnSync(nodeBin, [codeServerEntry, ...baseArgs, '--install-extension', vsix], {
    env, encoding: 'utf8', timeout: 120_000,
  });
  if (r.status !== 0) {
    throw new Error(`code-server --install-extension ${vsix} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  }
}

/** Servers still running, so a Ctrl-C (or CI's SIGTERM) can take their groups down. */
const live = new Set<ChildProcess>();
let signalsHooked = false;

/**
 * A detached server is outside the terminal's process group, so Ctrl-C never reaches
 * it, and Node skips 'exit' listeners when a signal kills it: without this hook an
 * interrupted test run or demo would leave code-server and its watchers behind.
 */
function hookSignals(): void {
  if (signalsHooked) return;
  signalsHooked = true;
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      for (const child of live) killGroup(child, 'SIGKILL');
      process.exit(128 + (signal === 'SIGINT' ? 2 : signal === 'SIGTERM' ? 15 : 1));
    });
  }
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // Already gone.
  }
}

async function waitHealthy(origin: string, child: ChildProcess, logFile: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`code-server exited early (${child.exitCode ?? child.signalCode}); log:\n${tail(logFile)}`);
    }
    try {
      const res = await fetch(`${origin}/healthz`);
      if (res.ok) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`code-server did not answer /healthz within ${timeoutMs} ms; log:\n${tail(logFile)}`);
}

function tail(file: string, lines = 40): string {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

export async function startCodeServer(opts: CodeServerOptions): Promise<CodeServer> {
  const { env, baseArgs, extensionsDir } = layout(opts);
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const logFile = opts.logFile ?? path.join(opts.workDir, 'code-server.log');
  const out = fs.openSync(logFile, 'a');
  const args = [codeServerEntry, ...baseArgs, '--bind-addr', `127.0.0.1:${port}`];
  if (opts.smokeTestDriver) args.push('--vscode-option', 'enable-smoke-test-driver');
  // detached: its own process group, so one kill reaches the file watchers and
  // extension hosts it forks.
  const child = spawn(nodeBin, args, { env, detached: true, stdio: ['ignore', out, out] });
  fs.closeSync(out);
  const onExit = () => killGroup(child, 'SIGKILL');
  process.once('exit', onExit);
  live.add(child);
  hookSignals();

  const stop = async () => {
    process.removeListener('exit', onExit);
    live.delete(child);
    if (child.exitCode !== null || child.signalCode !== null) {
      killGroup(child, 'SIGKILL'); // the leader may be gone while children linger
      return;
    }
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    killGroup(child, 'SIGTERM');
    const timer = setTimeout(() => killGroup(child, 'SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
    killGroup(child, 'SIGKILL');
  };

  try {
    await waitHealthy(origin, child, logFile, 30_000);
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    port, origin, logFile, extensionsDir, stop,
    url(folder, payload) {
      // A `.code-workspace` file opens as a (multi-root) workspace, anything else as a folder.
      const q = new URLSearchParams(folder.endsWith('.code-workspace') ? { workspace: folder } : { folder });
      if (payload) q.set('payload', JSON.stringify(payload));
      return `${origin}/?${q.toString()}`;
    },
  };
}
