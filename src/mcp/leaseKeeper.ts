import type { EngineApi } from '../core/engine/operations';
import type { Logger } from '../core/log';
import { errorMessage, isWaypointError } from '../core/model/errors';
import type { LeaseOwner } from '../core/model/schema';
import { ACTIVE_TASK_STATES } from '../core/model/stateMachine';

/**
 * Renews the leases of the tasks one MCP session drives, for as long as its transport is
 * open. An agent that thinks for a long time makes no tool call, and without this its
 * task would look like one whose driver died; a session whose transport closed (the agent
 * exited, its `waypoint mcp` was killed) stops renewing, so its tasks' leases run out as before.
 *
 * The keeper renews a lease only once a third of it has passed since the last renewal (any
 * tool call renews it too), so an agent that calls tools often costs no extra events.
 */
export interface LeaseKeeperOptions {
  engine: Pick<EngineApi, 'tasks' | 'heartbeat'>;
  owner: LeaseOwner;
  /** The session's lease length; the keeper looks every third of it. */
  ttlMs: number;
  log?: Logger;
  /** Whether the agent is still connected; the keeper renews nothing while it is not. */
  connected?: () => boolean;
  /** Overrides how often the keeper looks (tests). */
  intervalMs?: number;
}

export interface LeaseKeeper {
  /** One pass now: renews what needs it and returns the task ids renewed. */
  tick(): Promise<string[]>;
  dispose(): void;
}

export function keepLeases(o: LeaseKeeperOptions): LeaseKeeper {
  const interval = Math.max(50, o.intervalMs ?? Math.floor(o.ttlMs / 3));
  let disposed = false;
  let running: Promise<string[]> | null = null;

  const pass = async (): Promise<string[]> => {
    const renewed: string[] = [];
    if (o.connected && !o.connected()) return renewed;
    const now = Date.now();
    const mine = (await o.engine.tasks({ states: ACTIVE_TASK_STATES })).filter(
      (t) => t.lease?.owner === o.owner.id && t.lease.expiresAt - now <= (o.ttlMs * 2) / 3,
    );
    for (const t of mine) {
      if (disposed) break;
      try {
        await o.engine.heartbeat({ taskId: t.id, owner: o.owner });
        renewed.push(t.id);
      } catch (e) {
        // The task moved on between the list and the renewal (completed, resumed by someone
        // else, interrupted): nothing to keep. A store this process no longer owns: stop.
        if (isWaypointError(e) && e.code === 'lost_ownership') {
          dispose();
          break;
        }
        o.log?.debug(`lease of ${t.id} not renewed: ${errorMessage(e)}`);
      }
    }
    if (renewed.length) o.log?.debug(`renewed the lease of ${renewed.join(', ')} for ${o.owner.id} (its connection is open)`);
    return renewed;
  };

  const tick = (): Promise<string[]> => {
    if (disposed) return Promise.resolve([]);
    // One pass at a time: a slow store must not stack renewals.
    running ??= pass()
      .catch((e) => {
        o.log?.warn(`could not renew leases for ${o.owner.id}: ${errorMessage(e)}`);
        return [] as string[];
      })
      .finally(() => (running = null));
    return running;
  };

  const timer = setInterval(() => void tick(), interval);
  timer.unref();
  const dispose = () => {
    disposed = true;
    clearInterval(timer);
  };
  return { tick, dispose };
}
