import * as vscode from 'vscode';
import { rootsOfFolders, type WindowRoots } from '../core/engine/workspaceRoots';
import { splitKey, toKey, type SnapshotRoot } from '../core/snapshot';

/**
 * The window's folders as the store's roots, and the two ways between a file and its
 * path key: with one folder a key is the path inside it (`src/a.ts`); with several it
 * starts with the folder's root name (`app/src/a.ts`). Only folders on disk count (a
 * remote or virtual folder has nothing to snapshot); nested folders are captured
 * through the outer one (see rootsOfFolders).
 */
export function windowRoots(): WindowRoots {
  const folders = (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file');
  return rootsOfFolders(folders.map((f) => ({ name: f.name, dir: f.uri.fsPath })));
}

/** Two root lists name the same folders under the same names, in the same order. */
export function sameRoots(a: readonly SnapshotRoot[], b: readonly SnapshotRoot[]): boolean {
  return a.length === b.length && a.every((r, i) => r.name === b[i]!.name && r.dir === b[i]!.dir);
}

/** The file a key names in this window, or undefined for a key of no folder here (a folder since removed). */
export function keyUri(key: string, roots: readonly SnapshotRoot[] = windowRoots().roots): vscode.Uri | undefined {
  if (!roots.length) return undefined;
  try {
    const { root, rel } = splitKey(roots, key);
    return vscode.Uri.joinPath(vscode.Uri.file(root.dir), ...rel.split('/'));
  } catch {
    return undefined;
  }
}

/** The key of a file of this window, or undefined when it is in none of its folders. */
export function keyOf(uri: vscode.Uri, roots: readonly SnapshotRoot[] = windowRoots().roots): string | undefined {
  if (uri.scheme !== 'file' || !roots.length) return undefined;
  const k = toKey(roots, uri.fsPath);
  return k === null || k === '' || !roots.some((r) => k.startsWith(`${r.name}/`) || roots.length === 1) ? undefined : k;
}
