/** Line-level change counts between checkpoints (for review and `waypoint diff`). */
import { diffLines } from 'diff';
import type { BlobStore } from './blobStore.js';
import { diffManifests, hasNoContent, type FileChange, type Manifest, type ManifestEntry } from './manifest.js';

export interface LineCounts {
  added: number;
  removed: number;
  binary: boolean;
  /** True when the diff gave up (huge edit) and counts are whole-file counts. */
  approximate?: boolean;
}

const BINARY_SNIFF_BYTES = 8192;

/** Same heuristic as git: a NUL byte in the first 8 KB means binary. */
export function isBinary(bytes: Uint8Array): boolean {
  return bytes.subarray(0, BINARY_SNIFF_BYTES).includes(0);
}

function countLines(text: string): number {
  if (text.length === 0) return 0;
  let n = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) n++;
  return text.endsWith('\n') ? n : n + 1;
}

/**
 * Lines added and removed from `before` to `after` (either may be null: absent).
 * Binary content gets no line counts. Very large edits fall back to whole-file
 * counts rather than spending seconds in the diff (marked `approximate`).
 */
export function lineCounts(before: Uint8Array | null, after: Uint8Array | null): LineCounts {
  if ((before && isBinary(before)) || (after && isBinary(after))) return { added: 0, removed: 0, binary: true };
  const a = before ? Buffer.from(before).toString('utf8') : '';
  const b = after ? Buffer.from(after).toString('utf8') : '';
  if (a === b) return { added: 0, removed: 0, binary: false };
  if (a === '') return { added: countLines(b), removed: 0, binary: false };
  if (b === '') return { added: 0, removed: countLines(a), binary: false };
  const parts = diffLines(a, b, { maxEditLength: 20_000, timeout: 2_000 });
  if (!parts) return { added: countLines(b), removed: countLines(a), binary: false, approximate: true };
  let added = 0;
  let removed = 0;
  for (const p of parts) {
    if (p.added) added += p.count;
    else if (p.removed) removed += p.count;
  }
  return { added, removed, binary: false };
}

export interface FileChangeWithLines extends FileChange {
  lines: LineCounts | null;
}

async function contentOf(entry: ManifestEntry | undefined, blobs: Pick<BlobStore, 'get'>): Promise<Buffer | null> {
  if (!entry) return null;
  if (entry.type === 'file') return blobs.get(entry.hash);
  if (entry.type === 'symlink') return Buffer.from(`${entry.target}\n`);
  return null;
}

/** `diffManifests` plus line counts; `lines` is null where content is unknown (skipped files). */
export async function diffCheckpoint(a: Manifest, b: Manifest, blobs: Pick<BlobStore, 'get'>): Promise<FileChangeWithLines[]> {
  const out: FileChangeWithLines[] = [];
  for (const change of diffManifests(a, b)) {
    if (hasNoContent(change.before) || hasNoContent(change.after)) {
      out.push({ ...change, lines: null });
      continue;
    }
    if (change.status === 'mode_changed') {
      out.push({ ...change, lines: { added: 0, removed: 0, binary: false } });
      continue;
    }
    const [x, y] = await Promise.all([contentOf(change.before, blobs), contentOf(change.after, blobs)]);
    out.push({ ...change, lines: lineCounts(x, y) });
  }
  return out;
}
