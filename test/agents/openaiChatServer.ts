import type http from 'node:http';
import { Conversation, newId, sendJson, serveScripted, type Exchange, type ScriptedReply, type ScriptedServer } from './scriptedServer';

/**
 * A stand-in for the OpenAI Chat Completions API (POST /v1/chat/completions, SSE when
 * `stream` is set), the wire of OpenAI-compatible providers that Qwen Code, opencode and
 * Copilot CLI's default BYOK speak. Each request of the agent's main loop (one that offers
 * the main tool) takes the next scripted reply (scriptedServer.ts); every other request
 * gets a short text. A streamed reply is `chat.completion.chunk`s: the role, the text, each
 * tool call whole (id, name, arguments as a JSON string), a last chunk with the
 * `finish_reason` and usage, then `data: [DONE]`.
 */
export type OpenAiChatServer = ScriptedServer;

interface ChatBody {
  model?: string;
  stream?: boolean;
  tools?: { type?: string; function?: { name?: string } }[];
  messages?: { role?: string; tool_call_id?: string }[];
}

const toolsOf = (body: ChatBody) => (Array.isArray(body.tools) ? body.tools.map((t) => String(t?.function?.name ?? '')) : []);
const answeredIds = (body: ChatBody) => (Array.isArray(body.messages) ? body.messages.filter((m) => m?.role === 'tool' && typeof m.tool_call_id === 'string').map((m) => m.tool_call_id!) : []);

export async function startOpenAiChatServer(script: ScriptedReply[], opts: { mainTool: string; log?: (line: string) => void }): Promise<OpenAiChatServer> {
  const conversation = new Conversation(script, 'call');

  async function handle({ req, res, body: raw, rec }: Exchange): Promise<void> {
    const body = raw as ChatBody;
    const url = req.url ?? '';
    rec.tools = toolsOf(body);
    if (req.method === 'GET' && /\/models(\?|$)/.test(url)) return sendJson(res, 200, { object: 'list', data: [{ id: body.model ?? 'scripted', object: 'model', owned_by: 'scripted' }] });
    if (req.method !== 'POST' || !/\/chat\/completions(\?|$)/.test(url)) return sendJson(res, 404, { error: { type: 'not_found', message: 'not here' } });
    rec.main = rec.tools.includes(opts.mainTool);
    const reply = rec.main ? await conversation.next(answeredIds(body), rec) : { text: 'Scripted side answer' };
    send(res, body, reply);
  }

  function send(res: http.ServerResponse, body: ChatBody, reply: ScriptedReply): void {
    if (reply.error) return sendJson(res, reply.error.status, { error: { type: reply.error.type, message: reply.error.message, code: reply.error.type } });
    const id = newId('chatcmpl');
    const model = body.model ?? 'scripted';
    const created = Math.floor(Date.now() / 1000);
    const calls = (reply.tools ?? []).map((t, index) => ({ index, id: t.id, type: 'function', function: { name: t.name, arguments: JSON.stringify(t.input) } }));
    const finish = calls.length ? 'tool_calls' : 'stop';
    const usage = { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 };
    if (!body.stream) {
      const message = { role: 'assistant', content: reply.text ?? null, ...(calls.length ? { tool_calls: calls.map(({ index: _i, ...c }) => c) } : {}) };
      return sendJson(res, 200, { id, object: 'chat.completion', created, model, choices: [{ index: 0, message, finish_reason: finish }], usage });
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    const chunk = (delta: Record<string, unknown>, finish_reason: string | null, extra: Record<string, unknown> = {}) =>
      res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, finish_reason }], ...extra })}\n\n`);
    chunk({ role: 'assistant', content: '' }, null);
    if (reply.text) chunk({ content: reply.text }, null);
    if (calls.length) chunk({ tool_calls: calls }, null);
    chunk({}, finish, { usage });
    res.end('data: [DONE]\n\n');
  }

  return serveScripted(handle, conversation, opts.log);
}
