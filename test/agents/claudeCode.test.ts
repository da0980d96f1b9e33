import * as assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { cli } from '../support/mcp';
import { agentWorkspace, assertCleanHookLog, assertLoopbackOnly, removeAgentRun, waypoint } from './session';
import { startAnthropicServer, type AnthropicServer } from './anthropicServer';
import { CLAUDE_ALL_EVENTS, addCaptureHooks, runClaude } from './claudeCode';
import { repoRoot, versionOf } from './install';
import { recordObserved } from './observed';

/**
 * The real Claude Code binary (the pinned version) through one scripted session in a git
 * workspace that `waypoint connect claude-code` set up: its Tasks plan of two items, a
 * Read and an Edit (a person writes another file while the Edit runs), a Bash command that
 * changes one file and creates another, a subagent that writes a file, the end of the turn,
 * then the session continued (--continue) with one more command. Checked through the CLI.
 */
type Json = Record<string, any>;


const PERSON_TEXT = 'the person wrote this while the agent edited\n';

describe(`Claude Code ${versionOf('claude-code')} (real binary, scripted model)`, function () {
  let root: string;
  let ws: string;
  let home: string;
  let capture: string;
  let server: AnthropicServer;
  let resumeServer: AnthropicServer;
  let first: Awaited<ReturnType<typeof runClaude>>;
  let second: Awaited<ReturnType<typeof runClaude>>;

  before(async function () {
    ({ root, ws, home, capture } = agentWorkspace('claude', 'claude-code'));
    addCaptureHooks(ws, CLAUDE_ALL_EVENTS);
    const a = path.join(ws, 'a.txt');
    server = await startAnthropicServer([
      { tools: [{ name: 'ToolSearch', input: { query: 'select:TaskCreate,TaskUpdate' } }] },
      {
        tools: [
          { name: 'TaskCreate', input: { subject: 'Edit the greeting', description: 'Say hello world in a.txt', activeForm: 'Editing the greeting' } },
          { name: 'TaskCreate', input: { subject: 'Generate the files', description: 'Run the generator', activeForm: 'Generating the files' } },
        ],
      },
      { tools: [{ name: 'TaskUpdate', input: { taskId: '1', status: 'in_progress' } }] },
      { tools: [{ name: 'Read', input: { file_path: a } }] },
      { tools: [{ name: 'Edit', input: { file_path: a, old_string: 'hello', new_string: 'hello world' } }] },
      { tools: [{ name: 'TaskUpdate', input: { taskId: '1', status: 'completed' } }] },
      { tools: [{ name: 'TaskUpdate', input: { taskId: '2', status: 'in_progress' } }] },
      { tools: [{ name: 'Bash', input: { command: 'echo more >> b.txt && echo made > made.txt', description: 'Change b.txt and create made.txt' } }] },
      { tools: [{ name: 'Agent', input: { description: 'Write a note', prompt: 'Write note.txt', subagent_type: 'claude', run_in_background: false } }] },
      { tools: [{ name: 'Write', input: { file_path: path.join(ws, 'note.txt'), content: 'from the subagent\n' } }] },
      { text: 'The note is written.' },
      { tools: [{ name: 'TaskUpdate', input: { taskId: '2', status: 'completed' } }] },
      { text: 'Both items are done.' },
    ]);
    const env = { WAYPOINT_AGENT_CAPTURE: capture, WAYPOINT_PERSON_TOOL: 'Edit', WAYPOINT_PERSON_FILE: path.join(ws, 'person.txt'), WAYPOINT_PERSON_WORKSPACE: ws };
    first = await runClaude({ cwd: ws, home, baseUrl: server.url, prompt: 'Update the greeting and generate the files', env });
    resumeServer = await startAnthropicServer([{ tools: [{ name: 'Bash', input: { command: 'echo again > again.txt', description: 'One more file' } }] }, { text: 'Again done.' }]);
    second = await runClaude({ cwd: ws, home, baseUrl: resumeServer.url, prompt: 'One more file, please', args: ['--continue'], env: { WAYPOINT_AGENT_CAPTURE: capture } });
  });

  after(async () => {
    await server?.close();
    await resumeServer?.close();
    removeAgentRun(root ? { root, ws, home, capture } : undefined);
  });

  it('runs the whole scripted session offline and exits 0', () => {
    assert.equal(first.code, 0, first.stderr + first.stdout);
    assert.equal(first.result?.is_error, false, first.stdout);
    assert.equal(server.remaining(), 0, 'every scripted reply was asked for');
    assert.equal(second.code, 0, second.stderr + second.stdout);
    assert.equal(resumeServer.remaining(), 0);
    for (const f of ['made.txt', 'note.txt', 'person.txt', 'again.txt']) assert.ok(fs.existsSync(path.join(ws, f)), `${f} exists`);
    recordObserved('claude-code', versionOf('claude-code'), [...server.requests, ...resumeServer.requests], capture, { WORKSPACE: ws, HOME: home, ROOT: root });
  });

  it('records one task whose plan is the two Tasks items, each a step with its progress', () => {
    const tasks = waypoint(ws, ['tasks']) as Json[];
    assert.equal(tasks.length, 1, JSON.stringify(tasks.map((t) => t.title)));
    const d = waypoint(ws, ['show', '--task', tasks[0].id]);
    const plan = (d.steps as Json[]).filter((s) => s.id.startsWith('todo-'));
    assert.deepEqual(
      plan.map((s) => [s.title, s.status]),
      [
        ['Edit the greeting', 'completed'],
        ['Generate the files', 'completed'],
      ],
    );
    assert.equal(tasks[0].agent, 'claude-code');
  });

  it('records the edit, the command and the subagent’s write with their files, in the plan’s steps', () => {
    const [task] = waypoint(ws, ['tasks']) as Json[];
    const d = waypoint(ws, ['show', '--task', task.id]);
    const cps = d.checkpoints as Json[];
    const labels = cps.map((c) => String(c.label ?? ''));
    assert.ok(labels.some((l) => l === 'after Edit a.txt'), labels.join('\n'));
    assert.ok(labels.some((l) => l.startsWith('after Bash: echo more >> b.txt')), labels.join('\n'));
    assert.ok(labels.some((l) => l === 'after Write note.txt'), 'a subagent’s tool call is the agent’s');
    const shell = (d.sideEffects as Json[]).filter((e) => e.kind === 'shell');
    assert.deepEqual(shell.map((e) => [e.description, e.status]), [
      ['echo more >> b.txt && echo made > made.txt', 'done'],
      ['echo again > again.txt', 'done'],
    ]);
    const editStep = cps.find((c) => c.label === 'after Edit a.txt')!.stepId;
    assert.equal((d.steps as Json[]).find((s) => s.id === editStep)?.title, 'Edit the greeting', 'the edit belongs to the item in progress');
  });

  it('credits the person’s file to the person and the agent’s files to the agent; agent-only rollback is exact', () => {
    const [task] = waypoint(ws, ['tasks']) as Json[];
    const r = cli(['rollback', '--task', task.id, '--to', task.baseCheckpointId, '--agent-only', '--yes', '--workspace', ws]);
    assert.equal(r.status, 0, r.stderr + r.stdout);
    assert.equal(fs.readFileSync(path.join(ws, 'a.txt'), 'utf8'), 'hello\n', 'the agent’s edit is undone');
    assert.equal(fs.readFileSync(path.join(ws, 'b.txt'), 'utf8'), 'bee\n', 'the command’s change is undone');
    for (const f of ['made.txt', 'note.txt', 'again.txt']) assert.equal(fs.existsSync(path.join(ws, f)), false, `${f}, the agent’s, is removed`);
    assert.equal(fs.readFileSync(path.join(ws, 'person.txt'), 'utf8'), PERSON_TEXT, 'the person’s file, written during the Edit call, is kept');
  });

  it('continued session: the same task, a second turn', () => {
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
    assert.ok(repoRoot);
  });
});
