import * as fs from 'node:fs';
import { createHash } from 'node:crypto';
import type { Engine } from '../engine/engine';
import { WaypointError } from '../model/errors';
import type { CheckpointMeta, Task } from '../model/schema';
import { diffManifests, hasNoContent, isBinary, lineCounts, resolveInsideSync, splitKey, type ChangeStatus, type Manifest } from '../snapshot';
import { readRegularSync } from '../snapshot/noBlockRead';
import { computeHunks, type Hunk } from './hunks';

/** Files larger than this are summarised in the review, never diffed or rendered. */
export const MAX_RENDER_BYTES = 1024 * 1024;

/** Lines added and removed, known once the file's content has been read. */
export interface FileLines {
  added: number;
  removed: number;
  binary: boolean;
}

export interface ReviewFile {
  path: string;
  status: ChangeStatus;
  /**
   * Null until counted. Listing a review reads manifests only (cheap); counting
   * reads and diffs content, so the panel streams it after its first content.
   * Oversized files are never counted.
   */
  lines: FileLines | null;
  oversized: boolean;
  /** Changed only outside the task's step windows: the person's own edit. */
  drift: boolean;
  /**
   * Whether hunks can be decided one by one (text, small, a regular file on both
   * sides). From the manifests alone; binary content is found when counted.
   */
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

/**
 * The files changed from the task's base to the workspace now, from manifests
 * only: one incremental scan (its stat cache skips unchanged files), shared by the
 * diff and the drift classification; no file content is read. Line counts are
 * left null for `countFileLines`.
 */
export async function listReview(engine: Engine, taskId: string): Promise<ReviewData> {
  const task = engine.task(taskId);
  const base = requireBase(engine, task);
  const ws = engine.workspaceSnapshots;
  if (!ws) throw new WaypointError('invalid_input', 'This store records checkpoints without workspace snapshots, so there is nothing to review.');
  const now = await engine.scanWorkspace();
  const changes = diffManifests(await ws.load(base), now);
  const person = await personOnlyPaths(engine, task, now);
  const files = changes.map((c): ReviewFile => {
    const sizes = [c.before, c.after].map((e) => (e && (e.type === 'file' || e.type === 'skipped') ? e.size : 0));
    // No content on one side (over the size limit, or not captured): nothing to render or revert.
    const skipped = hasNoContent(c.before) || hasNoContent(c.after);
    const oversized = skipped || Math.max(...sizes) > MAX_RENDER_BYTES;
    const regular = (c.before === undefined || c.before.type === 'file') && (c.after === undefined || c.after.type === 'file');
    return {
      path: c.path,
      status: c.status,
      lines: c.status === 'mode_changed' ? { added: 0, removed: 0, binary: false } : null,
      oversized,
      drift: person.has(c.path),
      hunkable: regular && !oversized && c.status !== 'mode_changed',
      revertible: c.before === undefined || !hasNoContent(c.before),
    };
  });
  return { task, base, files };
}

/**
 * Line counts of some of a review's files: the base side from its blob, the other
 * from the workspace (as `fileHunks` reads them). A file found binary is no longer
 * hunkable. Oversized files are left uncounted. `stop` is asked between files so
 * a stream of batches can be abandoned (a refresh, a closed panel).
 */
export async function countFileLines(engine: Engine, data: ReviewData, files: readonly ReviewFile[], stop: () => boolean = () => false): Promise<ReviewFile[]> {
  const ws = engine.workspaceSnapshots;
  if (!ws) return [];
  const base = await ws.load(data.base);
  const out: ReviewFile[] = [];
  for (const f of files) {
    if (stop()) break;
    if (f.lines || f.oversized) continue;
    const e = base.get(f.path);
    const before = e?.type === 'file' ? await ws.blobs.get(e.hash) : e?.type === 'symlink' ? Buffer.from(e.target, 'utf8') : null;
    const after = readWorkspaceFile(engine, f.path);
    if (Math.max(before?.length ?? 0, after?.length ?? 0) > MAX_RENDER_BYTES) {
      // Grew past the limit since it was listed: summarised like any large file.
      f.oversized = true;
      f.hunkable = false;
      out.push(f);
      continue;
    }
    const c = lineCounts(before, after);
    f.lines = { added: c.added, removed: c.removed, binary: c.binary };
    if (c.binary) f.hunkable = false;
    out.push(f);
  }
  return out;
}

/** Everything the panel lists, with every file's line counts (listing plus counting, in one call). */
export async function loadReview(engine: Engine, taskId: string): Promise<ReviewData> {
  const data = await listReview(engine, taskId);
  await countFileLines(engine, data, data.files);
  return data;
}

/**
 * Paths changed only in intervals outside the task's step windows — the person's
 * edits while the task ran — as the engine's agent-only rollback classifies them.
 * A task that never reported a step cannot be told apart, so nothing is drift.
 * Pass `current` when the workspace was just scanned, to skip a second scan.
 */
export async function personOnlyPaths(engine: Engine, task: Task, current?: Manifest): Promise<Set<string>> {
  const steps = engine.queries.steps(task.id);
  if (!engine.workspaceSnapshots || !steps.some((s) => s.startedAt !== null)) return new Set();
  const { agent, person } = await engine.changesByOwner(task.id, requireBase(engine, task).id, current);
  return new Set([...person].filter((p) => !agent.has(p)));
}

/** The workspace file's bytes now (never following a path out of the workspace), or null if absent. */
export function readWorkspaceFile(engine: Engine, key: string): Buffer | null {
  // In a multi-root store a key starts with its folder's root name (see checkRoots).
  const roots = engine.workspaceSnapshots?.roots;
  const { root, rel } = roots && roots.length > 1 ? splitKey(roots, key) : { root: { dir: engine.workspace }, rel: key };
  const abs = resolveInsideSync(root.dir, rel);
  for (let attempt = 1; ; attempt++) {
    const st = fs.lstatSync(abs, { throwIfNoEntry: false });
    if (!st) return null;
    if (st.isSymbolicLink()) return Buffer.from(fs.readlinkSync(abs), 'utf8');
    if (!st.isFile()) return null;
    // Opened without blocking or following a link: the file may have been swapped for a FIFO or a link since its lstat.
    const read = readRegularSync(abs, { follow: false });
    if (read || attempt === 3) return read?.bytes ?? null;
  }
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
