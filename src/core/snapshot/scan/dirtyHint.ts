/**
 * What a dirty-path hint asks an incremental scan to look at again: the hint's paths
 * (keys or absolute paths) as (root, root-relative path) targets, widened where an
 * edit changes more than itself (.gitignore, .git/info/exclude, a path below a
 * directory the previous scan could not list), with targets inside another's subtree
 * dropped. Plus what the incremental scan needs of the previous manifest's shape.
 */
import type { Manifest } from '../manifest.js';
import { keyPrefixFor, splitKey, toKey, type SnapshotRoot } from '../paths.js';
import { isReserved } from './fsAccess.js';

export interface DirtyTarget {
  root: SnapshotRoot;
  rel: string;
}

export function dirtyTargets(roots: SnapshotRoot[], previous: Manifest, dirty: readonly string[]): DirtyTarget[] {
  // Normalize to (root, rel) pairs; widen .gitignore / info/exclude edits to their directory.
  const targets = new Map<string, DirtyTarget>();
  for (const raw of dirty) {
    const key = toKey(roots, raw);
    if (key === null) continue; // outside every root
    let root: SnapshotRoot;
    let rel: string;
    if (key === '' || (roots.length > 1 && roots.some((r) => r.name === key))) {
      root = key === '' ? roots[0]! : roots.find((r) => r.name === key)!;
      rel = '';
    } else {
      try {
        ({ root, rel } = splitKey(roots, key));
      } catch {
        continue;
      }
    }
    const segs = rel === '' ? [] : rel.split('/').filter((s) => s !== '' && s !== '.');
    if (segs.includes('..')) continue;
    const reservedAt = segs.findIndex(isReserved);
    if (reservedAt >= 0) {
      // Only an info/exclude edit matters inside .git: rescan the repo it belongs to.
      if (segs.slice(reservedAt).join('/').toLowerCase() === '.git/info/exclude') segs.length = reservedAt;
      else continue;
    } else if (segs[segs.length - 1] === '.gitignore') {
      segs.pop();
    }
    const prefix = keyPrefixFor(roots, root);
    // Below a directory the previous scan could not list: that whole directory is looked at again.
    for (let i = 1; i < segs.length; i++) {
      const above = previous.get(prefix + segs.slice(0, i).join('/'));
      if (above?.type === 'uncaptured' && above.dir) {
        segs.length = i;
        break;
      }
    }
    const r = segs.join('/');
    targets.set(r === '' ? prefix.replace(/\/$/, '') : prefix + r, { root, rel: r });
  }
  // A target inside another target's subtree is covered by that one.
  const kept: DirtyTarget[] = [];
  for (const [k, t] of targets) {
    const segs = k === '' ? [] : k.split('/');
    let covered = targets.has('') && k !== '';
    for (let i = 1; i < segs.length && !covered; i++) covered = targets.has(segs.slice(0, i).join('/'));
    if (!covered) kept.push(t);
  }
  return kept;
}

/** Every directory key the manifest has an entry below. */
export function buildDirPrefixes(m: Manifest): Set<string> {
  const dirs = new Set<string>();
  for (const k of m.keys()) {
    let i = k.lastIndexOf('/');
    while (i > 0) {
      const d = k.slice(0, i);
      if (dirs.has(d)) break;
      dirs.add(d);
      i = d.lastIndexOf('/');
    }
  }
  return dirs;
}

/** Listing-cache keys of the directories holding `touched` keys; null when a key belongs to no root (then no plan is carried). */
export function touchedDirs(roots: SnapshotRoot[], touched: Iterable<string>): Set<string> | null {
  const dirs = new Set<string>();
  try {
    for (const k of touched) {
      const { root, rel } = splitKey(roots, k);
      dirs.add(`${root.dir}\0${rel.includes('/') ? rel.slice(0, rel.lastIndexOf('/')) : ''}`);
    }
  } catch {
    return null; // a key no root holds: carry nothing
  }
  return dirs;
}
