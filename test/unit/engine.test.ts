import * as assert from 'node:assert/strict';
import { Engine } from '../../src/core/engine/engine';
import { WaypointError } from '../../src/core/model/errors';
import { FakeClock, PLAN4, openEngine, tmpDir } from '../support/tmp';
import { embeddedStore } from '../support/embedded';
import { localApi } from '../../src/core/engine/api';

describe('engine', () => {
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine;
  let clock: FakeClock;

  beforeEach(async () => {
    ws = tmpDir();
    clock = new FakeClock();
    engine = await openEngine(ws.dir, { clock });
  });
  afterEach(async () => {
    await engine.close();
    ws.cleanup();
  });

  const reopen = async () => {
    await engine.close();
    engine = await openEngine(ws.dir, { clock });
  };

  it('starts a task with its plan, a base checkpoint and a lease', async () => {
    const r = await engine.startTask({ goal: 'Add a feature', plan: PLAN4, agent: 'test', leaseTtlMs: 60_000 });
    const d = engine.taskDetail(r.taskId);
    assert.equal(d.task.state, 'running');
    assert.equal(d.task.baseCheckpointId, r.baseCheckpointId);
    assert.deepEqual(
      d.steps.map((s) => [s.id, s.status]),
      [
        ['a', 'pending'],
        ['b', 'pending'],
        ['c', 'pending'],
        ['d', 'pending'],
      ],
    );
    assert.equal(d.checkpoints[0].kind, 'task_base');
    assert.equal(d.task.lease?.expiresAt, clock.t + 60_000);
  });

  it('refuses a cyclic plan and records nothing', async () => {
    const before = engine.eventLog.lastSeq;
    await assert.rejects(
      engine.startTask({ goal: 'g', plan: [{ id: 'a', title: 'A', dependsOn: ['b'] }, { id: 'b', title: 'B', dependsOn: ['a'] }] }),
      /cycle/,
    );
    assert.equal(engine.eventLog.lastSeq, before);
  });

  describe('idempotency', () => {
    it('a repeated task start with the same key returns the original result and appends nothing', async () => {
      const a = await engine.startTask({ goal: 'g', idempotencyKey: 'k-1' });
      const seq = engine.eventLog.lastSeq;
      const b = await engine.startTask({ goal: 'g', idempotencyKey: 'k-1' });
      assert.deepEqual(b, a);
      assert.equal(engine.eventLog.lastSeq, seq);
      assert.equal(engine.tasks().length, 1);
    });

    it('survives a reopen (the key lives in the events)', async () => {
      const a = await engine.startTask({ goal: 'g', idempotencyKey: 'k-2' });
      await reopen();
      const b = await engine.startTask({ goal: 'g', idempotencyKey: 'k-2' });
      assert.equal(b.taskId, a.taskId);
      assert.equal(engine.tasks().length, 1);
    });

    it('derives keys from the transition when none is given (seed 004)', async () => {
      const { taskId } = await engine.startTask({ goal: 'g', plan: PLAN4 });
      const s1 = await engine.startStep({ taskId, stepId: 'a' });
      const seq = engine.eventLog.lastSeq;
      const s2 = await engine.startStep({ taskId, stepId: 'a' });
      assert.deepEqual(s2, s1);
      const c1 = await engine.completeStep({ taskId, stepId: 'a', outputs: { n: 1 } });
      const c2 = await engine.completeStep({ taskId, stepId: 'a', outputs: { n: 1 } });
      assert.deepEqual(c2, c1);
      assert.equal(engine.eventLog.lastSeq, seq + 2, 'one step.completed + its checkpoint only');
    });

    it('refuses a key reused for a different operation', async () => {
      const { taskId } = await engine.startTask({ goal: 'g', plan: PLAN4, idempotencyKey: 'same' });
      await assert.rejects(engine.startStep({ taskId, stepId: 'a', idempotencyKey: 'same' }), (e: unknown) => e instanceof WaypointError && e.code === 'conflict');
    });

    it('concurrent duplicate calls start a step once', async () => {
      const { taskId } = await engine.startTask({ goal: 'g', plan: PLAN4 });
      const rs = await Promise.all(Array.from({ length: 10 }, () => engine.startStep({ taskId, stepId: 'a' })));
      assert.equal(new Set(rs.map((r) => r.checkpointId)).size, 1);
      assert.equal((await engine.events({ taskId })).filter((e) => e.type === 'step.started').length, 1);
    });
  });

  describe('steps', () => {
    it('refuses to start a step whose dependencies are not completed, naming them', async () => {
      const { taskId } = await engine.startTask({ goal: 'g', plan: PLAN4 });
      await assert.rejects(engine.startStep({ taskId, stepId: 'b' }), /depends on “Read the code” \(a\), which is not completed/);
    });

    it('refuses unknown tasks and steps with not_found', async () => {
      await assert.rejects(engine.startStep({ taskId: 't_nope', stepId: 'a' }), (e: unknown) => e instanceof WaypointError && e.code === 'not_found' && /t_nope/.test(e.message));
      const { taskId } = await engine.startTask({ goal: 'g', plan: PLAN4 });
      await assert.rejects(engine.completeStep({ taskId, stepId: 'zz' }), /Unknown step/);
    });

    it('ad hoc steps get ids and join the plan', async () => {
      const { taskId } = await engine.startTask({ goal: 'g' });
      const r = await engine.startStep({ taskId, title: 'explore' });
      assert.equal(r.stepId, 's1');
      assert.equal(engine.queries.step(taskId, 's1')?.adhoc, true);
    });

    it('a recoverable failure keeps the step retryable with attempts and backoff', async () => {
      const { taskId } = await engine.startTask({ goal: 'g', plan: PLAN4 });
      await engine.startStep({ taskId, stepId: 'a' });
      const f = await engine.failStep({ taskId, stepId: 'a', error: 'rate limited', recoverable: true });
      // Equal jitter: between half and all of the 1 s base, fixed by the ids.
      assert.equal(f.retry?.attempt, 2);
      assert.equal(f.retry?.maxAttempts, 3);
      assert.ok(f.retry!.backoffMs >= 500 && f.retry!.backoffMs <= 1000, `${f.retry!.backoffMs}`);
      assert.equal(f.retry?.retryAt, clock.t + f.retry!.backoffMs);
      assert.equal(engine.task(taskId).state, 'running');
      const step = engine.queries.step(taskId, 'a')!;
      assert.equal(step.status, 'failed');
      assert.equal(step.error?.class, 'recoverable');
      clock.advance(f.retry!.backoffMs);
      const again = await engine.startStep({ taskId, stepId: 'a' });
      assert.equal(again.attempt, 2);
      const f2 = await engine.failStep({ taskId, stepId: 'a', error: 'again', recoverable: true });
      assert.ok(f2.retry!.backoffMs >= 1000 && f2.retry!.backoffMs <= 2000, `${f2.retry!.backoffMs}`);
    });

    it('an unrecoverable failure fails the task and keeps the error context', async () => {
      const { taskId } = await engine.startTask({ goal: 'g', plan: PLAN4 });
      await engine.startStep({ taskId, stepId: 'a' });
      const f = await engine.failStep({ taskId, stepId: 'a', error: 'disk full', recoverable: false });
      assert.equal(f.state, 'failed');
      const t = engine.task(taskId);
      assert.equal(t.state, 'failed');
      assert.equal(t.interruption?.class, 'unrecoverable');
      assert.match(t.interruption!.reason, /disk full/);
      await assert.rejects(engine.startStep({ taskId, stepId: 'd' }), /is failed; cannot start a step/);
    });

    it('bounds JSON payloads and neutralises prototype keys', async () => {
      const { taskId } = await engine.startTask({ goal: 'g', plan: PLAN4 });
      await assert.rejects(engine.startStep({ taskId, stepId: 'a', inputs: { big: 'x'.repeat(300_000) } }), /at most 262144 allowed/);
      await engine.startStep({ taskId, stepId: 'a', inputs: JSON.parse('{"__proto__": {"polluted": true}}') });
      assert.equal(({} as Record<string, unknown>).polluted, undefined);
      assert.deepEqual(engine.queries.step(taskId, 'a')!.inputs, JSON.parse('{"__proto__": {"polluted": true}}'));
    });
  });

  describe('side-effect ledger (write-ahead)', () => {
    it('proceed → (done) already_done with the recorded result', async () => {
      const { taskId } = await engine.startTask({ goal: 'g' });
      const b1 = await engine.beginSideEffect({ taskId, key: 'email-1', kind: 'http', description: 'send mail' });
      assert.equal(b1.decision, 'proceed');
      assert.equal(engine.task(taskId).state, 'waiting_tool');
      // The intent is durable before proceed: it is in the log on disk.
      assert.ok((await engine.events({ taskId })).some((e) => e.type === 'side_effect.intent'));
      await engine.endSideEffect({ taskId, key: 'email-1', ok: true, result: { id: 42 } });
      assert.equal(engine.task(taskId).state, 'running');
      const b2 = await engine.beginSideEffect({ taskId, key: 'email-1', kind: 'http', description: 'send mail' });
      assert.equal(b2.decision, 'already_done');
      assert.deepEqual(b2.result, { id: 42 });
    });

    it('an intent with no outcome answers in_doubt, also after a reopen', async () => {
      const { taskId } = await engine.startTask({ goal: 'g', leaseTtlMs: 3_600_000 });
      await engine.beginSideEffect({ taskId, key: 'migrate', kind: 'db', description: 'run migration' });
      assert.equal((await engine.beginSideEffect({ taskId, key: 'migrate', kind: 'db', description: 'run migration' })).decision, 'in_doubt');
      await reopen();
      assert.equal((await engine.beginSideEffect({ taskId, key: 'migrate', kind: 'db', description: 'run migration' })).decision, 'in_doubt');
    });

    it('a failed effect may be retried as a new attempt', async () => {
      const { taskId } = await engine.startTask({ goal: 'g' });
      await engine.beginSideEffect({ taskId, key: 'deploy', kind: 'shell', description: 'deploy' });
      await engine.endSideEffect({ taskId, key: 'deploy', ok: false, error: 'timeout' });
      const again = await engine.beginSideEffect({ taskId, key: 'deploy', kind: 'shell', description: 'deploy' });
      assert.equal(again.decision, 'proceed');
      assert.equal(again.attempt, 2);
    });

    it('a person settles an in-doubt effect', async () => {
      const { taskId } = await engine.startTask({ goal: 'g', leaseTtlMs: 1000 });
      await engine.beginSideEffect({ taskId, key: 'pay', kind: 'http', description: 'charge card' });
      clock.advance(5000);
      await engine.sweep();
      assert.equal(engine.queries.sideEffect(taskId, 'pay')?.status, 'in_doubt');
      await engine.endSideEffect({ taskId, key: 'pay', ok: true, result: 'checked by hand', by: 'person' });
      const e = engine.queries.sideEffect(taskId, 'pay')!;
      assert.equal(e.status, 'done');
      assert.equal(e.resolvedBy, 'person');
    });

    it('end without begin, and end twice, are refused', async () => {
      const { taskId } = await engine.startTask({ goal: 'g' });
      await assert.rejects(engine.endSideEffect({ taskId, key: 'x', ok: true }), /no side effect 'x'/);
      // The schema's rule, checked at the door.
      await assert.rejects(localApi(engine).endSideEffect({ taskId, key: 'x', ok: false }), /needs an error message/);
    });
  });

  describe('leases', () => {
    it('an expired lease interrupts the task with the reason; in-flight intents become in_doubt', async () => {
      const { taskId } = await engine.startTask({ goal: 'g', plan: PLAN4, leaseTtlMs: 10_000 });
      await engine.startStep({ taskId, stepId: 'a' });
      await engine.beginSideEffect({ taskId, key: 'k', kind: 'shell', description: 'rm -rf build' });
      clock.advance(9_000);
      assert.deepEqual(await engine.sweep(), []);
      clock.advance(2_000);
      assert.deepEqual(await engine.sweep(), [taskId]);
      const t = engine.task(taskId);
      assert.equal(t.state, 'interrupted');
      assert.match(t.interruption!.reason, /lease of cli expired/);
      assert.equal(t.interruption!.class, 'inconsistent_state');
      assert.equal(t.interruption!.stepId, 'a');
      assert.equal(engine.queries.sideEffect(taskId, 'k')?.status, 'in_doubt');
      assert.deepEqual(await engine.sweep(), [], 'a second sweep appends nothing');
    });

    it('every call from the owner renews the lease', async () => {
      const { taskId } = await engine.startTask({ goal: 'g', plan: PLAN4, leaseTtlMs: 10_000 });
      for (let i = 0; i < 3; i++) {
        clock.advance(8_000);
        await engine.heartbeat({ taskId });
      }
      assert.deepEqual(await engine.sweep(), []);
      assert.equal(engine.task(taskId).state, 'running');
    });

    it('opening the store interrupts tasks whose owner process is gone', async () => {
      const { taskId } = await engine.startTask({ goal: 'g', owner: { id: 'mcp:dead', pid: 2 ** 22 + 12345 }, leaseTtlMs: 3_600_000 });
      await reopen();
      const t = engine.task(taskId);
      assert.equal(t.state, 'interrupted');
      assert.match(t.interruption!.reason, /owner process \d+ \(mcp:dead\) exited/);
    });
  });

  describe('resume', () => {
    async function interruptedTask() {
      const { taskId } = await engine.startTask({ goal: 'Ship it', plan: PLAN4, leaseTtlMs: 2_000, agent: 'claude' });
      await engine.startStep({ taskId, stepId: 'a' });
      await engine.completeStep({ taskId, stepId: 'a', outputs: { files: ['x.ts'] }, summary: 'read x.ts' });
      await engine.startStep({ taskId, stepId: 'b' });
      await engine.beginSideEffect({ taskId, key: 'npm-install', kind: 'shell', description: 'npm install left-pad' });
      clock.advance(3_000);
      await engine.sweep();
      return taskId;
    }

    it('builds the context: plan with status and outputs, interrupted step, effects, next steps, last checkpoint', async () => {
      const taskId = await interruptedTask();
      const ctx = await engine.resumeContext(taskId);
      assert.equal(ctx.task.state, 'interrupted');
      assert.deepEqual(ctx.plan.map((s) => s.status), ['completed', 'in_progress', 'pending', 'pending']);
      assert.deepEqual(ctx.plan[0].outputs, { files: ['x.ts'] });
      assert.equal(ctx.interruptedStep?.id, 'b');
      assert.deepEqual(ctx.sideEffects.inDoubt.map((e) => e.key), ['npm-install']);
      assert.deepEqual(ctx.nextSteps.map((s) => s.id), ['d']);
      assert.equal(ctx.lastCheckpoint?.kind, 'before_side_effect');
      assert.match(ctx.markdown, /IN DOUBT: `npm-install`/);
      assert.match(ctx.markdown, /\[x\] `a` Read the code/);
      assert.match(ctx.markdown, /`d` Document it/);
    });

    it('resume starts a new attempt under the caller; a repeated resume does not', async () => {
      const taskId = await interruptedTask();
      const ctx = await engine.resumeTask({ taskId, owner: { id: 'agent-2' } });
      assert.equal(ctx.task.state, 'running');
      assert.equal(ctx.task.attempt, 2);
      const again = await engine.resumeTask({ taskId, owner: { id: 'agent-2' } });
      assert.equal(again.task.attempt, 2);
      assert.equal(engine.task(taskId).lease?.owner, 'agent-2');
      // The interrupted step restarts as attempt 2 of the step.
      const s = await engine.startStep({ taskId, stepId: 'b', owner: { id: 'agent-2' } });
      assert.equal(s.attempt, 2);
      assert.deepEqual(await engine.startStep({ taskId, stepId: 'b', owner: { id: 'agent-2' } }), s);
    });

    it('completed tasks cannot be resumed', async () => {
      const { taskId } = await engine.startTask({ goal: 'g' });
      await engine.requestReview({ taskId });
      await engine.completeTask({ taskId });
      await assert.rejects(engine.resumeTask({ taskId }), /completed; cannot resume it/);
    });
  });

  describe('task lifecycle', () => {
    it('complete → waiting_review (refused while a step is open) → approve → completed', async () => {
      const { taskId } = await engine.startTask({ goal: 'g', plan: PLAN4 });
      await engine.startStep({ taskId, stepId: 'a' });
      await assert.rejects(engine.requestReview({ taskId }), /still has a step in progress: “Read the code” \(a\). Complete or fail it first/);
      await engine.completeStep({ taskId, stepId: 'a' });
      assert.equal((await engine.requestReview({ taskId, summary: 'done' })).state, 'waiting_review');
      assert.equal((await engine.completeTask({ taskId, commit: 'abc1234' })).state, 'completed');
      assert.equal(engine.task(taskId).commit, 'abc1234');
      await assert.rejects(engine.abandonTask({ taskId }), /completed is final/);
    });

    it('delete removes projections but keeps the events', async () => {
      const { taskId } = await engine.startTask({ goal: 'g' });
      await assert.rejects(engine.deleteTask({ taskId }), /abandon it before deleting/);
      await engine.abandonTask({ taskId });
      await engine.deleteTask({ taskId });
      assert.equal(engine.queries.findTask(taskId), null);
      assert.ok(embeddedStore(engine).events({ taskId }).length > 0);
      assert.equal((await engine.verify()).ok, true);
    });

    it('emits change events after commit, carrying the task ids', async () => {
      const seen: string[][] = [];
      engine.onDidChange((e) => seen.push([...e.taskIds]));
      const { taskId } = await engine.startTask({ goal: 'g' });
      assert.deepEqual(seen, [[taskId]]);
    });

    it('carries the task correlation id on every event', async () => {
      const { taskId, correlationId } = await engine.startTask({ goal: 'g', plan: PLAN4 });
      await engine.startStep({ taskId, stepId: 'a' });
      await engine.beginSideEffect({ taskId, key: 'e', kind: 'k', description: 'd' });
      for (const e of (await engine.events({ taskId }))) assert.equal(e.corr, correlationId, e.type);
    });
  });

  it('projections always equal a rebuild from events', async () => {
    const { taskId } = await engine.startTask({ goal: 'g', plan: PLAN4, leaseTtlMs: 1000 });
    await engine.startStep({ taskId, stepId: 'a' });
    await engine.completeStep({ taskId, stepId: 'a', outputs: [1, 2] });
    await engine.beginSideEffect({ taskId, key: 'e', kind: 'k', description: 'd' });
    clock.advance(2000);
    await engine.sweep();
    await engine.resumeTask({ taskId });
    const v = await engine.verify();
    assert.deepEqual(v.differences, []);
    await engine.rebuild();
    assert.equal((await engine.verify()).ok, true);
  });
});
