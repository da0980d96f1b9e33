/**
 * Validates a whole timeline model a piece at a time, yielding between pieces, so a
 * model of thousands of entries never holds the page's main thread for the length
 * of one `safeParse` (scrolling and input stay live while it checks). The result is
 * the same as `TimelineModel.safeParse`: the same data when valid, refused whole at
 * the first bad entry. No `vscode` import: the page bundles it.
 */
import * as z from 'zod/mini';
import type { $ZodError, $ZodType } from 'zod/v4/core';
import { list } from '../webview/schemaParts';
import { COLLECTIONS, MAX_ATTEMPTS, MAX_CHECKPOINTS, MAX_EFFECTS, MAX_MARKS, MAX_STEPS, TimelineAttempt, TimelineCheckpoint, TimelineEffect, TimelineMark, TimelineModel, TimelineStep, type Collection } from './protocol';

/** Entries checked between two pauses: a few milliseconds of work each. */
export const PIECE = 400;

const ITEM: Record<Collection, $ZodType> = { steps: TimelineStep, attempts: TimelineAttempt, checkpoints: TimelineCheckpoint, effects: TimelineEffect, marks: TimelineMark };

/** The model with every collection's entries left unchecked (only the bounds on their number): the header and the shape. */
const Header = z.extend(TimelineModel, {
  steps: list(z.unknown(), MAX_STEPS),
  attempts: list(z.unknown(), MAX_ATTEMPTS),
  checkpoints: list(z.unknown(), MAX_CHECKPOINTS),
  effects: list(z.unknown(), MAX_EFFECTS),
  marks: list(z.unknown(), MAX_MARKS),
});

export type PieceResult = { success: true; data: TimelineModel } | { success: false; problem: string };

/** The first issue as `path: message`, its path shifted by `offset` within collection `c` (the piece began there). */
function problemOf(error: $ZodError, c?: Collection, offset = 0): string {
  const first = error.issues[0];
  if (!first) return 'invalid';
  const path = first.path.map(String);
  const where = c ? [c, String(offset + Number(path[0] ?? 0)), ...path.slice(1)] : path;
  return `${where.join('.') || 'model'}: ${first.message}`;
}

/** Checks `raw` as a TimelineModel, `PIECE` entries at a time, awaiting `pause()` between pieces. */
export async function validateModelInPieces(raw: unknown, pause: () => Promise<void>, piece = PIECE): Promise<PieceResult> {
  const head = Header.safeParse(raw);
  if (!head.success) return { success: false, problem: problemOf(head.error) };
  const out = { ...head.data } as Record<string, unknown>;
  for (const c of COLLECTIONS) {
    const items = head.data[c];
    const checked: unknown[] = [];
    for (let i = 0; i < items.length; i += piece) {
      if (i > 0 || c !== COLLECTIONS[0]) await pause();
      const r = z.array(ITEM[c]).safeParse(items.slice(i, i + piece));
      if (!r.success) return { success: false, problem: problemOf(r.error, c, i) };
      for (const x of r.data) checked.push(x);
    }
    out[c] = checked;
  }
  return { success: true, data: out as TimelineModel };
}
