// A store owner in its own process with a short lease, for the takeover tests: it
// opens the store, serves the owner endpoint (MCP + /rpc) and prints `ready` with
// its endpoint. The test then SIGSTOPs it (a hung owner: its pid lives, its lease
// lapses) or SIGKILLs it (an owner that vanished). Given a FIFO, SIGUSR2 blocks its
// main thread in a synchronous read of it (an owner hung in a blocking open: its pid
// and its threads live, its event loop does not turn) until someone writes the FIFO.
//   node ownerChild.js <workspace> <leaseMs> [fifo]
import * as fs from 'node:fs';
import { Engine } from '../../src/core/engine/engine';
import { startOwnerEndpoint } from '../../src/mcp/owner';

async function main(): Promise<void> {
  const [workspace, leaseMs, fifo] = process.argv.slice(2);
  if (fifo) {
    process.on('SIGUSR2', () => {
      process.stdout.write('blocking\n');
      fs.readFileSync(fifo);
      process.stdout.write('woke\n');
    });
  }
  const engine = await Engine.open({ workspace, store: { lock: { waitMs: 2_000, leaseMs: Number(leaseMs), ownerId: `waypoint-serve:child-${process.pid}` } } });
  const endpoint = await startOwnerEndpoint({ engine });
  process.stdout.write(`ready ${JSON.stringify({ url: endpoint.http.url, pid: process.pid })}\n`);
  await new Promise((resolve) => process.once('SIGTERM', resolve));
  await endpoint.close();
  await engine.close();
}

main().catch((e) => {
  process.stderr.write(`${(e as Error).stack ?? e}\n`);
  process.exit(1);
});
