import type { WaypointEvent } from '../../core/model/schema';
import type { EngineHost } from '../engineHost';
import { taskDetail, type TaskDetail } from '../storeReads';
import { buildTimeline } from './model';
import type { TimelineModel } from './protocol';

/** Tasks whose axis runs to "now": their model is rebuilt even when no event came. */
const LIVE = new Set(['running', 'waiting_tool', 'planning']);
/** Timelines kept warm: enough for the tasks a person flips between, bounded in memory. */
const KEEP = 8;

interface Cached {
  events: WaypointEvent[];
  lastSeq: number;
  detail: TaskDetail;
  model: TimelineModel;
}

/**
 * Reads a task's timeline, incrementally: events are append-only, so after the first
 * read only the events after the last one seen are fetched, and the projections are
 * read again only when some arrived. A task of thousands of events costs its full
 * read once; reopening it, or a live update, costs one small query.
 */
export class TimelineReader {
  private readonly cache = new Map<string, Cached>();

  constructor(private readonly host: EngineHost) {}

  async model(taskId: string): Promise<TimelineModel> {
    const c = this.cache.get(taskId);
    try {
      const after = c?.lastSeq ?? 0;
      const fresh = await (await this.host.api()).events({ taskId, afterSeq: after });
      if (c && !fresh.length && !LIVE.has(c.model.task.state)) return this.touch(taskId, c).model;
      const events = c ? (fresh.length ? c.events.concat(fresh) : c.events) : fresh;
      const detail = c && !fresh.length ? c.detail : await taskDetail(this.host, taskId);
      const model = buildTimeline({ ...detail, events, now: Date.now(), here: this.host.ownerId });
      this.touch(taskId, { events, lastSeq: events.at(-1)?.seq ?? 0, detail, model });
      return model;
    } catch (e) {
      // A deleted task, another store: start from nothing next time.
      this.cache.delete(taskId);
      throw e;
    }
  }

  private touch(taskId: string, entry: Cached): Cached {
    this.cache.delete(taskId);
    this.cache.set(taskId, entry);
    while (this.cache.size > KEEP) this.cache.delete(this.cache.keys().next().value!);
    return entry;
  }
}
