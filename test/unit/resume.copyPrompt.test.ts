import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { localApi } from '../../src/core/engine/api';
import { resumePromptTaskId } from '../../src/core/engine/resumeContext';
import { handOver } from '../../src/extension/resume/handOver';
import { buildCli, cli } from '../support/mcp';
import { openEngine, tmpDir } from '../support/tmp';

/**
 * Copying the resume prompt is not resuming: the task stays interrupted, on the same
 * attempt, until an agent's first call picks it up — the MCP resume tool the prompt
 * names, or a hook-driven session whose first prompt is the pasted text.
 */
describe('resume by copy: the task waits for the agent that gets the prompt', function () {
  this.timeout(120_000);
  let ws: ReturnType<typeof tmpDir>;
  beforeEach(() => {
    ws = tmpDir('wp-copy-resume-');
    fs.writeFileSync(path.join(ws.dir, 'app.js'), 'module.exports = 1;\n');
  });
  afterEach(() => ws.cleanup());

  async function interruptedTask(): Promise<{ taskId: string; close: () => Promise<void>; api: ReturnType<typeof localApi>; events: () => Promise<number> }> {
    const engine = await openEngine(ws.dir);
    const api = localApi(engine);
    const { taskId } = await api.startTask({ goal: 'Make app.js return 2', plan: [{ id: 'edit', title: 'Edit app.js' }], agent: 'demo-agent' });
    await api.startStep({ taskId, stepId: 'edit' });
    await api.interruptTask({ taskId, reason: 'the agent went away' });
    return { taskId, api, close: () => engine.close(), events: async () => (await api.events({ taskId })).length };
  }

  it('Copy to Clipboard leaves the task interrupted, its attempt and its events unchanged; the prompt says how to resume', async () => {
    const t = await interruptedTask();
    try {
      const before = await t.events();
      const ctx = await handOver(t.api, t.taskId, { how: 'clipboard' }, { id: 'window-1', pid: process.pid });
      const task = (await t.api.taskDetail(t.taskId)).task;
      assert.equal(task.state, 'interrupted');
      assert.equal(task.attempt, 1);
      assert.equal(await t.events(), before, 'nothing recorded by copying');
      assert.match(ctx.markdown, /not resumed yet: before anything else call `waypoint_task_resume` with taskId `t_/);
      assert.equal(resumePromptTaskId(ctx.markdown), t.taskId);
    } finally {
      await t.close();
    }
  });

  it('a delivery that starts an agent here resumes the task as a new attempt, and its prompt does not ask for another resume', async () => {
    const t = await interruptedTask();
    try {
      const cliDelivery = { how: 'cli' as const, cli: { name: 'Claude Code', bin: 'claude', args: (p: string) => [p] }, path: '/usr/bin/claude' };
      const ctx = await handOver(t.api, t.taskId, cliDelivery as never, { id: 'window-1', pid: process.pid });
      const task = (await t.api.taskDetail(t.taskId)).task;
      assert.equal(task.state, 'running');
      assert.equal(task.attempt, 2);
      assert.doesNotMatch(ctx.markdown, /not resumed yet/);
    } finally {
      await t.close();
    }
  });

  it('a new Claude Code session whose first prompt is the pasted prompt continues that task (running, attempt 2), not a new one', async () => {
    buildCli();
    const t = await interruptedTask();
    const prompt = (await t.api.resumeContext(t.taskId)).markdown;
    await t.close();
    const payload = { session_id: 'a-new-session', transcript_path: path.join(ws.dir, '..', 'none.jsonl'), cwd: ws.dir, hook_event_name: 'UserPromptSubmit', prompt };
    const r = cli(['hook', 'claude-code', '--workspace', ws.dir], { input: JSON.stringify(payload) });
    assert.equal(r.status, 0, r.stderr);
    const tasks = JSON.parse(cli(['tasks', '--workspace', ws.dir, '--json']).stdout) as { id: string; state: string; attempt: number }[];
    assert.deepEqual(tasks.map((x) => [x.id, x.state, x.attempt]), [[t.taskId, 'running', 2]]);
  });

  it('text that merely mentions a task is not a resume prompt', () => {
    assert.equal(resumePromptTaskId('please look at Task `t_0000000000abcdef` · attempt 1'), null);
    assert.equal(resumePromptTaskId('# Resume task: x\n\nnothing else'), null);
    assert.equal(resumePromptTaskId('# Resume task: x\n\nTask `t_0mfy2k3l4abc123` · attempt 3 · agent a'), 't_0mfy2k3l4abc123');
  });
});
