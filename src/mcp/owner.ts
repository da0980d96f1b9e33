import type { Engine } from '../core/engine/engine';
import { RPC_PATH, localApi, serveRpc } from '../core/engine/api';
import { Logger, silentLogger } from '../core/log';
import { errorMessage } from '../core/model/errors';
import { handleHook } from '../hooks';
import { HOOK_AGENT_NAMES, HOOK_ROUTES } from './hookRoutes';
import { removeDiscovery, writeDiscovery } from '../ownership/discovery';
import { dirFingerprint, parseClaimHeader, reconcileFolderIdentity, servesClaim, type ServedStore } from '../core/store/folderIdentity';
import { startHttpServer, type HttpLimits, type HttpServerHandle } from './http';
import { createMcpServer, localDispatch } from './server';
import { keepLeases } from './leaseKeeper';
import { AGENT_ROLLBACK_PATH, serveAgentRollback } from './agentRollbackRoute';
import { toolError, type AgentRollbackPolicy, type RollbackHandler } from './tools';

/**
 * What the owner of a store runs so that others can reach it: the MCP HTTP server
 * (each session a lease owner of its own), `/rpc` (the engine API every relaying
 * process calls: the CLI, other windows, a relaying `waypoint mcp`), agents' rollback
 * requests (agentRollbackRoute.ts), the hook endpoints, the
 * discovery file and the owner lock's endpoint. Used by `waypoint serve`, by an
 * owning `waypoint mcp`, and (later) by the extension host.
 */
export interface OwnerEndpointOptions {
  engine: Engine;
  agentRollback?: AgentRollbackPolicy;
  rollback?: RollbackHandler;
  /** Lease of tasks started by MCP sessions; session pids catch dead sessions sooner. */
  leaseTtlMs?: number;
  log?: Logger;
  port?: number;
  maxBodyBytes?: number;
  /** Connection and session limits of the HTTP server (tests lower them). */
  limits?: Partial<HttpLimits>;
  /** More routes (a background owner's status and hand-over); not counted by `onCall`. */
  routes?: Record<string, (body: unknown) => Promise<unknown>>;
  /** Told when a relayed call (an RPC or a hook) starts and ends: a background owner's idleness. */
  onCall?: (phase: 'start' | 'end') => void;
}

export interface OwnerEndpoint {
  http: HttpServerHandle;
  discoveryFile: string;
  close(): Promise<void>;
}

/** 30 minutes: an agent may think for a long time between calls; a dead session is caught by its pid. */
export const MCP_LEASE_TTL_MS = 30 * 60_000;

export async function startOwnerEndpoint(opts: OwnerEndpointOptions): Promise<OwnerEndpoint> {
  const { engine } = opts;
  const log = opts.log ?? silentLogger;
  const hookLog = log.child('hooks');
  const storeDir = engine.storeDir;
  const served = servedStoreOf(storeDir);
  const counted =
    (fn: (body: unknown) => Promise<unknown>) =>
    async (body: unknown): Promise<unknown> => {
      opts.onCall?.('start');
      try {
        return await fn(body);
      } finally {
        opts.onCall?.('end');
      }
    };
  const http = await startHttpServer({
    log,
    checkStoreClaim: (header) => {
      const claim = parseClaimHeader(header);
      return claim && servesClaim(served, claim) ? null : `This Waypoint owner (pid ${process.pid}) serves the store in ${served.dir}, not the one this call came from (a copy of this folder?); nothing was done.`;
    },
    port: opts.port,
    maxBodyBytes: opts.maxBodyBytes,
    limits: opts.limits,
    createSession: ({ sessionId, clientPid, connected }) => {
      const api = localApi(engine);
      // A local client may tell us its pid; otherwise a direct HTTP client lives as long as we do at most.
      const owner = { id: `mcp:${sessionId}`, pid: clientPid ?? process.pid };
      const leaseTtlMs = opts.leaseTtlMs ?? MCP_LEASE_TTL_MS;
      const dispatch = localDispatch({ engine: api, owner, leaseTtlMs, agentRollback: opts.agentRollback ?? 'ask', rollback: opts.rollback });
      // A replaced owner answers every tool call with lost_ownership (its view is stale).
      const server = createMcpServer(async (name, args) => {
        try {
          engine.eventLog.assertOwned();
        } catch (e) {
          return toolError(errorMessage(e));
        }
        return dispatch(name, args);
      });
      // While this session's client is connected its tasks keep their lease; when it goes
      // (it ended the session, died, or dropped its event stream) they run out as before.
      const keeper = keepLeases({ engine: api, owner, ttlMs: leaseTtlMs, connected, log: log.child('lease') });
      server.server.onclose = () => keeper.dispose();
      return server;
    },
    // A hook's refusal is an answer, not a transport failure: the relaying hook logs it and exits 0.
    routes: {
      // The CLI (and any other process) calls the owner's engine here instead of opening the store.
      [RPC_PATH]: counted((body) => serveRpc(engine, body)),
      // A relaying `waypoint mcp` runs its tools over /rpc; an agent's rollback is this owner's to decide (and to ask about).
      [AGENT_ROLLBACK_PATH]: counted((body) => serveAgentRollback({ engine, policy: opts.agentRollback ?? 'ask', rollback: opts.rollback }, body)),
      // One route per agent: the fast hook path posts the agent's raw payload to its own.
      ...Object.fromEntries(
        HOOK_AGENT_NAMES.map((agent) => [
          HOOK_ROUTES[agent],
          counted(async (body: unknown) => {
            try {
              engine.eventLog.assertOwned();
              return { ok: true, ...(await handleHook(engine, agent, body, { log: hookLog })) };
            } catch (e) {
              hookLog.warn(`not recorded: ${errorMessage(e)}`);
              return { ok: false, error: errorMessage(e) };
            }
          }),
        ]),
      ),
      ...opts.routes,
    },
  });
  let discoveryFile: string;
  try {
    discoveryFile = writeDiscovery(storeDir, { url: http.url, token: http.token, pid: process.pid, startedAt: Date.now(), epoch: engine.eventLog.ownerEpoch ?? engine.eventLog.epoch, store: served });
  } catch (e) {
    await http.close();
    throw e;
  }
  // Replaced while stalled: stop advertising this endpoint (its calls answer lost_ownership).
  const lostSub = engine.eventLog.onDidLoseOwnership(() => removeDiscovery(storeDir, http.token));
  let closed: Promise<void> | undefined;
  return {
    http,
    discoveryFile,
    close: () =>
      (closed ??= (async () => {
        lostSub.dispose();
        removeDiscovery(storeDir, http.token);
        await http.close();
      })()),
  };
}

/** The store this owner serves, as it proves it to relays: its folder identity and its directory's device and inode now. */
function servedStoreOf(storeDir: string): ServedStore {
  const { identity } = reconcileFolderIdentity(storeDir);
  const fp = dirFingerprint(storeDir) ?? { dev: identity.dev, ino: identity.ino };
  return { id: identity.id, dir: identity.dir, ...fp };
}
