import * as assert from 'node:assert/strict';
import type { Engine } from '../../src/core/engine/engine';
import { openEngine, tmpDir } from '../support/tmp';
import { waitFor } from '../support/mcp';

// A long-lived owner sweeps on an interval (an owner process that died is seen only by
// looking) and also as the earliest lease runs out: a lapsed lease must read as
// interrupted at once, not up to an interval later. The interval here is a minute, so
// only the alarm can pass these within their bounds.
describe('lease alarm: a long-lived owner interrupts a task as its lease runs out', () => {
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine;
  beforeEach(async () => {
    ws = tmpDir();
    engine = await openEngine(ws.dir, { sweepIntervalMs: 60_000 });
  });
  afterEach(async () => {
    await engine.close();
    ws.cleanup();
  });

  const state = (id: string) => engine.queries.task(id).state;

  it('a lease of 1 s that nobody renews: interrupted within about a second of its end, with the reason', async () => {
    const { taskId } = await engine.startTask({ goal: 'an agent that went quiet', leaseTtlMs: 1000 });
    const end = engine.queries.task(taskId).lease!.expiresAt;
    await waitFor('the task to be interrupted', () => state(taskId) === 'interrupted', 5_000);
    const seenLate = Date.now() - end;
    assert.ok(seenLate < 1_500, `interrupted ${seenLate} ms after its lease ended`);
    assert.match(engine.queries.task(taskId).interruption?.reason ?? '', /lease/);
  });

  it('heartbeats move the alarm: the task stays running while renewed, and is interrupted soon after they stop', async () => {
    const { taskId } = await engine.startTask({ goal: 'an agent that beats', leaseTtlMs: 1000 });
    for (let i = 0; i < 8; i++) {
      await new Promise((r) => setTimeout(r, 300));
      await engine.heartbeat({ taskId });
      assert.equal(state(taskId), 'running', `after beat ${i + 1}`);
    }
    const end = engine.queries.task(taskId).lease!.expiresAt;
    await waitFor('the task to be interrupted', () => state(taskId) === 'interrupted', 5_000);
    assert.ok(Date.now() - end < 1_500, `interrupted ${Date.now() - end} ms after its lease ended`);
  });

  it('of two tasks, each is interrupted as its own lease ends; an abandoned task is left as it is', async () => {
    const short = (await engine.startTask({ goal: 'short lease', leaseTtlMs: 1000 })).taskId;
    const long = (await engine.startTask({ goal: 'long lease', leaseTtlMs: 3000 })).taskId;
    const done = (await engine.startTask({ goal: 'finished', leaseTtlMs: 1000 })).taskId;
    await engine.abandonTask({ taskId: done, reason: 'not needed' });
    await waitFor('the short task to be interrupted', () => state(short) === 'interrupted', 5_000);
    assert.equal(state(long), 'running');
    const end = engine.queries.task(long).lease!.expiresAt;
    await waitFor('the long task to be interrupted', () => state(long) === 'interrupted', 6_000);
    assert.ok(Date.now() - end < 1_500, `interrupted ${Date.now() - end} ms after its lease ended`);
    assert.equal(state(done), 'abandoned');
  });

  it('a commit looks up only the tasks it names, not every active task of the store', async () => {
    const others = [];
    for (let i = 0; i < 5; i++) others.push((await engine.startTask({ goal: `other ${i}`, leaseTtlMs: 30_000 })).taskId);
    const { taskId } = await engine.startTask({ goal: 'the one that beats', leaseTtlMs: 30_000 });
    const q = engine.queries;
    const calls = { all: 0, named: [] as string[][] };
    const all = q.earliestLeaseEnd.bind(q);
    const named = q.earliestLeaseEndOf.bind(q);
    q.earliestLeaseEnd = (states) => (calls.all++, all(states));
    q.earliestLeaseEndOf = (ids, states) => (calls.named.push([...ids]), named(ids, states));
    try {
      for (let i = 0; i < 10; i++) await engine.heartbeat({ taskId });
      const short = (await engine.startTask({ goal: 'a short lease', leaseTtlMs: 1000 })).taskId;
      assert.equal(calls.all, 0, 'no commit looked through all active tasks');
      assert.ok(calls.named.length >= 11, `${calls.named.length} lookups`);
      for (const ids of calls.named.slice(0, 10)) assert.deepEqual([...new Set(ids)], [taskId]);
      // The short lease, started last, still moves the alarm up: it is interrupted at its end, the others are not.
      const end = engine.queries.task(short).lease!.expiresAt;
      await waitFor('the short task to be interrupted', () => state(short) === 'interrupted', 5_000);
      assert.ok(Date.now() - end < 1_500, `interrupted ${Date.now() - end} ms after its lease ended`);
      for (const id of [...others, taskId]) assert.equal(state(id), 'running');
    } finally {
      q.earliestLeaseEnd = all;
      q.earliestLeaseEndOf = named;
    }
  });
});
