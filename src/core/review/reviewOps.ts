import type { z } from 'zod';
import type { Engine } from '../engine/engine';
import type { ApplyReviewInput, ReviewCountInput, UndoReviewCommitInput } from '../engine/inputs';
import { WaypointError } from '../model/errors';
import type { SideEffect, Step } from '../model/schema';
import { applyReview, type ApplyReviewResult } from './applyReview';
import { GitCliCommitter } from './gitCli';
import { countFileLines, fileHunks, listReview, type FileHunks, type ReviewData, type ReviewFile } from './reviewModel';
import { undoReviewCommit } from './undoCommit';

/**
 * The review panel's work as engine operations (declared in operations.ts), so a
 * window that relays to another owner — `waypoint mcp` opened the store first —
 * reviews, commits and undoes through the owner exactly as the owning window does.
 * The owner keeps each task's latest listing for a short while: the panel counts
 * lines and asks for hunks a batch at a time, and each of those is checked against
 * the listing (only files of the review are read), without a scan per batch.
 */
const LISTING_FRESH_MS = 60_000;
const listings = new WeakMap<Engine, Map<string, { at: number; data: ReviewData }>>();

export interface ReviewListing {
  data: ReviewData;
  steps: Step[];
  effects: SideEffect[];
}

export async function reviewListing(engine: Engine, taskId: string): Promise<ReviewListing> {
  const data = await listReview(engine, taskId);
  let byTask = listings.get(engine);
  if (!byTask) listings.set(engine, (byTask = new Map()));
  byTask.set(taskId, { at: Date.now(), data });
  return { data, steps: engine.queries.steps(taskId), effects: engine.queries.sideEffects(taskId) };
}

async function listingOf(engine: Engine, taskId: string): Promise<ReviewData> {
  const kept = listings.get(engine)?.get(taskId);
  if (kept && Date.now() - kept.at < LISTING_FRESH_MS) return kept.data;
  return (await reviewListing(engine, taskId)).data;
}

function reviewFile(data: ReviewData, key: string): ReviewFile {
  const f = data.files.find((x) => x.path === key);
  if (!f) throw new WaypointError('invalid_input', `${key} is not one of the files this task's review lists. Refresh the review.`);
  return f;
}

/** Line counts for some files of the review (copies: the kept listing stays uncounted for the next caller). */
export async function reviewLineCounts(engine: Engine, input: z.output<typeof ReviewCountInput>): Promise<ReviewFile[]> {
  const data = await listingOf(engine, input.taskId);
  const files = input.paths.map((p) => ({ ...reviewFile(data, p) }));
  return countFileLines(engine, data, files);
}

export async function reviewHunks(engine: Engine, taskId: string, key: string): Promise<FileHunks> {
  const data = await listingOf(engine, taskId);
  reviewFile(data, key);
  return fileHunks(engine, data.base, key);
}

/** A review's decisions applied whole or not at all (see applyReview), committed with git in the store's workspace. */
export async function applyReviewOp(engine: Engine, input: z.output<typeof ApplyReviewInput>): Promise<ApplyReviewResult> {
  const roots = engine.workspaceSnapshots?.roots ?? [];
  if (roots.length > 1 && input.decisions.some((d) => d.action === 'approve' || d.action === 'hunks')) {
    // One commit cannot span the repositories of several folders; discarding and leaving work.
    throw new WaypointError(
      'invalid_input',
      `This task's store supervises ${roots.length} folders (${roots.map((r) => r.name).join(', ')}); committing from the review is for a single-folder workspace. Discard or leave changes here, and commit each folder from Source Control.`,
    );
  }
  try {
    return await applyReview(engine, { ...input, finish: input.finish ?? 'if_plan_done' }, new GitCliCommitter(engine.workspace));
  } finally {
    listings.get(engine)?.delete(input.taskId);
  }
}

export async function undoReviewCommitOp(engine: Engine, input: z.output<typeof UndoReviewCommitInput>): Promise<{ state: string }> {
  try {
    await undoReviewCommit(engine, input);
  } finally {
    listings.get(engine)?.delete(input.taskId);
  }
  return { state: engine.task(input.taskId).state };
}
