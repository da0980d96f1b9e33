/**
 * The MCP phase's victim: a real `waypoint mcp` stdio server (dist/cli.js, which
 * owns the store when nobody else does), driven by the official SDK client the
 * way an agent drives it. The server is SIGKILLed per the kill plan; every tool
 * result that came back before is an acknowledgement the store must keep.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { buildCli, CLI, sc, waitExit } from '../support/mcp';
import type { Ack } from './checks';
import type { KillPlan, RunOutcome } from './driver';
import { Prng } from './prng';

export async function mcpSession(workspace: string, plan: KillPlan, acks: Ack[]): Promise<RunOutcome> {
  buildCli();
  const rng = new Prng(plan.workloadSeed);
  const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, 'mcp', '--workspace', workspace], stderr: 'pipe', cwd: workspace });
  let stderr = '';
  transport.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const client = new Client({ name: 'waypoint-chaos', version: '1.0.0' });
  await client.connect(transport);
  const pid = transport.pid!;
  let killed = false;
  let timer: NodeJS.Timeout | undefined;
  const arm = () =>
    (timer ??= setTimeout(() => {
      killed = true;
      process.kill(pid, 'SIGKILL');
    }, plan.delayMs));
  let seen = 0;
  const ack = (a: Ack) => {
    acks.push(a);
    if (++seen >= plan.afterAcks) arm();
  };
  if (plan.afterAcks === 0) arm();
  const call = async <T>(name: string, args: Record<string, unknown>): Promise<T> => sc<T>(await client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 }));
  const tag = `m${plan.workloadSeed.toString(36)}`;
  let failure: string | undefined;
  try {
    for (let i = 0; ; i++) {
      const key = `${tag}-${i}`;
      const t = await call<{ taskId: string }>('waypoint_task_start', { goal: `mcp chaos ${key}`, plan: [{ id: 'a', title: 'A' }, { id: 'b', title: 'B', dependsOn: ['a'] }], idempotencyKey: key });
      ack({ kind: 'task', taskId: t.taskId, id: key });
      for (const stepId of ['a', 'b']) {
        const s = await call<{ checkpointId: string }>('waypoint_step_start', { taskId: t.taskId, stepId });
        ack({ kind: 'checkpoint', taskId: t.taskId, id: s.checkpointId });
        for (let n = 1 + rng.int(4); n > 0; n--) {
          const abs = path.join(workspace, 'src', `mcp${rng.int(30)}.txt`);
          fs.mkdirSync(path.dirname(abs), { recursive: true });
          fs.writeFileSync(abs, `${key} ${stepId}\n`.repeat(1 + rng.int(300)));
        }
        if (rng.chance(0.5)) {
          const effect = `${key}-${stepId}-deploy`;
          const b = await call<{ decision: string }>('waypoint_side_effect_begin', { taskId: t.taskId, key: effect, kind: 'http', description: `deploy ${effect}` });
          if (b.decision === 'proceed') ack({ kind: 'effect', taskId: t.taskId, id: effect });
          await call('waypoint_side_effect_end', { taskId: t.taskId, key: effect, ok: true, result: { id: effect } });
        }
        if (rng.chance(0.3)) {
          const c = await call<{ checkpointId: string }>('waypoint_checkpoint', { taskId: t.taskId, label: `mid ${stepId}` });
          ack({ kind: 'checkpoint', taskId: t.taskId, id: c.checkpointId });
        }
        const done = await call<{ checkpointId: string }>('waypoint_step_complete', { taskId: t.taskId, stepId, summary: `did ${stepId}` });
        ack({ kind: 'checkpoint', taskId: t.taskId, id: done.checkpointId });
      }
    }
  } catch (e) {
    // A call cut off by the kill fails; one that fails while the server lives is a finding.
    if (!killed) failure = `${(e as Error).message}; server log: ${stderr.trim().split('\n').slice(-4).join(' | ')}`;
  } finally {
    clearTimeout(timer);
    if (!killed) process.kill(pid, 'SIGKILL');
    await client.close().catch(() => undefined);
    await waitExit(pid);
  }
  return { open: null, failure };
}
