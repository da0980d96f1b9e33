import * as assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { cli } from '../support/mcp';
import { agentWorkspace, assertCleanHookLog, assertLoopbackOnly, removeAgentRun, waypoint } from './session';
import { COPILOT_ALL_EVENTS, addCopilotCaptureHooks, runCopilot } from './copilot';
import { versionOf } from './install';
import { recordObserved } from './observed';
import { startOpenAiResponsesServer, type OpenAiResponsesServer } from './openaiResponsesServer';

/**
 * The real GitHub Copilot CLI (the pinned version) through one scripted session in a git
 * workspace that `waypoint connect copilot-cli` set up: its plan written with its `sql` tool
 * into the session's `todos` table (two items, the first in progress), an apply_patch of
 * a.txt (reaching hooks as `Edit`; a person writes another file while it runs), the todos moved on, a bash command
 * that changes one file and creates another, the todos done, the end of the turn, then the
 * session resumed (`--resume=<id>`) with one more command. Checked through the CLI.
 */
type Json = Record<string, any>;


const PERSON_TEXT = 'the person wrote this while the agent edited\n';
const sql = (description: string, query: string) => ({ name: 'sql', input: { description, query } });

describe(`Copilot CLI ${versionOf('copilot-cli')} (real binary, scripted model)`, function () {
  let root: string;
  let ws: string;
  let home: string;
  let capture: string;
  let server: OpenAiResponsesServer;
  let resumeServer: OpenAiResponsesServer;
  let first: Awaited<ReturnType<typeof runCopilot>>;
  let second: Awaited<ReturnType<typeof runCopilot>>;

  before(async function () {
    ({ root, ws, home, capture } = agentWorkspace('copilot', 'copilot-cli'));
    addCopilotCaptureHooks(ws, COPILOT_ALL_EVENTS);
    server = await startOpenAiResponsesServer(
      [
        { tools: [sql('Insert the todos', "INSERT INTO todos (id, title, description) VALUES\n  ('greeting', 'Edit the greeting', 'Say hello to the world'),\n  ('files', 'Generate the files', 'Append to b.txt, create made.txt');\nUPDATE todos SET status = 'in_progress' WHERE id = 'greeting';")] },
        { tools: [{ name: 'apply_patch', input: { input: '*** Begin Patch\n*** Update File: a.txt\n@@\n-hello\n+hello world\n*** End Patch\n' } }] },
        { tools: [sql('Move the todos on', "UPDATE todos SET status = 'done' WHERE id = 'greeting';\nUPDATE todos SET status = 'in_progress' WHERE id = 'files';")] },
        { tools: [{ name: 'bash', input: { command: 'echo more >> b.txt && echo made > made.txt', description: 'Generate the files' } }] },
        { tools: [sql('Finish the todos', "UPDATE todos SET status = 'done' WHERE id = 'files';")] },
        { text: 'Both items are done.' },
      ],
      { mainTool: 'bash' },
    );
    const env = { WAYPOINT_AGENT_CAPTURE: capture, WAYPOINT_PERSON_TOOL: 'Edit', WAYPOINT_PERSON_FILE: path.join(ws, 'person.txt'), WAYPOINT_PERSON_WORKSPACE: ws };
    first = await runCopilot({ cwd: ws, home, baseUrl: server.url, prompt: 'Update the greeting and generate the files', env });
    resumeServer = await startOpenAiResponsesServer([{ tools: [{ name: 'bash', input: { command: 'echo again > again.txt', description: 'One more file' } }] }, { text: 'Again done.' }], { mainTool: 'bash' });
    second = await runCopilot({ cwd: ws, home, baseUrl: resumeServer.url, prompt: 'One more file, please', resume: first.sessionId, env: { WAYPOINT_AGENT_CAPTURE: capture } });
  });

  after(async () => {
    await server?.close();
    await resumeServer?.close();
    removeAgentRun(root ? { root, ws, home, capture } : undefined);
  });

  it('runs the whole scripted session offline and exits 0', () => {
    assert.equal(first.code, 0, first.stderr + first.stdout.slice(-4000));
    assert.ok(first.sessionId, first.stdout.slice(-4000));
    assert.equal(server.remaining(), 0, 'every scripted reply was asked for');
    assert.equal(second.code, 0, second.stderr + second.stdout.slice(-4000));
    assert.equal(resumeServer.remaining(), 0);
    for (const f of ['made.txt', 'person.txt', 'again.txt']) assert.ok(fs.existsSync(path.join(ws, f)), `${f} exists`);
    recordObserved('copilot-cli', versionOf('copilot-cli'), [...server.requests, ...resumeServer.requests], capture, { WORKSPACE: ws, HOME: home, ROOT: root });
  });

  it('records one task whose plan is the two todos the sql tool wrote, each a step with its progress', () => {
    const tasks = waypoint(ws, ['tasks']) as Json[];
    assert.equal(tasks.length, 1, JSON.stringify(tasks.map((t) => t.title)));
    assert.equal(tasks[0].agent, 'copilot-cli');
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

  it('records the patch and the command with their files, in the plan’s steps', () => {
    const [task] = waypoint(ws, ['tasks']) as Json[];
    const d = waypoint(ws, ['show', '--task', task.id]);
    const cps = d.checkpoints as Json[];
    const labels = cps.map((c) => String(c.label ?? ''));
    assert.ok(labels.some((l) => l === 'after Edit a.txt'), labels.join('\n'));
    assert.ok(labels.some((l) => l.startsWith('after Bash: echo more >> b.txt')), labels.join('\n'));
    const shell = (d.sideEffects as Json[]).filter((e) => e.kind === 'shell');
    assert.deepEqual(shell.map((e) => [e.description, e.status]), [
      ['echo more >> b.txt && echo made > made.txt', 'done'],
      ['echo again > again.txt', 'done'],
    ]);
    const stepOf = (label: string) => (d.steps as Json[]).find((s) => s.id === cps.find((c) => c.label === label || String(c.label).startsWith(label))!.stepId)?.title;
    assert.equal(stepOf('after Edit a.txt'), 'Edit the greeting', 'the patch belongs to the item in progress');
    assert.equal(stepOf('after Bash: echo more >> b.txt'), 'Generate the files', 'the command belongs to the item in progress');
  });

  it('leaves the task for review once the turn ended', () => {
    const [task] = waypoint(ws, ['tasks']) as Json[];
    assert.equal(task.state, 'waiting_review', JSON.stringify(task));
  });

  it('credits the person’s file to the person and the agent’s files to the agent; agent-only rollback is exact', () => {
    const [task] = waypoint(ws, ['tasks']) as Json[];
    const r = cli(['rollback', '--task', task.id, '--to', task.baseCheckpointId, '--agent-only', '--yes', '--workspace', ws]);
    assert.equal(r.status, 0, r.stderr + r.stdout);
    assert.equal(fs.readFileSync(path.join(ws, 'a.txt'), 'utf8'), 'hello\n', 'the agent’s patch is undone');
    assert.equal(fs.readFileSync(path.join(ws, 'b.txt'), 'utf8'), 'bee\n', 'the command’s change is undone');
    for (const f of ['made.txt', 'again.txt']) assert.equal(fs.existsSync(path.join(ws, f)), false, `${f}, the agent’s, is removed`);
    assert.equal(fs.readFileSync(path.join(ws, 'person.txt'), 'utf8'), PERSON_TEXT, 'the person’s file, written during the patch, is kept');
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
    assert.ok(server.requests.some((q) => q.main && q.tools.includes('apply_patch') && q.tools.includes('sql')), 'Copilot CLI offered its own tools');
  });
});
