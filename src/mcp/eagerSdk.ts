import * as sdk from './sdk';

/**
 * The extension's build resolves lazySdk.ts to this module (see esbuild.js): a window
 * serves MCP to its agents anyway, and with the SDK required lazily the extension's
 * bundle initialised zod's mini module after the webview protocols used it.
 */
export const mcpSdk = (): typeof sdk => sdk;
