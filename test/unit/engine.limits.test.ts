import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import * as fs from 'node:fs';
import { main } from '../../src/cli/main';
import { isWaypointError } from '../../src/core/model/errors';
import { MAX_JSON_DEPTH } from '../../src/core/model/validate';
import { MAX_PLAN_STEPS } from '../../src/core/model/schema';
import { MAX_RESUME_MARKDOWN_CHARS } from '../../src/core/engine/resumeContext';
import { nested } from '../support/fuzz';
import { openEngine, tmpDir } from '../support/tmp';
import { localApi } from '../../src/core/engine/api';

/**
 * Free-form JSON an agent sends (step inputs and outputs, side-effect arguments and
 * results) is bounded in depth as well as size at the door: 4,093-deep side-effect
 * arguments were accepted and made `resume-context --json` 81 MB. Now anything past
 * MAX_JSON_DEPTH levels is a clear `invalid_input` that records nothing.
 */
describe('engine: free-form JSON is bounded in depth at the door', function () {
  this.timeout(60_000);

  it('refuses step inputs/outputs and side-effect args/results nested too deep, records nothing; the deepest allowed keeps resume-context small', async () => {
    const t = tmpDir('wp-limits-');
    try {
      fs.writeFileSync(path.join(t.dir, 'a.txt'), 'a\n');
      const e = await openEngine(t.dir);
      let taskId: string;
      try {
        taskId = (await e.startTask({ goal: 'g', plan: [{ id: 's1', title: 'one' }] })).taskId;
        const before = e.eventLog.lastSeq;
        // The schema's depth rule, checked at the door every caller passes.
        const api = localApi(e);
        const deep = nested(4093);
        const refused = (what: string) => (err: unknown) => isWaypointError(err) && err.code === 'invalid_input' && err.message.includes(what) && /nests more than 64 levels/.test(err.message);
        await assert.rejects(api.startStep({ taskId, stepId: 's1', inputs: deep }), refused('inputs'));
        await assert.rejects(api.beginSideEffect({ taskId, key: 'deep', kind: 'shell', description: 'd', args: deep }), refused('args'));
        await assert.rejects(api.beginSideEffect({ taskId, key: 'deep', kind: 'shell', description: 'd', args: nested(MAX_JSON_DEPTH + 1, 'object') }), refused('args'));
        assert.equal(e.eventLog.lastSeq, before, 'nothing recorded');
        await e.startStep({ taskId, stepId: 's1', inputs: nested(MAX_JSON_DEPTH) });
        await assert.rejects(api.completeStep({ taskId, stepId: 's1', outputs: deep }), refused('outputs'));
        await e.beginSideEffect({ taskId, key: 'ok', kind: 'shell', description: 'd', args: nested(MAX_JSON_DEPTH, 'object') });
        await assert.rejects(api.endSideEffect({ taskId, key: 'ok', ok: true, result: deep }), refused('result'));
        await e.endSideEffect({ taskId, key: 'ok', ok: true, result: nested(MAX_JSON_DEPTH) });
        // A 100,000-deep value is refused without overflowing the stack.
        await assert.rejects(api.beginSideEffect({ taskId, key: 'deeper', kind: 'shell', description: 'd', args: nested(100_000) }), refused('args'));
      } finally {
        await e.close();
      }
      let out = '';
      const code = await main(['resume-context', '--task', taskId, '--workspace', t.dir, '--json'], {
        stdout: { write: (s: string) => ((out += s), true) } as never,
        stderr: { write: () => true } as never,
      });
      assert.equal(code, 0);
      assert.ok(out.length < 200_000, `resume-context --json is ${out.length} bytes`);
    } finally {
      t.cleanup();
    }
  });
});

/**
 * A plan was capped per call (1,000 steps) but not per task: 30 calls gave 30,000
 * steps and an 11.7 MB resume context. The cap is per task now, and the resume
 * context's Markdown stays within MAX_RESUME_MARKDOWN_CHARS however long the plan.
 */
describe('engine: a task holds at most MAX_PLAN_STEPS steps; the resume Markdown stays bounded', function () {
  this.timeout(120_000);

  it('refuses a plan call that would pass the cap with `limit`, records nothing; the Markdown of a full plan is cut with a note', async () => {
    const t = tmpDir('wp-plancap-');
    try {
      fs.writeFileSync(path.join(t.dir, 'a.txt'), 'a\n');
      const e = await openEngine(t.dir);
      try {
        const steps = (from: number, n: number) => Array.from({ length: n }, (_, i) => ({ id: `s${from + i}`, title: `${'t'.repeat(490)} ${from + i}` }));
        const { taskId } = await e.startTask({ goal: 'g', plan: steps(0, 600) });
        const before = e.eventLog.lastSeq;
        const limited = (err: unknown) => isWaypointError(err) && err.code === 'limit' && /at most 1000 steps/.test(err.message) && /Nothing was changed/.test(err.message);
        await assert.rejects(e.extendPlan({ taskId, plan: steps(600, 401) }), limited);
        assert.equal(e.eventLog.lastSeq, before, 'nothing recorded');
        await e.extendPlan({ taskId, plan: steps(600, 400) });
        await assert.rejects(e.extendPlan({ taskId, plan: steps(1000, 1) }), limited);
        assert.equal(e.queries.steps(taskId).length, MAX_PLAN_STEPS);
        const ctx = await e.resumeContext(taskId);
        assert.equal(ctx.plan.length, MAX_PLAN_STEPS, 'the JSON keeps every step');
        assert.ok(ctx.markdown.length <= MAX_RESUME_MARKDOWN_CHARS, `Markdown is ${ctx.markdown.length} characters`);
        assert.match(ctx.markdown, /- … \d+ more plan steps not shown/);
        assert.match(ctx.markdown, /## Next/, 'what follows the plan is still there');
      } finally {
        await e.close();
      }
    } finally {
      t.cleanup();
    }
  });
});
