import * as vscode from 'vscode';
import { isWaypointError } from '../core/model/errors';
import { Disposable } from './disposable';
import type { EngineHost } from './engineHost';
import { keyOf, keyUri } from './windowFolders';

/**
 * Checkpoint content, read-only, under the `waypoint:` scheme:
 *   waypoint:<the file's own path>?<checkpointId>
 * so comparisons open in VS Code's own diff editor (`vscode.diff`) and multi-file
 * diff editor (`vscode.changes`). The path is the workspace file's, as git's
 * `git:` URIs do: both sides of a comparison then name the same file (the
 * multi-file diff editor shows a different path on each side as a rename), and the
 * breadcrumb shows the file, not a checkpoint id. A path the checkpoint lacks reads
 * as empty (so a deleted or added file still has two sides to compare).
 */
export const CHECKPOINT_SCHEME = 'waypoint';

/** The empty side of a comparison (a file that does not exist on that side). */
export const EMPTY_SIDE = 'empty';

/** A key's file in this window (its folder's own path, as `git:` URIs name files). */
function fileOfKey(key: string): vscode.Uri {
  const uri = keyUri(key);
  // A key of a folder no longer in the window still names its content: under the first folder's path, as before.
  if (uri) return uri;
  const f = vscode.workspace.workspaceFolders?.[0];
  if (!f) throw new Error('Open a folder first.');
  return vscode.Uri.joinPath(f.uri, ...key.split('/'));
}

export function checkpointUri(checkpointId: string, key: string): vscode.Uri {
  return vscode.Uri.from({ scheme: CHECKPOINT_SCHEME, path: fileOfKey(key).path, query: checkpointId });
}

/** What a file would become that is no checkpoint's (an agent-only rollback's merged content): the store's object by hash. */
const OBJECT_SIDE = 'object:';
export function objectUri(hash: string, key: string): vscode.Uri {
  return checkpointUri(`${OBJECT_SIDE}${hash}`, key);
}

/** The checkpoint and the path key a `waypoint:` URI names; also the older `waypoint:/<checkpointId>/<key>` form. */
export function parseCheckpointUri(uri: vscode.Uri): { checkpointId: string; key: string } {
  if (uri.query) {
    const key = keyOf(vscode.Uri.file(uri.path));
    if (!key) throw vscode.FileSystemError.FileNotFound(uri);
    return { checkpointId: uri.query, key };
  }
  const m = /^\/([^/]+)\/(.+)$/.exec(uri.path);
  if (!m) throw vscode.FileSystemError.FileNotFound(uri);
  return { checkpointId: m[1], key: m[2] };
}

export class CheckpointFileSystem extends Disposable implements vscode.FileSystemProvider {
  private readonly _onDidChangeFile = this.register(new vscode.EventEmitter<vscode.FileChangeEvent[]>());
  readonly onDidChangeFile = this._onDidChangeFile.event;

  constructor(private readonly host: EngineHost) {
    super();
    this.register(vscode.workspace.registerFileSystemProvider(CHECKPOINT_SCHEME, this, { isReadonly: true, isCaseSensitive: true }));
  }

  async stat(uri: vscode.Uri): Promise<vscode.FileStat> {
    const { checkpointId, key } = parseCheckpointUri(uri);
    const f = await this.file(checkpointId, key);
    return { type: vscode.FileType.File, ctime: f.createdAt, mtime: f.createdAt, size: f.bytes.length, permissions: vscode.FilePermission.Readonly };
  }

  async readFile(uri: vscode.Uri): Promise<Uint8Array> {
    const { checkpointId, key } = parseCheckpointUri(uri);
    return (await this.file(checkpointId, key)).bytes;
  }

  /** In-process while this window owns the store (no copy through base64); from the owner while it relays. */
  private async file(checkpointId: string, key: string): Promise<{ createdAt: number; bytes: Uint8Array }> {
    if (checkpointId === EMPTY_SIDE) return { createdAt: 0, bytes: new Uint8Array() };
    const api = await this.host.api();
    const engine = this.host.current;
    if (checkpointId.startsWith(OBJECT_SIDE)) {
      const hash = checkpointId.slice(OBJECT_SIDE.length);
      try {
        return { createdAt: 0, bytes: Buffer.from((await api.objectFile({ hash })).base64, 'base64') };
      } catch (e) {
        if (isWaypointError(e) && (e.code === 'not_found' || e.code === 'invalid_input')) throw vscode.FileSystemError.FileNotFound(`content ${hash}`);
        throw e;
      }
    }
    if (engine) {
      const c = engine.queries.checkpoint(checkpointId);
      if (!c) throw vscode.FileSystemError.FileNotFound(`checkpoint ${checkpointId}`);
      if (!engine.workspaceSnapshots) throw vscode.FileSystemError.Unavailable('this store keeps no file snapshots');
      return { createdAt: c.createdAt, bytes: (await engine.workspaceSnapshots.fileAt(c, key)) ?? new Uint8Array() };
    }
    try {
      const r = await api.checkpointFile({ checkpointId, path: key });
      return { createdAt: r.createdAt, bytes: r.base64 === null ? new Uint8Array() : Buffer.from(r.base64, 'base64') };
    } catch (e) {
      if (isWaypointError(e) && e.code === 'not_found') throw vscode.FileSystemError.FileNotFound(`checkpoint ${checkpointId}`);
      throw e;
    }
  }

  readDirectory(): [string, vscode.FileType][] {
    return [];
  }
  watch(): vscode.Disposable {
    return new vscode.Disposable(() => undefined);
  }
  createDirectory(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }
  writeFile(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }
  delete(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }
  rename(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }
}
