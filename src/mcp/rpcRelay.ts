import { remoteApi, RpcTransportError, type EngineApi } from '../core/engine/api';
import { errorMessage } from '../core/model/errors';
import { describeOwner, type LockInfo } from '../core/store/ownerLock';
import type { Discovery } from '../ownership/discovery';
import { ownOrRelay, type StoreClaimHeader } from '../ownership/ownOrRelay';
import { remoteAgentRollback } from './agentRollbackRoute';
import type { AgentRollbackPolicy, RollbackHandler } from './tools';

/**
 * What a relaying `waypoint mcp` stands on: the owner's engine over `/rpc` — the one
 * relay protocol, the CLI's and a relaying window's — plus the owner's word on agents'
 * rollbacks (agentRollbackRoute.ts). The relay runs its own MCP server over `api`, as an
 * owning `waypoint mcp` runs it over its own engine; every call carries this folder's
 * claim, so an owner of another store refuses it before it runs.
 *
 * The owner is watched two ways: a call that fails to reach it, and a look at the owner
 * lock and discovery file every `watchMs` (an agent may be silent for a long time, and a
 * SIGKILLed owner says nothing). Either way `onLost` is told once, and the caller looks
 * for the store's owner again (and usually becomes it).
 */
export interface RpcRelay {
  discovery: Discovery;
  /** The owner's engine; a call that cannot reach the owner marks the relay lost. */
  api: EngineApi;
  /** The owner's agentRollback setting, asked when connecting. */
  agentRollback: AgentRollbackPolicy;
  /** Asks the owner to roll back (its setting, its person). */
  rollback: RollbackHandler;
  /** Called once, when the owner is found gone (not after `close`). */
  onLost(listener: (why: Error) => void): void;
  isLost(): boolean;
  close(): void;
}

export interface RpcRelayOptions {
  storeDir: string;
  owner: LockInfo;
  /** This folder's store claim (ownOrRelay.ts), sent with every call. */
  claim: StoreClaimHeader;
  /** How long the first call to the owner may take before the owner counts as not answering. */
  probeTimeoutMs?: number;
  /** How often the owner lock and discovery file are looked at. */
  watchMs?: number;
}

export const RELAY_PROBE_TIMEOUT_MS = 10_000;
const RELAY_WATCH_MS = 1_000;

/** Connects to the owner `d` serves: one `info` call over /rpc and the policy question must be answered, or it rejects. */
export async function connectRpcRelay(d: Discovery, o: RpcRelayOptions): Promise<RpcRelay> {
  const who = describeOwner(o.owner);
  const probeTimeout = o.probeTimeoutMs ?? RELAY_PROBE_TIMEOUT_MS;
  const probe = remoteApi(d, { owner: who, headers: o.claim, timeoutMs: probeTimeout, connectTimeoutMs: Math.min(5_000, probeTimeout) });
  const agent = remoteAgentRollback(d, o.claim);
  // An owner that drops or ignores us must not hold an agent's MCP server for long at startup:
  // fail soon, and let resolveStore look again (or take a dead owner over).
  await probe.info();
  const agentRollback = await agent.policy();

  let lost = false;
  let closed = false;
  const listeners: ((why: Error) => void)[] = [];
  const markLost = (why: Error) => {
    if (lost || closed) return;
    lost = true;
    clearInterval(watch);
    for (const l of listeners.splice(0)) l(why);
  };
  const remote = remoteApi(d, { owner: who, headers: o.claim });
  // Every engine method, watched: an owner this relay cannot reach is gone as far as it knows.
  const api = new Proxy(remote, {
    get: (t, name) => {
      const m = (t as unknown as Record<string | symbol, unknown>)[name];
      if (typeof m !== 'function') return m;
      return async (arg?: unknown) => {
        try {
          return await (m as (a?: unknown) => Promise<unknown>)(arg);
        } catch (e) {
          if (e instanceof RpcTransportError) markLost(new Error(errorMessage(e)));
          throw e;
        }
      };
    },
  });
  const watch = setInterval(() => {
    let why: string | null;
    try {
      const s = ownOrRelay(o.storeDir);
      why = s.kind === 'relay' && s.discovery.token === d.token ? null : `the Waypoint owner at ${d.url} (${who}) went away`;
    } catch (e) {
      // The store directory cannot be read as this folder's any more (replaced by a link, say): look again from the start.
      why = `the store's owner could not be checked: ${errorMessage(e)}`;
    }
    if (why) markLost(new Error(why));
  }, o.watchMs ?? RELAY_WATCH_MS);
  watch.unref();
  return {
    discovery: d,
    api,
    agentRollback,
    rollback: async (req) => {
      try {
        return await agent.rollback(req);
      } catch (e) {
        if (e instanceof RpcTransportError) markLost(new Error(errorMessage(e)));
        throw e;
      }
    },
    onLost: (l) => {
      if (!closed) listeners.push(l);
    },
    isLost: () => lost,
    close: () => {
      closed = true;
      listeners.length = 0;
      clearInterval(watch);
    },
  };
}
