import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildCli, cli, eventCount, httpClient, sc, serve, type Served } from '../support/mcp';
import { openEngine, tmpDir } from '../support/tmp';

type Json = Record<string, any>;
const FIXTURES = path.join(__dirname, '..', 'fixtures', 'claude-hooks');

function fixture(name: string, workspace: string): Json[] {
  return JSON.parse(fs.readFileSync(path.join(FIXTURES, name), 'utf8').replaceAll('${WORKSPACE}', workspace)) as Json[];
}

/** Feeds one hook event to the real CLI, as Claude Code does; it must exit 0 and print nothing. */
function hook(workspace: string, payload: unknown): string {
  const r = cli(['hook', 'claude-code', '--workspace', workspace], { input: typeof payload === 'string' ? payload : JSON.stringify(payload) });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, '', 'a hook prints nothing (UserPromptSubmit stdout would reach the model)');
  return r.stderr;
}

/** The recorded session, with the real file change between the Edit's Pre and Post hooks. */
function play(workspace: string, events: Json[]): void {
  for (const e of events) {
    if (e.hook_event_name === 'PostToolUse' && e.tool_name === 'Edit') fs.writeFileSync(path.join(workspace, 'src', 'greet.ts'), 'export const hi = 1;\n');
    hook(workspace, e);
  }
}

async function detail(workspace: string) {
  const engine = await openEngine(workspace);
  try {
    const [task] = engine.tasks();
    return { tasks: engine.tasks().length, ...engine.taskDetail(task.id) };
  } finally {
    await engine.close();
  }
}

describe('Claude Code hooks (waypoint hook claude-code)', function () {
  this.timeout(180_000);
  let ws: ReturnType<typeof tmpDir>;
  let served: Served | undefined;

  before(() => buildCli());
  beforeEach(() => {
    ws = tmpDir('wp-mcp-hooks-');
    fs.mkdirSync(path.join(ws.dir, 'src'));
    fs.writeFileSync(path.join(ws.dir, 'src', 'greet.ts'), 'export const hello = 1;\n');
  });
  afterEach(async () => {
    await served?.stop();
    served = undefined;
    ws.cleanup();
  });

  const expectRecorded = (d: Awaited<ReturnType<typeof detail>>) => {
    assert.equal(d.tasks, 1);
    assert.equal(d.task.goal, 'Rename the greeting and run the tests');
    assert.equal(d.task.agent, 'claude-code');
    assert.equal(d.task.state, 'waiting_review');
    assert.deepEqual(
      d.steps.map((s) => [s.id, s.status, s.title]),
      [['turn-1', 'completed', 'Turn 1: Rename the greeting and run the tests']],
      'the tool calls of a turn are the work of one step, not steps of their own',
    );
    assert.deepEqual(
      d.checkpoints.map((c) => [c.kind, c.stepId]),
      [
        ['task_base', null],
        ['step_start', 'turn-1'],
        ['tool_start', 'turn-1'],
        ['tool_end', 'turn-1'],
        ['tool_start', 'turn-1'],
        ['before_side_effect', 'turn-1'],
        ['tool_end', 'turn-1'],
        ['tool_start', 'turn-1'],
        ['step_end', 'turn-1'],
      ],
    );
    assert.deepEqual(
      d.sideEffects.map((e) => [e.key, e.kind, e.status, e.description]),
      [['shell:toolu_01BashXyzw98765432', 'shell', 'done', 'npm test']],
    );
    assert.deepEqual(d.sideEffects[0].result, { stdout: '3 passing' });
  };

  it('maps a recorded session onto a task, a step with checkpoints and a side effect; replaying it changes nothing', async () => {
    const events = fixture('session.json', ws.dir);
    play(ws.dir, events);
    expectRecorded(await detail(ws.dir));
    const before = eventCount(ws.dir);
    play(ws.dir, events);
    assert.equal(eventCount(ws.dir), before, 'the same hooks fired again appended no event');
    for (const e of events) hook(ws.dir, e); // and each one twice in a row
    assert.equal(eventCount(ws.dir), before);
    expectRecorded(await detail(ws.dir));
    assert.ok(fs.existsSync(path.join(ws.dir, '.waypoint', 'hooks', 'claude-code-5f3c2a1e-8d4b-4c6a-9e2f-1a2b3c4d5e6f.json')));
  });

  it('a next prompt in the same session continues the task; a failed Bash call is recorded as failed', async () => {
    const events = fixture('session.json', ws.dir);
    play(ws.dir, events);
    const [prompt, , , preBash] = events;
    hook(ws.dir, { ...prompt, prompt: 'Also fix the failing lint' });
    hook(ws.dir, { ...preBash, tool_input: { command: 'npm run lint' }, tool_use_id: 'toolu_01Lint' });
    hook(ws.dir, { ...preBash, hook_event_name: 'PostToolUseFailure', tool_input: { command: 'npm run lint' }, tool_use_id: 'toolu_01Lint', error: 'Command failed with exit code 1' });
    const d = await detail(ws.dir);
    assert.equal(d.tasks, 1, 'same task');
    assert.equal(d.task.state, 'running');
    assert.equal(d.task.attempt, 2);
    const lint = d.sideEffects.find((e) => e.key === 'shell:toolu_01Lint')!;
    assert.equal(lint.status, 'failed');
    assert.match(lint.error ?? '', /exit code 1/);
  });

  it('a session that ends with a step open leaves the task interrupted', async () => {
    play(ws.dir, fixture('session-end-mid-step.json', ws.dir));
    const d = await detail(ws.dir);
    assert.equal(d.task.state, 'interrupted');
    assert.match(d.task.interruption!.reason, /session ended \(prompt_input_exit\)/);
    assert.equal(d.task.interruption!.stepId, 'turn-1', 'the unfinished Write left its turn’s step open');
  });

  it('relays to a running owner (waypoint serve) and records the same', async () => {
    served = await serve(ws.dir);
    play(ws.dir, fixture('session.json', ws.dir));
    const c = await httpClient(served.url, served.token);
    try {
      const { tasks } = sc<Json>(await c.callTool({ name: 'waypoint_task_status', arguments: {} }));
      assert.equal(tasks.length, 1);
      const st = sc<Json>(await c.callTool({ name: 'waypoint_task_status', arguments: { taskId: tasks[0].id } }));
      assert.equal(st.task.state, 'waiting_review');
      assert.deepEqual(
        st.sideEffects.map((e: Json) => e.status),
        ['done'],
      );
    } finally {
      await c.close();
    }
    await served.stop();
    served = undefined;
    expectRecorded(await detail(ws.dir));
  });

  it('never blocks the agent: bad input exits 0 and is logged to .waypoint/hooks.log', () => {
    const err = hook(ws.dir, 'not json');
    assert.match(err, /not recorded: hook input is not JSON/);
    hook(ws.dir, { hook_event_name: 'Stop' }); // no session_id
    const log = fs.readFileSync(path.join(ws.dir, '.waypoint', 'hooks.log'), 'utf8');
    assert.match(log, /session_id/);
  });
});
