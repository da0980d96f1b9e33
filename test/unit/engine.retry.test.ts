import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { Engine } from '../../src/core/engine/engine';
import { localApi } from '../../src/core/engine/api';
import { backoffFor, DEFAULT_RETRY_POLICY, resolvePolicy, startWhenAllowed } from '../../src/core/engine/retryPolicy';
import { WaypointError } from '../../src/core/model/errors';
import { dumpProjections } from '../../src/core/store/projections';
import { buildCli, CLI } from '../support/mcp';
import { FakeClock, openEngine, tmpDir } from '../support/tmp';
import { embeddedStore } from '../support/embedded';

/**
 * Issue #19, item 2: the retry policy is enforced. A step that fails recoverably may
 * start again only after its backoff and only for the policy's attempts; then the
 * task waits for a person, who can grant more, skip the step or abandon the task.
 */
const PLAN2 = [
  { id: 'fetch', title: 'Fetch the data' },
  { id: 'use', title: 'Use it', dependsOn: ['fetch'] },
];

const isCode = (code: string, re?: RegExp) => (e: unknown) => e instanceof WaypointError && e.code === code && (!re || re.test(e.message));

describe('retry policy (enforced)', () => {
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine;
  let clock: FakeClock;

  beforeEach(async () => {
    ws = tmpDir('wp-retry-');
    clock = new FakeClock();
    engine = await openEngine(ws.dir, { clock, snapshots: false });
  });
  afterEach(async () => {
    await engine.close();
    ws.cleanup();
  });

  /** Fails `fetch` recoverably and moves the clock past its backoff; returns the failure. */
  const failAndWait = async (taskId: string) => {
    const f = await engine.failStep({ taskId, stepId: 'fetch', error: '503 from the API', recoverable: true });
    if (f.retry) clock.advance(f.retry.backoffMs);
    return f;
  };

  it('backoff is exponential, capped, with jitter fixed by (task, step, attempt)', () => {
    const p = resolvePolicy();
    assert.deepEqual(p, DEFAULT_RETRY_POLICY);
    for (let a = 1; a <= 12; a++) {
      const exp = Math.min(1000 * 2 ** (a - 1), 300_000);
      const d = backoffFor(p, 't_1', 's', a);
      assert.ok(d >= exp / 2 && d <= exp, `attempt ${a}: ${d} in [${exp / 2}, ${exp}]`);
      assert.equal(backoffFor(p, 't_1', 's', a), d, 'the same ids give the same delay');
    }
    const spread = new Set(Array.from({ length: 20 }, (_, i) => backoffFor(p, `t_${i}`, 's', 3)));
    assert.ok(spread.size > 10, `tasks failing together do not all come back at once (${spread.size} distinct delays)`);
    assert.deepEqual(resolvePolicy({ maxAttempts: 5 }, { backoffMs: 10 }), { maxAttempts: 5, backoffMs: 10, maxBackoffMs: 300_000 });
  });

  it('acceptance: after the policy’s attempts the start is refused, the task waits for a person, a grant lets it run', async () => {
    const { taskId } = await engine.startTask({ goal: 'two steps', plan: PLAN2 });
    for (let attempt = 1; attempt <= 3; attempt++) {
      const s = await engine.startStep({ taskId, stepId: 'fetch' });
      assert.equal(s.attempt, attempt);
      assert.equal(s.maxAttempts, 3);
      const f = await failAndWait(taskId);
      if (attempt < 3) {
        assert.equal(f.state, 'running');
        assert.equal(f.hold, null);
        assert.equal(f.retry?.attempt, attempt + 1);
      } else {
        assert.equal(f.state, 'suspended');
        assert.equal(f.retry, null);
        assert.equal(f.hold?.cause, 'retries_exhausted');
      }
    }
    const t = engine.task(taskId);
    assert.equal(t.state, 'suspended');
    assert.deepEqual({ ...t.hold, since: 0 }, { cause: 'retries_exhausted', stepId: 'fetch', reason: t.hold!.reason, since: 0 });
    assert.match(t.hold!.reason, /step fetch used its 3 attempts .*503 from the API.*a person must grant more, skip the step or abandon the task/);
    await assert.rejects(engine.startStep({ taskId, stepId: 'fetch' }), isCode('held', /step fetch used its 3 attempts; ?|used its 3 attempts/));
    await assert.rejects(engine.startStep({ taskId, stepId: 'fetch' }), (e: unknown) => e instanceof WaypointError && (e.details?.hold as { cause: string }).cause === 'retries_exhausted');
    // Resuming would only meet the same refusal: it is refused with the choices.
    await assert.rejects(engine.resumeTask({ taskId }), isCode('held', /waypoint step grant --task/));
    const ctx = await engine.resumeContext(taskId);
    assert.equal(ctx.task.hold?.cause, 'retries_exhausted');
    assert.match(ctx.markdown, /## Waiting for a person/);
    assert.match(ctx.markdown, /attempt 3 of 3/);

    const g = await engine.grantAttempts({ taskId, stepId: 'fetch', reason: 'the API is back' });
    assert.deepEqual(g, { taskId, stepId: 'fetch', attempts: 1, maxAttempts: 4, state: 'running' });
    assert.equal(engine.task(taskId).hold, null);
    // The grant waives the backoff: the person said go.
    const s4 = await engine.startStep({ taskId, stepId: 'fetch' });
    assert.equal(s4.attempt, 4);
    assert.equal(s4.maxAttempts, 4);
    await engine.completeStep({ taskId, stepId: 'fetch' });
    await engine.startStep({ taskId, stepId: 'use' });
    await engine.completeStep({ taskId, stepId: 'use' });
    assert.equal(engine.task(taskId).state, 'running');
  });

  it('a person’s grant hands the task back to the agent that used the attempts (its calls renew the lease)', async () => {
    const agent = { id: 'agent-7' };
    const { taskId } = await engine.startTask({ goal: 'g', plan: PLAN2, retry: { maxAttempts: 1 }, owner: agent });
    await engine.startStep({ taskId, stepId: 'fetch', owner: agent });
    await engine.failStep({ taskId, stepId: 'fetch', error: 'x', recoverable: true, owner: agent });
    assert.equal(engine.task(taskId).lease, null, 'nobody drives a held task');
    await engine.grantAttempts({ taskId, stepId: 'fetch', owner: { id: 'vscode-window', pid: process.pid } });
    assert.equal(engine.task(taskId).lease?.owner, 'agent-7');
    clock.advance(60_000);
    await engine.startStep({ taskId, stepId: 'fetch', owner: agent });
    assert.equal(engine.task(taskId).lease?.expiresAt, clock.t + engine.defaultLeaseTtlMs, 'the agent’s call renewed it');
  });

  it('a start inside the backoff is refused with retryAt; wait: true waits for it', async () => {
    const { taskId } = await engine.startTask({ goal: 'g', plan: PLAN2 });
    await engine.startStep({ taskId, stepId: 'fetch' });
    const f = await engine.failStep({ taskId, stepId: 'fetch', error: 'flaky', recoverable: true });
    const retryAt = f.retry!.retryAt;
    await assert.rejects(engine.startStep({ taskId, stepId: 'fetch' }), (e: unknown) => {
      assert.ok(e instanceof WaypointError && e.code === 'retry_later', String(e));
      assert.equal(e.details?.retryAt, retryAt);
      assert.match(e.message, /may retry at \d\d:\d\d:\d\d \(in 1 s\)/);
      return true;
    });
    assert.equal(engine.queries.step(taskId, 'fetch')!.status, 'failed', 'the refusal changed nothing');
    clock.advance(retryAt - clock.t - 1);
    await assert.rejects(engine.startStep({ taskId, stepId: 'fetch' }), isCode('retry_later'));
    // wait: the engine sleeps until retryAt (the fake clock moves while it sleeps) and starts it.
    setTimeout(() => clock.advance(10), 50);
    const t0 = Date.now();
    const s = await engine.startStep({ taskId, stepId: 'fetch', wait: true });
    assert.equal(s.attempt, 2);
    assert.ok(Date.now() - t0 < 5000);
  });

  it('startWhenAllowed waits until the time each refusal names, and gives up past its limit', async () => {
    let now = 1000;
    let calls = 0;
    const slept: number[] = [];
    const r = await startWhenAllowed(
      async () => {
        calls++;
        if (now < 3000) throw new WaypointError('retry_later', 'later', { retryAt: 3000 });
        return 'started';
      },
      () => now,
      async (ms) => {
        slept.push(ms);
        now += ms;
      },
    );
    assert.equal(r, 'started');
    assert.deepEqual(slept, [2000]);
    assert.equal(calls, 2);
    await assert.rejects(
      startWhenAllowed(async () => Promise.reject(new WaypointError('retry_later', 'much later', { retryAt: now + 10_000 })), () => now, async () => undefined, 5000),
      /much later/,
    );
    await assert.rejects(startWhenAllowed(async () => Promise.reject(new WaypointError('held', 'ask a person')), () => now, async () => undefined), /ask a person/);
  });

  it('per-plan and per-task limits, skip and abandon answer the hold, unrecoverable fails the task', async () => {
    const a = await engine.startTask({ goal: 'g', plan: [{ id: 'fetch', title: 'F', maxAttempts: 1 }, { id: 'use', title: 'U', dependsOn: ['fetch'] }], retry: { maxAttempts: 5 } });
    assert.equal(engine.queries.step(a.taskId, 'fetch')!.maxAttempts, 1);
    assert.equal(engine.queries.step(a.taskId, 'use')!.maxAttempts, 5);
    assert.equal(engine.task(a.taskId).retry.maxAttempts, 5);
    await engine.startStep({ taskId: a.taskId, stepId: 'fetch' });
    const f = await engine.failStep({ taskId: a.taskId, stepId: 'fetch', error: 'no', recoverable: true });
    assert.equal(f.state, 'suspended');
    // Skipping the held step is the person's other answer: the task runs on.
    await engine.skipStep({ taskId: a.taskId, stepId: 'fetch', reason: 'not needed' });
    assert.equal(engine.task(a.taskId).state, 'running');
    assert.equal(engine.task(a.taskId).hold, null);
    await engine.startStep({ taskId: a.taskId, stepId: 'use' });

    const b = await engine.startTask({ goal: 'g', plan: PLAN2, retry: { maxAttempts: 1 } });
    await engine.startStep({ taskId: b.taskId, stepId: 'fetch' });
    await engine.failStep({ taskId: b.taskId, stepId: 'fetch', error: 'no', recoverable: true });
    await engine.abandonTask({ taskId: b.taskId, reason: 'give up' });
    assert.equal(engine.task(b.taskId).state, 'abandoned');
    assert.equal(engine.task(b.taskId).hold, null);
    await assert.rejects(engine.grantAttempts({ taskId: b.taskId, stepId: 'fetch' }), isCode('illegal_transition', /abandoned/));

    const c = await engine.startTask({ goal: 'g', plan: PLAN2 });
    await engine.startStep({ taskId: c.taskId, stepId: 'fetch' });
    const u = await engine.failStep({ taskId: c.taskId, stepId: 'fetch', error: 'the schema is gone', recoverable: false });
    assert.equal(u.state, 'failed');
    assert.equal(u.retry, null);
    assert.match(engine.task(c.taskId).interruption!.reason, /the schema is gone/);
    assert.equal(engine.task(c.taskId).hold, null);
  });

  it('bad input to a grant is refused and changes nothing', async () => {
    const { taskId } = await engine.startTask({ goal: 'g', plan: PLAN2 });
    const seq = engine.eventLog.lastSeq;
    await assert.rejects(localApi(engine).grantAttempts({ taskId, stepId: 'fetch', attempts: 0 }), isCode('invalid_input', /at least 1/));
    await assert.rejects(localApi(engine).grantAttempts({ taskId, stepId: 'fetch', attempts: 1.5 }), isCode('invalid_input'));
    await assert.rejects(engine.grantAttempts({ taskId, stepId: 'nope' }), isCode('not_found'));
    await assert.rejects(localApi(engine).startTask({ goal: 'g', retry: { maxAttempts: 0 } }), isCode('invalid_input'));
    await assert.rejects(localApi(engine).startTask({ goal: 'g', plan: [{ id: 'x', title: 'X', maxAttempts: 1000 }] }), isCode('invalid_input'));
    assert.equal(engine.eventLog.lastSeq, seq);
    // A grant before the limit raises it for later: 3 + 2.
    const g = await engine.grantAttempts({ taskId, stepId: 'fetch', attempts: 2 });
    assert.equal(g.maxAttempts, 5);
    assert.equal(g.state, 'running');
  });

  it('an interruption with a side effect in doubt shows an inconsistent_state hold until it is settled', async () => {
    const { taskId } = await engine.startTask({ goal: 'g', plan: PLAN2 });
    await engine.startStep({ taskId, stepId: 'fetch' });
    await engine.beginSideEffect({ taskId, key: 'deploy:1', kind: 'shell', description: 'deploy' });
    await engine.interruptTask({ taskId, reason: 'window closed' });
    const t = engine.task(taskId);
    assert.equal(t.hold?.cause, 'inconsistent_state');
    assert.equal(t.hold?.stepId, 'fetch');
    assert.match(t.hold!.reason, /1 side effect is in doubt/);
    assert.match((await engine.resumeContext(taskId)).markdown, /settle each side effect in doubt/);
    await engine.endSideEffect({ taskId, key: 'deploy:1', ok: true, by: 'person' });
    assert.equal(engine.task(taskId).hold, null);
  });

  it('replay: a rebuild from the events gives the same projections (hold, limits, grants)', async () => {
    const { taskId } = await engine.startTask({ goal: 'g', plan: PLAN2, retry: { maxAttempts: 2 } });
    for (let i = 0; i < 2; i++) {
      await engine.startStep({ taskId, stepId: 'fetch' });
      await failAndWait(taskId);
    }
    assert.equal(engine.task(taskId).hold?.cause, 'retries_exhausted');
    const held = dumpProjections(embeddedStore(engine).db);
    await engine.grantAttempts({ taskId, stepId: 'fetch', attempts: 2 });
    await engine.startStep({ taskId, stepId: 'fetch' });
    const before = dumpProjections(embeddedStore(engine).db);
    assert.notDeepEqual(held, before);
    await engine.rebuild();
    assert.deepEqual(dumpProjections(embeddedStore(engine).db), before);
    assert.ok((await engine.verify()).ok);
    await engine.close();
    engine = await openEngine(ws.dir, { clock, snapshots: false });
    assert.equal(engine.queries.step(taskId, 'fetch')!.maxAttempts, 4);
    assert.equal(engine.task(taskId).retry.maxAttempts, 2);
  });

  it('the engine’s own policy (the VS Code setting) applies to tasks started without one, and is recorded', async () => {
    await engine.close();
    engine = await openEngine(ws.dir, { clock, snapshots: false, retry: { maxAttempts: 7 } });
    const { taskId } = await engine.startTask({ goal: 'g', plan: PLAN2 });
    assert.equal(engine.queries.step(taskId, 'fetch')!.maxAttempts, 7);
    await engine.close();
    // Reopened with another setting, the task keeps the policy it was started with.
    engine = await openEngine(ws.dir, { clock, snapshots: false, retry: { maxAttempts: 2 } });
    await engine.rebuild();
    assert.equal(engine.queries.step(taskId, 'fetch')!.maxAttempts, 7);
  });
});

describe('retry policy on the CLI', function () {
  this.timeout(120_000);
  before(() => buildCli());
  const run = (ws: string, ...args: string[]) => spawnSync(process.execPath, [CLI, ...args, '--workspace', ws], { encoding: 'utf8', timeout: 60_000 });

  it('refuses a held start non-zero with the reason, --wait waits out a backoff, step grant lets it run', () => {
    const t = tmpDir('wp-retry-cli-');
    try {
      const started = run(t.dir, 'task', 'start', '--goal', 'flaky fetch', '--max-attempts', '2', '--backoff-ms', '16000', '--json');
      assert.equal(started.status, 0, started.stderr);
      const taskId = (JSON.parse(started.stdout) as { taskId: string }).taskId;
      assert.equal(run(t.dir, 'step', 'start', '--task', taskId, '--step', 'fetch', '--ad-hoc').status, 0);
      const f1 = run(t.dir, 'step', 'fail', '--task', taskId, '--step', 'fetch', '--error', 'timeout', '--recoverable');
      assert.equal(f1.status, 0, f1.stderr);
      assert.match(f1.stdout, /may retry as attempt 2 of 2 at/);
      // Right away: refused, exit 1, with the time and the code in --json.
      const early = run(t.dir, 'step', 'start', '--task', taskId, '--step', 'fetch', '--json');
      assert.equal(early.status, 1);
      assert.match(early.stderr, /may retry at/);
      const err = (JSON.parse(early.stdout) as { error: { code: string; details: { retryAt: number } } }).error;
      assert.equal(err.code, 'retry_later');
      assert.ok(err.details.retryAt > Date.now() - 5000);
      const waited = run(t.dir, 'step', 'start', '--task', taskId, '--step', 'fetch', '--wait');
      assert.equal(waited.status, 0, waited.stderr);
      assert.match(waited.stdout, /attempt 2 of 2/);
      const f2 = run(t.dir, 'step', 'fail', '--task', taskId, '--step', 'fetch', '--error', 'timeout again', '--recoverable');
      assert.match(f2.stdout, /waits for a person/);
      const held = run(t.dir, 'step', 'start', '--task', taskId, '--step', 'fetch');
      assert.equal(held.status, 1);
      assert.match(held.stderr, /step fetch used its 2 attempts .*a person must grant more, skip the step or abandon the task/);
      const show = run(t.dir, 'show', '--task', taskId);
      assert.match(show.stdout, /WAITS FOR A PERSON \(retries exhausted/);
      const g = run(t.dir, 'step', 'grant', '--task', taskId, '--step', 'fetch', '--json');
      assert.equal(g.status, 0, g.stderr);
      assert.equal((JSON.parse(g.stdout) as { maxAttempts: number }).maxAttempts, 3);
      const s3 = run(t.dir, 'step', 'start', '--task', taskId, '--step', 'fetch');
      assert.equal(s3.status, 0, s3.stderr);
      assert.match(s3.stdout, /attempt 3 of 3/);
      const bad = run(t.dir, 'step', 'grant', '--task', taskId, '--step', 'fetch', '--attempts', 'lots');
      assert.equal(bad.status, 2);
    } finally {
      t.cleanup();
    }
  });
});
