import * as vscode from 'vscode';
import type { CheckpointMeta } from '../core/model/schema';
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

  private async checkpoint(id: string): Promise<CheckpointMeta | null> {
    if (id === EMPTY_SIDE) return null;
    const engine = await this.host.get();
    const c = engine.queries.checkpoint(id);
    if (!c) throw vscode.FileSystemError.FileNotFound(`checkpoint ${id}`);
    return c;
  }

  async stat(uri: vscode.Uri): Promise<vscode.FileStat> {
    const { checkpointId, key } = parse(uri);
    const c = await this.checkpoint(checkpointId);
    const bytes = await this.read(c, key);
    return { type: vscode.FileType.File, ctime: c?.createdAt ?? 0, mtime: c?.createdAt ?? 0, size: bytes.length, permissions: vscode.FilePermission.Readonly };
  }

  async readFile(uri: vscode.Uri): Promise<Uint8Array> {
    const { checkpointId, key } = parse(uri);
    return this.read(await this.checkpoint(checkpointId), key);
  }

  private async read(c: CheckpointMeta | null, key: string): Promise<Uint8Array> {
    if (!c) return new Uint8Array();
    const engine = await this.host.get();
    if (!engine.workspaceSnapshots) throw vscode.FileSystemError.Unavailable('this store keeps no file snapshots');
    return (await engine.workspaceSnapshots.fileAt(c, key)) ?? new Uint8Array();
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
