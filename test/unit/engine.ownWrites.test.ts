import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { listReview } from '../../src/core/review/reviewModel';
import { applyConnect, planConnect } from '../../src/mcp/connect';
import { openEngine, tmpDir } from '../support/tmp';

/**
 * "Changed by the task" in a review (and what an agent-only rollback reverts) leaves
 * out what is not the task's: the files Waypoint itself writes (Connect an Agent's
 * `.mcp.json`, `.claude/settings.local.json`) and the files another, hook-recorded
 * task changed inside its own tool calls. Both were listed as the running task's.
 */
describe('attribution: Waypoint’s own writes and another task’s edits are not the task’s', function () {
  this.timeout(60_000);

  it('a review lists them as changed outside the task; an agent-only rollback leaves them alone', async () => {
    const t = tmpDir('wp-ownwrites-');
    try {
      fs.writeFileSync(path.join(t.dir, 'a.txt'), 'a\n');
      fs.writeFileSync(path.join(t.dir, 'b.txt'), 'b\n');
      const e = await openEngine(t.dir);
      try {
        const a = await e.startTask({ goal: 'task A', plan: [{ id: 's1', title: 'one' }] });
        await e.startStep({ taskId: a.taskId, stepId: 's1' });
        // The person connects Claude Code while A's step is open.
        applyConnect(planConnect('claude-code', { cli: path.join(__dirname, '..', '..', 'dist', 'cli.js'), workspace: t.dir }));
        // Task B, hook-recorded, edits b.txt inside one of its tool calls.
        const b = await e.startTask({ goal: 'task B', plan: [{ id: 'x', title: 'x' }] });
        await e.startStep({ taskId: b.taskId, stepId: 'x' });
        await e.checkpoint({ taskId: b.taskId, kind: 'tool_start', stepId: 'x' });
        fs.writeFileSync(path.join(t.dir, 'b.txt'), 'b, by task B\n');
        await e.checkpoint({ taskId: b.taskId, kind: 'tool_end', stepId: 'x' });
        // A's own agent edits a.txt.
        fs.writeFileSync(path.join(t.dir, 'a.txt'), 'a, by task A\n');

        const review = await listReview(e, a.taskId);
        const byPath = new Map(review.files.map((f) => [f.path, f]));
        assert.equal(byPath.get('a.txt')?.drift, false, 'A’s own edit is A’s');
        assert.equal(byPath.get('b.txt')?.drift, true, 'B’s edit is not A’s');
        assert.equal(byPath.get('.mcp.json')?.drift, true, 'Waypoint’s own write is not A’s');
        assert.equal(byPath.get('.claude/settings.local.json')?.drift, true);

        const preview = await e.rollbackPreview({ taskId: a.taskId, checkpointId: a.baseCheckpointId, mode: 'agent-only' });
        const touched = JSON.stringify(preview);
        assert.ok(touched.includes('a.txt'), touched);
        for (const p of ['b.txt', '.mcp.json', 'settings.local.json']) assert.ok(!touched.includes(p), `${p} is left alone: ${touched}`);
      } finally {
        await e.close();
      }
    } finally {
      t.cleanup();
    }
  });
});
