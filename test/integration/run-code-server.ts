// Runs the integration suites inside code-server's Node extension host: the route
// that works offline (see shared/vscode-e2e.md). The workbench is opened by
// Chromium with a test payload; the smoke-test driver forwards the host's console
// to codeAutomationLog and reports run()'s outcome through codeAutomationExit.
// Exit code = test result.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { format } from 'node:util';
import { launchChromium } from '../../scripts/harness/browser';
import { buildExtension, buildIntegrationTests, integrationRunner } from '../../scripts/harness/build-tests';
import { startCodeServer, type CodeServer } from '../../scripts/harness/code-server';
import { ensureHarness } from '../../scripts/harness/install';
import { repoRoot } from '../../scripts/harness/versions';
import { printSummary, readResult } from './result';
import { PgCluster } from '../support/pgCluster';

const RUN_TIMEOUT_MS = Number(process.env.WAYPOINT_IT_TIMEOUT_MS ?? 180_000);
const label = 'integration';
/** Marks the extension host's console lines (see runner.ts). */
const HOST_PREFIX = '@@waypoint-host@@ ';
/** What a WAYPOINT_IT_TRACE trace records: DevTools' Performance panel's categories, with V8's sampling profiler. */
const TRACE_CATEGORIES = [
  'devtools.timeline', 'disabled-by-default-devtools.timeline', 'disabled-by-default-devtools.timeline.frame',
  'v8.execute', 'v8', 'blink.user_timing', 'loading', 'toplevel', 'disabled-by-default-v8.cpu_profiler', 'navigation', 'blink',
];
const outputDir = path.join(repoRoot, 'test-output', 'integration');

/**
 * One workbench run of the suite. The relay pass opens a workspace whose store a
 * `waypoint serve` (the shipped CLI, a real process) already owns, so the window
 * must relay to it; only the relay suite runs there (the others assume the window
 * owns the store), and it kills the serve process to see the window take over.
 */
interface Pass {
  name: string;
  env?: NodeJS.ProcessEnv;
  /** Runs before the workbench opens; returns a cleanup. */
  prepare?(workspace: string): Promise<() => Promise<void>>;
  /** What the workbench opens (the workspace folder unless given: a `.code-workspace` file, say). */
  open?(workspace: string): string;
}

const PASSES: Pass[] = [
  { name: 'main' },
  {
    name: 'relay',
    env: { WAYPOINT_TEST_GREP: 'second window' },
    prepare: async (workspace) => {
      const owner = await startServe(workspace);
      PASS_ENV.WAYPOINT_IT_RELAY_OWNER_PID = String(owner.pid);
      return owner.stop;
    },
  },
  {
    // A multi-root workspace of two folders (one of them not a git repository, the other
    // holding a nested repository): every folder is supervised by one store.
    name: 'folders',
    env: { WAYPOINT_TEST_GREP: 'two folders', WAYPOINT_IT_FOLDERS: '1' },
    open: (workspace) => {
      const second = path.join(path.dirname(workspace), 'second');
      fs.mkdirSync(path.join(second, 'nested'), { recursive: true });
      fs.writeFileSync(path.join(second, 'lib.txt'), 'lib one\n');
      fs.writeFileSync(path.join(second, 'nested', 'vendored.txt'), 'vendored one\n');
      execFileSync('git', ['init', '-q', path.join(second, 'nested')]);
      fs.writeFileSync(path.join(workspace, 'app.txt'), 'app one\n');
      const file = path.join(path.dirname(workspace), 'two.code-workspace');
      fs.writeFileSync(file, JSON.stringify({ folders: [{ path: 'workspace' }, { path: 'second' }] }, null, 2));
      return file;
    },
  },
  {
    // A throwaway PostgreSQL cluster (test/support/pgCluster.ts): the window connects to it
    // as a team store, and a CLI on "another machine" records into it. With no PostgreSQL
    // installed, creating the cluster throws and the pass fails: it never skips.
    name: 'team',
    env: { WAYPOINT_TEST_GREP: 'team store in VS Code' },
    prepare: async () => {
      const pg = await PgCluster.create();
      PASS_ENV.WAYPOINT_IT_TEAM_URL = `postgresql://postgres@127.0.0.1:${pg.port}/waypoint`;
      PASS_ENV.WAYPOINT_IT_TEAM_PASSWORD = pg.password;
      // For the outage test: how to stop and start this cluster (as the postgres user, like pgCluster does).
      PASS_ENV.WAYPOINT_IT_TEAM_PG_CTL = JSON.stringify({ bin: pg.bin, data: pg.dataDir, log: path.join(pg.dir, 'server.log') });
      return async () => pg.remove();
    },
  },
];
/** Set by a pass's prepare step for its workbench (the extension host inherits it). */
const PASS_ENV: NodeJS.ProcessEnv = {};

async function main(): Promise<number> {
  ensureHarness();
  buildExtension();
  await buildIntegrationTests();

  fs.mkdirSync(outputDir, { recursive: true });
  const only = process.env.WAYPOINT_IT_PASS;
  const totals = { passes: 0, failures: 0, pending: 0 };
  let code = 0;
  for (const pass of PASSES) {
    if (only && pass.name !== only) continue;
    // A pass whose set-up fails (no PostgreSQL for the team pass, say) fails; the others still run.
    const r = await runPass(pass).catch((e: unknown) => {
      console.error(`[integration] ${pass.name}: ${(e as Error).stack ?? e}`);
      return { code: 1, result: undefined };
    });
    if (r.code !== 0) code = 1;
    totals.passes += r.result?.passes ?? 0;
    totals.failures += r.result?.failures ?? (r.code ? 1 : 0);
    totals.pending += r.result?.pending ?? 0;
  }
  printSummary(label, totals);
  return code;
}

async function runPass(pass: Pass): Promise<{ code: number; result: ReturnType<typeof readResult> }> {
  const logName = pass.name === 'main' ? 'code-server.log' : `code-server.${pass.name}.log`;
  fs.rmSync(path.join(outputDir, logName), { force: true });
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'waypoint-it-'));
  const workspace = path.join(workDir, 'workspace');
  // .waypoint/ makes `workspaceContains:.waypoint` activate the extension.
  fs.mkdirSync(path.join(workspace, '.waypoint'), { recursive: true });
  const resultFile = path.join(workDir, 'result.json');
  for (const k of Object.keys(PASS_ENV)) delete PASS_ENV[k];
  const cleanup = await pass.prepare?.(workspace);

  let server: CodeServer | undefined;
  const browser = await launchChromium();
  try {
    server = await startCodeServer({
      workDir,
      smokeTestDriver: true,
      env: { WAYPOINT_TEST_RESULT_FILE: resultFile, WAYPOINT_HOST_LOG_PREFIX: HOST_PREFIX, ...pass.env, ...PASS_ENV },
      logFile: path.join(outputDir, logName),
    });
    const remote = (p: string) => `vscode-remote://127.0.0.1:${server!.port}${p}`;
    const url = server.url(pass.open?.(workspace) ?? workspace, [
      ['extensionDevelopmentPath', remote(repoRoot)],
      ['extensionTestsPath', remote(integrationRunner)],
      ['skipWelcome', 'true'],
    ]);
    const page = await browser.newPage();
    // A Chromium trace of the whole run (every frame, webviews included), for finding where
    // a page's time goes: open it in chrome://tracing or Perfetto.
    const trace = process.env.WAYPOINT_IT_TRACE;
    if (trace) await browser.startTracing(page, { path: trace, screenshots: false, categories: TRACE_CATEGORIES });
    const exitCode = new Promise<number>((resolve) => {
      void page.exposeFunction('codeAutomationExit', (code: number) => resolve(code));
    });
    const workbenchLog = fs.createWriteStream(path.join(outputDir, pass.name === 'main' ? 'workbench.log' : `workbench.${pass.name}.log`));
    await page.exposeFunction('codeAutomationLog', (type: string, args: unknown[]) => {
      const text = format(...args);
      if (text.startsWith(HOST_PREFIX)) process.stdout.write(`${text.slice(HOST_PREFIX.length)}\n`);
      else workbenchLog.write(`[${type}] ${text}\n`);
    });
    // Only the navigation itself: the run's own deadline below covers the workbench
    // loading, which on a loaded machine can take longer than goto's 30 s default.
    await page.goto(url, { waitUntil: 'commit', timeout: RUN_TIMEOUT_MS });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<number>((resolve) => {
      timer = setTimeout(() => {
        console.error(`[integration] ${pass.name}: no result within ${RUN_TIMEOUT_MS} ms; logs in ${outputDir}`);
        resolve(1);
      }, RUN_TIMEOUT_MS).unref();
    });
    const code = await Promise.race([exitCode, timeout]);
    // The next pass must not hear this one's deadline.
    clearTimeout(timer);
    if (trace) await browser.stopTracing();
    const result = readResult(resultFile);
    // Either signal alone could lie (a crashed host, a run with no tests): both must agree.
    return { code: code === 0 && result !== undefined && result.failures === 0 && result.passes > 0 ? 0 : 1, result };
  } finally {
    await browser.close();
    await server?.stop();
    await cleanup?.();
    if (!process.env.WAYPOINT_KEEP_WORKDIR) fs.rmSync(workDir, { recursive: true, force: true });
  }
}

/** `waypoint serve` from the freshly built dist/cli.js, owning the workspace's store until stopped (or killed by the test). */
async function startServe(workspace: string): Promise<{ pid: number; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, [path.join(repoRoot, 'dist', 'cli.js'), 'serve', '--workspace', workspace], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const deadline = Date.now() + 30_000;
  while (!out.includes('Serving Waypoint MCP')) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`waypoint serve did not start: ${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    pid: child.pid!,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(t);
    },
  };
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(`[integration] ${(e as Error).stack ?? e}`);
    process.exit(1);
  },
);
