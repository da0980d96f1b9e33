import { plural } from './plural';
import type { CheckpointMeta } from './schema';

/**
 * How a checkpoint is spoken of, one definition for every surface (the tree, the
 * timeline page, `waypoint timeline`, `stats`).
 */

/**
 * An auto checkpoint that captured no change is noise (the watcher saw Waypoint's own
 * rollback or undo writes, or an edit put back): the tree and the timelines leave it out.
 */
export function isShownCheckpoint(c: Pick<CheckpointMeta, 'kind' | 'filesChanged' | 'damaged'>): boolean {
  return !(c.kind === 'auto' && c.filesChanged === 0 && !c.damaged);
}

/**
 * What a checkpoint holds: a base checkpoint changed nothing, it holds N files; the
 * others changed N files since the one before.
 */
export function checkpointChanges(c: Pick<CheckpointMeta, 'kind' | 'files' | 'filesChanged'>): string {
  if (c.kind === 'task_base') return plural(c.files, 'file');
  return c.filesChanged === 0 ? 'no changes' : `${plural(c.filesChanged, 'file')} changed`;
}
