import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Engine } from '../../src/core/engine/engine';
import { median, percentile, type Stats } from '../../src/core/engine/stats';
import { main } from '../../src/cli/main';
import { metricsMarkdown } from '../../src/extension/metricsMarkdown';
import { FakeClock, openEngine, tmpDir } from '../support/tmp';

/** Metrics (issue 19, item 3): the percentile method, and every number for a history built on a fixed clock. */

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let out = '';
  let err = '';
  const code = await main(args, {
    stdout: { write: (s: string) => ((out += s), true) } as never,
    stderr: { write: (s: string) => ((err += s), true) } as never,
  });
  return { code, stdout: out, stderr: err };
}

describe('stats: median and percentiles (hand-computed)', () => {
  it('median: the middle value, or the mean of the two middle values', () => {
    assert.equal(median([]), null);
    assert.equal(median([7]), 7);
    assert.equal(median([3, 1, 2]), 2);
    assert.equal(median([4, 1, 3, 2]), 2.5);
    assert.equal(median([10, 10, 20, 40]), 15);
  });
  it('percentile: nearest rank, ceil(p/100 × n), a value of the sample', async () => {
    assert.equal(percentile([], 95), null);
    // The textbook example: 15, 20, 35, 40, 50.
    const s = [50, 15, 40, 20, 35];
    assert.equal(percentile(s, 5), 15); // rank ceil(0.25) = 1
    assert.equal(percentile(s, 30), 20); // rank ceil(1.5) = 2
    assert.equal(percentile(s, 40), 20); // rank ceil(2) = 2
    assert.equal(percentile(s, 50), 35); // rank ceil(2.5) = 3
    assert.equal(percentile(s, 100), 50);
    assert.equal(percentile(s, 0), 15);
    const oneToTwenty = Array.from({ length: 20 }, (_, i) => i + 1);
    assert.equal(percentile(oneToTwenty, 95), 19); // rank 19
    const oneToTen = Array.from({ length: 10 }, (_, i) => i + 1);
    assert.equal(percentile(oneToTen, 95), 10); // rank ceil(9.5) = 10
    assert.equal(percentile([5], 95), 5);
    assert.throws(() => percentile([1], 101), /within 0\.\.100/);
  });
});

describe('stats: a constructed history', function () {
  this.timeout(60_000);
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine;
  let clock: FakeClock;
  let a: string;
  let b: string;

  before(async () => {
    ws = tmpDir('wp-stats-');
    fs.writeFileSync(path.join(ws.dir, 'x.txt'), 'x\n');
    clock = new FakeClock(Date.UTC(2026, 10, 30, 10, 0, 0));
    engine = await openEngine(ws.dir, { clock });
    // Task A (agent alpha), 2026-11-30: s1 fails recoverably twice, then succeeds; s2 succeeds; the task is interrupted, resumed, handed for review.
    a = (await engine.startTask({ goal: 'A', agent: 'alpha', retry: { backoffMs: 0 }, plan: [{ id: 's1', title: 'one' }, { id: 's2', title: 'two', dependsOn: ['s1'] }] })).taskId;
    clock.advance(1000);
    await engine.startStep({ taskId: a, stepId: 's1' });
    clock.advance(2000);
    await engine.failStep({ taskId: a, stepId: 's1', error: 'flaky', recoverable: true });
    clock.advance(1000);
    await engine.startStep({ taskId: a, stepId: 's1' });
    clock.advance(4000);
    await engine.failStep({ taskId: a, stepId: 's1', error: 'flaky again', recoverable: true });
    clock.advance(1000);
    await engine.startStep({ taskId: a, stepId: 's1' });
    fs.writeFileSync(path.join(ws.dir, 'x.txt'), 'x2\n');
    clock.advance(6000);
    await engine.completeStep({ taskId: a, stepId: 's1' });
    await engine.startStep({ taskId: a, stepId: 's2' });
    clock.advance(3000);
    await engine.completeStep({ taskId: a, stepId: 's2' });
    await engine.beginSideEffect({ taskId: a, key: 'deploy', kind: 'shell', description: 'deploy' });
    await engine.endSideEffect({ taskId: a, key: 'deploy', ok: true });
    await engine.interruptTask({ taskId: a, reason: 'editor closed' });
    await engine.resumeTask({ taskId: a });
    await engine.requestReview({ taskId: a });
    // Task B (agent beta), the next day: its only step fails unrecoverably, failing the task.
    clock.advance(86_400_000);
    b = (await engine.startTask({ goal: 'B', agent: 'beta', plan: [{ id: 'm', title: 'migrate' }] })).taskId;
    await engine.startStep({ taskId: b, stepId: 'm' });
    clock.advance(500);
    await engine.failStep({ taskId: b, stepId: 'm', error: 'schema drift', recoverable: false });
  });
  after(async () => {
    await engine.close();
    ws.cleanup();
  });

  it('counts tasks, attempts, retries, interruptions, durations, side effects, checkpoints, per agent and per day', async () => {
    const s = (await engine.stats());
    assert.equal(s.totals.tasks, 2);
    assert.deepEqual(s.totals.byState, { waiting_review: 1, failed: 1 });
    assert.equal(s.totals.attempts, 5); // s1 ×3, s2, m
    assert.equal(s.totals.retries, 2);
    assert.deepEqual(s.totals.stepFailures, { recoverable: 2, unrecoverable: 1 });
    assert.equal(s.totals.interruptions, 2);
    // Finished attempts: 2000, 4000, 6000, 3000 (A) and 500 (B) → sorted 500, 2000, 3000, 4000, 6000.
    assert.deepEqual(s.totals.durations, { count: 5, medianMs: 3000, p95Ms: 6000, meanMs: 3100, maxMs: 6000 });
    assert.deepEqual(s.interruptions.byClass, { recoverable: 1, unrecoverable: 1 });
    assert.equal(s.interruptions.failedTasks, 1);
    assert.deepEqual(
      s.interruptions.byReason.map((r) => r.reason).sort(),
      ['editor closed', 'step m failed: schema drift'],
    );
    assert.equal(s.steps.total, 3);
    assert.equal(s.steps.retried, 1);
    assert.equal(s.steps.maxAttempts, 3);
    assert.deepEqual(s.steps.mostRetried.map((x) => [x.taskId, x.stepId, x.attempts]), [[a, 's1', 3]]);
    assert.deepEqual(s.sideEffects, { total: 1, byOutcome: { done: 1 }, resolvedByPerson: 0 });
    assert.equal(s.checkpoints.byKind.task_base, 2);
    assert.equal(s.checkpoints.byKind.step_start, 5);
    assert.ok(s.filesChanged >= 1, 'x.txt changed in s1');
    assert.ok(s.storeBytes !== null && s.storeBytes > 0);
    assert.deepEqual(
      s.byAgent.map((x) => [x.agent, x.tasks, x.attempts, x.retries, x.interruptions]),
      [
        ['alpha', 1, 4, 2, 1],
        ['beta', 1, 1, 0, 1],
      ],
    );
    assert.deepEqual(s.byAgent[0].durations.medianMs, 3500); // 2000, 3000, 4000, 6000
    assert.deepEqual(
      s.byDay.map((x) => [x.day, x.tasks, x.attempts, x.retries, x.interruptions]),
      [
        ['2026-11-30', 1, 4, 2, 1],
        ['2026-12-01', 1, 1, 0, 1],
      ],
    );
  });

  it('with taskId: that task only, with each step’s attempts and durations; since: tasks active since then', async () => {
    const s = (await engine.stats({ taskId: a }));
    assert.equal(s.totals.tasks, 1);
    assert.equal(s.totals.retries, 2);
    assert.equal(s.totals.interruptions, 1);
    assert.deepEqual(s.task?.steps.map((x) => [x.id, x.attempts, x.durationsMs]), [
      ['s1', 3, [2000, 4000, 6000]],
      ['s2', 1, [3000]],
    ]);
    const since = (await engine.stats({ since: Date.UTC(2026, 11, 1) }));
    assert.equal(since.totals.tasks, 1);
    assert.equal(since.byAgent[0].agent, 'beta');
    await assert.rejects(async () => engine.stats({ taskId: 't_missing' }), /Unknown task 't_missing'/);
  });

  it('the Metrics view (Markdown): the numbers, the tables, and agent text escaped', async () => {
    const md = metricsMarkdown((await engine.stats()));
    assert.match(md, /^# Waypoint metrics/);
    assert.match(md, /\| Attempts \| 5 step starts, \*\*2 retries\*\*/);
    assert.match(md, /median \*\*3\.0 s\*\* · p95 \*\*6\.0 s\*\*/);
    assert.match(md, /\| alpha \| 1 \| 4 \| 2 \| 2 \| 1 \| 3\.5 s \| 6\.0 s \|/);
    assert.match(md, /\| 2026-11-30 \| 1 \| 4 \| 2 \| 2 \| 1 \| 3\.5 s \| 6\.0 s \| 0 \|/);
    assert.match(md, /\| step m failed: schema drift \| 1 \|/);
    // Most retried names the task and the step by title; ids stay in `waypoint stats --json`.
    const retried = md.slice(md.indexOf('## Most retried steps'));
    assert.match(retried, /\| task \| step \| attempts \| status \|/);
    assert.match(retried, /^\| A \| one \| 3 \| completed \|$/m);
    assert.doesNotMatch(retried.split('\n## ')[0]!, /\bt_[0-9a-z]{15}\b|`s1`/);
    const hostile = metricsMarkdown({ ...(await engine.stats()), interruptions: { total: 1, byClass: {}, failedTasks: 0, byReason: [{ reason: 'a | b [x](javascript:alert(1)) <img>', count: 1 }] } });
    assert.match(hostile, /\| a \\\| b \\\[x\\\]\\\(javascript:alert\\\(1\\\)\\\) \\<img\\> \| 1 \|/);
    const empty = metricsMarkdown((await engine.stats({ since: Date.UTC(2030, 0, 1) })));
    assert.match(empty, /No tasks yet/);
  });

  it('waypoint stats --json --task T reports retries, interruptions and durations for that task; the table is readable; bad input exits non-zero', async () => {
    await engine.close();
    try {
      const r = await cli(['stats', '--task', a, '--json', '--workspace', ws.dir]);
      assert.equal(r.code, 0, r.stderr);
      const doc = JSON.parse(r.stdout) as Stats;
      assert.equal(doc.filter.taskId, a);
      assert.equal(doc.totals.retries, 2);
      assert.equal(doc.totals.interruptions, 1);
      assert.deepEqual(doc.totals.durations, { count: 4, medianMs: 3500, p95Ms: 6000, meanMs: 3750, maxMs: 6000 });

      const human = await cli(['stats', '--workspace', ws.dir]);
      assert.equal(human.code, 0, human.stderr);
      assert.match(human.stdout, /^Tasks: 2 — waiting_review 1, failed 1$/m);
      assert.match(human.stdout, /^Attempts: 5 step starts, 2 of them retries/m);
      assert.match(human.stdout, /^Step durations \(5 finished attempts\): median 3\.0 s, p95 6\.0 s/m);
      assert.match(human.stdout, /Per agent:\n {2}AGENT +TASKS +ATTEMPTS +RETRIES +FAILURES +INTERRUPTIONS +MEDIAN +P95\n {2}alpha +1 +4 +2 +2 +1 +3\.5 s +6\.0 s/);
      assert.match(human.stdout, /Per day[^\n]*\n[^\n]*COMPLETED\n {2}2026-11-30 /);

      const unknown = await cli(['stats', '--task', 't_nope', '--json', '--workspace', ws.dir]);
      assert.equal(unknown.code, 1);
      const badSince = await cli(['stats', '--since', 'yesterday', '--workspace', ws.dir]);
      assert.equal(badSince.code, 2);
      assert.match(badSince.stderr, /--since must be a date/);
    } finally {
      engine = await openEngine(ws.dir, { clock });
    }
  });
});

describe('stats: files changed, one definition', () => {
  it('a base checkpoint changes nothing: a task that only started records no file change, whatever its workspace holds', async () => {
    const ws = tmpDir('wp-stats-base-');
    for (let i = 0; i < 6; i++) fs.writeFileSync(path.join(ws.dir, `f${i}.txt`), `${i}\n`);
    const engine = await openEngine(ws.dir);
    try {
      const { taskId } = await engine.startTask({ goal: 'Just looking' });
      const base = engine.queries.checkpoints(taskId).find((c) => c.kind === 'task_base')!;
      assert.ok(base.files >= 6, 'the base holds the workspace');
      let s = await engine.stats();
      assert.equal(s.filesChanged, 0);
      assert.match(metricsMarkdown(s), /· 0 file changes recorded \|/);
      // A real change after the base counts once.
      fs.writeFileSync(path.join(ws.dir, 'f0.txt'), 'changed\n');
      await engine.checkpoint({ taskId, label: 'after the edit' });
      s = await engine.stats();
      assert.equal(s.filesChanged, 1);
    } finally {
      await engine.close();
      ws.cleanup();
    }
  });
});
