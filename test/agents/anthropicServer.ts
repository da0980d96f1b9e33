import type http from 'node:http';
import { Conversation, newId, openSse, sendJson, serveScripted, type Exchange, type ScriptedReply, type ScriptedServer } from './scriptedServer';

export type { RecordedRequest, ScriptedReply, ScriptedToolUse } from './scriptedServer';

/**
 * A stand-in for the Anthropic Messages API (POST /v1/messages, SSE streaming), as
 * Claude Code calls it through ANTHROPIC_BASE_URL. The conversation is answered from
 * a script (scriptedServer.ts): each request of the agent's main loop (one that offers
 * the agent's tools) takes the next scripted reply; every other request (titles,
 * summaries, the quota probe…) gets a short text. Everything the agent sent is kept
 * for the test to read.
 */
export type AnthropicServer = ScriptedServer;

interface MessagesBody {
  model?: string;
  stream?: boolean;
  tools?: { name?: string }[];
  messages?: { role: string; content: unknown }[];
  system?: unknown;
}

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
  const conversation = new Conversation(script, 'toolu');

  async function handle({ req, res, body: raw, rec }: Exchange): Promise<void> {
    const body = raw as MessagesBody;
    const url = req.url ?? '';
    rec.tools = Array.isArray(body.tools) ? body.tools.map((t) => String(t?.name ?? '')) : [];
    const isMessages = req.method === 'POST' && /^\/v1\/messages(\?|$)/.test(url);
    rec.main = isMessages && isMainLoop(body, mainTool);
    if (req.method === 'POST' && /^\/v1\/messages\/count_tokens/.test(url)) return sendJson(res, 200, { input_tokens: 100 });
    if (!isMessages) return sendJson(res, 404, { type: 'error', error: { type: 'not_found_error', message: 'not here' } });
    const reply = rec.main ? await conversation.next(answeredIds(body), rec) : { text: 'Scripted side answer' };
    send(res, body, reply);
  }

  function send(res: http.ServerResponse, body: MessagesBody, reply: ScriptedReply): void {
    if (reply.error) return sendJson(res, reply.error.status, { type: 'error', error: { type: reply.error.type, message: reply.error.message } });
    const content: Record<string, unknown>[] = [];
    if (reply.text) content.push({ type: 'text', text: reply.text });
    for (const t of reply.tools ?? []) content.push({ type: 'tool_use', id: t.id, name: t.name, input: t.input });
    const stop = reply.tools?.length ? 'tool_use' : 'end_turn';
    const message = { id: newId('msg'), type: 'message', role: 'assistant', model: body.model ?? 'claude-scripted', content: [] as unknown[], stop_reason: null, stop_sequence: null, usage: { input_tokens: 10, output_tokens: 1 } };
    if (!body.stream) return sendJson(res, 200, { ...message, content, stop_reason: stop, usage: { input_tokens: 10, output_tokens: 10 } });
    const ev = openSse(res);
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

  return serveScripted(handle, conversation, opts.log);
}
