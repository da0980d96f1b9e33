import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { Logger, silentLogger } from '../core/log';
import { errorMessage } from '../core/model/errors';

/**
 * Streamable HTTP for MCP on the loopback interface only. Every request must:
 *  - name a local Host (and, if it has one, a local Origin) with our port — 403
 *    otherwise, which defeats DNS rebinding from a web page;
 *  - carry `Authorization: Bearer <token>` — 401 otherwise;
 *  - stay under the body limit — 413 otherwise.
 * Each MCP session gets its own McpServer from `createSession`, which decides whom
 * the session's calls are attributed to (its lease owner).
 */
export interface SessionInfo {
  sessionId: string;
  /** The client's pid when it told us (a relay on this host), so a dead relay's tasks are interrupted. */
  clientPid: number | undefined;
}

export interface HttpServerOptions {
  createSession(info: SessionInfo): McpServer;
  /** Non-MCP JSON endpoints behind the same checks, e.g. `/hooks/claude-code` → handler(body). */
  routes?: Record<string, (body: unknown) => Promise<unknown>>;
  token?: string;
  port?: number;
  maxBodyBytes?: number;
  maxSessions?: number;
  log?: Logger;
}

export interface HttpServerHandle {
  url: string;
  port: number;
  token: string;
  sessionCount(): number;
  close(): Promise<void>;
}

export const MCP_PATH = '/mcp';
export const CLIENT_PID_HEADER = 'x-waypoint-client-pid';
const DEFAULT_MAX_BODY = 1024 * 1024;

export function newToken(): string {
  return randomBytes(32).toString('base64url');
}

class HttpRefusal extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export async function startHttpServer(opts: HttpServerOptions): Promise<HttpServerHandle> {
  const log = (opts.log ?? silentLogger).child('mcp-http');
  const token = opts.token ?? newToken();
  const tokenBuf = Buffer.from(`Bearer ${token}`);
  const maxBody = opts.maxBodyBytes ?? DEFAULT_MAX_BODY;
  const maxSessions = opts.maxSessions ?? 64;
  const sessions = new Map<string, { transport: StreamableHTTPServerTransport; server: McpServer }>();
  let port = 0;

  const localHosts = () => new Set([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]);
  const localOrigins = () => new Set([...localHosts()].map((h) => `http://${h}`));

  function authorize(req: http.IncomingMessage): void {
    const host = (req.headers.host ?? '').toLowerCase();
    if (!localHosts().has(host)) throw new HttpRefusal(403, `Host '${host}' is not this local server.`);
    const origin = req.headers.origin;
    if (origin !== undefined && !localOrigins().has(origin.toLowerCase())) throw new HttpRefusal(403, `Origin '${origin}' is not allowed.`);
    const auth = Buffer.from(req.headers.authorization ?? '');
    if (auth.length !== tokenBuf.length || !timingSafeEqual(auth, tokenBuf)) throw new HttpRefusal(401, 'Missing or wrong bearer token.');
  }

  async function readBody(req: http.IncomingMessage): Promise<unknown> {
    const declared = Number(req.headers['content-length'] ?? NaN);
    if (Number.isFinite(declared) && declared > maxBody) throw new HttpRefusal(413, `Request body of ${declared} bytes exceeds ${maxBody}.`);
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > maxBody) throw new HttpRefusal(413, `Request body exceeds ${maxBody} bytes.`);
      chunks.push(chunk as Buffer);
    }
    if (size === 0) return undefined;
    try {
      return JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      throw new HttpRefusal(400, 'Request body is not valid JSON.');
    }
  }

  async function handleMcp(req: http.IncomingMessage, res: http.ServerResponse, body: unknown): Promise<void> {
    const sid = req.headers['mcp-session-id'];
    const existing = typeof sid === 'string' ? sessions.get(sid) : undefined;
    if (existing) return existing.transport.handleRequest(req, res, body);
    if (typeof sid === 'string') throw new HttpRefusal(404, `Unknown MCP session '${sid}'; initialize a new one.`);
    if (req.method !== 'POST' || !isInitializeRequest(body)) throw new HttpRefusal(400, 'No MCP session: send an initialize request first.');
    if (sessions.size >= maxSessions) throw new HttpRefusal(503, `Too many MCP sessions (${maxSessions}).`);
    const sessionId = randomUUID();
    const pidHeader = req.headers[CLIENT_PID_HEADER];
    const clientPid = typeof pidHeader === 'string' && /^[1-9]\d{0,9}$/.test(pidHeader) ? Number(pidHeader) : undefined;
    const server = opts.createSession({ sessionId, clientPid });
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => sessionId,
      // Request/response JSON: every Waypoint tool answers at once, no streaming needed.
      enableJsonResponse: true,
      onsessioninitialized: (id) => {
        sessions.set(id, { transport, server });
        log.info(`session ${id} opened${clientPid ? ` (client pid ${clientPid})` : ''}`);
      },
    });
    transport.onclose = () => {
      if (sessions.delete(sessionId)) log.info(`session ${sessionId} closed`);
      void server.close().catch(() => undefined);
    };
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://local');
    authorize(req);
    const route = opts.routes?.[url.pathname];
    if (url.pathname !== MCP_PATH && !route) throw new HttpRefusal(404, `No endpoint ${url.pathname}.`);
    if (route && req.method !== 'POST') throw new HttpRefusal(405, 'Use POST.');
    const body = req.method === 'POST' ? await readBody(req) : undefined;
    if (route) {
      const out = await route(body);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(out ?? null));
      return;
    }
    await handleMcp(req, res, body);
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((e) => {
      const status = e instanceof HttpRefusal ? e.status : 500;
      if (status === 500) log.error(`request failed: ${errorMessage(e)}`);
      if (!res.headersSent) {
        const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/json' };
        if (status === 401) headers['www-authenticate'] = 'Bearer realm="waypoint"';
        if (status === 413) headers.connection = 'close';
        res.writeHead(status, headers).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: errorMessage(e) }, id: null }));
      } else res.end();
      // Do not read an oversized body to its end; drop the connection once answered.
      if (status === 413) res.on('finish', () => req.destroy());
    });
  });
  server.requestTimeout = 60_000;
  server.headersTimeout = 15_000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // Loopback only: never reachable from another machine.
    server.listen(opts.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}${MCP_PATH}`;
  log.info(`serving MCP on ${url}`);

  let closing: Promise<void> | undefined;
  return {
    url,
    port,
    token,
    sessionCount: () => sessions.size,
    close: () =>
      (closing ??= (async () => {
        for (const { transport, server: s } of [...sessions.values()]) {
          await transport.close().catch(() => undefined);
          await s.close().catch(() => undefined);
        }
        sessions.clear();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
      })()),
  };
}
