import { z } from 'zod';
import { WaypointError, errorMessage, isWaypointError, type WaypointErrorCode } from '../model/errors';
import { formatZodError, parseInput } from '../model/validate';
import type { Engine } from './engine';
import { OPERATIONS, OPERATION_NAMES, type EngineApi, type OperationName } from './operations';

/**
 * The engine as other processes see it. Only one process owns a store; every other
 * one (the CLI while VS Code or `waypoint serve` is running) calls the owner's
 * engine through this API over the owner's authenticated loopback HTTP endpoint
 * (`POST /rpc`). Locally the same API is a thin adapter, so the CLI has one code
 * path either way. Both are derived from the operation table (operations.ts).
 */
export type { EngineApi };
export const RPC_METHODS = OPERATION_NAMES;
export type RpcMethod = OperationName;

/**
 * The local adapter: each call checks that this process still owns the store (one
 * stalled past its lease and replaced answers nothing — not even a read, whose
 * answer would come from a view the new owner has moved past — but
 * `lost_ownership`), validates its argument against the operation's schema, and
 * runs it.
 */
export function localApi(engine: Engine, relayed = false): EngineApi {
  const api = {} as Record<OperationName, (a?: unknown) => Promise<unknown>>;
  for (const name of OPERATION_NAMES) {
    const op = OPERATIONS[name] as { label: string; input: z.ZodType; run: (e: Engine, a: unknown) => unknown };
    api[name] = async (a?: unknown) => {
      engine.store.assertOwned();
      const result = await op.run(engine, parseInput(op.input, a, op.label));
      return name === 'info' ? { ...(result as object), relayed } : result;
    };
  }
  return api as unknown as EngineApi;
}

export const RpcRequest = z.strictObject({
  method: z.enum(RPC_METHODS),
  /** One argument, as the engine method takes it (validated by the engine itself). */
  arg: z.unknown().optional(),
});

export type RpcResponse = { ok: true; result: unknown } | { ok: false; error: { code: WaypointErrorCode | 'internal'; message: string } };

/** The owner's side of `POST /rpc`. Errors travel as data, with their code, and change nothing. */
export async function serveRpc(engine: Engine, body: unknown): Promise<RpcResponse> {
  const req = RpcRequest.safeParse(body);
  if (!req.success) return { ok: false, error: { code: 'invalid_input', message: `Invalid RPC request: ${formatZodError(req.error)}` } };
  const api = localApi(engine, true) as unknown as Record<RpcMethod, (a?: unknown) => Promise<unknown>>;
  try {
    return { ok: true, result: await api[req.data.method](req.data.arg) };
  } catch (e) {
    return { ok: false, error: { code: isWaypointError(e) ? e.code : 'internal', message: errorMessage(e) } };
  }
}

export const RPC_PATH = '/rpc';

/** Calls an owner's engine over its loopback endpoint; rejections are WaypointErrors with the owner's code and message. */
export function remoteApi(endpoint: { url: string; token: string }, opts: { timeoutMs?: number } = {}): EngineApi {
  const base = new URL(endpoint.url);
  const url = new URL(RPC_PATH, base).toString();
  const call = async (method: RpcMethod, arg?: unknown): Promise<unknown> => {
    let res: Response;
    try {
      res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${endpoint.token}` },
        body: JSON.stringify({ method, arg }),
        // A hung owner accepts connections (the kernel does) but never answers; a watcher must not hang with it.
        signal: opts.timeoutMs ? AbortSignal.timeout(opts.timeoutMs) : undefined,
      });
    } catch (e) {
      throw new WaypointError('io', `The store's owner at ${base.origin} did not answer: ${errorMessage(e)}`);
    }
    let text: string;
    try {
      text = await res.text();
    } catch (e) {
      throw new WaypointError('io', `The store's owner at ${base.origin} stopped answering: ${errorMessage(e)}`);
    }
    if (!res.ok) throw new WaypointError('io', `The store's owner refused the call (${res.status}): ${text.slice(0, 300)}`);
    let body: RpcResponse;
    try {
      body = JSON.parse(text) as RpcResponse;
    } catch {
      throw new WaypointError('io', `The store's owner answered something that is not JSON.`);
    }
    if (!body.ok) throw new WaypointError(body.error.code === 'internal' ? 'io' : body.error.code, body.error.message);
    return body.result;
  };
  const methods = new Set<string>(RPC_METHODS);
  // Only real RPC names become calls: `then` must stay undefined so awaiting the API is not mistaken for a promise.
  return new Proxy({} as EngineApi, {
    get: (_t, name) => (typeof name === 'string' && methods.has(name) ? (arg?: unknown) => call(name as RpcMethod, arg) : undefined),
  });
}
