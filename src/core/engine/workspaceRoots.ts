import * as path from 'node:path';
import { isSafePathKey, type SnapshotRoot } from '../snapshot';

/**
 * The snapshot roots of a window's folders. With more than one root every path key
 * is `<root name>/<relative path>` (see checkRoots), so the names are what the
 * person sees in every list (`app/src/x.ts`) and must stay the same from one
 * session to the next: a name is the folder's own, made a safe single path segment,
 * and a clash (two folders both called `src`) takes `-2`, `-3` in the window's order.
 *
 * A folder inside another folder of the window is already captured through the
 * outer one; recording it twice would have two keys for one file, and a rollback
 * write it twice, so it is left out (and said so). The same directory listed twice
 * is kept once.
 */
export interface FolderInput {
  /** The folder's display name (VS Code's `WorkspaceFolder.name`). */
  name: string;
  /** Absolute directory on disk. */
  dir: string;
}

export interface WindowRoots {
  roots: SnapshotRoot[];
  /** Folders not made roots of their own, and why. */
  skipped: { dir: string; reason: string }[];
}

const MAX_NAME = 100;

/** A folder name as a path segment that checkRoots accepts: no separators, no dot names, nothing a key refuses. */
export function rootNameOf(name: string, dir: string): string {
  for (const candidate of [name, path.basename(dir)]) {
    const s = candidate
      .trim()
      .replace(/[/\\:*?"<>|\u0000-\u001f]+/g, '_')
      .replace(/^[._]+/, '')
      .replace(/[. _]+$/, '')
      .slice(0, MAX_NAME);
    // Only a name with a letter or digit in it says which folder it is.
    if (/[\p{L}\p{N}]/u.test(s) && isSafePathKey(s)) return s;
  }
  return 'folder';
}

function inside(outer: string, inner: string): boolean {
  const rel = path.relative(outer, inner);
  return rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel);
}

export function rootsOfFolders(folders: readonly FolderInput[]): WindowRoots {
  const skipped: WindowRoots['skipped'] = [];
  const dirs: FolderInput[] = [];
  for (const f of folders) {
    if (!path.isAbsolute(f.dir)) {
      skipped.push({ dir: f.dir, reason: 'not an absolute path' });
      continue;
    }
    const dir = path.resolve(f.dir);
    if (dirs.some((d) => d.dir === dir)) {
      skipped.push({ dir, reason: 'listed twice' });
      continue;
    }
    dirs.push({ name: f.name, dir });
  }
  const kept = dirs.filter((f) => {
    const outer = dirs.find((o) => o !== f && inside(o.dir, f.dir));
    if (outer) skipped.push({ dir: f.dir, reason: `inside ${outer.dir}, which already captures it` });
    return !outer;
  });
  const used = new Set<string>();
  const roots = kept.map((f) => {
    const base = rootNameOf(f.name, f.dir);
    let name = base;
    for (let i = 2; used.has(name.toLowerCase()); i++) name = `${base}-${i}`;
    used.add(name.toLowerCase());
    return { name, dir: f.dir };
  });
  return { roots, skipped };
}
