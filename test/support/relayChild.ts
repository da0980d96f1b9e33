// An MCP client on this host in its own process that names its pid to the owner's HTTP
// endpoint (x-waypoint-client-pid), as a local client that lives as long as its agent may:
// it opens a session, starts a task, prints `ready` and waits. The session tests SIGKILL
// it, so it never ends its session. (`waypoint mcp` itself relays over /rpc, not MCP.)
//   node relayChild.js <workspace>
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { readDiscovery } from '../../src/ownership/discovery';
import { CLIENT_PID_HEADER } from '../../src/mcp/http';

async function main(): Promise<void> {
  const d = readDiscovery(path.join(process.argv[2], '.waypoint'));
  if (!d) throw new Error('no discovery file');
  const transport = new StreamableHTTPClientTransport(new URL(d.url), { requestInit: { headers: { authorization: `Bearer ${d.token}`, [CLIENT_PID_HEADER]: String(process.pid) } } });
  const client = new Client({ name: 'relay-child', version: '1.0.0' });
  await client.connect(transport);
  const r = await client.callTool({ name: 'waypoint_task_start', arguments: { goal: `relay ${process.pid}` } });
  if (r.isError) throw new Error(`tool call failed: ${JSON.stringify(r.content)}`);
  process.stdout.write('ready\n');
  setInterval(() => undefined, 60_000);
}

main().catch((e) => {
  process.stderr.write(`${(e as Error).stack ?? e}\n`);
  process.exit(1);
});
