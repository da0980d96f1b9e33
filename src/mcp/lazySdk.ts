import type * as McpSdk from './sdk';

/** The MCP SDK, loaded on first use (see sdk.ts): only `import type` of it may appear at the top of a module. */
export const mcpSdk = (): typeof McpSdk => require('./sdk') as typeof McpSdk;
