import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import * as fs from 'node:fs';
import { main } from '../../src/cli/main';
import { isWaypointError } from '../../src/core/model/errors';
import { MAX_JSON_DEPTH } from '../../src/core/model/validate';
import { nested } from '../support/fuzz';
import { openEngine, tmpDir } from '../support/tmp';

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
        const deep = nested(4093);
        const refused = (what: string) => (err: unknown) => isWaypointError(err) && err.code === 'invalid_input' && err.message.includes(what) && /nests more than 64 levels/.test(err.message);
        await assert.rejects(e.startStep({ taskId, stepId: 's1', inputs: deep }), refused('inputs'));
        await assert.rejects(e.beginSideEffect({ taskId, key: 'deep', kind: 'shell', description: 'd', args: deep }), refused('args'));
        await assert.rejects(e.beginSideEffect({ taskId, key: 'deep', kind: 'shell', description: 'd', args: nested(MAX_JSON_DEPTH + 1, 'object') }), refused('args'));
        assert.equal(e.eventLog.lastSeq, before, 'nothing recorded');
        await e.startStep({ taskId, stepId: 's1', inputs: nested(MAX_JSON_DEPTH) });
        await assert.rejects(e.completeStep({ taskId, stepId: 's1', outputs: deep }), refused('outputs'));
        await e.beginSideEffect({ taskId, key: 'ok', kind: 'shell', description: 'd', args: nested(MAX_JSON_DEPTH, 'object') });
        await assert.rejects(e.endSideEffect({ taskId, key: 'ok', ok: true, result: deep }), refused('result'));
        await e.endSideEffect({ taskId, key: 'ok', ok: true, result: nested(MAX_JSON_DEPTH) });
        // A 100,000-deep value is refused without overflowing the stack.
        await assert.rejects(e.beginSideEffect({ taskId, key: 'deeper', kind: 'shell', description: 'd', args: nested(100_000) }), refused('args'));
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
