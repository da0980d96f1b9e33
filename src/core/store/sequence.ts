import { SCHEMA_VERSION, parseEvent, type WaypointEvent } from '../model/schema';
import type { NewEvent } from './eventLog';

/**
 * Gives a batch its place in a log: consecutive seqs after `lastSeq`, one timestamp,
 * the current event version, each payload validated against its type's schema (a bad
 * one throws, and nothing of the batch is sequenced). One definition for every
 * EventLog (embedded and PostgreSQL), so the two cannot sequence differently.
 */
export function sequenceBatch(batch: readonly NewEvent[], lastSeq: number, ts: number): WaypointEvent[] {
  return batch.map((b, i) =>
    parseEvent({
      seq: lastSeq + 1 + i,
      ts,
      type: b.type,
      v: SCHEMA_VERSION,
      taskId: b.taskId,
      corr: b.corr,
      key: b.key,
      by: b.by,
      data: b.data as Record<string, unknown>,
      ...(b.op !== undefined ? { op: b.op, result: b.result ?? null } : {}),
    }),
  );
}
