import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * What every scripted model server shares, whatever its wire protocol: the script (a list
 * of replies, each text and/or tool calls), the order it is answered in, and the record of
 * what the agent sent. A protocol module (anthropicServer.ts, openaiResponsesServer.ts)
 * only says which requests belong to the scripted conversation, which tool calls a request
 * answers, and how a reply is written on its wire.
 */
export interface ScriptedToolUse {
  name: string;
  input: Record<string, unknown>;
  /** Set by the server: the id the agent will answer with. */
  id?: string;
}

export interface ScriptedReply {
  text?: string;
  /** Answer with this API error instead (a 400 is not retried by the clients). */
  error?: { status: number; type: string; message: string };
  tools?: ScriptedToolUse[];
  /**
   * Called when the agent sends the request that carries this reply's tool results
   * (the calls have run), before the next reply goes out.
   */
  onResults?: (req: RecordedRequest) => void | Promise<void>;
}

export interface RecordedRequest {
  at: number;
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: unknown;
  /** Names of the tools the request offered (empty for side requests). */
  tools: string[];
  /** Whether this request was answered from the script. */
  main: boolean;
}

export interface ScriptedServer {
  url: string;
  requests: RecordedRequest[];
  /** Replies still unanswered. */
  remaining(): number;
  close(): Promise<void>;
}

let idSeq = 0;
export const newId = (prefix: string) => `${prefix}_${Date.now().toString(36)}${(idSeq++).toString(36).padStart(4, '0')}`;

/** The script, answered in order: a main-loop request first runs the hook of the reply whose calls it answers. */
export class Conversation {
  private readonly queue: ScriptedReply[];
  // Replies whose tool results are awaited: their hook runs when the results arrive.
  private readonly awaiting: ScriptedReply[] = [];

  constructor(
    script: readonly ScriptedReply[],
    private readonly idPrefix: string,
  ) {
    this.queue = [...script];
  }

  remaining(): number {
    return this.queue.length;
  }

  /** The next reply for a main-loop request that answers the calls `answered`; its calls get fresh ids. */
  async next(answered: readonly string[], rec: RecordedRequest): Promise<ScriptedReply> {
    const waiting = this.awaiting.findIndex((r) => r.tools?.some((t) => t.id && answered.includes(t.id)));
    if (waiting >= 0) {
      const [r] = this.awaiting.splice(waiting, 1);
      await r!.onResults?.(rec);
    }
    const reply = this.queue.shift() ?? { text: 'Done.' };
    for (const t of reply.tools ?? []) t.id = newId(this.idPrefix);
    if (reply.tools?.length) this.awaiting.push(reply);
    return reply;
  }
}

export interface Exchange {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  /** The body parsed as JSON ({} when it is none). */
  body: Record<string, unknown>;
  /** Already in the server's record; the handler sets `main` and `tools`. */
  rec: RecordedRequest;
}

/**
 * A loopback HTTP server that records every request (body parsed as JSON) before the
 * protocol's handler answers it; a handler that throws answers 500 with its message.
 */
export async function serveScripted(handler: (x: Exchange) => Promise<void>, conversation: Conversation, log?: (line: string) => void): Promise<ScriptedServer> {
  const requests: RecordedRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: Record<string, unknown> = {};
      try {
        const parsed: unknown = raw ? JSON.parse(raw) : {};
        body = parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
      } catch {
        body = {};
      }
      const rec: RecordedRequest = { at: Date.now(), method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, tools: [], main: false };
      requests.push(rec);
      void handler({ req, res, body, rec })
        .then(() => log?.(`${rec.method} ${rec.url} main=${rec.main} tools=${rec.tools.length}`))
        .catch((e: unknown) => {
          log?.(`scripted server error: ${String(e)}`);
          if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { type: 'api_error', message: String(e) } }));
        });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    remaining: () => conversation.remaining(),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function sendJson(res: http.ServerResponse, status: number, value: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}

/** Opens a server-sent-events answer; the returned function writes one event (its `type` in the data too, as both APIs do). */
export function openSse(res: http.ServerResponse): (type: string, data: Record<string, unknown>) => void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  return (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
}
