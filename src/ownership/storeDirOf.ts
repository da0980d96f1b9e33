import * as path from 'node:path';

/** A workspace's store folder, and the discovery file's name in it (no schema library here: the fast hook path loads this). */
export function storeDirOf(workspace: string): string {
  return path.join(path.resolve(workspace), '.waypoint');
}

export const DISCOVERY_FILE_NAME = 'mcp.json';
