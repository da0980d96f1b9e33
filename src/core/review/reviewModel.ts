import * as fs from 'node:fs';
import { createHash } from 'node:crypto';
import type { Engine } from '../engine/engine';
import { WaypointError } from '../model/errors';
import type { CheckpointMeta, Task } from '../model/schema';
import { isBinary, resolveInsideSync, type ChangeStatus } from '../snapshot';
import { computeHunks, type Hunk } from './hunks';

/** Files larger than this are summarised in the review, never diffed or rendered. */
export const MAX_RENDER_BYTES = 1024 * 1024;

export interface ReviewFile {
  path: string;
  status: ChangeStatus;
  added: number;
  removed: number;
  binary: boolean;
  oversized: boolean;
  /** Changed only outside the task's step windows: the person's own edit. */
  drift: boolean;
  /** Whether hunks can be decided one by one (text, small, UTF-8, a regular file on both sides). */
  hunkable: boolean;
  /** Whether rejecting is possible (the base content is held, or the file is new). */
  revertible: boolean;
}

export interface ReviewData {
  task: Task;
  base: CheckpointMeta;
  files: ReviewFile[];
}

export function requireBase(engine: Engine, task: Task): CheckpointMeta {
  const base = task.baseCheckpointId ? engine.queries.checkpoint(task.baseCheckpointId) : null;
  if (!base?.manifestRef) throw new WaypointError('invalid_input', `Task “${task.title}” has no base checkpoint with file contents, so there is nothing to compare against.`);
  return base;
}

/** Everything the panel lists: the files changed from the task's base to the workspace now. */
export async function loadReview(engine: Engine, taskId: string): Promise<ReviewData> {
  const task = engine.task(taskId);
  const base = requireBase(engine, task);
  const { changes } = await engine.diff({ from: base.id });
  const person = await personOnlyPaths(engine, task);
  const files = changes.map((c): ReviewFile => {
    const sizes = [c.before, c.after].map((e) => (e && e.type !== 'symlink' ? e.size : 0));
    const skipped = c.before?.type === 'skipped' || c.after?.type === 'skipped';
    const oversized = skipped || Math.max(...sizes) > MAX_RENDER_BYTES;
    const regular = (c.before === undefined || c.before.type === 'file') && (c.after === undefined || c.after.type === 'file');
    const binary = c.lines?.binary ?? false;
    return {
      path: c.path,
      status: c.status,
      added: c.lines?.added ?? 0,
      removed: c.lines?.removed ?? 0,
      binary,
      oversized,
      drift: person.has(c.path),
      hunkable: regular && !binary && !oversized && c.status !== 'mode_changed',
      revertible: c.before === undefined || c.before.type !== 'skipped',
    };
  });
  return { task, base, files };
}

/**
 * Paths changed only in intervals outside the task's step windows — the person's
 * edits while the task ran — as the engine's agent-only rollback classifies them.
 * A task that never reported a step cannot be told apart, so nothing is drift.
 */
export async function personOnlyPaths(engine: Engine, task: Task): Promise<Set<string>> {
  const steps = engine.queries.steps(task.id);
  if (!engine.workspaceSnapshots || !steps.some((s) => s.startedAt !== null)) return new Set();
  const { agent, person } = await engine.changesByOwner(task.id, requireBase(engine, task).id);
  return new Set([...person].filter((p) => !agent.has(p)));
}

/** The workspace file's bytes now (never following a path out of the workspace), or null if absent. */
export function readWorkspaceFile(engine: Engine, key: string): Buffer | null {
  const abs = resolveInsideSync(engine.workspace, key);
  const st = fs.lstatSync(abs, { throwIfNoEntry: false });
  if (!st) return null;
  if (st.isSymbolicLink()) return Buffer.from(fs.readlinkSync(abs), 'utf8');
  if (!st.isFile()) return null;
  return fs.readFileSync(abs);
}

export async function baseContent(engine: Engine, base: CheckpointMeta, key: string): Promise<Buffer | null> {
  return engine.workspaceSnapshots ? engine.workspaceSnapshots.fileAt(base, key) : null;
}

/** Identifies the exact content a person reviewed, so a decision on stale content is refused. */
export function fingerprint(base: Buffer | null, current: Buffer | null): string {
  const h = createHash('sha256');
  h.update(base ? `b${base.length}:` : 'b-:');
  if (base) h.update(base);
  h.update(current ? `c${current.length}:` : 'c-:');
  if (current) h.update(current);
  return h.digest('hex').slice(0, 32);
}

export type FileHunks =
  | { kind: 'hunks'; fingerprint: string; hunks: Hunk[] }
  | { kind: 'summary'; fingerprint: string; reason: string };

/** One file's hunks for the panel (computed on request, so large reviews stay cheap). */
export async function fileHunks(engine: Engine, base: CheckpointMeta, key: string): Promise<FileHunks> {
  const [before, after] = [await baseContent(engine, base, key), readWorkspaceFile(engine, key)];
  const fp = fingerprint(before, after);
  const size = Math.max(before?.length ?? 0, after?.length ?? 0);
  if (size > MAX_RENDER_BYTES) return { kind: 'summary', fingerprint: fp, reason: `Large file (${(size / 1024 / 1024).toFixed(1)} MB): not rendered. Open it in the diff editor.` };
  if ((before && isBinary(before)) || (after && isBinary(after))) return { kind: 'summary', fingerprint: fp, reason: 'Binary file: not rendered.' };
  return { kind: 'hunks', fingerprint: fp, hunks: computeHunks(before?.toString('utf8') ?? '', after?.toString('utf8') ?? '').hunks };
}
