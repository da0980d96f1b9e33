// An MCP relay in its own process (what `waypoint mcp` is when an owner serves): it opens
// a session on the owner's HTTP endpoint, with its pid, prints `ready <sessions>` and waits.
// The session tests SIGKILL it, so it never ends its session.
//   node relayChild.js <workspace>
import * as path from 'node:path';
import { readDiscovery } from '../../src/ownership/discovery';
import { connectRelay } from '../../src/mcp/relay';

async function main(): Promise<void> {
  const d = readDiscovery(path.join(process.argv[2], '.waypoint'));
  if (!d) throw new Error('no discovery file');
  const relay = await connectRelay(d, { clientName: 'relay-child' });
  const r = await relay.dispatch('waypoint_task_start', { goal: `relay ${process.pid}` });
  if (r.isError) throw new Error(`tool call failed: ${JSON.stringify(r.content)}`);
  process.stdout.write('ready\n');
  setInterval(() => undefined, 60_000);
}

main().catch((e) => {
  process.stderr.write(`${(e as Error).stack ?? e}\n`);
  process.exit(1);
});
