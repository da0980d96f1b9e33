import { z } from 'zod';
import { WaypointError, errorMessage, isWaypointError, type WaypointErrorCode } from '../model/errors';
import type { Step } from '../model/schema';
import { formatZodError, parseInput } from '../model/validate';
import type { Engine } from './engine';

/**
 * The engine as other processes see it. Only one process owns a store; every other
 * one (the CLI while VS Code or `waypoint serve` is running) calls the owner's
 * engine through this API over the owner's authenticated loopback HTTP endpoint
 * (`POST /rpc`). Locally the same API is a thin adapter, so the CLI has one code
 * path either way.
 */
export const RPC_METHODS = [
  'startTask',
  'extendPlan',
  'requestReview',
  'completeTask',
  'abandonTask',
  'suspendTask',
  'interruptTask',
  'deleteTask',
  'resumeTask',
  'heartbeat',
  'startStep',
  'completeStep',
  'failStep',
  'skipStep',
  'checkpoint',
  'beginSideEffect',
  'endSideEffect',
  'rollback',
  'undoRollback',
  'diff',
  'gc',
  // queries
  'resumeContext',
  'taskDetail',
  'tasks',
  'allSteps',
  'checkpointFile',
  'events',
  'storage',
  'drift',
  'verify',
  'rebuild',
  'info',
] as const;
export type RpcMethod = (typeof RPC_METHODS)[number];

type Eng = Engine;
export interface EngineApi {
  startTask: (a: Parameters<Eng['startTask']>[0]) => ReturnType<Eng['startTask']>;
  extendPlan: (a: unknown) => ReturnType<Eng['extendPlan']>;
  requestReview: (a: unknown) => ReturnType<Eng['requestReview']>;
  completeTask: (a: unknown) => ReturnType<Eng['completeTask']>;
  abandonTask: (a: unknown) => ReturnType<Eng['abandonTask']>;
  suspendTask: (a: unknown) => ReturnType<Eng['suspendTask']>;
  interruptTask: (a: unknown) => ReturnType<Eng['interruptTask']>;
  deleteTask: (a: unknown) => ReturnType<Eng['deleteTask']>;
  resumeTask: (a: unknown) => ReturnType<Eng['resumeTask']>;
  heartbeat: (a: unknown) => ReturnType<Eng['heartbeat']>;
  startStep: (a: unknown) => ReturnType<Eng['startStep']>;
  completeStep: (a: unknown) => ReturnType<Eng['completeStep']>;
  failStep: (a: unknown) => ReturnType<Eng['failStep']>;
  skipStep: (a: unknown) => ReturnType<Eng['skipStep']>;
  checkpoint: (a: unknown) => ReturnType<Eng['checkpoint']>;
  beginSideEffect: (a: unknown) => ReturnType<Eng['beginSideEffect']>;
  endSideEffect: (a: unknown) => ReturnType<Eng['endSideEffect']>;
  rollback: (a: Parameters<Eng['rollback']>[0]) => ReturnType<Eng['rollback']>;
  undoRollback: (a: unknown) => ReturnType<Eng['undoRollback']>;
  diff: (a: unknown) => ReturnType<Eng['diff']>;
  gc: (a?: Parameters<Eng['gc']>[0]) => ReturnType<Eng['gc']>;
  resumeContext: (taskId: string) => ReturnType<Eng['resumeContext']>;
  taskDetail: (taskId: string) => Promise<ReturnType<Eng['taskDetail']>>;
  tasks: (filter?: Parameters<Eng['tasks']>[0]) => Promise<(ReturnType<Eng['tasks']>[number] & { progress: { done: number; total: number } })[]>;
  /** Every task's steps in one call (a relaying window lists its tree with this and `tasks`). */
  allSteps: () => Promise<Step[]>;
  /** A file as a checkpoint holds it (base64; null when the checkpoint lacks the path), for diff editors in other processes. */
  checkpointFile: (a: unknown) => Promise<{ createdAt: number; base64: string | null }>;
  events: (filter?: Parameters<Eng['events']>[0]) => Promise<ReturnType<Eng['events']>>;
  storage: () => ReturnType<Eng['storage']>;
  drift: (taskId: string) => ReturnType<Eng['drift']>;
  verify: (a?: Parameters<Eng['verify']>[0]) => ReturnType<Eng['verify']>;
  rebuild: () => Promise<void>;
  info: () => Promise<{ storeDir: string; storeId: string; events: number; pid: number; relayed: boolean }>;
}

/** The local adapter: the engine itself, with queries made async like the remote ones. */
export function localApi(engine: Engine, relayed = false): EngineApi {
  return ownedOnly(engine, {
    startTask: (a) => engine.startTask(a),
    extendPlan: (a) => engine.extendPlan(a),
    requestReview: (a) => engine.requestReview(a),
    completeTask: (a) => engine.completeTask(a),
    abandonTask: (a) => engine.abandonTask(a),
    suspendTask: (a) => engine.suspendTask(a),
    interruptTask: (a) => engine.interruptTask(a),
    deleteTask: (a) => engine.deleteTask(a),
    resumeTask: (a) => engine.resumeTask(a),
    heartbeat: (a) => engine.heartbeat(a),
    startStep: (a) => engine.startStep(a),
    completeStep: (a) => engine.completeStep(a),
    failStep: (a) => engine.failStep(a),
    skipStep: (a) => engine.skipStep(a),
    checkpoint: (a) => engine.checkpoint(a),
    beginSideEffect: (a) => engine.beginSideEffect(a),
    endSideEffect: (a) => engine.endSideEffect(a),
    rollback: (a) => engine.rollback(a),
    undoRollback: (a) => engine.undoRollback(a),
    diff: (a) => engine.diff(a),
    gc: (a) => engine.gc(a),
    resumeContext: (id) => engine.resumeContext(id),
    taskDetail: async (id) => engine.taskDetail(id),
    tasks: async (f) =>
      engine.tasks(f).map((t) => {
        const steps = engine.queries.steps(t.id);
        return { ...t, progress: { done: steps.filter((s) => s.status === 'completed' || s.status === 'skipped').length, total: steps.length } };
      }),
    allSteps: async () => engine.queries.allSteps(),
    checkpointFile: async (a) => {
      const { checkpointId, path } = parseInput(CheckpointFileInput, a, 'checkpointFile');
      const c = engine.queries.checkpoint(checkpointId);
      if (!c) throw new WaypointError('not_found', `Unknown checkpoint '${checkpointId}'.`);
      if (!engine.workspaceSnapshots) throw new WaypointError('invalid_input', 'This store keeps no file snapshots.');
      const bytes = await engine.workspaceSnapshots.fileAt(c, path);
      return { createdAt: c.createdAt, base64: bytes ? bytes.toString('base64') : null };
    },
    events: async (f) => engine.events(f),
    storage: () => engine.storage(),
    drift: (id) => engine.drift(id),
    verify: (a) => engine.verify(a),
    rebuild: () => engine.rebuild(),
    info: async () => ({ storeDir: engine.store.dir, storeId: engine.store.storeId, events: engine.store.lastSeq, pid: process.pid, relayed }),
  });
}

/**
 * Every call first checks that this process still owns the store: one that was
 * stalled past its lease and replaced answers nothing — not even a read, whose
 * answer would come from a view the new owner has moved past — but `lost_ownership`.
 */
function ownedOnly(engine: Engine, api: EngineApi): EngineApi {
  const guarded = {} as Record<string, (...a: unknown[]) => Promise<unknown>>;
  for (const [name, fn] of Object.entries(api) as [string, (...a: unknown[]) => Promise<unknown>][]) {
    guarded[name] = async (...a: unknown[]) => {
      engine.store.assertOwned();
      return fn(...a);
    };
  }
  return guarded as unknown as EngineApi;
}

const CheckpointFileInput = z.strictObject({ checkpointId: z.string().min(1).max(200), path: z.string().min(1).max(4096) });

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
