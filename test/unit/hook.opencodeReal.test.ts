import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildCli, cli } from '../support/mcp';
import { callPlugin, loadOpencodePlugin } from '../support/opencodePlugin';
import { realPayloads } from '../support/realFixtures';
import { openEngine, tmpDir } from '../support/tmp';
import { opencodeAdapter } from '../../src/hooks/adapters/opencode';
import { OPENCODE_PLUGIN_REL, opencodePluginFile } from '../../src/mcp/connectHooks';

/**
 * What the real opencode 1.18.33 handed its plugins (test/fixtures/hooks-real/opencode,
 * recorded by `WAYPOINT_RECORD_FIXTURES=1 npm run test:agents` through a capture plugin, in
 * the shape Waypoint's plugin hands on) replayed through the plugin `waypoint connect
 * opencode` writes, loaded in Node as opencode loads it: each hook called with the real
 * input and output, the files each tool call changed written before its after hook — and a
 * person's file written during the `edit` call. The plugin picks what to hand to
 * `waypoint hook opencode` (the recorded tools, the events the recorder uses) by itself. The
 * continued run's command is run by a subagent (the `task` tool), in a session of its own.
 */
type Json = Record<string, any>;
const PERSON = 'the person wrote this while the agent edited\n';

describe('hook recorder: the real opencode’s plugin payloads (todowrite, read + edit, bash, run -s through a subagent)', function () {
  this.timeout(300_000);
  before(() => buildCli());
  let ws: ReturnType<typeof tmpDir>;
  beforeEach(() => {
    ws = tmpDir('wp-opencode-real-');
    fs.writeFileSync(path.join(ws.dir, 'a.txt'), 'hello\n');
    fs.writeFileSync(path.join(ws.dir, 'b.txt'), 'bee\n');
  });
  afterEach(() => ws.cleanup());

  const vars = () => ({ WORKSPACE: ws.dir, HOME: path.join(ws.dir, '..', 'home'), ROOT: path.join(ws.dir, '..') });
  const w = (f: string, s: string) => fs.writeFileSync(path.join(ws.dir, f), s);

  async function replay(list: Json[]): Promise<void> {
    const r = cli(['connect', 'opencode', '--yes', '--workspace', ws.dir]);
    assert.equal(r.status, 0, r.stderr);
    const hooks = await loadOpencodePlugin(ws.dir);
    let shell = 0;
    for (const p of list) {
      if (p.hook === 'tool.execute.after' && p.input.tool === 'edit') {
        w('a.txt', 'hello world\n');
        w('person.txt', PERSON); // the person, in another editor, while the edit runs
      }
      if (p.hook === 'tool.execute.after' && p.input.tool === 'bash' && ++shell === 1) {
        fs.appendFileSync(path.join(ws.dir, 'b.txt'), 'more\n');
        w('made.txt', 'made\n');
      } else if (p.hook === 'tool.execute.after' && p.input.tool === 'bash') w('again.txt', 'again\n');
      await callPlugin(hooks, p);
    }
  }

  it('records one task: the todowrite items as steps with their progress, the edit and both commands with their files, two turns with their answers', async () => {
    const list = realPayloads('opencode', vars());
    assert.equal(list.filter((p) => p.hook === 'chat.message').length, 3, 'the recording holds the continued session and the subagent’s prompt');
    assert.ok(list.some((p) => p.hook === 'event' && p.event.type === 'session.created' && p.event.properties.info.parentID), 'and the subagent’s session');
    await replay(list);
    const engine = await openEngine(ws.dir);
    let taskId: string;
    let baseId: string;
    try {
      const tasks = engine.tasks();
      assert.equal(tasks.length, 1, 'one task, the continued session and the subagent’s included');
      assert.equal(tasks[0].agent, 'opencode');
      taskId = tasks[0].id;
      baseId = tasks[0].baseCheckpointId!;
      const d = engine.taskDetail(taskId);
      assert.deepEqual(
        d.steps.filter((s) => s.id.startsWith('todo-')).map((s) => [s.title, s.status]),
        [
          ['Edit the greeting', 'completed'],
          ['Generate the files', 'completed'],
        ],
      );
      assert.deepEqual(
        engine.queries.turns(taskId).map((t) => [t.prompt, t.lastMessage]),
        [
          ['Update the greeting and generate the files', 'Both items are done.'],
          ['One more file, please', 'Again done.'],
        ],
      );
      assert.deepEqual(
        d.sideEffects.filter((e) => e.kind === 'shell').map((e) => [e.description, e.status]),
        [
          ['echo more >> b.txt && echo made > made.txt', 'done'],
          ['echo again > again.txt', 'done'],
        ],
      );
      assert.equal(tasks[0].state, 'waiting_review', 'a run that ends after its turn leaves the task for review');
      const owners = await engine.changesByOwner(taskId, baseId);
      assert.deepEqual([...owners.agent].sort(), ['a.txt', 'again.txt', 'b.txt', 'made.txt']);
      assert.deepEqual([...owners.person].sort(), ['person.txt']);
    } finally {
      await engine.close();
    }
    const r = cli(['rollback', '--task', taskId, '--to', baseId, '--agent-only', '--yes', '--workspace', ws.dir]);
    assert.equal(r.status, 0, r.stderr + r.stdout);
    assert.equal(fs.readFileSync(path.join(ws.dir, 'a.txt'), 'utf8'), 'hello\n');
    assert.equal(fs.readFileSync(path.join(ws.dir, 'b.txt'), 'utf8'), 'bee\n');
    for (const f of ['made.txt', 'again.txt']) assert.equal(fs.existsSync(path.join(ws.dir, f)), false, f);
    assert.equal(fs.readFileSync(path.join(ws.dir, 'person.txt'), 'utf8'), PERSON);
    assert.equal(fs.existsSync(path.join(ws.dir, '.waypoint', 'hooks.log')), false, 'nothing in the hook log');
  });

  it('the adapter: the prompt from the text parts, todowrite as the whole list, files and call ids, bash’s exit code', () => {
    const list = realPayloads('opencode', vars());
    const top = list[0].event.properties.sessionID as string;
    const prompts = list.filter((p) => p.hook === 'chat.message' && p.input.sessionID === top).map((p) => opencodeAdapter(p));
    assert.deepEqual(
      prompts.map((e) => [e.sessionId, e.cwd, (e.event as Json).prompt]),
      [
        [top, ws.dir, 'Update the greeting and generate the files'],
        [top, ws.dir, 'One more file, please'],
      ],
    );
    const todo = opencodeAdapter(list.find((p) => p.hook === 'tool.execute.before' && p.input.tool === 'todowrite')!).event as Json;
    assert.deepEqual([todo.type, todo.call.kind], ['tool_before', 'todo']);
    assert.deepEqual(todo.call.todos, [
      { content: 'Edit the greeting', status: 'in_progress' },
      { content: 'Generate the files', status: 'pending' },
    ]);
    const editPayload = list.find((p) => p.hook === 'tool.execute.before' && p.input.tool === 'edit')!;
    const edit = opencodeAdapter(editPayload).event as Json;
    assert.deepEqual([edit.call.kind, edit.call.files, edit.call.id], ['edit', [path.join(ws.dir, 'a.txt')], editPayload.input.callID]);
    const shell = opencodeAdapter(list.find((p) => p.hook === 'tool.execute.after' && p.input.tool === 'bash')!).event as Json;
    assert.deepEqual([shell.type, shell.call.kind, shell.call.command, shell.ok, shell.exitCode], ['tool_after', 'shell', 'echo more >> b.txt && echo made > made.txt', true, 0]);
    const read = opencodeAdapter(list.find((p) => p.hook === 'tool.execute.before' && p.input.tool === 'read')!).event as Json;
    assert.equal(read.call.kind, 'other');
    assert.equal(opencodeAdapter(list.find((p) => p.hook === 'event' && p.event.type === 'session.idle')!).event.type, 'stop');
    assert.deepEqual(opencodeAdapter(list.find((p) => p.hook === 'experimental.text.complete')!).event, { type: 'agent_message', text: 'Both items are done.' });
    assert.equal(opencodeAdapter(list.find((p) => p.hook === 'event' && p.event.type === 'todo.updated')!).event.type, 'ignored', 'todo.updated repeats todowrite');
  });

  it('the adapter: what 1.18.33 sends on failures (seen from the real binary) and apply_patch', () => {
    const s = 'ses_1';
    // A bash command that exits 3: a normal tool.execute.after, the code in metadata.exit.
    const failing = opencodeAdapter({ hook: 'tool.execute.after', directory: '/w', input: { tool: 'bash', sessionID: s, callID: 'c1', args: { command: 'exit 3', description: 'Fail' } }, output: { title: 'exit 3', metadata: { output: '(no output)', exit: 3, truncated: false }, output: '(no output)' } }).event as Json;
    assert.deepEqual([failing.type, failing.ok, failing.exitCode], ['tool_after', true, 3]);
    // An edit that throws: no tool.execute.after, only its part in state error.
    const part = { type: 'tool', tool: 'edit', callID: 'c2', state: { status: 'error', input: { filePath: '/w/a.txt', oldString: 'nothere', newString: 'x' }, error: 'Could not find oldString in the file.', time: { start: 1, end: 2 } }, id: 'prt_1', sessionID: s, messageID: 'msg_1' };
    const threw = opencodeAdapter({ hook: 'event', directory: '/w', event: { id: 'evt_1', type: 'message.part.updated', properties: { sessionID: s, part, time: 2 } } }).event as Json;
    assert.deepEqual([threw.type, threw.ok, threw.error, threw.call.id, threw.call.files], ['tool_after', false, 'Could not find oldString in the file.', 'c2', ['/w/a.txt']]);
    const running = opencodeAdapter({ hook: 'event', event: { type: 'message.part.updated', properties: { sessionID: s, part: { ...part, state: { status: 'running', input: {} } } } } }).event;
    assert.equal(running.type, 'ignored');
    // A model API error (400): session.error, then session.idle.
    const error = { name: 'APIError', data: { message: 'scripted failure', statusCode: 400, isRetryable: false } };
    assert.deepEqual(opencodeAdapter({ hook: 'event', event: { type: 'session.error', properties: { sessionID: s, error } } }).event, { type: 'turn_failed', error: 'scripted failure' });
    assert.equal(opencodeAdapter({ hook: 'event', event: { type: 'session.compacted', properties: { sessionID: s } } }).event.type, 'compaction');
    // GPT models edit through apply_patch {patchText}.
    const patch = opencodeAdapter({ hook: 'tool.execute.before', input: { tool: 'apply_patch', sessionID: s, callID: 'c3' }, output: { args: { patchText: '*** Begin Patch\n*** Update File: src/x.ts\n@@\n-a\n+b\n*** Add File: y.txt\n+y\n*** End Patch' } } }).event as Json;
    assert.deepEqual([patch.call.kind, patch.call.files], ['edit', ['src/x.ts', 'y.txt']]);
    // Text parts the person did not type (synthetic, ignored) are not the prompt.
    const prompt = opencodeAdapter({ hook: 'chat.message', input: { sessionID: s }, output: { message: { sessionID: s }, parts: [{ type: 'text', text: 'do it' }, { type: 'text', text: 'file contents', synthetic: true }, { type: 'file', url: 'file:///w/a.txt' }] } }).event;
    assert.deepEqual(prompt, { type: 'prompt', prompt: 'do it' });
    // A subagent's session: its calls are the caller's, its prompt, end and todo list are not.
    const child = { parentSessionID: 'ses_top' };
    assert.deepEqual(opencodeAdapter({ ...child, hook: 'tool.execute.before', input: { tool: 'bash', sessionID: 'ses_sub', callID: 'c4' }, output: { args: { command: 'ls' } } }), {
      sessionId: 'ses_top',
      cwd: undefined,
      event: { type: 'tool_before', call: { id: 'c4', name: 'bash', kind: 'shell', command: 'ls' } },
    });
    assert.equal(opencodeAdapter({ ...child, hook: 'chat.message', input: { sessionID: 'ses_sub' }, output: { parts: [{ type: 'text', text: 'sub' }] } }).event.type, 'ignored');
    assert.equal(opencodeAdapter({ ...child, hook: 'event', event: { type: 'session.idle', properties: { sessionID: 'ses_sub' } } }).event.type, 'ignored');
    const subTodo = opencodeAdapter({ ...child, hook: 'tool.execute.before', input: { tool: 'todowrite', sessionID: 'ses_sub', callID: 'c5' }, output: { args: { todos: [{ content: 'x', status: 'pending', priority: 'low' }] } } }).event as Json;
    assert.deepEqual(subTodo.call, { id: 'c5', name: 'todowrite', kind: 'other' });
    assert.throws(() => opencodeAdapter({ hook: 'event', event: { type: 'session.idle', properties: {} } }), /names no sessionID/);
    assert.throws(() => opencodeAdapter({ directory: '/w' }), /opencode hook input/);
  });

  it('the plugin hands on only what the recorder uses; connect writes it once and never replaces a plugin it did not write', async () => {
    const plugin = opencodePluginFile(ws.dir);
    assert.ok(!plugin.content.includes(ws.dir), 'no machine path in a file meant to be shared');
    assert.equal(plugin.local, false);
    const r = cli(['connect', 'opencode', '--yes', '--workspace', ws.dir]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(opencodePluginFile(ws.dir).changed, false, 'a second connect changes nothing');
    // Every payload the plugin hands on reaches the recorder as an event it uses.
    const handed: Json[] = [];
    const bin = path.join(ws.dir, 'bin');
    fs.mkdirSync(bin);
    const sink = path.join(ws.dir, 'handed.jsonl');
    fs.writeFileSync(path.join(bin, 'node'), `#!/bin/sh\ncat >> ${JSON.stringify(sink)}; echo >> ${JSON.stringify(sink)}\n`, { mode: 0o755 });
    const PATH = process.env.PATH;
    process.env.PATH = `${bin}${path.delimiter}${PATH}`;
    try {
      const hooks = await loadOpencodePlugin(ws.dir);
      for (const p of realPayloads('opencode', vars())) await callPlugin(hooks, p);
    } finally {
      process.env.PATH = PATH;
    }
    for (const l of fs.readFileSync(sink, 'utf8').split('\n').filter(Boolean)) handed.push(JSON.parse(l) as Json);
    const kinds = handed.map((p) => opencodeAdapter(p).event.type);
    assert.deepEqual(kinds.filter((k) => k === 'ignored'), [], 'nothing handed on that the recorder ignores');
    assert.deepEqual(
      handed.filter((p) => p.hook.startsWith('tool.')).map((p) => `${p.hook.slice(13)} ${p.input.tool}`),
      ['before todowrite', 'after todowrite', 'before edit', 'after edit', 'before todowrite', 'after todowrite', 'before bash', 'after bash', 'before todowrite', 'after todowrite', 'before bash', 'after bash'],
      'read and task are not handed on',
    );
    assert.equal(kinds.filter((k) => k === 'stop').length, 2, 'the subagent’s session.idle is not handed on');
    assert.equal(kinds.filter((k) => k === 'prompt').length, 2, 'nor its prompt');
    const top = handed[0].input.sessionID as string;
    const sub = handed.filter((p) => p.input?.sessionID && p.input.sessionID !== top);
    assert.deepEqual(
      sub.map((p) => [p.hook, p.input.tool, p.parentSessionID]),
      [
        ['tool.execute.before', 'bash', top],
        ['tool.execute.after', 'bash', top],
      ],
      'the subagent’s calls name the session it works for',
    );
    assert.equal(opencodeAdapter(sub[0]).sessionId, top);
    fs.writeFileSync(path.join(ws.dir, ...OPENCODE_PLUGIN_REL.split('/')), 'export const Mine = async () => ({});\n');
    assert.throws(() => opencodePluginFile(ws.dir), /Waypoint did not write/);
    assert.equal(fs.readFileSync(path.join(ws.dir, ...OPENCODE_PLUGIN_REL.split('/')), 'utf8'), 'export const Mine = async () => ({});\n');
  });
});
