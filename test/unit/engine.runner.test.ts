import assert from 'node:assert/strict';
import { WaypointError } from '../../src/core/model/errors';
import type { NewEvent } from '../../src/core/store/eventLog';
import { SqlProjection } from '../../src/core/store/projection';
import { Queries } from '../../src/core/store/queries';
import { OperationRunner } from '../../src/core/engine/runner';
import { MemoryLog } from '../support/memoryLog';

/** OperationRunner.once: the one way every writing operation runs. */
describe('engine runner: once', () => {
  const started = (taskId: string, key = ''): NewEvent => ({ type: 'task.started', taskId, corr: `c-${taskId}`, key, by: 'a', data: { goal: 'g', title: 't', agent: null, plan: [], owner: { id: 'a' }, leaseTtlMs: 60_000 } }) as NewEvent;

  async function setup(): Promise<{ log: MemoryLog; projection: SqlProjection; runner: OperationRunner; queries: Queries }> {
    const log = new MemoryLog({ id: 'w', machine: 'm', path: '/nowhere' });
    const projection = await SqlProjection.empty();
    const queries = Queries.of(projection);
    return { log, projection, runner: new OperationRunner(log, projection, queries), queries };
  }

  it('records the call under its key, answers a repeat from the ledger without running the body, and refuses the key for another operation', async () => {
    const { log, projection, runner, queries } = await setup();
    let runs = 0;
    const body = () => {
      runs++;
      return { result: { n: runs }, events: [started('t1'), { ...started('t2'), key: 'own-key' }] };
    };
    assert.deepEqual(await runner.once('task.start', 'k1', body), { n: 1 });
    assert.deepEqual(await runner.once('task.start', 'k1', body), { n: 1 }, 'the recorded result');
    assert.equal(runs, 1, 'the body ran once');
    assert.deepEqual(log.events.map((e) => [e.key, e.op ?? null]), [['k1', 'task.start'], ['own-key', null]], 'the first event carries the key and op; the rest keep theirs');
    assert.equal(projection.lastSeq, 2, 'folded into the projection by the runner');
    assert.equal(queries.idempotent('k1')?.op, 'task.start');
    await assert.rejects(runner.once('task.abandon', 'k1', body), (e: unknown) => e instanceof WaypointError && e.code === 'conflict');
    assert.equal(log.events.length, 2, 'a refused call appends nothing');
    projection.close();
  });

  it('answers only once the events are durable, and serializes: the next body sees the last one folded in', async () => {
    const { log, projection, runner } = await setup();
    const seen: number[] = [];
    const answers = await Promise.all(
      [1, 2, 3].map((i) =>
        runner.once('task.start', `k${i}`, () => {
          seen.push(projection.lastSeq);
          return { result: i, events: [started(`t${i}`)] };
        }),
      ),
    );
    assert.deepEqual(answers, [1, 2, 3]);
    assert.deepEqual(seen, [0, 1, 2], 'each body ran after the previous batch was in the projection');
    assert.equal((await log.read()).length, 3);
    projection.close();
  });

  it('keyed: false appends the events as they are and keeps no ledger row; repeat answers from another record', async () => {
    const { log, projection, runner, queries } = await setup();
    await runner.once('heartbeat', 'hb', () => ({ result: null, events: [started('t1', 'beat-1')] }), { keyed: false });
    assert.equal(log.events[0].key, 'beat-1');
    assert.equal(log.events[0].op, undefined);
    assert.equal(queries.idempotent('hb'), null);
    let ran = false;
    const r = await runner.once('effect.begin', 'x', () => ((ran = true), { result: 'new' }), { keyed: false, repeat: () => ({ result: 'from the ledger', seq: 1 }) });
    assert.equal(r, 'from the ledger');
    assert.equal(ran, false);
    projection.close();
  });

  it('a body that throws appends nothing, and the runner goes on with the next call', async () => {
    const { log, projection, runner } = await setup();
    await assert.rejects(
      runner.once('task.start', 'bad', () => {
        throw new WaypointError('invalid_input', 'no');
      }),
      /no/,
    );
    assert.equal(await runner.once('task.start', 'good', () => ({ result: 'ok', events: [started('t1')] })), 'ok');
    assert.deepEqual(log.events.map((e) => e.key), ['good']);
    projection.close();
  });
});
