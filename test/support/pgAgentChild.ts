/**
 * An agent on a team-store workspace, in a process of its own: opens the engine on
 * workspace argv[3] with the team store at argv[2] (as `waypoint mcp` started by an
 * agent does), starts a task with a lease of argv[4] ms and a step in progress, prints
 * `ready <taskId>` once that is durable, then renews its lease every second until it
 * is killed.
 */
import * as os from 'node:os';
import { Engine } from '../../src/core/engine';

async function run(): Promise<void> {
  const [url, workspace, ttl] = process.argv.slice(2);
  const engine = await Engine.open({ workspace, teamStore: url });
  const owner = { id: 'agent-session-7', pid: process.pid, host: os.hostname() };
  const { taskId } = await engine.startTask({ goal: 'Migrate the billing tables', title: 'Billing migration', agent: 'claude-code', plan: [{ id: 'migrate', title: 'Migrate' }], leaseTtlMs: Number(ttl), owner });
  await engine.startStep({ taskId, stepId: 'migrate', owner });
  process.stdout.write(`ready ${taskId}\n`);
  setInterval(() => {
    engine.heartbeat({ taskId, owner }).catch((e) => process.stderr.write(`heartbeat failed: ${(e as Error).message}\n`));
  }, 1000);
}

run().catch((e) => {
  process.stderr.write(`agent failed: ${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(3);
});
