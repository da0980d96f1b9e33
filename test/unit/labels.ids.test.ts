import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Engine } from '../../src/core/engine/engine';
import { ownerWords, reasonWords, withoutIds } from '../../src/extension/labelText';
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

  it("the engine's interruption reasons name who in words and no UTC stamp; an agent's own reason is kept", () => {
    assert.equal(reasonWords('lease of cli expired at 2026-12-04T20:56:50.338Z (no call for 6 s)'), 'the waypoint command line stopped reporting (no call for 6 s)');
    assert.equal(reasonWords('owner process 4242 (claude-code:7d1e) exited'), 'Claude Code went away (its process ended)');
    assert.equal(reasonWords('taken over by vscode:w1', (id) => ownerWords(id, 'vscode:w1')), 'taken over by this window');
    assert.equal(reasonWords('rate limited by the provider'), 'rate limited by the provider');
  });

  describe('from a real engine', () => {
    let sandbox: ReturnType<typeof tmpDir>;
    let engine: Engine;
    let clock: FakeClock;
    let taskId: string;
    const here = 'vscode:window-1';

    beforeEach(async () => {
      sandbox = tmpDir('wp-ids-');
      fs.writeFileSync(path.join(sandbox.dir, 'a.txt'), 'a\n');
      clock = new FakeClock();
      engine = await openEngine(sandbox.dir, { clock });
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

    it('a lapsed lease reads in words in the timeline header and on the bar it closed', async () => {
      await engine.startStep({ taskId, stepId: 'edit', owner: { id: here } });
      clock.advance(10 * 60 * 60_000);
      await engine.sweep();
      assert.match(engine.taskDetail(taskId).task.interruption!.reason, /^lease of vscode:window-1 expired at \d{4}-/, 'the record stays exact');
      const m = buildTimeline({ ...engine.taskDetail(taskId), events: await engine.events({ taskId }), now: clock.now(), here });
      assert.match(m.task.interruption!, /^this window stopped reporting \(no call for \d+ s\)/);
      assert.match(m.attempts[0]!.error ?? '', /^this window stopped reporting/);
      assert.doesNotMatch(JSON.stringify([m.task.interruption, m.attempts, m.marks]), /vscode:window-1|\d{4}-\d\d-\d\dT/);
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
