import * as fs from 'node:fs';
import * as path from 'node:path';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/** Helpers for the MCP tests: the built CLI, real SDK clients, and child processes that are always reaped. */

export const ROOT = path.resolve(__dirname, '..', '..');
export const CLI = path.join(ROOT, 'dist', 'cli.js');

let built = false;
/**
 * Builds dist/cli.js once per test process, so the tests run the code as shipped. Under
 * the unit suite's global setup (test/support/globalSetup.ts) the main process has built
 * it before any worker starts, and a worker must not rebuild it under another's feet.
 */
export function buildCli(): void {
  if (built || process.env.WAYPOINT_TEST_CLI_BUILT === '1') return;
  execFileSync(process.execPath, ['esbuild.js'], { cwd: ROOT, stdio: 'pipe' });
  built = true;
}

export interface StdioSession {
  client: Client;
  transport: StdioClientTransport;
  pid: number;
  stderr: () => string;
  close(): Promise<void>;
}

export async function stdioSession(workspace: string, extra: string[] = []): Promise<StdioSession> {
  const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, 'mcp', '--workspace', workspace, ...extra], stderr: 'pipe', cwd: workspace });
  let err = '';
  transport.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const client = new Client({ name: 'waypoint-test', version: '1.0.0' });
  await client.connect(transport);
  const pid = transport.pid!;
  return {
    client,
    transport,
    pid,
    stderr: () => err,
    close: async () => {
      await client.close().catch(() => undefined);
      await waitExit(pid);
    },
  };
}

export async function httpClient(url: string, token: string, headers: Record<string, string> = {}): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}`, ...headers } } });
  const client = new Client({ name: 'waypoint-test-http', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Waits for a process to be gone (SIGKILLs it after the deadline, so no test leaves one behind). */
export async function waitExit(pid: number, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (isAlive(pid)) {
    if (Date.now() > deadline) {
      process.kill(pid, 'SIGKILL');
      await new Promise((r) => setTimeout(r, 100));
      return;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function waitFor<T>(what: string, fn: () => T | undefined | null | false, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Runs the CLI to completion. */
export function cli(args: string[], opts: { input?: string; cwd?: string } = {}): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { input: opts.input ?? '', cwd: opts.cwd, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

export function eventCount(workspace: string): number {
  const r = cli(['events', '--workspace', workspace, '--json']);
  if (r.status !== 0) throw new Error(`waypoint events failed: ${r.stderr}`);
  return (JSON.parse(r.stdout) as unknown[]).length;
}

export interface Served {
  child: ChildProcess;
  url: string;
  token: string;
  stop(): Promise<number | null>;
}

/** Starts `waypoint serve` and waits for its discovery file. */
export async function serve(workspace: string, extra: string[] = []): Promise<Served> {
  const child = spawn(process.execPath, [CLI, 'serve', '--workspace', workspace, ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const file = path.join(workspace, '.waypoint', 'mcp.json');
  try {
    await waitFor(`waypoint serve to write ${file}`, () => out.includes('Serving Waypoint MCP') && fs.existsSync(file));
  } catch (e) {
    child.kill('SIGKILL');
    throw new Error(`${(e as Error).message}; output: ${out}`);
  }
  const d = JSON.parse(fs.readFileSync(file, 'utf8')) as { url: string; token: string };
  return {
    child,
    url: d.url,
    token: d.token,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const code = await exited;
      clearTimeout(t);
      return code;
    },
  };
}

export function sc<T = Record<string, unknown>>(r: unknown): T {
  const res = r as CallToolResult;
  if (res.isError) throw new Error(`tool error: ${JSON.stringify(res.content)}`);
  return res.structuredContent as T;
}

export function errorText(r: unknown): string {
  const res = r as CallToolResult;
  if (!res.isError) throw new Error(`expected a tool error, got ${JSON.stringify(res)}`);
  return (res.content as { type: string; text: string }[]).map((c) => c.text).join('\n');
}
