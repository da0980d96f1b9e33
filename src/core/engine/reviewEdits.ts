import { WaypointError } from '../model/errors';
import { sha256Hex, type BlobStore, type FileEntry, type Manifest, type ManifestEntry } from '../snapshot';

/**
 * What a review apply asks of the workspace, one path at a time: the content the
 * person saw (so a file changed since is refused) and what the path must become.
 * The engine turns these into a restore plan and applies it with the rollback
 * machinery (write-ahead plan, temp + rename, recovery on open).
 */
export interface WorkspaceEdit {
  path: string;
  /** SHA-256 of the bytes the decision was made on (a symlink's target text), or null when the path was absent. */
  expect: string | null;
  to: { kind: 'file'; content: Buffer; mode?: 0o755 | 0o644 } | { kind: 'symlink'; target: string } | { kind: 'absent' };
}

/** The hash `WorkspaceEdit.expect` compares against: a file's content, a symlink's target text. */
export function entryContentHash(e: ManifestEntry | undefined): string | null | 'unknown' {
  if (!e) return null;
  if (e.type === 'file') return e.hash;
  if (e.type === 'symlink') return sha256Hex(Buffer.from(e.target, 'utf8'));
  return 'unknown'; // too large to have been read: never matches
}

/**
 * The manifest the workspace must match after the edits: `current` with each edited
 * path replaced. New content is put in the blob store (the caller flushes it with
 * the plan). Refuses, before anything is written, an edit whose path changed since
 * it was reviewed.
 */
export async function editedManifest(current: Manifest, edits: readonly WorkspaceEdit[], blobs: BlobStore): Promise<Manifest> {
  const target: Manifest = new Map(current);
  const seen = new Set<string>();
  for (const e of edits) {
    if (seen.has(e.path)) throw new WaypointError('invalid_input', `Two edits for ${e.path}.`);
    seen.add(e.path);
    const have = current.get(e.path);
    if (entryContentHash(have) !== e.expect) {
      throw new WaypointError('invalid_input', `${e.path} changed since you reviewed it. Refresh the review and decide again.`, { path: e.path });
    }
    if (e.to.kind === 'absent') {
      target.delete(e.path);
    } else if (e.to.kind === 'symlink') {
      target.set(e.path, { type: 'symlink', target: e.to.target, mtimeMs: 0, ino: 0 });
    } else {
      const { hash } = await blobs.put(e.to.content, { inline: true });
      const mode = e.to.mode ?? (have?.type === 'file' ? have.mode : 0o644);
      const entry: FileEntry = { type: 'file', hash, size: e.to.content.length, mode, mtimeMs: 0, ino: 0 };
      target.set(e.path, entry);
    }
  }
  return target;
}
