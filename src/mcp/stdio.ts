import { randomUUID } from 'node:crypto';
import { mcpSdk } from './lazySdk';
import type { Engine } from '../core/engine/engine';
import type { Logger } from '../core/log';
import { errorMessage } from '../core/model/errors';
import { localApi, type EngineApi } from '../core/engine/api';
import { MCP_LEASE_TTL_MS, startOwnerEndpoint, type OwnerEndpoint } from './owner';
import { connectRpcRelay, type RpcRelay } from './rpcRelay';
import { resolveStore, storeDirOf } from '../ownership/resolve';
import { createMcpServer, localDispatch, type Dispatch } from './server';
import { toolError, type AgentRollbackPolicy, type RollbackHandler } from './tools';
import { headlessRollback } from './headlessRollback';
import { keepLeases, type LeaseKeeper } from './leaseKeeper';

/**
 * `waypoint mcp`: MCP over stdio for an agent that starts Waypoint itself. It always
 * runs its own MCP server (server.ts), over the engine API wherever the store is: the
 * owner's `/rpc` when another process serves the store (the relay protocol the CLI and
 * windows use, see rpcRelay.ts), or the store itself, owned for its lifetime (and then
 * it serves HTTP too, so the next process finds it). The switch is resolveStore's
 * (ownOrRelay.ts). If the owner it relays to goes away, it resolves again — and usually
 * becomes the owner.
 * Stdout carries MCP frames only; every log line goes to the logger (stderr).
 */
export interface StdioOptions {
  workspace: string;
  log: Logger;
  agentRollback: AgentRollbackPolicy;
  rollback?: RollbackHandler;
  /** How long to wait for a store held by a process without an endpoint. */
  waitMs?: number;
  /** Sweep interval when owning; dead relay sessions' tasks are interrupted by it. */
  sweepIntervalMs?: number;
}

/** Where this server's tools run: the owner's engine over `/rpc`, or the store this process owns. */
type Backend = { kind: 'relay'; relay: RpcRelay; dispatch: Dispatch; keeper: LeaseKeeper } | { kind: 'owner'; engine: Engine; endpoint: OwnerEndpoint; dispatch: Dispatch; keeper: LeaseKeeper };

export async function runStdio(o: StdioOptions): Promise<void> {
  const log = o.log.child('mcp');
  // One lease owner for the agent's whole connection, owning or relaying: a switch between
  // the two leaves its tasks its own. Our pid: when this process dies, its tasks are interrupted.
  const sessionOwner = { id: `mcp:stdio-${randomUUID()}`, pid: process.pid };
  /** The same tools either way, over the engine API wherever the store is (the one relay protocol: /rpc). */
  const session = (api: EngineApi, agentRollback: AgentRollbackPolicy, rollback: RollbackHandler) => ({
    dispatch: localDispatch({ engine: api, owner: sessionOwner, leaseTtlMs: MCP_LEASE_TTL_MS, agentRollback, rollback }),
    // Our stdin is the agent's connection: while it is open the agent's tasks keep their lease.
    keeper: keepLeases({ engine: api, owner: sessionOwner, ttlMs: MCP_LEASE_TTL_MS, log }),
  });
  const resolve = () =>
    resolveStore<Backend>({
      workspace: o.workspace,
      log: o.log,
      waitMs: o.waitMs ?? 15_000,
      ownerKind: 'waypoint-mcp',
      sweepIntervalMs: o.sweepIntervalMs ?? 5_000,
      serving: async (d, owner, claim) => {
        const relay = await connectRpcRelay(d, { storeDir: storeDirOf(o.workspace), owner, claim });
        log.info(`relaying to the owner at ${d.url} (pid ${d.pid}) over /rpc; agents' rollbacks follow its setting (agentRollback = ${relay.agentRollback})`);
        // The owner's setting and person decide an agent's rollback, as for an agent connected to it directly.
        return { kind: 'relay', relay, ...session(relay.api, relay.agentRollback, relay.rollback) };
      },
      own: async (engine) => {
        const rollback = o.rollback ?? headlessRollback(engine);
        const endpoint = await startOwnerEndpoint({ engine, log: o.log, agentRollback: o.agentRollback, rollback });
        log.info(`owning the store ${engine.storeDir}; also serving ${endpoint.http.url}`);
        return { kind: 'owner', engine, endpoint, ...session(localApi(engine), o.agentRollback, rollback) };
      },
    });

  let backend: Backend = await resolve();
  let switching: Promise<void> | null = null;
  /** Looks for the store's owner again (and usually becomes it); calls wait for this. */
  const switchOver = (b: Backend, why: string, release: () => Promise<void>) => {
    b.keeper.dispose();
    if (backend !== b || closed || switching) return;
    log.warn(why);
    switching = (async () => {
      await release();
      try {
        backend = await resolve();
        watch(backend);
      } catch (e) {
        log.error(`could not reach the store's new owner: ${errorMessage(e)}`);
      }
    })().finally(() => (switching = null));
  };
  const watch = (b: Backend) => {
    if (b.kind === 'owner') {
      // Stalled past its lease and replaced: stop owning (nothing of ours is acknowledged
      // after the takeover) and relay to whoever owns the store now.
      const sub = b.engine.eventLog.onDidLoseOwnership((why) => {
        sub.dispose();
        switchOver(b, `${why.message} Switching to relay.`, async () => {
          await b.endpoint.close().catch(() => undefined);
          await b.engine.close().catch(() => undefined);
        });
      });
      return;
    }
    b.relay.onLost((why) => switchOver(b, `${why.message}; looking for the store's new owner`, async () => b.relay.close()));
  };
  watch(backend);

  let closed = false;
  const dispatch: Dispatch = async (name, args) => {
    if (switching) await switching;
    let b = backend;
    if (b.kind === 'relay' && b.relay.isLost()) {
      // The last look found no owner to reach or take over: look again now.
      switchOver(b, "looking again for the store's owner", async () => undefined);
      if (switching) await switching;
      b = backend;
      if (b.kind === 'relay' && b.relay.isLost()) return toolError("The Waypoint owner went away and this server could not reach the store's new owner yet. Call the tool again.");
    }
    if (b.kind === 'owner') {
      try {
        b.engine.eventLog.assertOwned();
      } catch (e) {
        return toolError(errorMessage(e));
      }
    }
    return b.dispatch(name, args);
  };

  const server = createMcpServer(dispatch);
  const transport = new (mcpSdk().StdioServerTransport)();
  const done = new Promise<string>((r) => {
    transport.onclose = () => r('transport closed');
    process.stdin.once('end', () => r('stdin ended'));
    process.stdin.once('close', () => r('stdin closed'));
    process.once('SIGINT', () => r('SIGINT'));
    process.once('SIGTERM', () => r('SIGTERM'));
    process.once('SIGHUP', () => r('SIGHUP'));
  });
  await server.connect(transport);
  const why = await done;
  closed = true;
  log.info(`stopping: ${why}`);
  if (switching) await switching;
  await server.close().catch(() => undefined);
  const b = backend;
  b.keeper.dispose();
  if (b.kind === 'relay') b.relay.close();
  else {
    await b.endpoint.close();
    await b.engine.close();
  }
}
