import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { errorMessage } from '../core/model/errors';
import { CLIENT_PID_HEADER } from './http';
import type { Discovery } from '../ownership/discovery';
import { SERVER_VERSION, type Dispatch } from './server';
import { toolError } from './tools';

/**
 * A relay: an MCP client session to the store's owner over streamable HTTP. Tool
 * calls are forwarded as they are, so the owner validates, attributes (to this
 * session, with our pid) and answers them exactly as it would a direct client.
 */
export interface Relay {
  url: string;
  dispatch: Dispatch;
  /** Resolves when the connection to the owner is lost (not on our own close). */
  lost: Promise<Error>;
  isLost(): boolean;
  close(): Promise<void>;
}

/** How long the MCP handshake with the owner may take. */
export const RELAY_CONNECT_TIMEOUT_MS = 10_000;
/** A bound on every relayed request (the SDK gives up on a call after 60 s; the request itself must not stay pending forever). */
const RELAY_REQUEST_TIMEOUT_MS = 90_000;

/**
 * fetch with a deadline for requests (not for the long-lived GET event stream): undici's
 * fetch never settles when the owner drops the connection before answering.
 */
const boundedFetch: typeof fetch = (input, init) => {
  if ((init?.method ?? 'GET').toUpperCase() === 'GET') return fetch(input, init);
  const deadline = AbortSignal.timeout(RELAY_REQUEST_TIMEOUT_MS);
  return fetch(input, { ...init, signal: init?.signal ? AbortSignal.any([init.signal, deadline]) : deadline });
};

export async function connectRelay(d: Discovery, opts: { clientName?: string; connectTimeoutMs?: number; headers?: Record<string, string> } = {}): Promise<Relay> {
  const transport = new StreamableHTTPClientTransport(new URL(d.url), {
    // `headers`: the store this relay means (see folderIdentity.ts); an owner of another refuses every request.
    requestInit: { headers: { ...opts.headers, authorization: `Bearer ${d.token}`, [CLIENT_PID_HEADER]: String(process.pid) } },
    fetch: boundedFetch,
  });
  const client = new Client({ name: opts.clientName ?? 'waypoint-relay', version: SERVER_VERSION });
  let closing = false;
  let lostFlag = false;
  let resolveLost!: (e: Error) => void;
  const lost = new Promise<Error>((r) => (resolveLost = r));
  const markLost = (e: Error) => {
    lostFlag = true;
    resolveLost(e);
  };
  try {
    // An owner that drops or ignores us must not hold an agent's MCP server at startup for
    // the SDK's 60 s: fail soon, and let resolveStore look again (or take a dead owner over).
    await client.connect(transport, { timeout: opts.connectTimeoutMs ?? RELAY_CONNECT_TIMEOUT_MS });
  } catch (e) {
    closing = true;
    await client.close().catch(() => undefined);
    throw new Error(`The Waypoint owner at ${d.url} did not answer the MCP handshake: ${errorMessage(e)}`);
  }
  client.onclose = () => {
    if (!closing) markLost(new Error(`connection to the Waypoint owner at ${d.url} closed`));
  };
  return {
    url: d.url,
    lost,
    isLost: () => lostFlag,
    dispatch: async (name, args) => {
      try {
        return (await client.callTool({ name, arguments: (args ?? {}) as Record<string, unknown> })) as CallToolResult;
      } catch (e) {
        const err = new Error(`The Waypoint owner at ${d.url} did not answer: ${errorMessage(e)}`);
        if (isConnectionError(e)) markLost(err);
        return toolError(err.message);
      }
    },
    close: async () => {
      closing = true;
      // Ending the session lets the owner release what it holds for it at once.
      await transport.terminateSession().catch(() => undefined);
      await client.close().catch(() => undefined);
    },
  };
}

function isConnectionError(e: unknown): boolean {
  const text = `${errorMessage(e)} ${errorMessage((e as { cause?: unknown })?.cause ?? '')}`;
  return /ECONNREFUSED|ECONNRESET|fetch failed|socket hang up|other side closed|404/i.test(text);
}
