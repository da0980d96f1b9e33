import * as fs from 'node:fs';
import * as path from 'node:path';
import { storeDirOf } from '../ownership/storeDirOf';

/**
 * A workspace that has recorded into a team store holds its team identity
 * (`.waypoint/workspace-id.json`). Run without the store, a command reads the embedded
 * one, which does not have those tasks: "No tasks yet" or "Unknown task" there most
 * likely means a forgotten --store, so the answer says so. Null when it cannot be that.
 */
export function teamStoreHint(workspace: string, teamStore: string | undefined): string | null {
  if (teamStore !== undefined) return null;
  let used = false;
  try {
    used = fs.existsSync(path.join(storeDirOf(workspace), 'workspace-id.json'));
  } catch {
    used = false;
  }
  return used ? 'This workspace records into a team store; its tasks may be there: pass --store postgresql://… or set WAYPOINT_STORE.' : null;
}
