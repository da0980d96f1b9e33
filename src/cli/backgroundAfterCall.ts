import * as path from 'node:path';
import type { Engine } from '../core/engine/engine';
import { silentLogger } from '../core/log';
import { isPostgresUrl } from '../core/store/postgres/connection';
import { awaitStartingOwner, startBackgroundOwnerAfter } from '../ownership/backgroundStart';
import { storeDirOf } from '../ownership/storeDirOf';

/**
 * The background owner around a call (a command or a hook) that found nobody owning
 * the store: before it owns, it waits for an owner another call is starting; once it has
 * done its work in the store, it starts one, so the next calls are relayed and their
 * checkpoints look only at what changed (backgroundStart.ts); it is started as the call
 * begins to close the store, and waits for the lock. The shipped CLI only
 * (dist/cli.js is what the owner runs as), and never for a team store: its URL may hold
 * a password, which a detached process must not inherit from one call.
 */
export function awaitStartingOwnerOf(workspace: string, teamStore: string | undefined): { awaitStartingOwner?: () => Promise<boolean> } {
  return teamStore === undefined ? { awaitStartingOwner: () => awaitStartingOwner({ storeDir: storeDirOf(workspace) }) } : {};
}

/**
 * Starts the background owner, then closes the store. When an owner was started, content
 * the call's bulk checkpoint stored raw is left for it to compress as it opens the store:
 * the call (a fresh clone's `task start`, a hook the agent waits on) ends without that
 * second or so of work.
 */
export async function closeStartingOwner(engine: Engine, teamStore: string | undefined): Promise<void> {
  let started = false;
  try {
    started = teamStore === undefined && !isPostgresUrl(process.env.WAYPOINT_STORE) && startBackgroundOwnerAfter({ workspace: engine.workspace, storeDir: engine.storeDir, cliPath: path.join(__dirname, 'cli.js'), log: silentLogger });
  } finally {
    // Closed whatever the start did: a store left open would hold its lock until the lease ran out.
    await engine.close({ leaveRawContent: started });
  }
}
