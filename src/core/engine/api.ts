import { z } from 'zod';
import { WaypointError, errorMessage, isWaypointError, type WaypointErrorCode } from '../model/errors';
import { formatZodError, parseInput } from '../model/validate';
import type { Engine } from './engine';
import { OPERATIONS, OPERATION_NAMES, type EngineApi, type OperationName } from './operations';
import { DEFAULT_RPC_CONNECT_TIMEOUT_MS, DEFAULT_RPC_TIMEOUT_MS, RpcTransportError, postLoopback } from './loopback';

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

/** Calls that change nothing: one that got no answer can simply be asked again. */
const READ_ONLY = new Set<RpcMethod>(OPERATION_NAMES.filter((n) => OPERATIONS[n].kind === 'query'));

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
      engine.eventLog.assertOwned();
      const result = await op.run(engine, parseInput(op.input, a, op.label));
      return name === 'info' ? { ...(result as object), relayed } : result;
    };
  }
  return api as unknown as EngineApi;
}

export const RpcRequest = z.strictObject({
  method: z.enum(RPC_METHODS),
  /** One argument, validated below (localApi) against the operation's schema: the door the engine's typed methods rely on. */
  arg: z.unknown().optional(),
});

export type RpcResponse = { ok: true; result: unknown } | { ok: false; error: { code: WaypointErrorCode | 'internal'; message: string; details?: Record<string, unknown> } };

/** Refusals whose details a caller acts on (when to retry, what the person must decide): they travel with the error. */
const CODES_WITH_DETAILS: ReadonlySet<string> = new Set<WaypointErrorCode>(['retry_later', 'held', 'limit']);

/** The owner's side of `POST /rpc`. Errors travel as data, with their code, and change nothing. */
export async function serveRpc(engine: Engine, body: unknown): Promise<RpcResponse> {
  const req = RpcRequest.safeParse(body);
  if (!req.success) return { ok: false, error: { code: 'invalid_input', message: `Invalid RPC request: ${formatZodError(req.error)}` } };
  const api = localApi(engine, true) as unknown as Record<RpcMethod, (a?: unknown) => Promise<unknown>>;
  try {
    return { ok: true, result: await api[req.data.method](req.data.arg) };
  } catch (e) {
    const details = isWaypointError(e) && CODES_WITH_DETAILS.has(e.code) && e.details ? { details: e.details } : {};
    return { ok: false, error: { code: isWaypointError(e) ? e.code : 'internal', message: errorMessage(e), ...details } };
  }
}

export const RPC_PATH = '/rpc';

export interface RemoteApiOptions {
  /** How long the whole call may take once connected (the owner's answer); default 120 s. */
  timeoutMs?: number;
  /** How long to wait for the TCP connection; default 5 s. */
  connectTimeoutMs?: number;
  /** Who the owner is (`pid 123 on host, since …`), for error messages. */
  owner?: string;
  /** Sent with every call: the store this caller means (see folderIdentity.ts); an owner of another refuses. */
  headers?: Record<string, string>;
}

export { DEFAULT_RPC_TIMEOUT_MS, DEFAULT_RPC_CONNECT_TIMEOUT_MS, RpcTransportError, postLoopback };

function refusalText(text: string): string {
  try {
    const m = (JSON.parse(text) as { error?: { message?: unknown } }).error?.message;
    if (typeof m === 'string') return m.slice(0, 300);
  } catch {
    // not JSON: shown as it is
  }
  return text.slice(0, 300);
}

/** Calls an owner's engine over its loopback endpoint; rejections are WaypointErrors with the owner's code and message. */
export function remoteApi(endpoint: { url: string; token: string }, opts: RemoteApiOptions = {}): EngineApi {
  const base = new URL(endpoint.url);
  const url = new URL(RPC_PATH, base);
  const who = `The store's owner${opts.owner ? `, ${opts.owner},` : ''} at ${base.origin}`;
  const timeouts = { timeoutMs: opts.timeoutMs ?? DEFAULT_RPC_TIMEOUT_MS, connectTimeoutMs: opts.connectTimeoutMs ?? DEFAULT_RPC_CONNECT_TIMEOUT_MS };
  const call = async (method: RpcMethod, arg?: unknown): Promise<unknown> => {
    let res: { status: number; text: string };
    try {
      res = await postLoopback(url, { ...opts.headers, 'content-type': 'application/json', authorization: `Bearer ${endpoint.token}` }, JSON.stringify({ method, arg }), timeouts);
    } catch (e) {
      if (!(e instanceof RpcTransportError)) throw e;
      const fate = e.delivered && !READ_ONLY.has(method) ? ` The call '${method}' may or may not have been carried out; check before repeating it.` : '';
      throw new RpcTransportError(`${who} did not answer the call '${method}': ${e.message}.${fate}`, e.delivered);
    }
    const { status, text } = res;
    if (status === 409) throw new WaypointError('locked', `${who} serves another folder's store and refused the call '${method}' (nothing was done): ${refusalText(text)}`, { foreignOwner: true });
    if (status !== 200) throw new WaypointError('io', `${who} refused the call (${status}): ${text.slice(0, 300)}`);
    let body: RpcResponse;
    try {
      body = JSON.parse(text) as RpcResponse;
    } catch {
      throw new WaypointError('io', `${who} answered something that is not JSON.`);
    }
    if (!body || typeof body !== 'object' || typeof body.ok !== 'boolean') throw new WaypointError('io', `${who} answered something that is not an RPC response.`);
    if (!body.ok) {
      const d = body.error.details;
      const details = CODES_WITH_DETAILS.has(body.error.code) && d && typeof d === 'object' && !Array.isArray(d) ? d : undefined;
      throw new WaypointError(body.error.code === 'internal' ? 'io' : body.error.code, body.error.message, details);
    }
    return body.result;
  };
  const methods = new Set<string>(RPC_METHODS);
  // Only real RPC names become calls: `then` must stay undefined so awaiting the API is not mistaken for a promise.
  return new Proxy({} as EngineApi, {
    get: (_t, name) => (typeof name === 'string' && methods.has(name) ? (arg?: unknown) => call(name as RpcMethod, arg) : undefined),
  });
}
