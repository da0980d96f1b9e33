import * as vscode from 'vscode';
import { isWaypointError } from '../core/model/errors';
import { Disposable } from './disposable';
import type { EngineHost } from './engineHost';

/**
 * Checkpoint content, read-only, under the `waypoint:` scheme:
 *   waypoint:/<checkpointId>/<path key>
 * so comparisons open in VS Code's own diff editor (`vscode.diff`) and multi-file
 * diff editor (`vscode.changes`). A path the checkpoint lacks reads as empty (so a
 * deleted or added file still has two sides to compare).
 */
export const CHECKPOINT_SCHEME = 'waypoint';

/** The empty side of a comparison (a file that does not exist on that side). */
export const EMPTY_SIDE = 'empty';

export function checkpointUri(checkpointId: string, key: string): vscode.Uri {
  return vscode.Uri.from({ scheme: CHECKPOINT_SCHEME, path: `/${checkpointId}/${key}` });
}

function parse(uri: vscode.Uri): { checkpointId: string; key: string } {
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
    const { checkpointId, key } = parse(uri);
    const f = await this.file(checkpointId, key);
    return { type: vscode.FileType.File, ctime: f.createdAt, mtime: f.createdAt, size: f.bytes.length, permissions: vscode.FilePermission.Readonly };
  }

  async readFile(uri: vscode.Uri): Promise<Uint8Array> {
    const { checkpointId, key } = parse(uri);
    return (await this.file(checkpointId, key)).bytes;
  }

  /** In-process while this window owns the store (no copy through base64); from the owner while it relays. */
  private async file(checkpointId: string, key: string): Promise<{ createdAt: number; bytes: Uint8Array }> {
    if (checkpointId === EMPTY_SIDE) return { createdAt: 0, bytes: new Uint8Array() };
    const api = await this.host.api();
    const engine = this.host.current;
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
