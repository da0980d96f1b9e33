import * as assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { cli } from '../support/mcp';
import { agentWorkspace, assertCleanHookLog, assertLoopbackOnly, removeAgentRun, waypoint } from './session';
import { CLINE_ALL_EVENTS, addClineCaptureHooks, authCline, lastClineSession, resumeCline, runCline, stopClineHubs } from './cline';
import { versionOf } from './install';
import { recordObserved } from './observed';
import { startOpenAiChatServer, type OpenAiChatServer } from './openaiChatServer';

/**
 * The real Cline CLI (the pinned version) through one scripted session on the Chat
 * Completions server, in a git workspace that `waypoint connect cline` set up: an
 * `apply_patch` of a.txt (a person writes another file while it runs), a `run_commands`
 * that changes one file and creates another, a subagent (`spawn_agent`) that runs a
 * command of its own, the end of the turn; then the session resumed in Cline's terminal
 * UI (`--id`) with one more command. Cline sends its own event names and a task id per
 * run and per subagent; the session they share is `sessionContext.rootSessionId`.
 * Checked through the CLI.
 */
type Json = Record<string, any>;


const PERSON_TEXT = 'the person wrote this while the agent edited\n';

describe(`Cline ${versionOf('cline')} (real binary, scripted model)`, function () {
  let root: string;
  let ws: string;
  let home: string;
  let capture: string;
  let server: OpenAiChatServer;
  let first: Awaited<ReturnType<typeof runCline>>;
  let second: Awaited<ReturnType<typeof resumeCline>>;
  let session: string | undefined;

  before(async function () {
    ({ root, ws, home, capture } = agentWorkspace('cline', 'cline'));
    fs.mkdirSync(home);
    addClineCaptureHooks(home, CLINE_ALL_EVENTS, {
      WAYPOINT_AGENT_CAPTURE: capture,
      WAYPOINT_CAPTURE_STDOUT: '{"cancel":false}',
      WAYPOINT_PERSON_TOOL: 'apply_patch',
      WAYPOINT_PERSON_FILE: path.join(ws, 'person.txt'),
      WAYPOINT_PERSON_WORKSPACE: ws,
    });
    const patch = `*** Begin Patch\n*** Update File: ${path.join(ws, 'a.txt')}\n@@\n-hello\n+hello world\n*** End Patch\n`;
    server = await startOpenAiChatServer(
      [
        { text: 'Editing the greeting.', tools: [{ name: 'apply_patch', input: { input: patch } }] },
        { text: 'Generating the files.', tools: [{ name: 'run_commands', input: { commands: ['echo more >> b.txt && echo made > made.txt'] } }] },
        { text: 'Delegating one file.', tools: [{ name: 'spawn_agent', input: { systemPrompt: 'You write files with run_commands.', task: 'Write sub.txt' } }] },
        // The subagent's own conversation (it is offered run_commands too).
        { tools: [{ name: 'run_commands', input: { commands: ['echo sub > sub.txt'] } }] },
        { text: 'sub.txt is written.' },
        { text: 'The greeting is updated and the files are generated.' },
        // The resumed session.
        { tools: [{ name: 'run_commands', input: { commands: ['echo again > again.txt'] } }] },
        { text: 'Again done.' },
      ],
      { mainTool: 'run_commands' },
    );
    const auth = await authCline({ cwd: ws, home, baseUrl: server.url });
    assert.equal(auth.code, 0, auth.stderr + auth.stdout);
    first = await runCline({ cwd: ws, home, prompt: 'Update the greeting and generate the files' });
    session = lastClineSession(home);
    const turns = () => {
      const q = cli(['events', '--workspace', ws, '--json']);
      return q.status === 0 ? (JSON.parse(q.stdout) as Json[]).filter((e) => e.type === 'turn.recorded').length : 0;
    };
    second = await resumeCline({ cwd: ws, home, session: session ?? '', prompt: 'One more file, please', done: () => server.remaining() === 0 && turns() >= 2 });
  });

  after(async () => {
    if (root) await stopClineHubs(root);
    await server?.close();
    removeAgentRun(root ? { root, ws, home, capture } : undefined);
  });

  it('runs the whole scripted session offline, and the resumed one in its terminal UI', () => {
    assert.equal(first.code, 0, first.stderr + first.stdout);
    assert.ok(session, 'Cline kept a session record');
    assert.equal(server.remaining(), 0, `every scripted reply was asked for; the resumed run printed:\n${second.stdout.slice(-2000)}`);
    for (const f of ['made.txt', 'sub.txt', 'person.txt', 'again.txt']) assert.ok(fs.existsSync(path.join(ws, f)), `${f} exists`);
    assert.equal(fs.readFileSync(path.join(ws, 'a.txt'), 'utf8'), 'hello world\n', 'the patch applied');
    recordObserved('cline', versionOf('cline'), server.requests, capture, { WORKSPACE: ws, HOME: home, ROOT: root, SESSION: session ?? '' });
  });

  it('names events only by their data key, and gives each run and subagent its own task id under one root session', () => {
    const lines = fs.readFileSync(capture, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Json);
    assert.ok(lines.every((p) => !/^[A-Z]/.test(String(p.hookName))), `hookName is Cline's own: ${[...new Set(lines.map((p) => p.hookName))].join(', ')}`);
    assert.equal(new Set(lines.map((p) => p.sessionContext?.rootSessionId)).size, 1, 'one root session');
    assert.ok(new Set(lines.map((p) => p.taskId)).size >= 3, 'a task id per run and per subagent');
    assert.ok(lines.some((p) => p.parent_agent_id && p.preToolUse), 'the subagent’s tool calls name their lead');
  });

  it('records one task for the session, its subagent’s work included', () => {
    const tasks = waypoint(ws, ['tasks']) as Json[];
    assert.equal(tasks.length, 1, JSON.stringify(tasks.map((t) => t.title)));
    assert.equal(tasks[0].agent, 'cline');
    assert.match(tasks[0].goal, /Update the greeting and generate the files/, 'the prompt, read from Cline’s session record');
  });

  it('records the patch and each command with its files', () => {
    const [task] = waypoint(ws, ['tasks']) as Json[];
    const d = waypoint(ws, ['show', '--task', task.id]);
    const labels = (d.checkpoints as Json[]).map((c) => String(c.label ?? ''));
    assert.ok(labels.some((l) => l === 'after apply_patch a.txt'), labels.join('\n'));
    const shell = (d.sideEffects as Json[]).filter((e) => e.kind === 'shell');
    assert.deepEqual(
      shell.map((e) => [e.description, e.status]),
      [
        ['echo more >> b.txt && echo made > made.txt', 'done'],
        ['echo sub > sub.txt', 'done'],
        ['echo again > again.txt', 'done'],
      ],
    );
  });

  it('leaves the task for review once the turn ended', () => {
    const [task] = waypoint(ws, ['tasks']) as Json[];
    assert.equal(task.state, 'waiting_review', JSON.stringify(task));
  });

  it('credits the person’s file to the person and the agent’s files (the subagent’s too) to the agent; agent-only rollback is exact', () => {
    const [task] = waypoint(ws, ['tasks']) as Json[];
    const r = cli(['rollback', '--task', task.id, '--to', task.baseCheckpointId, '--agent-only', '--yes', '--workspace', ws]);
    assert.equal(r.status, 0, r.stderr + r.stdout);
    assert.equal(fs.readFileSync(path.join(ws, 'a.txt'), 'utf8'), 'hello\n', 'the agent’s patch is undone');
    assert.equal(fs.readFileSync(path.join(ws, 'b.txt'), 'utf8'), 'bee\n', 'the command’s change is undone');
    for (const f of ['made.txt', 'sub.txt', 'again.txt']) assert.equal(fs.existsSync(path.join(ws, f)), false, `${f}, the agent’s, is removed`);
    assert.equal(fs.readFileSync(path.join(ws, 'person.txt'), 'utf8'), PERSON_TEXT, 'the person’s file, written during the patch, is kept');
  });

  it('resumed session: the same task, exactly two turns', () => {
    const tasks = waypoint(ws, ['tasks']) as Json[];
    assert.equal(tasks.length, 1);
    const events = waypoint(ws, ['events', '--task', tasks[0].id]) as Json[];
    assert.equal(events.filter((e) => e.type === 'turn.recorded').length, 2, events.map((e) => e.type).join(','));
  });

  it('leaves nothing in the hook log', () => {
    assertCleanHookLog(ws);
  });

  it('keeps the scripted server out of the way: only loopback, no other host asked', () => {
    assertLoopbackOnly(server.requests);
    assert.ok(server.requests.some((q) => q.main && q.tools.includes('apply_patch') && q.tools.includes('spawn_agent')), 'Cline offered its own tools');
  });
});
