import type { z } from 'zod';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { mcpSdk } from './lazySdk';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { SERVER_INSTRUCTIONS, TOOLS, runTool, toolError, type ToolContext } from './tools';

/**
 * Builds one MCP server (one per session: the SDK binds a server to one transport)
 * with Waypoint's tools. What a call does is the dispatcher's business: `localDispatch`
 * runs it over an engine API — this process's store (localApi) or, in a relaying
 * `waypoint mcp`, the owner's `/rpc` (remoteApi). Either way the client sees the same
 * tools, schemas and descriptions.
 */
export type Dispatch = (name: string, args: unknown) => Promise<CallToolResult>;

export const SERVER_NAME = 'waypoint';
export const SERVER_VERSION = '0.1.0';

export function createMcpServer(dispatch: Dispatch): McpServer {
  const server = new (mcpSdk().McpServer)({ name: SERVER_NAME, version: SERVER_VERSION }, { instructions: SERVER_INSTRUCTIONS, capabilities: { tools: {} } });
  for (const spec of TOOLS) {
    server.registerTool(
      spec.name,
      { title: spec.title, description: spec.description, inputSchema: spec.input, outputSchema: spec.output, annotations: spec.annotations },
      // The SDK has validated args against spec.input already.
      async (args: unknown) => dispatch(spec.name, args),
    );
  }
  return server;
}

/** Runs tools over the engine API in `ctx` (in-process or the owner's), as the session's lease owner. */
export function localDispatch(ctx: ToolContext): Dispatch {
  const byName = new Map(TOOLS.map((t) => [t.name, t]));
  return async (name, args) => {
    const spec = byName.get(name);
    if (!spec) return toolError(`Unknown tool '${name}'.`);
    // The SDK validated args against spec.input before dispatching (see createMcpServer).
    return runTool(spec, ctx, args as z.infer<typeof spec.input>);
  };
}
