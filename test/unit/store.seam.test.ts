import assert from 'node:assert/strict';
import { WaypointError } from '../../src/core/model/errors';
import { SCHEMA_VERSION, parseEvent, type WaypointEvent } from '../../src/core/model/schema';
import type { AppendResult, Disposable, EventLog, NewEvent, ReadFilter, WorkspaceIdentity } from '../../src/core/store/eventLog';
import { SqlProjection } from '../../src/core/store/projection';
import { dumpProjections } from '../../src/core/store/projections';
import { Engine } from '../../src/core/engine/engine';
import { embeddedStore } from '../support/embedded';
import { openEngine, tmpDir } from '../support/tmp';

/**
 * The store seam: the engine runs on any EventLog feeding the one projection. The
 * second log here keeps its events in memory and settles durability a turn later,
 * as a remote database's commit does: the engine must answer only after it, fold
 * the sequenced events into the projection itself, and never reach into the log.
 */
class MemoryLog implements EventLog {
  readonly backend = 'postgresql' as const;
  readonly readOnlyReason = null;
  readonly warnings: string[] = [];
  readonly epoch = 1;
  readonly events: WaypointEvent[] = [];
  private readonly keys = new Set<string>();
  private readonly listeners = new Set<(events: readonly WaypointEvent[]) => void>();
  private durableSeq = 0;
  appends = 0;

  constructor(readonly workspace: WorkspaceIdentity) {}

  get lastSeq(): number {
    return this.events.length;
  }

  async append(batch: readonly NewEvent[]): Promise<AppendResult> {
    // A remote log's answer comes back later: an await, so nothing here is synchronous with the caller.
    await new Promise((r) => setImmediate(r));
    for (const b of batch) if (this.keys.has(b.key)) throw new WaypointError('conflict', `duplicate key ${b.key}`);
    const ts = Date.now();
    const events = batch.map((b, i) =>
      parseEvent({ seq: this.events.length + 1 + i, ts, v: SCHEMA_VERSION, type: b.type, taskId: b.taskId, corr: b.corr, key: b.key, by: b.by, data: b.data, ...(b.op !== undefined ? { op: b.op, result: b.result ?? null } : {}) }),
    );
    for (const e of events) this.keys.add(e.key);
    this.events.push(...events);
    this.appends++;
    const last = this.events.length;
    const durable = new Promise<void>((r) => setImmediate(r)).then(() => {
      this.durableSeq = Math.max(this.durableSeq, last);
      for (const l of this.listeners) l(events);
    });
    return { events, durable };
  }

  async waitDurable(seq: number): Promise<void> {
    while (this.durableSeq < seq) await new Promise((r) => setImmediate(r));
  }

  async read(filter: ReadFilter = {}): Promise<WaypointEvent[]> {
    const out = this.events.filter((e) => e.seq > (filter.afterSeq ?? 0) && (!filter.taskId || e.taskId === filter.taskId));
    return filter.limit !== undefined ? out.slice(0, filter.limit) : out;
  }

  subscribe(listener: (events: readonly WaypointEvent[]) => void): Disposable {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  onDidLoseOwnership(): Disposable {
    return { dispose: () => undefined };
  }

  assertOwned(): void {}

  async close(): Promise<void> {}
}

describe('store seam: SqlProjection', () => {
  const ev = (seq: number, taskId: string): WaypointEvent =>
    parseEvent({ seq, ts: 1000 + seq, v: SCHEMA_VERSION, type: 'task.started', taskId, corr: `c${seq}`, key: `k${seq}`, by: 'a', data: { goal: `goal ${seq}`, title: `t ${seq}`, agent: null, plan: [], owner: { id: 'a' }, leaseTtlMs: 60_000 } });

  it('applies in order, skips what it holds, and refuses a gap without changing anything', async () => {
    const p = await SqlProjection.empty();
    try {
      p.apply([ev(1, 't1'), ev(2, 't2')]);
      assert.equal(p.lastSeq, 2);
      // Applying again what it holds (the embedded log applied it at sequencing) changes nothing.
      const before = JSON.stringify(dumpProjections(p.db));
      p.apply([ev(2, 't2')]);
      assert.equal(JSON.stringify(dumpProjections(p.db)), before);
      assert.throws(() => p.apply([ev(3, 't3'), ev(5, 't5')]), (e: unknown) => e instanceof WaypointError && e.code === 'corrupt' && /gap/.test(e.message));
      assert.equal(p.lastSeq, 2, 'a refused batch leaves the position');
      assert.equal(JSON.stringify(dumpProjections(p.db)), before, 'and every table');
      assert.equal((await p.verify([ev(1, 't1'), ev(2, 't2')])).ok, true);
      assert.equal((await p.verify([ev(1, 't1')])).ok, false, 'verify notices a projection that is not the fold of the events');
    } finally {
      p.close();
    }
  });
});

describe('store seam: the engine on a second EventLog', () => {
  it('runs tasks, steps, side effects and heartbeats on a log that is not the embedded one; a repeat is answered from the ledger', async () => {
    const ws = tmpDir();
    const log = new MemoryLog({ id: 'w-mem', machine: 'm1', path: ws.dir });
    const projection = await SqlProjection.empty();
    const engine = await Engine.open({ workspace: ws.dir, snapshots: false, backend: { log, projection } });
    try {
      const changes: number[] = [];
      engine.onDidChange((c) => changes.push(...c.events.map((e) => e.seq)));
      const start = { goal: 'on another log', plan: [{ id: 'a', title: 'A' }], idempotencyKey: 'seam-start' };
      const { taskId } = await engine.startTask(start);
      await engine.startStep({ taskId, stepId: 'a' });
      assert.equal((await engine.beginSideEffect({ taskId, key: 'deploy', kind: 'shell', description: 'deploy' })).decision, 'proceed');
      await engine.endSideEffect({ taskId, key: 'deploy', ok: true, result: { ok: 1 } });
      assert.equal((await engine.beginSideEffect({ taskId, key: 'deploy', kind: 'shell', description: 'deploy' })).decision, 'already_done');
      await engine.heartbeat({ taskId });
      await engine.completeStep({ taskId, stepId: 'a' });
      const appends = log.appends;
      assert.equal((await engine.startTask(start)).taskId, taskId, 'the repeat answers the first call');
      assert.equal(log.appends, appends, 'and appends nothing');

      assert.equal(projection.lastSeq, log.lastSeq, 'the engine folded every sequenced event into the projection');
      assert.equal(engine.task(taskId).state, 'running');
      assert.equal(engine.taskDetail(taskId).sideEffects[0].status, 'done');
      assert.deepEqual((await engine.events({ taskId })).map((e) => e.seq), log.events.map((e) => e.seq));
      assert.equal((await projection.verify(log.events)).ok, true, 'the projection equals a rebuild from the log');
      assert.deepEqual(changes, log.events.map((e) => e.seq), 'change events come from the log as it makes them durable');
      // The read side names the log's workspace; the engine never needs the embedded store.
      const listed = await engine.reader.listTasks();
      assert.deepEqual(listed.map((l) => [l.workspace.machine, l.task.id]), [['m1', taskId]]);
      assert.equal((await engine.reader.getTask(taskId))?.id, taskId);
      assert.equal((await engine.reader.getTask('t_none')), null);
      assert.equal((await engine.reader.taskEvents(taskId)).length, log.events.length);
      assert.throws(() => embeddedStore(engine), /needs the embedded store/);
    } finally {
      await engine.close();
      ws.cleanup();
    }
  });

  it('the embedded store is an EventLog: its workspace identity, epoch, and reads through the contract', async () => {
    const ws = tmpDir();
    const saved = process.env.WAYPOINT_MACHINE;
    process.env.WAYPOINT_MACHINE = 'seam-box';
    const engine = await openEngine(ws.dir, { snapshots: false });
    try {
      const { taskId } = await engine.startTask({ goal: 'embedded' });
      const log = engine.eventLog;
      assert.equal(log.backend, 'embedded');
      assert.equal(log.workspace.machine, 'seam-box');
      assert.equal(log.workspace.path, ws.dir);
      assert.equal(log.workspace.id, embeddedStore(engine).storeId, 'the identity is the id kept in .waypoint/');
      assert.ok(log.epoch >= 1);
      assert.equal(engine.projection.lastSeq, log.lastSeq);
      assert.deepEqual((await log.read({ taskId })).map((e) => e.type), ['task.started', 'checkpoint.created']);
      assert.deepEqual((await engine.reader.listTasks()).map((l) => [l.workspace.machine, l.task.id]), [['seam-box', taskId]]);
    } finally {
      if (saved === undefined) delete process.env.WAYPOINT_MACHINE;
      else process.env.WAYPOINT_MACHINE = saved;
      await engine.close();
      ws.cleanup();
    }
  });
});
