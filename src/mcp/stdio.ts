import { randomUUID } from 'node:crypto';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Engine } from '../core/engine/engine';
import type { Logger } from '../core/log';
import { errorMessage } from '../core/model/errors';
import { localApi } from '../core/engine/api';
import { MCP_LEASE_TTL_MS, startOwnerEndpoint, type OwnerEndpoint } from './owner';
import { connectRelay, type Relay } from './relay';
import { resolveStore } from '../ownership/resolve';
import { createMcpServer, localDispatch, type Dispatch } from './server';
import { toolError, type AgentRollbackPolicy, type RollbackHandler } from './tools';
import { headlessRollback } from './headlessRollback';
import { keepLeases, type LeaseKeeper } from './leaseKeeper';

/**
 * `waypoint mcp`: MCP over stdio for an agent that starts Waypoint itself. Relays
 * to the store's owner when one is serving; otherwise owns the store for its
 * lifetime (and serves HTTP too, so a second relay finds it). If the owner it
 * relays to goes away, it resolves again — and usually becomes the owner.
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

type Backend = { kind: 'relay'; relay: Relay; dispatch: Dispatch } | { kind: 'owner'; engine: Engine; endpoint: OwnerEndpoint; dispatch: Dispatch; keeper: LeaseKeeper };

export async function runStdio(o: StdioOptions): Promise<void> {
  const log = o.log.child('mcp');
  const sessionOwner = { id: `mcp:stdio-${randomUUID()}`, pid: process.pid };
  const resolve = () =>
    resolveStore<Backend>({
      workspace: o.workspace,
      log: o.log,
      waitMs: o.waitMs ?? 15_000,
      ownerKind: 'waypoint-mcp',
      sweepIntervalMs: o.sweepIntervalMs ?? 5_000,
      serving: async (d, _lock, claim) => {
        const relay = await connectRelay(d, { clientName: 'waypoint-mcp-stdio', headers: claim });
        log.info(`relaying to the owner at ${d.url} (pid ${d.pid})`);
        return { kind: 'relay', relay, dispatch: relay.dispatch };
      },
      own: async (engine) => {
        const rollback = o.rollback ?? headlessRollback(engine);
        const endpoint = await startOwnerEndpoint({ engine, log: o.log, agentRollback: o.agentRollback, rollback });
        log.info(`owning the store ${engine.storeDir}; also serving ${endpoint.http.url}`);
        const api = localApi(engine);
        const dispatch = localDispatch({ engine: api, owner: sessionOwner, leaseTtlMs: MCP_LEASE_TTL_MS, agentRollback: o.agentRollback, rollback });
        // Our stdin is the agent's connection: while it is open the agent's tasks keep their
        // lease. (A relay's session is kept by the owner it relays to, the same way.)
        const keeper = keepLeases({ engine: api, owner: sessionOwner, ttlMs: MCP_LEASE_TTL_MS, log });
        return { kind: 'owner', engine, endpoint, dispatch, keeper };
      },
    });

  let backend: Backend = await resolve();
  let switching: Promise<void> | null = null;
  const watchRelay = (b: Backend) => {
    if (b.kind === 'owner') {
      // Stalled past its lease and replaced: stop owning (nothing of ours is acknowledged
      // after the takeover) and relay to whoever owns the store now.
      const sub = b.engine.eventLog.onDidLoseOwnership((why) => {
        sub.dispose();
        b.keeper.dispose();
        if (backend !== b || closed) return;
        log.warn(`${why.message} Switching to relay.`);
        switching = (async () => {
          await b.endpoint.close().catch(() => undefined);
          await b.engine.close().catch(() => undefined);
          try {
            backend = await resolve();
            watchRelay(backend);
          } catch (e) {
            log.error(`could not reach the store's new owner: ${errorMessage(e)}`);
          }
        })().finally(() => (switching = null));
      });
      return;
    }
    void b.relay.lost.then((why) => {
      if (backend !== b || closed) return;
      log.warn(`${why.message}; looking for the store's new owner`);
      switching = (async () => {
        await b.relay.close();
        try {
          backend = await resolve();
          watchRelay(backend);
        } catch (e) {
          log.error(`could not take over the store: ${errorMessage(e)}`);
        }
      })().finally(() => (switching = null));
    });
  };
  watchRelay(backend);

  let closed = false;
  const dispatch: Dispatch = async (name, args) => {
    if (switching) await switching;
    const b = backend;
    if (b.kind === 'relay' && b.relay.isLost()) {
      return toolError('The Waypoint owner went away; this server is switching over. Call the tool again.');
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
  const transport = new StdioServerTransport();
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
  if (b.kind === 'relay') await b.relay.close();
  else {
    b.keeper.dispose();
    await b.endpoint.close();
    await b.engine.close();
  }
}
