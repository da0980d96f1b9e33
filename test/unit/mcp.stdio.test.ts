import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TOOL_NAMES } from '../../src/mcp/tools';
import { buildCli, errorText, eventCount, isAlive, sc, stdioSession, waitFor, type StdioSession } from '../support/mcp';
import { tmpDir } from '../support/tmp';

type Json = Record<string, any>;

describe('mcp over stdio (waypoint mcp, real SDK client)', function () {
  this.timeout(120_000);
  let ws: ReturnType<typeof tmpDir>;
  const open: StdioSession[] = [];
  const session = async (extra: string[] = []) => {
    const s = await stdioSession(ws.dir, extra);
    open.push(s);
    return s;
  };

  before(() => buildCli());
  beforeEach(() => {
    ws = tmpDir('wp-mcp-stdio-');
  });
  afterEach(async () => {
    for (const s of open.splice(0)) await s.close();
    ws.cleanup();
  });

  it('lists exactly the contract tools with their required arguments and JSON types', async () => {
    const { client } = await session();
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOL_NAMES].sort());
    assert.equal(TOOL_NAMES.length, 12);
    const byName = new Map(tools.map((t) => [t.name, t]));
    const expect: Record<string, { required: string[]; props: Record<string, string | undefined> }> = {
      waypoint_task_start: { required: ['goal'], props: { goal: 'string', title: 'string', plan: 'array', agent: 'string', idempotencyKey: 'string' } },
      waypoint_step_start: { required: ['taskId'], props: { taskId: 'string', stepId: 'string', title: 'string', inputs: undefined, wait: 'boolean' } },
      waypoint_step_complete: { required: ['stepId', 'taskId'], props: { taskId: 'string', stepId: 'string', outputs: undefined, summary: 'string' } },
      waypoint_step_fail: { required: ['error', 'recoverable', 'stepId', 'taskId'], props: { taskId: 'string', stepId: 'string', error: 'string', recoverable: 'boolean' } },
      waypoint_checkpoint: { required: ['taskId'], props: { taskId: 'string', label: 'string' } },
      waypoint_side_effect_begin: { required: ['description', 'key', 'kind', 'taskId'], props: { taskId: 'string', stepId: 'string', key: 'string', kind: 'string', description: 'string', args: undefined } },
      waypoint_side_effect_end: { required: ['key', 'ok', 'taskId'], props: { taskId: 'string', key: 'string', ok: 'boolean', result: undefined, error: 'string' } },
      waypoint_task_resume: { required: ['taskId'], props: { taskId: 'string' } },
      waypoint_task_status: { required: [], props: { taskId: 'string' } },
      waypoint_task_complete: { required: ['taskId'], props: { taskId: 'string', summary: 'string' } },
      waypoint_rollback: { required: ['checkpointId', 'reason', 'taskId'], props: { taskId: 'string', checkpointId: 'string', reason: 'string' } },
    };
    for (const [name, e] of Object.entries(expect)) {
      const schema = byName.get(name)!.inputSchema as Json;
      assert.equal(schema.type, 'object', name);
      assert.deepEqual([...(schema.required ?? [])].sort(), e.required, `${name} required`);
      assert.deepEqual(Object.keys(schema.properties).sort(), Object.keys(e.props).sort(), `${name} properties`);
      for (const [prop, type] of Object.entries(e.props)) assert.equal(schema.properties[prop].type, type, `${name}.${prop}`);
      assert.equal(schema.additionalProperties, false, `${name} refuses unknown arguments`);
      assert.ok((byName.get(name)!.description ?? '').length > 80, `${name} has a teaching description`);
      assert.ok(byName.get(name)!.outputSchema, `${name} declares an output schema`);
    }
    const plan = (byName.get('waypoint_task_start')!.inputSchema as Json).properties.plan;
    assert.deepEqual([...plan.items.required].sort(), ['id', 'title']);
  });

  it('drives a task: plan, steps around real file edits, a side effect that is not repeated, completion for review', async () => {
    const { client } = await session();
    const call = (name: string, args: Json) => client.callTool({ name, arguments: args });
    const start = sc<Json>(
      await call('waypoint_task_start', {
        goal: 'Add a greeting module',
        plan: [
          { id: 'write', title: 'Write greet.ts' },
          { id: 'test', title: 'Test it', dependsOn: ['write'] },
        ],
        agent: 'test-agent',
        idempotencyKey: 'job-1',
      }),
    );
    assert.equal(start.state, 'running');
    assert.match(start.taskId, /^t_/);
    // The same key returns the same task.
    assert.equal(sc<Json>(await call('waypoint_task_start', { goal: 'Add a greeting module', idempotencyKey: 'job-1' })).taskId, start.taskId);
    const taskId = start.taskId;

    // Dependencies are enforced through the tool.
    assert.match(errorText(await call('waypoint_step_start', { taskId, stepId: 'test' })), /depends on “Write greet.ts” \(write\), which is not completed/);

    const s1 = sc<Json>(await call('waypoint_step_start', { taskId, stepId: 'write', inputs: { file: 'greet.ts' } }));
    assert.deepEqual([s1.stepId, s1.attempt], ['write', 1]);
    fs.writeFileSync(path.join(ws.dir, 'greet.ts'), 'export const greet = (n: string) => `hi ${n}`;\n');
    const c1 = sc<Json>(await call('waypoint_step_complete', { taskId, stepId: 'write', outputs: { files: ['greet.ts'] }, summary: 'wrote greet.ts' }));
    assert.equal(typeof c1.checkpointId, 'string');
    assert.notEqual(c1.checkpointId, s1.checkpointId);

    sc(await call('waypoint_step_start', { taskId, stepId: 'test' }));
    fs.appendFileSync(path.join(ws.dir, 'greet.ts'), '// tested\n');
    const begin = sc<Json>(await call('waypoint_side_effect_begin', { taskId, key: 'publish:v1', kind: 'http', description: 'publish the package', args: { version: 1 } }));
    assert.equal(begin.decision, 'proceed');
    assert.equal(sc<Json>(await call('waypoint_side_effect_end', { taskId, key: 'publish:v1', ok: true, result: { url: 'https://example.invalid/v1' } })).state, 'done');
    const again = await call('waypoint_side_effect_begin', { taskId, key: 'publish:v1', kind: 'http', description: 'publish the package' });
    assert.equal(sc<Json>(again).decision, 'already_done');
    assert.deepEqual(sc<Json>(again).result, { url: 'https://example.invalid/v1' });
    assert.match((again.content as { text: string }[])[0].text, /do NOT run it again/);
    sc(await call('waypoint_step_complete', { taskId, stepId: 'test' }));
    const cp = sc<Json>(await call('waypoint_checkpoint', { taskId, label: 'before review' }));
    assert.equal(typeof cp.checkpointId, 'string');

    const done = sc<Json>(await call('waypoint_task_complete', { taskId, summary: 'greeting module added' }));
    assert.equal(done.state, 'waiting_review');
    const status = sc<Json>(await call('waypoint_task_status', { taskId }));
    assert.equal(status.task.state, 'waiting_review');
    assert.deepEqual(
      status.steps.map((s: Json) => [s.id, s.status]),
      [
        ['write', 'completed'],
        ['test', 'completed'],
      ],
    );
    assert.deepEqual(status.sideEffects.map((e: Json) => [e.key, e.status]), [['publish:v1', 'done']]);
    assert.deepEqual(
      status.checkpoints.map((c: Json) => c.kind),
      ['task_base', 'step_start', 'step_end', 'step_start', 'before_side_effect', 'step_end', 'manual'],
    );
  });

  it('an interrupted session (process killed) leaves the task interrupted; waypoint_task_resume returns the context and drives it again', async () => {
    const first = await session();
    const call1 = (name: string, args: Json) => first.client.callTool({ name, arguments: args });
    const { taskId } = sc<Json>(
      await call1('waypoint_task_start', {
        goal: 'Two-step job',
        plan: [
          { id: 'a', title: 'First' },
          { id: 'b', title: 'Second', dependsOn: ['a'] },
          { id: 'c', title: 'Third', dependsOn: ['b'] },
        ],
      }),
    );
    sc(await call1('waypoint_step_start', { taskId, stepId: 'a' }));
    fs.writeFileSync(path.join(ws.dir, 'a.txt'), 'a\n');
    sc(await call1('waypoint_step_complete', { taskId, stepId: 'a', summary: 'did a' }));
    sc(await call1('waypoint_step_start', { taskId, stepId: 'b' }));
    sc(await call1('waypoint_side_effect_begin', { taskId, key: 'migrate:1', kind: 'migration', description: 'run migration 1' }));
    process.kill(first.pid, 'SIGKILL');
    await waitFor('the killed server to be gone', () => !isAlive(first.pid));

    const second = await session();
    const call2 = (name: string, args: Json) => second.client.callTool({ name, arguments: args });
    const list = sc<Json>(await call2('waypoint_task_status', {}));
    assert.deepEqual(
      list.tasks.map((t: Json) => [t.id, t.state]),
      [[taskId, 'interrupted']],
    );
    const detail = sc<Json>(await call2('waypoint_task_status', { taskId }));
    assert.match(detail.interruption.reason, new RegExp(`owner process ${first.pid}`));
    // Work on an interrupted task is refused until it is resumed.
    assert.match(errorText(await call2('waypoint_step_complete', { taskId, stepId: 'b' })), /interrupted.*Resume it first/);

    const resumed = await call2('waypoint_task_resume', { taskId });
    const ctx = sc<Json>(resumed);
    assert.equal(ctx.task.state, 'running');
    assert.equal(ctx.task.attempt, 2);
    assert.equal(ctx.interruptedStep.id, 'b');
    assert.deepEqual(
      ctx.plan.map((s: Json) => [s.id, s.status]),
      [
        ['a', 'completed'],
        ['b', 'in_progress'],
        ['c', 'pending'],
      ],
    );
    assert.deepEqual(
      ctx.sideEffects.inDoubt.map((e: Json) => e.key),
      ['migrate:1'],
    );
    assert.match((resumed.content as { text: string }[])[1].text, /# Resume task: Two-step job/);
    // Continue: b again, then the next ready step is c.
    sc(await call2('waypoint_step_start', { taskId, stepId: 'b' }));
    sc(await call2('waypoint_side_effect_end', { taskId, key: 'migrate:1', ok: true }));
    sc(await call2('waypoint_step_complete', { taskId, stepId: 'b' }));
    const next = sc<Json>(await call2('waypoint_task_resume', { taskId }));
    assert.deepEqual(
      next.nextSteps.map((s: Json) => s.id),
      ['c'],
    );
    assert.equal(next.task.attempt, 2, 'resuming a task this session already drives adds no attempt');
  });

  it('malformed arguments and refused moves are tool errors that change nothing', async () => {
    let s = await session();
    const { taskId } = sc<Json>(await s.client.callTool({ name: 'waypoint_task_start', arguments: { goal: 'g' } }));
    sc(await s.client.callTool({ name: 'waypoint_task_complete', arguments: { taskId } }));
    await s.close();
    const before = eventCount(ws.dir);

    s = await session();
    const bad: [string, Json, RegExp][] = [
      ['waypoint_task_start', {}, /goal/],
      ['waypoint_task_start', { goal: 42 }, /goal/],
      ['waypoint_task_start', { goal: 'x', plan: [{ id: 'a' }] }, /plan/],
      ['waypoint_task_start', { goal: 'x', plan: [{ id: 'a', title: 'A', dependsOn: ['zzz'] }] }, /zzz/],
      ['waypoint_task_start', { goal: 'x', task_id: 'typo' }, /task_id|Unrecognized/i],
      ['waypoint_step_start', { taskId: 't_nope' }, /Unknown task 't_nope'/],
      ['waypoint_step_start', { taskId: '../etc' }, /taskId/],
      ['waypoint_step_complete', { taskId, stepId: 'nope' }, /waiting_review; cannot complete a step/],
      ['waypoint_step_fail', { taskId, stepId: 's1', error: 'x' }, /recoverable/],
      ['waypoint_side_effect_begin', { taskId, key: 'has space', kind: 'k', description: 'd' }, /key/],
      ['waypoint_side_effect_end', { taskId, key: 'k', ok: false }, /error|begin it first/],
      ['waypoint_step_start', { taskId, title: 'more' }, /waiting_review; cannot start a step/],
      ['waypoint_task_status', { taskId: 't_missing' }, /Unknown task/],
      ['waypoint_rollback', { taskId, checkpointId: 'c_x', reason: 'oops' }, /Unknown checkpoint 'c_x'/],
    ];
    for (const [name, args, re] of bad) {
      const r = await s.client.callTool({ name, arguments: args });
      assert.match(errorText(r), re, `${name} ${JSON.stringify(args)}`);
    }
    await s.close();
    assert.equal(eventCount(ws.dir), before, 'no refused call appended an event');
  });

  it('agentRollback=deny refuses with an explanation', async () => {
    const s = await session(['--agent-rollback', 'deny']);
    const { taskId, baseCheckpointId } = sc<Json>(await s.client.callTool({ name: 'waypoint_task_start', arguments: { goal: 'g' } }));
    const r = await s.client.callTool({ name: 'waypoint_rollback', arguments: { taskId, checkpointId: baseCheckpointId, reason: 'broke the build' } });
    assert.match(errorText(r), /agentRollback = deny/);
  });

  it('keeps stdout for MCP frames only and exits when the client closes', async () => {
    const s = await session(['--verbose']);
    sc(await s.client.callTool({ name: 'waypoint_task_status', arguments: {} }));
    await s.close();
    assert.ok(!isAlive(s.pid));
    // Logs went to stderr (the client would have failed on a non-JSON line on stdout).
    assert.match(s.stderr(), /\[mcp\] owning the store/);
    assert.ok(!fs.existsSync(path.join(ws.dir, '.waypoint', 'mcp.json')), 'discovery file removed on exit');
    assert.ok(!fs.existsSync(path.join(ws.dir, '.waypoint', 'owner.lock')), 'lock released on exit');
  });
});
