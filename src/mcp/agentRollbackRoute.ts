import { z } from 'zod';
import type { Engine } from '../core/engine/engine';
import { TaskId } from '../core/engine/inputs';
import { postLoopback } from '../core/engine/loopback';
import { WaypointError, errorMessage, isWaypointError, type WaypointErrorCode } from '../core/model/errors';
import { Identifier, LeaseOwner } from '../core/model/schema';
import { formatZodError } from '../core/model/validate';
import { AgentRollbackPolicy, type RollbackHandler, type RollbackResult } from './tools';

/**
 * An agent's rollback request is the one MCP tool that is more than an engine
 * operation: the owner's setting decides it (`agentRollback`) and, under `ask`, the
 * owner asks the person (a VS Code window's modal). A relaying `waypoint mcp` runs
 * every other tool itself over the owner's `/rpc`; for this one it asks the owner here,
 * on the same authenticated endpoint, so an agent beside a window is asked in that
 * window, exactly as one connected to the window directly.
 *
 * `{ kind: 'policy' }` answers the owner's setting (a relay's `waypoint_fork` and
 * `waypoint_rollback` refuse by it before calling anything); `{ kind: 'rollback', … }`
 * runs the owner's handler under the owner's setting.
 */
export const AGENT_ROLLBACK_PATH = '/agent-rollback';

const AgentRollbackRequest = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('policy') }),
  z.strictObject({ kind: z.literal('rollback'), taskId: TaskId, checkpointId: Identifier, reason: z.string().min(1).max(2_000), owner: LeaseOwner }),
]);

type Answer = { ok: true; policy: AgentRollbackPolicy; result?: RollbackResult } | { ok: false; error: { code: WaypointErrorCode | 'internal'; message: string } };

/** The owner's side: its setting, and its handler under that setting. Refusals travel as data. */
export async function serveAgentRollback(o: { engine: Engine; policy: AgentRollbackPolicy; rollback?: RollbackHandler }, body: unknown): Promise<Answer> {
  const req = AgentRollbackRequest.safeParse(body);
  if (!req.success) return { ok: false, error: { code: 'invalid_input', message: `Invalid rollback request: ${formatZodError(req.error)}` } };
  try {
    o.engine.eventLog.assertOwned();
    if (req.data.kind === 'policy') return { ok: true, policy: o.policy };
    if (o.policy === 'deny') throw new WaypointError('invalid_input', `Rollback by agents is turned off in this workspace (setting agentRollback = deny).`);
    if (!o.rollback) throw new WaypointError('invalid_input', 'rollback is not available in the process that owns this store. Tell the person which checkpoint you would restore; they can roll back from VS Code.');
    const { taskId, checkpointId, reason, owner } = req.data;
    return { ok: true, policy: o.policy, result: await o.rollback({ taskId, checkpointId, reason, owner, policy: o.policy }) };
  } catch (e) {
    return { ok: false, error: { code: isWaypointError(e) ? e.code : 'internal', message: errorMessage(e) } };
  }
}

/** Timeouts of the policy question (a probe) and of a rollback (the person may take a while to answer a modal). */
const POLICY_TIMEOUTS = { timeoutMs: 10_000, connectTimeoutMs: 5_000 };
const ROLLBACK_TIMEOUTS = { timeoutMs: 10 * 60_000, connectTimeoutMs: 5_000 };

/** A relay's side: asks the owner at `endpoint` (its MCP URL and token), with the relay's store claim. */
export function remoteAgentRollback(endpoint: { url: string; token: string }, headers: Record<string, string> = {}) {
  const url = new URL(AGENT_ROLLBACK_PATH, new URL(endpoint.url));
  const ask = async (body: unknown, timeouts: typeof POLICY_TIMEOUTS): Promise<Answer & { ok: true }> => {
    const { status, text } = await postLoopback(url, { ...headers, 'content-type': 'application/json', authorization: `Bearer ${endpoint.token}` }, JSON.stringify(body), timeouts);
    if (status !== 200) throw new WaypointError(status === 409 ? 'locked' : 'io', `The store's owner at ${url.origin} refused the rollback request (${status}): ${text.slice(0, 300)}`);
    let a: Answer;
    try {
      a = JSON.parse(text) as Answer;
    } catch {
      throw new WaypointError('io', `The store's owner at ${url.origin} answered something that is not JSON.`);
    }
    if (!a || typeof a !== 'object' || typeof a.ok !== 'boolean') throw new WaypointError('io', `The store's owner at ${url.origin} answered something that is not a rollback answer.`);
    if (!a.ok) throw new WaypointError(a.error.code === 'internal' ? 'io' : a.error.code, a.error.message);
    return a;
  };
  return {
    /** The owner's `agentRollback` setting. */
    policy: async (): Promise<AgentRollbackPolicy> => {
      const p = AgentRollbackPolicy.safeParse((await ask({ kind: 'policy' }, POLICY_TIMEOUTS)).policy);
      if (!p.success) throw new WaypointError('io', `The store's owner at ${url.origin} named no rollback policy.`);
      return p.data;
    },
    /** Runs the owner's handler; the owner applies its own setting (`req.policy` is ours, and not sent). */
    rollback: (async (req) => {
      const a = await ask({ kind: 'rollback', taskId: req.taskId, checkpointId: req.checkpointId, reason: req.reason, owner: req.owner }, ROLLBACK_TIMEOUTS);
      if (!a.result || typeof a.result.rolledBack !== 'boolean') throw new WaypointError('io', `The store's owner at ${url.origin} answered no rollback result.`);
      return a.result;
    }) satisfies RollbackHandler,
  };
}
