/**
 * The part of a timeline the page's first screen shows, so that the page's document
 * carries only that (small to parse, quick to validate and draw) and the whole model
 * follows as a message once the page says `ready`. Both sides import this file; no
 * `vscode` import.
 */
import { COLLECTIONS, type Collection, type TimelineModel } from './protocol';

/** Steps the time axis lists first (a tall window shows fewer). */
export const FIRST_ROWS = 30;
/** Checkpoints and side effects carried: their lists start below the fold. */
export const FIRST_LIST_ROWS = 20;
/** Graph layers and rows visible in the graph's scroll box before it is scrolled (a 1,200 px wide window, the 360 px box). */
export const FIRST_GRAPH_LAYERS = 6;
export const FIRST_GRAPH_ROWS = 9;
/** Task-level moments kept on the first screen's axis lane (the newest). */
export const FIRST_MARKS = 200;

/**
 * The first screen of `m`: the steps the time axis lists first and those the graph
 * shows before scrolling, their attempts, the newest checkpoints (the list shows the
 * newest first), the first side effects and the newest task marks, with `pending`
 * counting what is left for the whole model. A model that fits whole is returned
 * as it is, without `pending`.
 */
export function firstScreen(m: TimelineModel): TimelineModel {
  const steps = m.steps.filter((s, i) => i < FIRST_ROWS || (s.layer < FIRST_GRAPH_LAYERS && s.row < FIRST_GRAPH_ROWS));
  const shown = new Set(steps.map((s) => s.id));
  const attempts = m.attempts.filter((a) => shown.has(a.stepId));
  const checkpoints = m.checkpoints.slice(-FIRST_LIST_ROWS);
  const effects = m.effects.slice(0, FIRST_LIST_ROWS);
  const marks = m.marks.slice(-FIRST_MARKS);
  const part = { steps, attempts, checkpoints, effects, marks };
  const pending = Object.fromEntries(COLLECTIONS.map((c) => [c, m[c].length - part[c].length])) as Record<Collection, number>;
  if (COLLECTIONS.every((c) => pending[c] === 0)) return m;
  return { ...m, ...part, pending };
}
