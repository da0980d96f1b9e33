import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Engine } from '../../src/core/engine/engine';
import { ownerWords, withoutIds } from '../../src/extension/labelText';
import { buildTimeline } from '../../src/extension/timeline/model';
import { FakeClock, openEngine, tmpDir } from '../support/tmp';

/**
 * Ids a person should not have to read: who drove a task is said in words, and an
 * engine refusal shown in a toast names steps by title. The ids stay in the events
 * document, tooltips and `--json`.
 */
const ENGINE_ID = /\b[tcrsa]_[0-9a-z]{15}\b/;

describe('labels: who and which, in words rather than ids', () => {
  it('an owner id reads as who it is', () => {
    assert.equal(ownerWords('vscode:3f2a-1733', 'vscode:3f2a-1733'), 'this window');
    assert.equal(ownerWords('vscode:other-window', 'vscode:3f2a-1733'), 'VS Code');
    assert.equal(ownerWords('claude-code:7d1e2c3b-4a5f'), 'Claude Code');
    assert.equal(ownerWords('gemini-cli:abc'), 'Gemini CLI');
    assert.equal(ownerWords('copilot-cli:abc'), 'Copilot CLI');
    assert.equal(ownerWords('waypoint-serve:0b9c-44'), 'waypoint serve');
    assert.equal(ownerWords('mcp:stdio-0b9c'), 'an agent over MCP');
    assert.equal(ownerWords('cli'), 'the waypoint command line');
    // A name an agent chose for itself is its own words: shown as given (escaped).
    assert.equal(ownerWords('nightly-bot'), 'nightly-bot');
  });

  describe('from a real engine', () => {
    let sandbox: ReturnType<typeof tmpDir>;
    let engine: Engine;
    let taskId: string;
    const here = 'vscode:window-1';

    beforeEach(async () => {
      sandbox = tmpDir('wp-ids-');
      fs.writeFileSync(path.join(sandbox.dir, 'a.txt'), 'a\n');
      engine = await openEngine(sandbox.dir, { clock: new FakeClock() });
      taskId = (
        await engine.startTask({
          goal: 'Make app.js return 2',
          agent: 'claude-code',
          owner: { id: here },
          plan: [
            { id: 'edit', title: 'Edit app.js' },
            { id: 'test', title: 'Run the tests', dependsOn: ['edit'] },
          ],
        })
      ).taskId;
    });
    afterEach(async () => {
      await engine.close();
      sandbox.cleanup();
    });

    it('the timeline says who started, ran and resumed the task in words, not by owner id', async () => {
      await engine.startStep({ taskId, stepId: 'edit', owner: { id: here } });
      await engine.interruptTask({ taskId, reason: 'the window closed' });
      await engine.resumeTask({ taskId, owner: { id: 'claude-code:7d1e2c3b-4a5f' } });
      await engine.startStep({ taskId, stepId: 'edit', owner: { id: 'claude-code:7d1e2c3b-4a5f' } }).catch(() => undefined);
      const m = buildTimeline({ ...engine.taskDetail(taskId), events: await engine.events({ taskId }), now: Date.now(), here });
      const texts = m.marks.map((k) => k.text);
      assert.ok(texts.includes('Started by this window'), texts.join(' | '));
      assert.ok(texts.some((t) => t === 'Resumed (task attempt 2) by Claude Code'), texts.join(' | '));
      assert.equal(m.attempts[0]!.by, 'this window');
      const shown = JSON.stringify({ marks: texts, by: m.attempts.map((a) => a.by) });
      assert.doesNotMatch(shown, /vscode:window-1|7d1e2c3b/);
    });

    it('a refusal shown in a toast names the steps by title and no id (the agent still gets the ids)', async () => {
      const refusal = await engine.startStep({ taskId, stepId: 'test' }).then(
        () => assert.fail('a step whose prerequisite is not done must be refused'),
        (e: Error) => e.message,
      );
      assert.match(refusal, /“Run the tests” \(test\).*“Edit app\.js” \(edit\)/, 'the agent reading the error gets the ids it calls with');
      const toast = withoutIds(refusal, new Map([[taskId, 'Make app.js return 2']]));
      assert.equal(toast, 'Step “Run the tests” of task “Make app.js return 2” depends on “Edit app.js”, which is not completed.');
      assert.doesNotMatch(toast, ENGINE_ID);
    });
  });
});
