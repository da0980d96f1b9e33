import { localApi } from '../core/engine/api';
import type { Engine } from '../core/engine/engine';
import { WaypointError, notFound } from '../core/model/errors';
import type { RollbackHandler, RollbackResult } from './tools';
import { plural } from '../core/model/plural';

type RollbackRequest = Parameters<RollbackHandler>[0];

export interface AgentRollbackOptions {
  /**
   * Under `ask`: the answer when the rollback does not happen (the person declined, or
   * nobody is there to ask), or null to go on.
   */
  ask: (req: RollbackRequest, engine: Engine) => Promise<RollbackResult | null>;
  /** Where the rollback runs: a window's one queue of workspace operations; by default at once. */
  run?: <T>(fn: () => Promise<T>) => Promise<T>;
}

/**
 * The one agent rollback, wherever the store's owner is: the checkpoint must be the
 * task's (a plain refusal before anyone is asked); under `ask` the owner's `ask` decides;
 * the rollback goes through the operation table (validated once, refused by a store this
 * process no longer owns), and a pre_rollback checkpoint makes it undoable.
 */
export function agentRollbackHandler(engine: Engine, o: AgentRollbackOptions): RollbackHandler {
  const api = localApi(engine);
  const run = o.run ?? (<T>(fn: () => Promise<T>) => fn());
  return async (req) => {
    const c = engine.queries.checkpoint(req.checkpointId);
    if (!c) throw notFound('checkpoint', req.checkpointId);
    if (c.taskId !== req.taskId) throw new WaypointError('invalid_input', `Checkpoint ${c.id} does not belong to task ${req.taskId}.`);
    if (req.policy === 'ask') {
      const refused = await o.ask(req, engine);
      if (refused) return refused;
    }
    const r = await run(() => api.rollback({ taskId: req.taskId, checkpointId: req.checkpointId, reason: `agent ${req.owner.id}: ${req.reason}`.slice(0, 2000) }));
    return {
      rolledBack: true,
      preRollbackCheckpointId: r.preRollbackCheckpointId ?? undefined,
      message: `Rolled back ${plural(r.filesWritten + r.filesRemoved, 'file')} to ${r.targetCheckpointId}; steps ${r.abandonedSteps.join(', ') || '(none)'} are abandoned and ready to redo.`,
    };
  };
}

/**
 * Agent rollbacks where no person can be asked (`waypoint serve`, an owning
 * `waypoint mcp`): under `allow` the engine rolls back; under `ask` nobody is there to
 * confirm, so the request is declined with the command the person can run.
 */
export function headlessRollback(engine: Engine): RollbackHandler {
  return agentRollbackHandler(engine, {
    ask: async (req) => ({
      rolledBack: false,
      message:
        `Rollback needs the person's confirmation (agentRollback = ask) and no editor is attached to this store. ` +
        `Ask them to run: waypoint rollback --task ${req.taskId} --to ${req.checkpointId}`,
    }),
  });
}
