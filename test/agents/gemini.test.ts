import * as assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { cli } from '../support/mcp';
import { agentWorkspace, assertCleanHookLog, assertLoopbackOnly, removeAgentRun, waypoint } from './session';
import { GEMINI_ALL_EVENTS, addGeminiCaptureHooks, runGemini, writeGeminiHome } from './gemini';
import { startGeminiServer, type GeminiServer } from './geminiServer';
import { versionOf } from './install';
import { recordObserved } from './observed';

/**
 * The real Gemini CLI (the pinned version) through one scripted session in a git workspace
 * that `waypoint connect gemini-cli` set up: a write_todos of two items, a `replace` of
 * a.txt (a person writes another file while it runs), the list moved on, a
 * run_shell_command that changes one file and creates another, the list finished, the end
 * of the turn, then the session resumed (`--resume <id>`) with one more command. Checked
 * through the CLI.
 */
type Json = Record<string, any>;


const PERSON_TEXT = 'the person wrote this while the agent edited\n';
const todos = (first: string, second: string) => ({ todos: [{ description: 'Edit the greeting', status: first }, { description: 'Generate the files', status: second }] });

describe(`Gemini CLI ${versionOf('gemini-cli')} (real binary, scripted model)`, function () {
  let root: string;
  let ws: string;
  let home: string;
  let capture: string;
  let server: GeminiServer;
  let resumeServer: GeminiServer;
  let first: Awaited<ReturnType<typeof runGemini>>;
  let second: Awaited<ReturnType<typeof runGemini>>;

  before(async function () {
    ({ root, ws, home, capture } = agentWorkspace('gemini', 'gemini-cli'));
    addGeminiCaptureHooks(ws, GEMINI_ALL_EVENTS);
    writeGeminiHome(home, ws);
    server = await startGeminiServer([
      { tools: [{ name: 'write_todos', input: todos('in_progress', 'pending') }] },
      { tools: [{ name: 'replace', input: { file_path: path.join(ws, 'a.txt'), old_string: 'hello', new_string: 'hello world', instruction: 'Greet the world' } }] },
      { tools: [{ name: 'write_todos', input: todos('completed', 'in_progress') }] },
      { tools: [{ name: 'run_shell_command', input: { command: 'echo more >> b.txt && echo made > made.txt', description: 'Generate the files' } }] },
      { tools: [{ name: 'write_todos', input: todos('completed', 'completed') }] },
      { text: 'Both items are done.' },
    ]);
    const env = { WAYPOINT_AGENT_CAPTURE: capture, WAYPOINT_CAPTURE_STDOUT: '{}', WAYPOINT_PERSON_TOOL: 'replace', WAYPOINT_PERSON_FILE: path.join(ws, 'person.txt'), WAYPOINT_PERSON_WORKSPACE: ws };
    first = await runGemini({ cwd: ws, home, baseUrl: server.url, prompt: 'Update the greeting and generate the files', env });
    resumeServer = await startGeminiServer([{ tools: [{ name: 'run_shell_command', input: { command: 'echo again > again.txt' } }] }, { text: 'Again done.' }]);
    second = await runGemini({ cwd: ws, home, baseUrl: resumeServer.url, prompt: 'One more file, please', resume: first.sessionId ?? 'latest', env: { WAYPOINT_AGENT_CAPTURE: capture, WAYPOINT_CAPTURE_STDOUT: '{}' } });
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
    assert.equal(resumeServer.remaining(), 0);
    for (const f of ['made.txt', 'person.txt', 'again.txt']) assert.ok(fs.existsSync(path.join(ws, f)), `${f} exists`);
    recordObserved('gemini-cli', versionOf('gemini-cli'), [...server.requests, ...resumeServer.requests], capture, { WORKSPACE: ws, HOME: home, ROOT: root });
  });

  it('records one task whose plan is the two write_todos items, each a step with its progress', () => {
    const tasks = waypoint(ws, ['tasks']) as Json[];
    assert.equal(tasks.length, 1, JSON.stringify(tasks.map((t) => t.title)));
    assert.equal(tasks[0].agent, 'gemini-cli');
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

  it('records the edit and the command with their files, in the plan’s steps', () => {
    const [task] = waypoint(ws, ['tasks']) as Json[];
    const d = waypoint(ws, ['show', '--task', task.id]);
    const cps = d.checkpoints as Json[];
    const labels = cps.map((c) => String(c.label ?? ''));
    assert.ok(labels.some((l) => l === 'after replace a.txt'), labels.join('\n'));
    assert.ok(labels.some((l) => l.startsWith('after run_shell_command: echo more >> b.txt')), labels.join('\n'));
    const shell = (d.sideEffects as Json[]).filter((e) => e.kind === 'shell');
    assert.deepEqual(shell.map((e) => [e.description, e.status]), [
      ['echo more >> b.txt && echo made > made.txt', 'done'],
      ['echo again > again.txt', 'done'],
    ]);
    const stepOf = (label: string) => (d.steps as Json[]).find((s) => s.id === cps.find((c) => c.label === label || String(c.label).startsWith(label))!.stepId)?.title;
    assert.equal(stepOf('after replace a.txt'), 'Edit the greeting', 'the edit belongs to the item in progress');
    assert.equal(stepOf('after run_shell_command: echo more >> b.txt'), 'Generate the files', 'the command belongs to the item in progress');
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

  it('resumed session: the same task, a second turn', () => {
    const tasks = waypoint(ws, ['tasks']) as Json[];
    assert.equal(tasks.length, 1);
    const events = waypoint(ws, ['events', '--task', tasks[0].id]) as Json[];
    assert.ok(events.filter((e) => e.type === 'turn.recorded').length >= 2, events.map((e) => e.type).join(','));
  });

  it('leaves nothing in the hook log', () => {
    assertCleanHookLog(ws);
  });

  it('keeps the scripted server out of the way: only loopback, no other host asked', () => {
    assertLoopbackOnly([...server.requests, ...resumeServer.requests]);
    assert.ok(server.requests.some((q) => q.main && q.tools.includes('replace') && q.tools.includes('run_shell_command')), 'Gemini CLI offered its own tools');
  });
});
