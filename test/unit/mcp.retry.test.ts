import * as assert from 'node:assert/strict';
import { localApi } from '../../src/core/engine/api';
import { Engine } from '../../src/core/engine/engine';
import { runTool, TOOLS, type ToolContext } from '../../src/mcp/tools';
import { FakeClock, openEngine, tmpDir } from '../support/tmp';

/** The MCP tools tell an agent when it may retry a step, and to stop when the task waits for a person. */
const tool = (name: string) => TOOLS.find((t) => t.name === name)!;
const text = (r: Awaited<ReturnType<typeof runTool>>) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');

describe('MCP tools and the retry policy', () => {
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine;
  let clock: FakeClock;
  let ctx: ToolContext;

  beforeEach(async () => {
    ws = tmpDir('wp-mcp-retry-');
    clock = new FakeClock();
    engine = await openEngine(ws.dir, { clock, snapshots: false });
    ctx = { engine: localApi(engine), owner: { id: 'agent-1' }, agentRollback: 'deny' };
  });
  afterEach(async () => {
    await engine.close();
    ws.cleanup();
  });

  it('step_fail names retryAt; step_start before it is an error with the time; the last attempt says STOP, and so do later starts and the status', async () => {
    const { taskId } = await engine.startTask({ goal: 'g', plan: [{ id: 'fetch', title: 'Fetch', maxAttempts: 2 }], owner: { id: 'agent-1' } });
    await runTool(tool('waypoint_step_start'), ctx, { taskId, stepId: 'fetch' });
    const f1 = await runTool(tool('waypoint_step_fail'), ctx, { taskId, stepId: 'fetch', error: '503', recoverable: true });
    assert.equal(f1.isError, undefined);
    const retry = (f1.structuredContent as { retry: { attempt: number; maxAttempts: number; retryAt: string } }).retry;
    assert.deepEqual([retry.attempt, retry.maxAttempts], [2, 2]);
    assert.match(text(f1), /you may retry it as attempt 2 of 2 at .*, not before/);
    const early = await runTool(tool('waypoint_step_start'), ctx, { taskId, stepId: 'fetch' });
    assert.equal(early.isError, true);
    assert.match(text(early), new RegExp(`may retry at .*\\(retryAt ${retry.retryAt.replace(/[.]/g, '\\.')}\\)`));
    clock.advance(Date.parse(retry.retryAt) - clock.t);
    const s2 = await runTool(tool('waypoint_step_start'), ctx, { taskId, stepId: 'fetch' });
    assert.equal((s2.structuredContent as { attempt: number }).attempt, 2);
    const f2 = await runTool(tool('waypoint_step_fail'), ctx, { taskId, stepId: 'fetch', error: '503 again', recoverable: true });
    assert.match(text(f2), /^STOP: step fetch failed on its last allowed attempt/);
    assert.equal((f2.structuredContent as { state: string; hold: { cause: string } }).hold.cause, 'retries_exhausted');
    const again = await runTool(tool('waypoint_step_start'), ctx, { taskId, stepId: 'fetch' });
    assert.equal(again.isError, true);
    assert.match(text(again), /^STOP — this task waits for a person; do not retry\. .*used its 2 attempts/);
    const status = await runTool(tool('waypoint_task_status'), ctx, { taskId });
    assert.match(JSON.stringify(status.structuredContent), /retries_exhausted/);
    const resumed = await runTool(tool('waypoint_task_resume'), ctx, { taskId });
    assert.equal(resumed.isError, true, 'resume is refused too: the person decides');
  });

  it('wait: true waits out the backoff instead of refusing', async () => {
    const { taskId } = await engine.startTask({ goal: 'g', plan: [{ id: 'fetch', title: 'Fetch' }], owner: { id: 'agent-1' } });
    await runTool(tool('waypoint_step_start'), ctx, { taskId, stepId: 'fetch' });
    await runTool(tool('waypoint_step_fail'), ctx, { taskId, stepId: 'fetch', error: '503', recoverable: true });
    const timer = setInterval(() => clock.advance(200), 20);
    try {
      const s = await runTool(tool('waypoint_step_start'), ctx, { taskId, stepId: 'fetch', wait: true });
      assert.equal(s.isError, undefined, text(s));
      assert.equal((s.structuredContent as { attempt: number }).attempt, 2);
    } finally {
      clearInterval(timer);
    }
  });
});
