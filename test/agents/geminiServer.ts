import type http from 'node:http';
import { Conversation, sendJson, serveScripted, type Exchange, type ScriptedReply, type ScriptedServer } from './scriptedServer';

/**
 * A stand-in for the Gemini API (`POST /v1beta/models/<model>:generateContent` and
 * `:streamGenerateContent?alt=sse`), as Gemini CLI calls it through
 * `GOOGLE_GEMINI_BASE_URL`. Each request of the agent's main loop (one whose
 * `tools[].functionDeclarations` offer the main tool) takes the next scripted reply
 * (scriptedServer.ts); every other request (the CLI's own side questions) gets a short
 * text, or the JSON its `responseSchema` asks for where it asks for one. A reply is one
 * candidate whose parts are the text and the `functionCall`s (each with the id the CLI
 * answers in its `functionResponse`); streamed, it is one `data:` event, as the API sends
 * a short answer — the Gemini SSE stream has no `event:` lines.
 */
export type GeminiServer = ScriptedServer;

interface Part {
  text?: string;
  functionCall?: { name?: string; id?: string; args?: unknown };
  functionResponse?: { name?: string; id?: string; response?: unknown };
}
interface GeminiBody {
  contents?: { role?: string; parts?: Part[] }[];
  tools?: { functionDeclarations?: { name?: string }[] }[];
  generationConfig?: { responseMimeType?: string; responseSchema?: unknown; responseJsonSchema?: unknown };
}

const toolsOf = (body: GeminiBody) => (Array.isArray(body.tools) ? body.tools.flatMap((t) => (Array.isArray(t?.functionDeclarations) ? t.functionDeclarations.map((f) => String(f?.name ?? '')) : [])) : []);

/** Call ids the last user turn answers. */
function answeredIds(body: GeminiBody): string[] {
  const last = Array.isArray(body.contents) ? body.contents[body.contents.length - 1] : undefined;
  return (last?.parts ?? []).map((p) => p?.functionResponse?.id).filter((id): id is string => typeof id === 'string');
}

/**
 * A side request that wants JSON (the CLI's router and its loop and next-speaker checks
 * ask for it with a schema) gets the neutral answer: the default model, the user's turn,
 * no loop.
 */
function sideAnswer(body: GeminiBody): string {
  const gc = body.generationConfig ?? {};
  if (gc.responseMimeType !== 'application/json') return 'Scripted side answer';
  const schema = JSON.stringify(gc.responseJsonSchema ?? gc.responseSchema ?? {});
  if (schema.includes('next_speaker')) return JSON.stringify({ reasoning: 'scripted', next_speaker: 'user' });
  if (schema.includes('model_choice')) return JSON.stringify({ reasoning: 'scripted', model_choice: 'flash' });
  if (schema.includes('unproductive_state_confidence')) return JSON.stringify({ unproductive_state_analysis: 'scripted', unproductive_state_confidence: 0 });
  return '{}';
}

export async function startGeminiServer(script: ScriptedReply[], opts: { mainTool?: string; log?: (line: string) => void } = {}): Promise<GeminiServer> {
  const mainTool = opts.mainTool ?? 'write_todos';
  const conversation = new Conversation(script, 'call');

  async function handle({ req, res, body: raw, rec }: Exchange): Promise<void> {
    const body = raw as GeminiBody;
    const url = req.url ?? '';
    rec.tools = toolsOf(body);
    const m = /\/models\/([^/:?]+):(generateContent|streamGenerateContent|countTokens)(\?|$)/.exec(url);
    if (req.method !== 'POST' || !m) return sendJson(res, 404, { error: { code: 404, status: 'NOT_FOUND', message: 'not here' } });
    if (m[2] === 'countTokens') return sendJson(res, 200, { totalTokens: 10 });
    rec.main = rec.tools.includes(mainTool);
    const reply: ScriptedReply = rec.main ? await conversation.next(answeredIds(body), rec) : { text: sideAnswer(body) };
    send(res, m[1], m[2] === 'streamGenerateContent', reply);
  }

  function send(res: http.ServerResponse, model: string, stream: boolean, reply: ScriptedReply): void {
    if (reply.error) return sendJson(res, reply.error.status, { error: { code: reply.error.status, status: reply.error.type, message: reply.error.message } });
    const parts: Part[] = [];
    if (reply.text) parts.push({ text: reply.text });
    for (const t of reply.tools ?? []) parts.push({ functionCall: { id: t.id, name: t.name, args: t.input } });
    const answer = {
      candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP', index: 0 }],
      usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 10, totalTokenCount: 20 },
      modelVersion: model,
      responseId: `resp-${Date.now().toString(36)}`,
    };
    if (!stream) return sendJson(res, 200, answer);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    res.end(`data: ${JSON.stringify(answer)}\r\n\r\n`);
  }

  return serveScripted(handle, conversation, opts.log);
}
