import * as http from 'node:http';
import type * as net from 'node:net';
import { randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import type { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Logger, silentLogger } from '../core/log';
import { mcpSdk } from './lazySdk';
import { errorMessage } from '../core/model/errors';
import { isPidAlive } from '../core/store/fsutil';
import { STORE_CLAIM_HEADER } from '../core/store/folderIdentity';

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
  /** The client's pid when it told us (a client on this host, `x-waypoint-client-pid`), so a dead client's tasks are interrupted. */
  clientPid: number | undefined;
  /**
   * Whether the client is still there: the pid it named is alive (a client on this host), or
   * it holds the session's server-sent event stream open (a direct client such as VS Code's). A client that shows neither is not known to be
   * there between its requests.
   */
  connected(): boolean;
}

export interface HttpServerOptions {
  createSession(info: SessionInfo): McpServer;
  /** Non-MCP JSON endpoints behind the same checks, e.g. `/hooks/claude-code` → handler(body). */
  routes?: Record<string, (body: unknown) => Promise<unknown>>;
  token?: string;
  /**
   * Checks a caller's `x-waypoint-store` claim (the store it means): the reason to refuse
   * it (409) when this owner serves another store. Callers that send none are not checked.
   */
  checkStoreClaim?: (claim: string) => string | null;
  port?: number;
  maxBodyBytes?: number;
  log?: Logger;
  limits?: Partial<HttpLimits>;
}

/**
 * What a flood of connections or a crowd of dead clients may cost the owner. Every
 * open socket is a file descriptor of the process that also holds the store: past the
 * process's limit the store itself could no longer open a file.
 */
export interface HttpLimits {
  /** Open connections at most; past it the oldest connection that has not yet presented the token is dropped. */
  maxConnections: number;
  /** A connection must present the token (complete headers of an authorized request) within this, or be dropped. */
  unauthenticatedTimeoutMs: number;
  /** MCP sessions at most. */
  maxSessions: number;
  /** A session with no request for this long is closed (a client that reconnects just initializes again). */
  sessionIdleMs: number;
  /** How often sessions are checked for dead client pids and idleness. */
  reapIntervalMs: number;
}

export const DEFAULT_HTTP_LIMITS: HttpLimits = {
  maxConnections: 256,
  unauthenticatedTimeoutMs: 10_000,
  maxSessions: 64,
  sessionIdleMs: 6 * 60 * 60_000,
  reapIntervalMs: 30_000,
};

/** A full session table gives way to its least recently used session only if that one has rested this long. */
const EVICTABLE_IDLE_MS = 60_000;

export interface HttpServerHandle {
  url: string;
  port: number;
  token: string;
  sessionCount(): number;
  /** Open TCP connections, authenticated or not. */
  connectionCount(): number;
  close(): Promise<void>;
}

export const MCP_PATH = '/mcp';
export const CLIENT_PID_HEADER = 'x-waypoint-client-pid';
const DEFAULT_MAX_BODY = 1024 * 1024;

export function newToken(): string {
  return randomBytes(32).toString('base64url');
}

interface Session {
  transport: StreamableHTTPServerTransport;
  server: McpServer;
  clientPid: number | undefined;
  lastSeen: number;
  /** Open GET (server-sent event) streams of this session. */
  streams: number;
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
  const limits: HttpLimits = { ...DEFAULT_HTTP_LIMITS, ...opts.limits };
  const sessions = new Map<string, Session>();
  /** Every open connection, oldest first, and whether it has presented the token. */
  const connections = new Map<net.Socket, { authenticated: boolean }>();
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
    if (existing) {
      existing.lastSeen = Date.now();
      if (req.method === 'GET') {
        existing.streams++;
        res.once('close', () => existing.streams--);
      }
      return existing.transport.handleRequest(req, res, body);
    }
    if (typeof sid === 'string') throw new HttpRefusal(404, `Unknown MCP session '${sid}'; initialize a new one.`);
    if (req.method !== 'POST' || !mcpSdk().isInitializeRequest(body)) throw new HttpRefusal(400, 'No MCP session: send an initialize request first.');
    if (sessions.size >= limits.maxSessions) await reapSessions({ makeRoom: true });
    if (sessions.size >= limits.maxSessions) throw new HttpRefusal(503, `Too many MCP sessions (${limits.maxSessions}), all of them in use.`);
    const sessionId = randomUUID();
    const pidHeader = req.headers[CLIENT_PID_HEADER];
    const clientPid = typeof pidHeader === 'string' && /^[1-9]\d{0,9}$/.test(pidHeader) ? Number(pidHeader) : undefined;
    const connected = (): boolean => {
      const sess = sessions.get(sessionId);
      if (!sess) return false;
      return sess.clientPid !== undefined ? isPidAlive(sess.clientPid) : sess.streams > 0;
    };
    const server = opts.createSession({ sessionId, clientPid, connected });
    const transport = new (mcpSdk().StreamableHTTPServerTransport)({
      sessionIdGenerator: () => sessionId,
      // Request/response JSON: every Waypoint tool answers at once, no streaming needed.
      enableJsonResponse: true,
      onsessioninitialized: (id) => {
        sessions.set(id, { transport, server, clientPid, lastSeen: Date.now(), streams: 0 });
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

  /**
   * Closes sessions nobody can use any more: their client's pid is gone (a local client that was
   * SIGKILLed never says goodbye), or they rested past the idle limit. With `makeRoom`,
   * a full table also gives up its least recently used session if it rested a while.
   */
  let reaping: Promise<void> | undefined;
  function reapSessions(o: { makeRoom?: boolean } = {}): Promise<void> {
    const run = async () => {
      const now = Date.now();
      const doomed: [string, Session, string][] = [];
      for (const [id, sess] of sessions) {
        if (sess.clientPid !== undefined && !isPidAlive(sess.clientPid)) doomed.push([id, sess, `client pid ${sess.clientPid} is gone`]);
        else if (now - sess.lastSeen > limits.sessionIdleMs) doomed.push([id, sess, `idle for ${Math.round((now - sess.lastSeen) / 1000)} s`]);
      }
      if (o.makeRoom && doomed.length === 0 && sessions.size >= limits.maxSessions) {
        const [id, lru] = [...sessions].reduce((a, b) => (b[1].lastSeen < a[1].lastSeen ? b : a));
        if (now - lru.lastSeen > EVICTABLE_IDLE_MS) doomed.push([id, lru, `least recently used, idle for ${Math.round((now - lru.lastSeen) / 1000)} s, to make room`]);
      }
      for (const [id, sess, why] of doomed) {
        sessions.delete(id);
        log.info(`session ${id} reaped: ${why}`);
        await sess.transport.close().catch(() => undefined);
        await sess.server.close().catch(() => undefined);
      }
    };
    // One pass at a time; a caller that wants room waits for the pass under way, then runs its own.
    const next = (reaping ?? Promise.resolve()).then(run, run);
    reaping = next.finally(() => {
      if (reaping === next) reaping = undefined;
    });
    return next;
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://local');
    authorize(req);
    const conn = connections.get(req.socket);
    if (conn) conn.authenticated = true;
    // A caller whose folder is a copy of ours holds our token too: it is refused before anything runs.
    const claim = req.headers[STORE_CLAIM_HEADER];
    const notOurs = typeof claim === 'string' && opts.checkStoreClaim ? opts.checkStoreClaim(claim) : null;
    if (notOurs !== null) throw new HttpRefusal(409, notOurs);
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
        // A refused caller gets its answer and loses the connection: nothing of its body is read.
        const drop = status === 401 || status === 403 || status === 409 || status === 413;
        if (status === 401) headers['www-authenticate'] = 'Bearer realm="waypoint"';
        if (drop) headers.connection = 'close';
        res.writeHead(status, headers).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: errorMessage(e) }, id: null }));
        if (drop) res.on('finish', () => req.destroy());
      } else res.end();
    });
  });
  server.requestTimeout = 60_000;
  server.headersTimeout = 15_000;

  server.on('connection', (socket: net.Socket) => {
    const conn = { authenticated: false };
    connections.set(socket, conn);
    // A connection that has not shown the token soon is dropped: idle and slow-header
    // floods then cost a bounded number of descriptors for a bounded time.
    const deadline = setTimeout(() => {
      if (!conn.authenticated) socket.destroy();
    }, limits.unauthenticatedTimeoutMs);
    deadline.unref();
    socket.once('close', () => {
      clearTimeout(deadline);
      connections.delete(socket);
      // A client that died (SIGKILL) closes its sockets: look for its sessions at once.
      // Only for a client's connection: a flood closing must not queue thousands of passes.
      if (conn.authenticated && sessions.size > 0) reapSoon();
    });
    if (connections.size <= limits.maxConnections) return;
    // Over the cap: drop the oldest connection that has not proved itself (the flood's),
    // so authenticated clients keep working; if every one has, the newcomer waits its turn.
    for (const [s, c] of connections) {
      if (!c.authenticated && s !== socket) {
        s.destroy();
        return;
      }
    }
    socket.destroy();
  });
  const reaper = setInterval(() => void reapSessions(), limits.reapIntervalMs);
  // The kernel closes a killed process's sockets while it is still exiting, before it is
  // a zombie: a pass at that instant still sees its pid alive. One more pass a moment
  // later finds it gone; at most one such pass waits at a time.
  let recheck: NodeJS.Timeout | undefined;
  function reapSoon(): void {
    void reapSessions();
    if (recheck) return;
    recheck = setTimeout(() => {
      recheck = undefined;
      if (sessions.size > 0) void reapSessions();
    }, 500);
    recheck.unref();
  }
  reaper.unref();

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // Loopback only: never reachable from another machine.
    server.listen(opts.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  port = (server.address() as net.AddressInfo).port;
  const url = `http://127.0.0.1:${port}${MCP_PATH}`;
  log.info(`serving MCP on ${url}`);

  let closing: Promise<void> | undefined;
  return {
    url,
    port,
    token,
    sessionCount: () => sessions.size,
    connectionCount: () => connections.size,
    close: () =>
      (closing ??= (async () => {
        clearInterval(reaper);
        if (recheck) clearTimeout(recheck);
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
