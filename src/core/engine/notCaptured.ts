import { plural } from '../model/plural';
import type { NotCaptured } from './snapshotter';

/**
 * What a checkpoint did not capture, as a result carries it and as a terminal shows it.
 * Its own module (no engine, no zod) because the CLI's checkpoint fast path prints it too.
 */

/** Added to a result whose checkpoint did not capture everything (see NotCaptured); absent otherwise. */
export interface NotCapturedReport {
  /** The first MAX_NOT_CAPTURED_LISTED of them, by path. */
  notCaptured?: NotCaptured[];
  notCapturedCount?: number;
}

/** One line for a log or a terminal: the checkpoint and what it did not capture, the first few by name. */
export function notCapturedLine(checkpointId: string, r: NotCapturedReport): string {
  const list = r.notCaptured ?? [];
  const n = r.notCapturedCount ?? list.length;
  const shown = list.slice(0, 10).map((x) => `${JSON.stringify(x.path)} (${x.reason === 'unreadable' ? x.code : x.reason})`);
  const more = n > shown.length ? ` and ${n - shown.length} more` : '';
  return `warning: checkpoint ${checkpointId} did not capture ${plural(n, 'path')}: ${shown.join(', ')}${more}. No rollback to it deletes or changes them; make them readable (or raise the size or open-file limit) and take a new checkpoint to capture them.`;
}

/** The warning a command's result carries when its checkpoint missed something (null when it did not). */
export function notCapturedWarning(result: unknown): string | null {
  if (!result || typeof result !== 'object') return null;
  const r = result as NotCapturedReport & { checkpointId?: string; baseCheckpointId?: string; preRollbackCheckpointId?: string };
  if (!r.notCapturedCount) return null;
  return notCapturedLine(r.checkpointId ?? r.baseCheckpointId ?? r.preRollbackCheckpointId ?? '?', r);
}
