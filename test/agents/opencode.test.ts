import * as assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { cli } from '../support/mcp';
import { agentWorkspace, assertCleanHookLog, assertLoopbackOnly, removeAgentRun, waypoint } from './session';
import { versionOf } from './install';
import { recordObserved } from './observed';
import { runOpencode, setOpencodeServer, writeOpencodeHome } from './opencode';
import { startOpenAiChatServer, type OpenAiChatServer } from './openaiChatServer';

/**
 * The real opencode (the pinned version) through one scripted session on the Chat
 * Completions server, in a git workspace that `waypoint connect opencode` set up (its
 * plugin .opencode/plugins/waypoint.js): a todowrite of two items, a read then an `edit` of
 * a.txt (edit refuses a file not read first; a person writes another file while it runs), the
 * list moved on, a bash command that changes one file and creates another, the list
 * finished, the end of the turn (session.idle), then the session continued
 * (`opencode run -s <id>`) with one more command, run by a subagent (the `task` tool: a
 * session of its own, whose work is the task's). A capture plugin in the home records what
 * opencode hands to plugins. Checked through the CLI.
 */
type Json = Record<string, any>;


const PERSON_TEXT = 'the person wrote this while the agent edited\n';
const todos = (first: string, second: string) => ({
  todos: [
    { content: 'Edit the greeting', status: first, priority: 'high' },
    { content: 'Generate the files', status: second, priority: 'medium' },
  ],
});

describe(`opencode ${versionOf('opencode')} (real binary, scripted model)`, function () {
  let root: string;
  let ws: string;
  let home: string;
  let capture: string;
  let server: OpenAiChatServer;
  let resumeServer: OpenAiChatServer;
  let first: Awaited<ReturnType<typeof runOpencode>>;
  let second: Awaited<ReturnType<typeof runOpencode>>;

  before(async function () {
    ({ root, ws, home, capture } = agentWorkspace('opencode', 'opencode'));
    const a = path.join(ws, 'a.txt');
    server = await startOpenAiChatServer(
      [
        { tools: [{ name: 'todowrite', input: todos('in_progress', 'pending') }] },
        { tools: [{ name: 'read', input: { filePath: a } }] },
        { tools: [{ name: 'edit', input: { filePath: a, oldString: 'hello', newString: 'hello world' } }] },
        { tools: [{ name: 'todowrite', input: todos('completed', 'in_progress') }] },
        { tools: [{ name: 'bash', input: { command: 'echo more >> b.txt && echo made > made.txt', description: 'Generate the files' } }] },
        { tools: [{ name: 'todowrite', input: todos('completed', 'completed') }] },
        { text: 'Both items are done.' },
      ],
      { mainTool: 'bash' },
    );
    writeOpencodeHome(home, server.url);
    const env = { WAYPOINT_AGENT_CAPTURE: capture, WAYPOINT_PERSON_TOOL: 'edit', WAYPOINT_PERSON_FILE: path.join(ws, 'person.txt') };
    first = await runOpencode({ cwd: ws, home, prompt: 'Update the greeting and generate the files', env });
    // Continued through a subagent (the task tool), which works in a session of its own and offers bash too.
    resumeServer = await startOpenAiChatServer(
      [
        { tools: [{ name: 'task', input: { description: 'One more file', prompt: 'Create again.txt', subagent_type: 'general' } }] },
        { tools: [{ name: 'bash', input: { command: 'echo again > again.txt', description: 'One more file' } }] },
        { text: 'Subagent done.' },
        { text: 'Again done.' },
      ],
      { mainTool: 'bash' },
    );
    setOpencodeServer(home, resumeServer.url);
    second = await runOpencode({ cwd: ws, home, prompt: 'One more file, please', args: ['-s', first.sessionId ?? ''], env: { WAYPOINT_AGENT_CAPTURE: capture } });
  });

  after(async () => {
    await server?.close();
    await resumeServer?.close();
    removeAgentRun(root ? { root, ws, home, capture } : undefined);
  });

  it('runs the whole scripted session offline and exits 0', () => {
    assert.equal(first.code, 0, first.stderr + first.stdout);
    assert.ok(first.sessionId, first.stdout);
    assert.equal(server.remaining(), 0, 'every scripted reply was asked for');
    assert.equal(second.code, 0, second.stderr + second.stdout);
    assert.equal(second.sessionId, first.sessionId, 'the resumed run continues the same session');
    assert.equal(resumeServer.remaining(), 0);
    for (const f of ['made.txt', 'person.txt', 'again.txt']) assert.ok(fs.existsSync(path.join(ws, f)), `${f} exists`);
    assert.equal(fs.readFileSync(path.join(ws, 'a.txt'), 'utf8'), 'hello world\n', 'the edit ran (read first)');
    recordObserved('opencode', versionOf('opencode'), [...server.requests, ...resumeServer.requests], capture, { WORKSPACE: ws, HOME: home, ROOT: root });
  });

  it('hands Waypoint’s plugin the prompt, each tool call before and after, each answer and the end of each turn', () => {
    const lines = fs.readFileSync(capture, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Json);
    const prompts = lines.filter((p) => p.hook === 'chat.message').map((p) => (p.output.parts as Json[]).filter((x) => x.type === 'text').map((x) => x.text).join(''));
    assert.deepEqual(prompts, ['Update the greeting and generate the files', 'One more file, please', 'Create again.txt']);
    const calls = (hook: string) => lines.filter((p) => p.hook === hook).map((p) => p.input.tool);
    assert.deepEqual(calls('tool.execute.before'), ['todowrite', 'read', 'edit', 'todowrite', 'bash', 'todowrite', 'task', 'bash']);
    assert.deepEqual(calls('tool.execute.after'), ['todowrite', 'read', 'edit', 'todowrite', 'bash', 'todowrite', 'bash', 'task'], 'the task call ends after its subagent’s work');
    assert.deepEqual(lines.filter((p) => p.hook === 'experimental.text.complete').map((p) => p.output.text), ['Both items are done.', 'Subagent done.', 'Again done.']);
    const child = lines.find((p) => p.hook === 'event' && p.event.type === 'session.created' && p.event.properties.info.parentID);
    assert.ok(child, 'the subagent’s session names its parent');
    assert.equal(child.event.properties.info.parentID, first.sessionId);
    const sessions = new Set(lines.filter((p) => p.input?.sessionID).map((p) => p.input.sessionID));
    assert.deepEqual([...sessions].sort(), [first.sessionId, child.event.properties.info.id].sort(), 'one session, continued, and the subagent’s');
  });

  it('records one task whose plan is the two todowrite items, each a step with its progress', () => {
    const tasks = waypoint(ws, ['tasks']) as Json[];
    assert.equal(tasks.length, 1, JSON.stringify(tasks.map((t) => t.title)));
    assert.equal(tasks[0].agent, 'opencode');
    const d = waypoint(ws, ['show', '--task', tasks[0].id]);
    const items = (d.steps as Json[]).filter((s) => s.id.startsWith('todo-'));
    assert.deepEqual(
      items.map((s) => [s.title, s.status]),
      [
        ['Edit the greeting', 'completed'],
        ['Generate the files', 'completed'],
      ],
    );
  });

  it('records the edit and the commands with their files, in the plan’s steps', () => {
    const [task] = waypoint(ws, ['tasks']) as Json[];
    const d = waypoint(ws, ['show', '--task', task.id]);
    const cps = d.checkpoints as Json[];
    const labels = cps.map((c) => String(c.label ?? ''));
    assert.ok(labels.some((l) => l === 'after edit a.txt'), labels.join('\n'));
    assert.ok(labels.some((l) => l.startsWith('after bash: echo more >> b.txt')), labels.join('\n'));
    const shell = (d.sideEffects as Json[]).filter((e) => e.kind === 'shell');
    assert.deepEqual(
      shell.map((e) => [e.description, e.status]),
      [
        ['echo more >> b.txt && echo made > made.txt', 'done'],
        ['echo again > again.txt', 'done'],
      ],
    );
    const stepOf = (label: string) => (d.steps as Json[]).find((s) => s.id === cps.find((c) => c.label === label || String(c.label).startsWith(label))!.stepId)?.title;
    assert.equal(stepOf('after edit a.txt'), 'Edit the greeting', 'the edit belongs to the item in progress');
    assert.equal(stepOf('after bash: echo more >> b.txt'), 'Generate the files', 'the command belongs to the item in progress');
  });

  it('leaves the task for review once the turn ended', () => {
    const [task] = waypoint(ws, ['tasks']) as Json[];
    assert.equal(task.state, 'waiting_review', JSON.stringify(task));
  });

  it('credits the person’s file to the person and the agent’s files to the agent; agent-only rollback is exact', () => {
    const [task] = waypoint(ws, ['tasks']) as Json[];
    const r = cli(['rollback', '--task', task.id, '--to', task.baseCheckpointId, '--agent-only', '--yes', '--workspace', ws]);
    assert.equal(r.status, 0, r.stderr + r.stdout);
    assert.equal(fs.readFileSync(path.join(ws, 'a.txt'), 'utf8'), 'hello\n', 'the agent’s edit is undone');
    assert.equal(fs.readFileSync(path.join(ws, 'b.txt'), 'utf8'), 'bee\n', 'the command’s change is undone');
    for (const f of ['made.txt', 'again.txt']) assert.equal(fs.existsSync(path.join(ws, f)), false, `${f}, the agent’s, is removed`);
    assert.equal(fs.readFileSync(path.join(ws, 'person.txt'), 'utf8'), PERSON_TEXT, 'the person’s file, written during the edit, is kept');
  });

  it('resumed session: the same task, exactly two turns (the subagent’s prompt is none of them)', () => {
    const tasks = waypoint(ws, ['tasks']) as Json[];
    assert.equal(tasks.length, 1);
    const events = waypoint(ws, ['events', '--task', tasks[0].id]) as Json[];
    const turns = events.filter((e) => e.type === 'turn.recorded');
    assert.equal(turns.length, 2, events.map((e) => e.type).join(','));
    assert.deepEqual(
      turns.map((e) => e.data.lastMessage),
      ['Both items are done.', 'Again done.'],
      'each turn’s answer, from experimental.text.complete',
    );
  });

  it('leaves nothing in the hook log', () => {
    assertCleanHookLog(ws);
  });

  it('keeps the scripted server out of the way: only loopback, no other host asked', () => {
    assertLoopbackOnly([...server.requests, ...resumeServer.requests]);
    assert.ok(server.requests.some((q) => q.main && q.tools.includes('edit') && q.tools.includes('todowrite')), 'opencode offered its own tools');
  });
});
