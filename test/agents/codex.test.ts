import * as assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { cli } from '../support/mcp';
import { agentWorkspace, assertCleanHookLog, assertLoopbackOnly, removeAgentRun, waypoint } from './session';
import { CODEX_ALL_EVENTS, addCodexCaptureHooks, runCodex, writeCodexConfig } from './codex';
import { versionOf } from './install';
import { recordObserved } from './observed';
import { startOpenAiResponsesServer, type OpenAiResponsesServer } from './openaiResponsesServer';

/**
 * The real Codex binary (the pinned version) through one scripted session in a git
 * workspace that `waypoint connect codex` set up: an update_plan of two items, an
 * apply_patch (a person writes another file while it runs), the plan moved on, an
 * exec_command that changes one file and creates another, the plan finished, the end of
 * the turn, then the session resumed (`codex exec resume <id>`) with one more command.
 * Checked through the CLI.
 */
type Json = Record<string, any>;


const PERSON_TEXT = 'the person wrote this while the agent edited\n';
const plan = (first: string, second: string) => ({ plan: [{ step: 'Edit the greeting', status: first }, { step: 'Generate the files', status: second }] });

describe(`Codex ${versionOf('codex')} (real binary, scripted model)`, function () {
  let root: string;
  let ws: string;
  let home: string;
  let codexHome: string;
  let capture: string;
  let server: OpenAiResponsesServer;
  let resumeServer: OpenAiResponsesServer;
  let first: Awaited<ReturnType<typeof runCodex>>;
  let second: Awaited<ReturnType<typeof runCodex>>;

  before(async function () {
    ({ root, ws, home, capture } = agentWorkspace('codex', 'codex'));
    codexHome = path.join(root, 'codex-home');
    addCodexCaptureHooks(ws, CODEX_ALL_EVENTS);
    server = await startOpenAiResponsesServer([
      { tools: [{ name: 'update_plan', input: plan('in_progress', 'pending') }] },
      { tools: [{ name: 'apply_patch', input: { input: '*** Begin Patch\n*** Update File: a.txt\n@@\n-hello\n+hello world\n*** End Patch\n' } }] },
      { tools: [{ name: 'update_plan', input: plan('completed', 'in_progress') }] },
      { tools: [{ name: 'exec_command', input: { cmd: 'echo more >> b.txt && echo made > made.txt' } }] },
      { tools: [{ name: 'update_plan', input: plan('completed', 'completed') }] },
      { text: 'Both items are done.' },
    ]);
    writeCodexConfig(codexHome, ws, server.url);
    const env = { WAYPOINT_AGENT_CAPTURE: capture, WAYPOINT_PERSON_TOOL: 'apply_patch', WAYPOINT_PERSON_FILE: path.join(ws, 'person.txt'), WAYPOINT_PERSON_WORKSPACE: ws };
    first = await runCodex({ cwd: ws, home, codexHome, prompt: 'Update the greeting and generate the files', env });
    resumeServer = await startOpenAiResponsesServer([{ tools: [{ name: 'exec_command', input: { cmd: 'echo again > again.txt' } }] }, { text: 'Again done.' }]);
    writeCodexConfig(codexHome, ws, resumeServer.url);
    second = await runCodex({ cwd: ws, home, codexHome, prompt: 'One more file, please', resume: first.threadId ?? '--last', env: { WAYPOINT_AGENT_CAPTURE: capture } });
  });

  after(async () => {
    await server?.close();
    await resumeServer?.close();
    removeAgentRun(root ? { root, ws, home, capture } : undefined);
  });

  it('runs the whole scripted session offline and exits 0', () => {
    assert.equal(first.code, 0, first.stderr + first.stdout);
    assert.ok(first.threadId, first.stdout);
    assert.equal(server.remaining(), 0, 'every scripted reply was asked for');
    assert.equal(second.code, 0, second.stderr + second.stdout);
    assert.equal(resumeServer.remaining(), 0);
    for (const f of ['made.txt', 'person.txt', 'again.txt']) assert.ok(fs.existsSync(path.join(ws, f)), `${f} exists`);
    recordObserved('codex', versionOf('codex'), [...server.requests, ...resumeServer.requests], capture, { WORKSPACE: ws, HOME: home, CODEX_HOME: codexHome, ROOT: root });
  });

  it('records one task whose plan is the two update_plan items, each a step with its progress', () => {
    const tasks = waypoint(ws, ['tasks']) as Json[];
    assert.equal(tasks.length, 1, JSON.stringify(tasks.map((t) => t.title)));
    assert.equal(tasks[0].agent, 'codex');
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
    assert.ok(labels.some((l) => l === 'after apply_patch a.txt'), labels.join('\n'));
    assert.ok(labels.some((l) => l.startsWith('after Bash: echo more >> b.txt')), labels.join('\n'));
    const shell = (d.sideEffects as Json[]).filter((e) => e.kind === 'shell');
    assert.deepEqual(shell.map((e) => [e.description, e.status]), [
      ['echo more >> b.txt && echo made > made.txt', 'done'],
      ['echo again > again.txt', 'done'],
    ]);
    const stepOf = (label: string) => (d.steps as Json[]).find((s) => s.id === cps.find((c) => c.label === label || String(c.label).startsWith(label))!.stepId)?.title;
    assert.equal(stepOf('after apply_patch a.txt'), 'Edit the greeting', 'the patch belongs to the item in progress');
    assert.equal(stepOf('after Bash: echo more >> b.txt'), 'Generate the files', 'the command belongs to the item in progress');
  });

  it('leaves the task for review once the turn ended, and Codex warned of nothing in Waypoint’s hooks', () => {
    const [task] = waypoint(ws, ['tasks']) as Json[];
    assert.equal(task.state, 'waiting_review', JSON.stringify(task));
    // Codex reports a hook config it had to correct (a SessionEnd timeout over its 3 s cap…) as an error item.
    const warnings = [...first.events, ...second.events].filter((e) => e.item?.type === 'error' && !/dangerously-bypass-hook-trust/.test(String(e.item.message)));
    assert.deepEqual(warnings.map((e) => e.item?.message), []);
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
    assert.ok(server.requests.some((q) => q.main && q.tools.includes('apply_patch') && q.tools.includes('exec_command')), 'Codex offered its own tools');
  });
});
