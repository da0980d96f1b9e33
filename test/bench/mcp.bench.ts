import * as fs from 'node:fs';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Engine } from '../../src/core/engine/engine';
import { CLI, ROOT, httpClient, serve } from '../support/mcp';
import { benchDir, fmtMs, percentile, printTable, type Row } from './util';

/**
 * MCP round-trip latency of `waypoint_step_start`, over stdio (`waypoint mcp`,
 * owning the store) and over streamable HTTP (`waypoint serve`), against the same
 * operation through the engine API in this process. Before each step start the
 * workload changes 10 files in the workspace; only the step start is timed (each
 * step is completed, untimed, so the next one starts from a clean state).
 */


function touchFiles(dir: string, round: number): void {
  for (let i = 0; i < 10; i++) fs.writeFileSync(path.join(dir, 'src', `f${i}.ts`), `export const v${i} = ${round};\n// ${'x'.repeat(200)}\n`);
}

async function measure(dir: string, n: number, startTask: () => Promise<string>, stepStart: (taskId: string) => Promise<string>, complete: (taskId: string, stepId: string) => Promise<void>): Promise<number[]> {
  fs.mkdirSync(path.join(dir, 'src'), { recursive: true });
  const taskId = await startTask();
  const lat: number[] = [];
  for (let i = 0; i < n + 5; i++) {
    touchFiles(dir, i);
    const t0 = performance.now();
    const stepId = await stepStart(taskId);
    const ms = performance.now() - t0;
    if (i >= 5) lat.push(ms); // the first calls warm the JIT and the connection
    await complete(taskId, stepId);
  }
  return lat;
}

function toolOk(r: unknown): Record<string, unknown> {
  const res = r as CallToolResult;
  if (res.isError) throw new Error(JSON.stringify(res.content));
  return res.structuredContent as Record<string, unknown>;
}

async function viaClient(client: Client, dir: string, n: number): Promise<number[]> {
  return measure(
    dir,
    n,
    async () => String(toolOk(await client.callTool({ name: 'waypoint_task_start', arguments: { goal: 'bench' } })).taskId),
    async (taskId) => String(toolOk(await client.callTool({ name: 'waypoint_step_start', arguments: { taskId, title: 'edit 10 files' } })).stepId),
    async (taskId, stepId) => void toolOk(await client.callTool({ name: 'waypoint_step_complete', arguments: { taskId, stepId } })),
  );
}

export async function main(opts: { quick?: boolean } = {}): Promise<Row[]> {
  const n = opts.quick ? 50 : 300;
  execFileSync(process.execPath, ['esbuild.js'], { cwd: ROOT, stdio: 'pipe' });
  const rows: Row[] = [];

  const direct = benchDir('wp-bench-mcp-engine-');
  let engineLat: number[];
  try {
    const engine = await Engine.open({ workspace: direct.dir });
    try {
      const owner = { id: 'bench', pid: process.pid };
      engineLat = await measure(
        direct.dir,
        n,
        async () => (await engine.startTask({ goal: 'bench', owner })).taskId,
        async (taskId) => (await engine.startStep({ taskId, title: 'edit 10 files', owner })).stepId,
        async (taskId, stepId) => void (await engine.completeStep({ taskId, stepId, owner })),
      );
    } finally {
      await engine.close();
    }
  } finally {
    direct.cleanup();
  }

  const stdioDir = benchDir('wp-bench-mcp-stdio-');
  let stdioLat: number[];
  try {
    const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, 'mcp', '--workspace', stdioDir.dir], stderr: 'ignore' });
    const client = new Client({ name: 'bench', version: '1' });
    await client.connect(transport);
    try {
      stdioLat = await viaClient(client, stdioDir.dir, n);
    } finally {
      await client.close();
    }
  } finally {
    stdioDir.cleanup();
  }

  const httpDir = benchDir('wp-bench-mcp-http-');
  let httpLat: number[];
  try {
    const served = await serve(httpDir.dir);
    try {
      const client = await httpClient(served.url, served.token);
      try {
        httpLat = await viaClient(client, httpDir.dir, n);
      } finally {
        await client.close();
      }
    } finally {
      await served.stop();
    }
  } finally {
    httpDir.cleanup();
  }

  const base50 = percentile(engineLat, 50);
  const base99 = percentile(engineLat, 99);
  for (const [name, lat] of [
    ['stdio', stdioLat],
    ['HTTP', httpLat],
  ] as const) {
    const p50 = percentile(lat, 50);
    const p99 = percentile(lat, 99);
    rows.push({ measure: `step_start p50, MCP ${name} (10-file change)`, waypoint: fmtMs(p50), baseline: fmtMs(base50), ratio: `${(p50 / base50).toFixed(1)}x`, target: '(info)', ok: null });
    rows.push({ measure: `step_start p99, MCP ${name} (10-file change)`, waypoint: fmtMs(p99), baseline: fmtMs(base99), ratio: `${(p99 / base99).toFixed(1)}x`, target: '(info)', ok: null });
  }
  printTable(`MCP round trip, ${n} calls each (baseline: the engine API in-process)`, rows);
  return rows;
}


if (require.main === module) void main({ quick: process.argv.includes('--quick') });
