import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A stand-in for the Anthropic Messages API (POST /v1/messages, SSE streaming), as
 * Claude Code calls it through ANTHROPIC_BASE_URL. The conversation is answered from
 * a script: each request of the agent's main loop (one that offers the agent's tools)
 * takes the next scripted reply; every other request (titles, summaries, the quota
 * probe…) gets a short text. Everything the agent sent is kept for the test to read.
 */
export interface ScriptedToolUse {
  name: string;
  input: Record<string, unknown>;
  /** Set by the server: the id the agent will answer with. */
  id?: string;
}

export interface ScriptedReply {
  text?: string;
  /** Answer with this API error instead (a 400 is not retried by the client). */
  error?: { status: number; type: string; message: string };
  tools?: ScriptedToolUse[];
  /**
   * Called when the agent sends the request that carries this reply's tool results
   * (the calls have run), before the next reply goes out. Returning a reply here
   * replaces the scripted next one (rarely needed).
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

export interface AnthropicServer {
  url: string;
  requests: RecordedRequest[];
  /** Replies still unanswered. */
  remaining(): number;
  close(): Promise<void>;
}

interface MessagesBody {
  model?: string;
  stream?: boolean;
  tools?: { name?: string }[];
  messages?: { role: string; content: unknown }[];
  system?: unknown;
}

let idSeq = 0;
const newId = (prefix: string) => `${prefix}_${Date.now().toString(36)}${(idSeq++).toString(36).padStart(4, '0')}`;

/** A request belongs to the scripted conversation when it offers the tools a coding turn needs. */
export function isMainLoop(body: MessagesBody, mainTool: string): boolean {
  return Array.isArray(body.tools) && body.tools.some((t) => t?.name === mainTool);
}

/** tool_use ids the last user message answers. */
function answeredIds(body: MessagesBody): string[] {
  const last = body.messages?.[body.messages.length - 1];
  if (!last || last.role !== 'user' || !Array.isArray(last.content)) return [];
  return (last.content as { type?: string; tool_use_id?: string }[]).filter((c) => c?.type === 'tool_result' && typeof c.tool_use_id === 'string').map((c) => c.tool_use_id!);
}

export async function startAnthropicServer(script: ScriptedReply[], opts: { mainTool?: string; log?: (line: string) => void } = {}): Promise<AnthropicServer> {
  const mainTool = opts.mainTool ?? 'Bash';
  const requests: RecordedRequest[] = [];
  const queue = [...script];
  // Replies whose tool results are awaited: their hook runs when the results arrive.
  const awaiting: ScriptedReply[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void handle(req, res, Buffer.concat(chunks).toString('utf8')).catch((e: unknown) => {
        opts.log?.(`scripted server error: ${String(e)}`);
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', error: { type: 'api_error', message: String(e) } }));
      });
    });
  });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, raw: string): Promise<void> {
    let body: MessagesBody = {};
    try {
      body = raw ? (JSON.parse(raw) as MessagesBody) : {};
    } catch {
      body = {};
    }
    const url = req.url ?? '';
    const tools = Array.isArray(body.tools) ? body.tools.map((t) => String(t?.name ?? '')) : [];
    const isMessages = req.method === 'POST' && /^\/v1\/messages(\?|$)/.test(url);
    const main = isMessages && isMainLoop(body, mainTool);
    const rec: RecordedRequest = { at: Date.now(), method: req.method ?? '', url, headers: req.headers, body, tools, main };
    requests.push(rec);
    opts.log?.(`${rec.method} ${url} main=${main} tools=${tools.length}`);
    if (req.method === 'POST' && /^\/v1\/messages\/count_tokens/.test(url)) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ input_tokens: 100 }));
      return;
    }
    if (!isMessages) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: 'not here' } }));
      return;
    }
    let reply: ScriptedReply;
    if (main) {
      const answered = answeredIds(body);
      const waiting = awaiting.findIndex((r) => r.tools?.some((t) => t.id && answered.includes(t.id)));
      if (waiting >= 0) {
        const [r] = awaiting.splice(waiting, 1);
        await r!.onResults?.(rec);
      }
      reply = queue.shift() ?? { text: 'Done.' };
      for (const t of reply.tools ?? []) t.id = newId('toolu');
      if (reply.tools?.length) awaiting.push(reply);
    } else {
      reply = { text: 'Scripted side answer' };
    }
    send(res, body, reply);
  }

  function send(res: http.ServerResponse, body: MessagesBody, reply: ScriptedReply): void {
    if (reply.error) {
      res.writeHead(reply.error.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ type: 'error', error: { type: reply.error.type, message: reply.error.message } }));
      return;
    }
    const content: Record<string, unknown>[] = [];
    if (reply.text) content.push({ type: 'text', text: reply.text });
    for (const t of reply.tools ?? []) content.push({ type: 'tool_use', id: t.id, name: t.name, input: t.input });
    const stop = reply.tools?.length ? 'tool_use' : 'end_turn';
    const message = { id: newId('msg'), type: 'message', role: 'assistant', model: body.model ?? 'claude-scripted', content: [] as unknown[], stop_reason: null, stop_sequence: null, usage: { input_tokens: 10, output_tokens: 1 } };
    if (!body.stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ...message, content, stop_reason: stop, usage: { input_tokens: 10, output_tokens: 10 } }));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    const ev = (type: string, data: Record<string, unknown>) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    ev('message_start', { message });
    content.forEach((c, index) => {
      if (c.type === 'text') {
        ev('content_block_start', { index, content_block: { type: 'text', text: '' } });
        ev('content_block_delta', { index, delta: { type: 'text_delta', text: c.text } });
      } else {
        ev('content_block_start', { index, content_block: { type: 'tool_use', id: c.id, name: c.name, input: {} } });
        ev('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(c.input) } });
      }
      ev('content_block_stop', { index });
    });
    ev('message_delta', { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 10 } });
    ev('message_stop', {});
    res.end();
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    remaining: () => queue.length,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
