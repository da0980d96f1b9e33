import type { Engine } from '../engine/engine';
import { WaypointError } from '../model/errors';
import { git } from './gitCli';

export interface UndoCommitInput {
  taskId: string;
  /** The review's commit. */
  sha: string;
  /** Workspace keys the commit holds: their index entries go back to the parent's. */
  committed: readonly string[];
  /** Workspace keys whose changes the apply discarded: restored from the pre-apply checkpoint. */
  discarded: readonly string[];
  preApplyCheckpointId: string;
}

/**
 * Undoes a review's commit, only while HEAD is still that commit (anything else
 * would drop later work): a soft reset to its parent, the committed paths' index
 * entries set back to the parent's (so they are plain uncommitted changes again,
 * as before the review), then the discarded files restored from the pre-apply
 * checkpoint. A task this commit completed waits for review again (`reopenTask`), so
 * the person can decide and commit once more. If the restore is refused the reset
 * and the task are put back, so the undo too is whole or nothing. Refused, changing nothing: HEAD moved on, or the commit is the
 * repository's first (it has no parent to reset to).
 */
export async function undoReviewCommit(engine: Engine, input: UndoCommitInput): Promise<void> {
  const cwd = engine.workspace;
  const head = (await git(cwd, ['rev-parse', '-q', '--verify', 'HEAD'])).stdout.trim();
  if (head !== input.sha) {
    throw new WaypointError('conflict', `HEAD is no longer the review's commit ${input.sha.slice(0, 10)}, so it is not undone (that would drop the commits after it). Use the Source Control view instead.`);
  }
  const parent = (await git(cwd, ['rev-parse', '-q', '--verify', `${input.sha}^`])).stdout.trim();
  if (!parent) throw new WaypointError('invalid_input', `${input.sha.slice(0, 10)} is the repository's first commit: there is no parent to go back to. Undo it from a terminal (git update-ref -d HEAD).`);
  const run = async (args: string[], input?: string) => {
    const r = await git(cwd, args, input);
    if (r.code !== 0) throw new WaypointError('io', `git ${args.slice(0, 3).join(' ')} failed: ${r.stderr.trim()}`);
  };
  // The record goes back with the commit only when this commit is what completed the task
  // (a review that kept the task open leaves nothing to reopen).
  const before = engine.task(input.taskId);
  const reopen = before.state === 'completed' && before.commit === input.sha;
  await run(['reset', '-q', '--soft', parent]);
  let reopened = false;
  try {
    if (input.committed.length) await run(['reset', '-q', '--pathspec-from-file=-', '--pathspec-file-nul', parent], nul(input.committed));
    if (reopen) {
      await engine.reopenTask({ taskId: input.taskId, commit: input.sha, reason: `the review commit ${input.sha.slice(0, 10)} was undone` });
      reopened = true;
    }
    if (input.discarded.length) {
      await engine.rollback({ taskId: input.taskId, checkpointId: input.preApplyCheckpointId, paths: [...input.discarded], reason: `undo the review commit ${input.sha.slice(0, 10)}` });
    }
  } catch (e) {
    // Back to the commit: a half-undone review is worse than none (the task completed by it again too).
    await git(cwd, ['reset', '-q', '--soft', input.sha]);
    if (input.committed.length) await git(cwd, ['reset', '-q', '--pathspec-from-file=-', '--pathspec-file-nul', input.sha], nul(input.committed));
    if (reopened) await engine.completeTask({ taskId: input.taskId, commit: input.sha, summary: before.summary ?? undefined });
    throw e;
  }
}

/** Paths for `--pathspec-from-file=- --pathspec-file-nul` (any number, any characters). */
function nul(paths: readonly string[]): string {
  return paths.map((p) => `${p}\0`).join('');
}
