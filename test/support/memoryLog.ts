import { WaypointError } from '../../src/core/model/errors';
import { SCHEMA_VERSION, parseEvent, type WaypointEvent } from '../../src/core/model/schema';
import type { AppendResult, Disposable, EventLog, NewEvent, ReadFilter, WorkspaceIdentity } from '../../src/core/store/eventLog';

/**
 * A second EventLog for the store seam's tests: the engine runs on any EventLog
 * feeding the one projection. This one keeps its events in memory and settles durability a turn later,
 * as a remote database's commit does: the engine must answer only after it, fold
 * the sequenced events into the projection itself, and never reach into the log.
 */
export class MemoryLog implements EventLog {
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
