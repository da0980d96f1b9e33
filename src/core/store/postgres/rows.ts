import { z } from 'zod';
import { parseEvent, type WaypointEvent } from '../../model/schema';
import { upcast } from '../upcast';

/** The one NOTIFY channel: every commit and every takeover says which workspace, which epoch, which head. */
export const NOTIFY_CHANNEL = 'waypoint_events';

export const EVENT_COLUMNS = 'seq, ts, type, v, task_id, corr, key, by, data, op, result';

const Note = z.object({ w: z.string(), e: z.number().int(), h: z.number().int().nonnegative() });
export type StoreNotification = z.infer<typeof Note>;

/** A NOTIFY payload, or null when it is not one of ours (anyone with access may NOTIFY the channel). */
export function parseNotification(payload: string | undefined): StoreNotification | null {
  if (!payload) return null;
  try {
    const r = Note.safeParse(JSON.parse(payload));
    return r.success ? r.data : null;
  } catch {
    return null;
  }
}

/** An events row as an event, checked like every event read from disk (a shared database is input too). */
export function rowToEvent(r: Record<string, unknown>): WaypointEvent {
  return parseEvent(
    upcast({
      seq: Number(r.seq),
      ts: Number(r.ts),
      type: r.type,
      v: Number(r.v),
      taskId: r.task_id ?? null,
      corr: r.corr ?? null,
      key: r.key,
      by: r.by ?? null,
      data: r.data,
      ...(r.op != null ? { op: r.op, result: r.result ?? null } : {}),
    }),
  );
}
