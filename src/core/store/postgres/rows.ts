import { z } from 'zod';
import { parseEvent, type WaypointEvent } from '../../model/schema';
import { upcast } from '../upcast';
import { fromPgText } from './pgText';

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

/** A text column's value as the string that was written (see pgText.ts); anything but a string is left for the schema to refuse. */
const text = (v: unknown): unknown => (typeof v === 'string' ? fromPgText(v) : v);

/** An events row as an event, checked like every event read from disk (a shared database is input too). */
export function rowToEvent(r: Record<string, unknown>): WaypointEvent {
  return parseEvent(
    upcast({
      seq: Number(r.seq),
      ts: Number(r.ts),
      type: text(r.type),
      v: Number(r.v),
      taskId: text(r.task_id ?? null),
      corr: text(r.corr ?? null),
      key: text(r.key),
      by: text(r.by ?? null),
      data: r.data,
      ...(r.op != null ? { op: text(r.op), result: r.result ?? null } : {}),
    }),
  );
}
