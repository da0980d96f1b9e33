import type http from 'node:http';
import { Conversation, newId, openSse, sendJson, serveScripted, type Exchange, type ScriptedReply, type ScriptedServer } from './scriptedServer';

/**
 * A stand-in for the OpenAI Responses API (POST /v1/responses, SSE streaming), as Codex
 * calls it through a custom model provider (`wire_api = "responses"`). Each request of
 * the agent's main loop (one that offers the agent's tools) takes the next scripted reply
 * (scriptedServer.ts); every other request gets a short text. A reply is streamed as the
 * client reads it: `response.created`, each output item `added` then `done` (a message,
 * a `function_call` with its arguments as a JSON string, or a `custom_tool_call` with its
 * raw input where the request declared the tool freeform), then `response.completed`
 * with usage — without it Codex fails the turn ("stream closed before response.completed").
 */
export type OpenAiResponsesServer = ScriptedServer;

interface ResponsesBody {
  model?: string;
  stream?: boolean;
  tools?: { type?: string; name?: string }[];
  input?: { type?: string; call_id?: string }[];
}

const toolName = (t: { type?: string; name?: string }) => String(t?.name ?? t?.type ?? '');

/** Call ids the request's input answers (function and freeform tool outputs alike). */
function answeredIds(body: ResponsesBody): string[] {
  if (!Array.isArray(body.input)) return [];
  return body.input.filter((i) => /_call_output$/.test(String(i?.type)) && typeof i.call_id === 'string').map((i) => i.call_id!);
}

export async function startOpenAiResponsesServer(script: ScriptedReply[], opts: { mainTool?: string; log?: (line: string) => void } = {}): Promise<OpenAiResponsesServer> {
  const mainTool = opts.mainTool ?? 'update_plan';
  const conversation = new Conversation(script, 'call');

  async function handle({ req, res, body: raw, rec }: Exchange): Promise<void> {
    const body = raw as ResponsesBody;
    const url = req.url ?? '';
    rec.tools = Array.isArray(body.tools) ? body.tools.map(toolName) : [];
    const isResponses = req.method === 'POST' && /\/responses(\?|$)/.test(url);
    rec.main = isResponses && rec.tools.includes(mainTool);
    // The model list Codex may ask a provider for: an empty one leaves it on the configured model.
    if (req.method === 'GET' && /\/models(\?|$)/.test(url)) return sendJson(res, 200, { object: 'list', data: [], models: [] });
    if (!isResponses) return sendJson(res, 404, { error: { type: 'not_found', message: 'not here' } });
    const reply = rec.main ? await conversation.next(answeredIds(body), rec) : { text: 'Scripted side answer' };
    send(res, body, reply);
  }

  function itemsOf(body: ResponsesBody, reply: ScriptedReply): Record<string, unknown>[] {
    const freeform = new Set((body.tools ?? []).filter((t) => t?.type === 'custom').map(toolName));
    const items: Record<string, unknown>[] = [];
    if (reply.text) items.push({ type: 'message', id: newId('msg'), role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: reply.text, annotations: [] }] });
    for (const t of reply.tools ?? []) {
      if (freeform.has(t.name)) {
        const input = typeof t.input.input === 'string' ? t.input.input : JSON.stringify(t.input);
        items.push({ type: 'custom_tool_call', id: newId('ctc'), status: 'completed', call_id: t.id, name: t.name, input });
      } else {
        items.push({ type: 'function_call', id: newId('fc'), status: 'completed', call_id: t.id, name: t.name, arguments: JSON.stringify(t.input) });
      }
    }
    return items;
  }

  function send(res: http.ServerResponse, body: ResponsesBody, reply: ScriptedReply): void {
    if (reply.error) return sendJson(res, reply.error.status, { error: { type: reply.error.type, message: reply.error.message, code: reply.error.type } });
    const items = itemsOf(body, reply);
    const usage = { input_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 10, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 20 };
    const response = { id: newId('resp'), object: 'response', created_at: Math.floor(Date.now() / 1000), model: body.model ?? 'gpt-scripted', status: 'in_progress', output: [] as unknown[] };
    if (body.stream === false) return sendJson(res, 200, { ...response, status: 'completed', output: items, usage });
    const ev = openSse(res);
    let seq = 0;
    ev('response.created', { sequence_number: seq++, response });
    items.forEach((item, output_index) => {
      ev('response.output_item.added', { sequence_number: seq++, output_index, item: item.type === 'message' ? { ...item, content: [] } : item });
      if (item.type === 'message') {
        const text = (item.content as { text: string }[])[0]!.text;
        ev('response.output_text.delta', { sequence_number: seq++, item_id: item.id, output_index, content_index: 0, delta: text });
      }
      ev('response.output_item.done', { sequence_number: seq++, output_index, item });
    });
    ev('response.completed', { sequence_number: seq++, response: { ...response, status: 'completed', output: items, usage } });
    res.end();
  }

  return serveScripted(handle, conversation, opts.log);
}
