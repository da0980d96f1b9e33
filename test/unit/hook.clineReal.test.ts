import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildCli, cli } from '../support/mcp';
import { openEngine, tmpDir } from '../support/tmp';
import { realPayloads } from '../support/realFixtures';
import { clineAdapter, sessionPrompt } from '../../src/hooks/adapters/cline';
import { handleHook } from '../../src/hooks';
import { CLINE_HOOKS } from '../../src/mcp/connectHooks';

/**
 * The hook payloads the real Cline CLI 3.0.65 sent (test/fixtures/hooks-real/cline,
 * recorded by `WAYPOINT_RECORD_FIXTURES=1 npm run test:agents`) replayed through
 * `waypoint hook cline`, with the files each tool call changed written between its before
 * and after hooks, and a person's file written during the patch. What the real CLI does
 * that its documentation does not say: its own `hookName`s (`agent_start`, `tool_call`…),
 * a task id per run and per subagent under one `sessionContext.rootSessionId`, no prompt
 * in TaskStart (it is in the session's record), `run_commands` with a list of commands.
 */
type Json = Record<string, any>;
const PERSON = 'the person wrote this while the agent edited\n';
const PROMPT = 'Update the greeting and generate the files';

describe('hook recorder: the real Cline CLI’s payloads (apply_patch, run_commands, a subagent, a resumed session)', function () {
  this.timeout(300_000);
  before(() => buildCli());
  let ws: ReturnType<typeof tmpDir>;
  let dataDir: string;
  const saved = process.env.CLINE_DATA_DIR;
  beforeEach(() => {
    ws = tmpDir('wp-cline-real-');
    fs.writeFileSync(path.join(ws.dir, 'a.txt'), 'hello\n');
    fs.writeFileSync(path.join(ws.dir, 'b.txt'), 'bee\n');
    // Cline's own record of the session, where its prompt is (the hook process finds it through CLINE_DATA_DIR).
    dataDir = path.join(ws.dir, '..', `cline-data-${path.basename(ws.dir)}`);
    const record = path.join(dataDir, 'sessions', 'S1', 'S1.json');
    fs.mkdirSync(path.dirname(record), { recursive: true });
    fs.writeFileSync(record, JSON.stringify({ session_id: 'S1', prompt: `<user_input mode="act">${PROMPT}</user_input>`, metadata: { prompt: PROMPT } }));
    process.env.CLINE_DATA_DIR = dataDir;
  });
  afterEach(() => {
    if (saved === undefined) delete process.env.CLINE_DATA_DIR;
    else process.env.CLINE_DATA_DIR = saved;
    fs.rmSync(dataDir, { recursive: true, force: true });
    ws.cleanup();
  });

  const payloads = (): Json[] => realPayloads('cline', { WORKSPACE: ws.dir, SESSION: 'S1' });
  const w = (f: string, s: string) => fs.writeFileSync(path.join(ws.dir, f), s);

  function replay(list: Json[]): void {
    for (const p of list) {
      const post = p.postToolUse as Json | undefined;
      if (post?.toolName === 'apply_patch') {
        w('a.txt', 'hello world\n');
        w('person.txt', PERSON); // the person, in another editor, while the patch applies
      }
      const cmd = JSON.stringify(p.tool_result?.input ?? '');
      if (post?.toolName === 'run_commands' && cmd.includes('made.txt')) {
        fs.appendFileSync(path.join(ws.dir, 'b.txt'), 'more\n');
        w('made.txt', 'made\n');
      } else if (post?.toolName === 'run_commands' && cmd.includes('sub.txt')) w('sub.txt', 'sub\n');
      else if (post?.toolName === 'run_commands' && cmd.includes('again.txt')) w('again.txt', 'again\n');
      const r = cli(['hook', 'cline', '--workspace', ws.dir], { input: JSON.stringify(p) });
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout.trim(), '{"cancel":false}', 'Cline reads its answer from stdout');
      assert.doesNotMatch(r.stderr, /not recorded/, `${p.hookName}: ${r.stderr}`);
    }
  }

  it('records one task for the session (its subagent’s commands included), the patch and the commands with their files, two turns', async () => {
    const list = payloads();
    assert.ok(list.some((p) => p.parent_agent_id && p.preToolUse), 'the recording holds a subagent’s tool call');
    assert.ok(list.some((p) => p.taskResume), 'the recording holds the resumed session');
    replay(list);
    const engine = await openEngine(ws.dir);
    let taskId: string;
    let baseId: string;
    try {
      const tasks = engine.tasks();
      assert.equal(tasks.length, 1, 'one task: the runs and the subagent share the root session');
      assert.equal(tasks[0].agent, 'cline');
      assert.equal(tasks[0].goal, PROMPT);
      taskId = tasks[0].id;
      baseId = tasks[0].baseCheckpointId!;
      assert.equal(engine.queries.turns(taskId).length, 2, 'two turns: the subagent’s start and end are inside the first');
      assert.deepEqual(
        engine.taskDetail(taskId).sideEffects.filter((e) => e.kind === 'shell').map((e) => [e.description, e.status]),
        [
          ['echo more >> b.txt && echo made > made.txt', 'done'],
          ['echo sub > sub.txt', 'done'],
          ['echo again > again.txt', 'done'],
        ],
      );
      assert.equal(tasks[0].state, 'waiting_review');
      const owners = await engine.changesByOwner(taskId, baseId);
      assert.deepEqual([...owners.agent].sort(), ['a.txt', 'again.txt', 'b.txt', 'made.txt', 'sub.txt']);
      assert.deepEqual([...owners.person].sort(), ['person.txt']);
    } finally {
      await engine.close();
    }
    const r = cli(['rollback', '--task', taskId, '--to', baseId, '--agent-only', '--yes', '--workspace', ws.dir]);
    assert.equal(r.status, 0, r.stderr + r.stdout);
    assert.equal(fs.readFileSync(path.join(ws.dir, 'a.txt'), 'utf8'), 'hello\n');
    assert.equal(fs.readFileSync(path.join(ws.dir, 'b.txt'), 'utf8'), 'bee\n');
    for (const f of ['made.txt', 'sub.txt', 'again.txt']) assert.equal(fs.existsSync(path.join(ws.dir, f)), false, f);
    assert.equal(fs.readFileSync(path.join(ws.dir, 'person.txt'), 'utf8'), PERSON);
    assert.equal(fs.existsSync(path.join(ws.dir, '.waypoint', 'hooks.log')), false, 'nothing in the hook log');
  });

  it('a resumed session that begins with TaskStart (as Cline sometimes does) is a second turn, not credited with the first prompt’s words', async () => {
    // The same recording, its resume sent as Cline's other runs send it: TaskStart, no TaskResume.
    const list = payloads().map((p) => {
      if (!p.taskResume) return p;
      const { taskResume: _resume, ...rest } = p;
      return { ...rest, hookName: 'agent_start', taskStart: { taskMetadata: {} } };
    });
    replay(list);
    const engine = await openEngine(ws.dir);
    try {
      const [task] = engine.tasks();
      const turns = engine.queries.turns(task!.id);
      assert.deepEqual(
        turns.map((t) => t.prompt),
        [PROMPT, ''],
        'the record holds the session’s first prompt only: the resumed turn’s words are unknown, not the first ones',
      );
    } finally {
      await engine.close();
    }
  });

  it('the adapter: events told by their data key, the session by its root, a subagent’s start and end inside the turn, the commands as one line', () => {
    const list = payloads();
    const events = list.map((p) => clineAdapter(p));
    assert.deepEqual([...new Set(events.map((e) => e.sessionId))], ['S1']);
    const start = events[0]!.event as Json;
    assert.deepEqual(start, { type: 'prompt', prompt: PROMPT, firstOnly: true });
    const sub = list.findIndex((p) => p.parent_agent_id && p.taskStart);
    assert.equal(events[sub]!.event.type, 'ignored', 'a subagent’s start is not a new turn');
    const patch = events.find((e) => e.event.type === 'tool_before' && e.event.call.name === 'apply_patch')!.event as Json;
    assert.deepEqual([patch.call.kind, patch.call.files], ['edit', [path.join(ws.dir, 'a.txt')]]);
    assert.match(patch.call.id, /^call_/, 'the call’s id, from tool_call');
    const shell = events.find((e) => e.event.type === 'tool_after' && e.event.call.name === 'run_commands')!.event as Json;
    assert.deepEqual([shell.call.kind, shell.call.command, shell.ok], ['shell', 'echo more >> b.txt && echo made > made.txt', true]);
    const end = events.filter((e) => e.event.type === 'stop').map((e) => (e.event as Json).lastMessage);
    assert.deepEqual(end, ['The greeting is updated and the files are generated.', 'Again done.']);
    // The documented shape still reads (hookName as the event's name, the prompt in TaskStart).
    const documented = clineAdapter({ hookName: 'TaskStart', taskId: 't1', taskStart: { taskMetadata: { initialTask: 'Do it' } } });
    assert.deepEqual([documented.sessionId, documented.event], ['t1', { type: 'prompt', prompt: 'Do it' }]);
    assert.equal((clineAdapter({ hookName: 'PreToolUse', taskId: 't1', preToolUse: { toolName: 'run_commands', parameters: { commands: '["a","b"]' } } }).event as Json).call.command, 'a ; b');
  });

  it('TaskStart and the first PreToolUse reaching the owner together (Cline does not wait for TaskStart) make one turn with the prompt’s words', async () => {
    const list = payloads();
    const start = list.find((p) => p.taskStart && !p.parent_agent_id)!;
    const pre = list.find((p) => p.preToolUse?.toolName === 'apply_patch')!;
    const post = list.find((p) => p.postToolUse?.toolName === 'apply_patch')!;
    const engine = await openEngine(ws.dir);
    try {
      // Both at once, as the owner's endpoint takes them from two hook processes.
      const [a, b] = await Promise.all([handleHook(engine, 'cline', start), handleHook(engine, 'cline', pre)]);
      assert.deepEqual([a.event, b.event], ['prompt', 'tool_before']);
      w('a.txt', 'hello world\n');
      await handleHook(engine, 'cline', post);
      const [task] = engine.tasks();
      assert.equal(task!.goal, PROMPT);
      const steps = engine.taskDetail(task!.id).steps;
      assert.deepEqual(
        steps.map((s) => s.title),
        [`Turn 1: ${PROMPT}`],
        'one turn, its words from the start, the patch in it',
      );
    } finally {
      await engine.close();
    }
  });

  it('reads the prompt only from a session record that is a small regular file, by a plain id', () => {
    assert.equal(sessionPrompt('S1'), PROMPT);
    assert.equal(sessionPrompt('../S1'), undefined, 'no path in the id');
    assert.equal(sessionPrompt('nope'), undefined);
    const dir = path.join(dataDir, 'sessions', 'L1');
    fs.mkdirSync(dir, { recursive: true });
    fs.symlinkSync(path.join(dataDir, 'sessions', 'S1', 'S1.json'), path.join(dir, 'L1.json'));
    assert.equal(sessionPrompt('L1'), undefined, 'a link is not followed');
    fs.mkdirSync(path.join(dataDir, 'sessions', 'F1'));
    fs.writeFileSync(path.join(dataDir, 'sessions', 'F1', 'F1.json'), '{not json');
    assert.equal(sessionPrompt('F1'), undefined);
  });

  it('waypoint connect cline writes a hook for every event the recorder uses', () => {
    const used = new Set(payloads().filter((p) => clineAdapter(p).event.type !== 'ignored').map((p) => Object.keys(p).find((k) => ['taskStart', 'taskResume', 'taskComplete', 'preToolUse', 'postToolUse'].includes(k))!));
    const names: Record<string, string> = { taskStart: 'TaskStart', taskResume: 'TaskResume', taskComplete: 'TaskComplete', preToolUse: 'PreToolUse', postToolUse: 'PostToolUse' };
    assert.deepEqual([...used].map((k) => names[k]).filter((e) => !(CLINE_HOOKS as readonly string[]).includes(e!)), []);
  });
});
