/**
 * The parts of the MCP SDK Waypoint serves with, in one module that its users require
 * where they use it (through lazySdk.ts) rather than import: a CLI call that serves no MCP (a checkpoint, a
 * task listing) then never loads the SDK, whose load was ~50 ms and ~14 MB of every full
 * CLI call. Requiring this module (not the SDK's own paths) keeps the bundle on the SDK's
 * ES modules, so the SDK and Waypoint share one copy of zod.
 */
export { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
export { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
export { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
export { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
