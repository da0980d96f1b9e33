import { randomUUID } from 'node:crypto';
import { Engine } from '../core/engine/engine';
import type { Logger } from '../core/log';
import { WaypointError, errorMessage, isWaypointError } from '../core/model/errors';
import { describeOwner, type LockInfo } from '../core/store/ownerLock';
import { storeDirOf, type Discovery } from './discovery';
import { ownOrRelay, type StoreClaimHeader } from './ownOrRelay';
import { storeRootsOf } from './storeRoots';
import type { SnapshotRoot } from '../core/snapshot';
import * as path from 'node:path';
import { isPostgresUrl } from '../core/store/postgres/connection';

/**
 * The short-lived surfaces' way through the one switch (ownOrRelay.ts): relay to a
 * serving owner, own a free store, and while the store is held by a process without
 * an endpoint (a CLI command mid-run, an owner still starting), wait a little and
 * look again, then give a clear error.
 */
export interface ResolveOptions<T> {
  workspace: string;
  log: Logger;
  /** How long to wait for a busy store. */
  waitMs: number;
  /** Connects to a serving owner; a rejection means "not reachable now", and the store is looked at again. */
  serving(d: Discovery, owner: LockInfo, claim: StoreClaimHeader): Promise<T>;
  own(engine: Engine): Promise<T>;
  /** Names the owner in the lock (`waypoint-mcp`), so others can say whom they relay to. */
  ownerKind?: string;
  /** Engine options for owning (sweep timer for long-lived owners). */
  sweepIntervalMs?: number;
  /** Files over this many bytes are recorded without content, when this process owns the store (an owner applies its own). */
  maxFileBytes?: number;
  /** The team store URL (postgresql://…) the engine records into when this process owns the workspace. */
  teamStore?: string;
  /**
   * Asked once, when nobody owns the store: a background owner another call started and
   * that is not serving yet is waited for (true: look again); false opens the store here.
   * (A call that owned the store starts one when it is done: backgroundStart.ts.)
   */
  awaitStartingOwner?: () => Promise<boolean>;
}

export { storeDirOf };
export { storeClaimHeaders, type StoreClaimHeader } from './ownOrRelay';

/**
 * What opening a folder's store takes: the store (the folder's own, or the multi-root
 * window's it links to), the folder that holds it, and that window's roots, verified
 * (see storeRoots.ts). A CLI started in any folder of the window opens the same store
 * with the same roots the window would.
 */
export interface StoreLocation {
  storeDir: string;
  /** The store's home folder: the window's first folder, or the folder itself. */
  workspace: string;
  roots: SnapshotRoot[] | null;
}

export function storeLocationOf(workspace: string): StoreLocation {
  const storeDir = storeDirOf(workspace);
  const roots = storeRootsOf(storeDir);
  return { storeDir, workspace: roots ? roots[0]!.dir : path.resolve(workspace), roots };
}

export async function resolveStore<T>(o: ResolveOptions<T>): Promise<T> {
  const dir = storeDirOf(o.workspace);
  const log = o.log.child('mcp');
  let deadline = Date.now() + o.waitMs;
  // The team store an agent's MCP server or hook inherits from its environment (the CLI passes its --store).
  const envStore = process.env.WAYPOINT_STORE;
  const teamStore = o.teamStore ?? (isPostgresUrl(envStore) ? envStore.trim() : undefined);
  let lastProblem = '';
  let awaitStarting = o.awaitStartingOwner;
  for (;;) {
    const s = ownOrRelay(dir, o.log);
    if (s.kind === 'relay') {
      try {
        return await o.serving(s.discovery, s.owner, s.headers);
      } catch (e) {
        // The owner may be shutting down, or dead (then the next look takes it over); look again.
        const problem = `it is owned by ${describeOwner(s.owner)}, which serves ${s.discovery.url} but did not answer (${errorMessage(e)})`;
        // Once per distinct problem: a retry loop must not flood stderr.
        if (problem !== lastProblem) log.warn(problem);
        lastProblem = problem;
      }
    } else if (s.kind === 'own' && awaitStarting) {
      const starting = awaitStarting;
      awaitStarting = undefined;
      if (await starting()) {
        // The wait for a busy store starts now: the new owner had to open it first.
        deadline = Date.now() + o.waitMs;
        continue;
      }
      continue;
    } else if (s.kind === 'own') {
      let engine: Engine | undefined;
      const at = storeLocationOf(o.workspace);
      // Only a long-lived owner (serve, mcp, the background owner) sweeps on an interval; a
      // call that owns the store for itself closes it when done, so its scans need not keep workers.
      const snapshots = { ...(o.maxFileBytes !== undefined ? { maxFileBytes: o.maxFileBytes } : {}), ...(at.roots ? { roots: at.roots } : {}), releaseWorkersAfterScan: !o.sweepIntervalMs };
      try {
        engine = await Engine.open({ workspace: at.workspace, storeDir: at.storeDir, log: o.log, ...(teamStore ? { teamStore } : {}), sweepIntervalMs: o.sweepIntervalMs, snapshots, store: { lock: { waitMs: 250, ...(o.ownerKind ? { ownerId: `${o.ownerKind}:${randomUUID()}` } : {}) } } });
      } catch (e) {
        if (!(isWaypointError(e) && e.code === 'locked')) throw e;
        lastProblem = 'another process took the store first';
      }
      if (engine) {
        try {
          return await o.own(engine);
        } catch (e) {
          await engine.close().catch(() => undefined);
          throw e;
        }
      }
    } else {
      lastProblem = s.reason;
    }
    if (Date.now() >= deadline) {
      throw new WaypointError('locked', `Cannot reach the Waypoint store in ${dir}: ${lastProblem}. Try again when that process has finished, or stop it.`);
    }
    await new Promise((r) => setTimeout(r, 150 + Math.random() * 100));
  }
}
