import { localApi } from '../core/engine/api';
import type { Engine } from '../core/engine/engine';
import { WaypointError, notFound } from '../core/model/errors';
import type { RollbackHandler } from './tools';
import { plural } from '../core/model/plural';

/**
 * Agent rollbacks where no person can be asked (`waypoint serve`, an owning
 * `waypoint mcp`): under `allow` the engine rolls back (a pre_rollback checkpoint
 * makes it undoable); under `ask` nobody is there to confirm, so the request is
 * declined with the command the person can run.
 */
export function headlessRollback(engine: Engine): RollbackHandler {
  return async (req) => {
    // An unknown checkpoint is a plain refusal, before anyone would be asked.
    const c = engine.queries.checkpoint(req.checkpointId);
    if (!c) throw notFound('checkpoint', req.checkpointId);
    if (c.taskId !== req.taskId) throw new WaypointError('invalid_input', `Checkpoint ${c.id} does not belong to task ${req.taskId}.`);
    if (req.policy === 'ask') {
      return {
        rolledBack: false,
        message:
          `Rollback needs the person's confirmation (agentRollback = ask) and no editor is attached to this store. ` +
          `Ask them to run: waypoint rollback --task ${req.taskId} --to ${req.checkpointId}`,
      };
    }
    // Through the operation table: validated once, and refused by a store this process no longer owns.
    const r = await localApi(engine).rollback({ taskId: req.taskId, checkpointId: req.checkpointId, reason: `agent ${req.owner.id}: ${req.reason}`.slice(0, 2000) });
    return {
      rolledBack: true,
      preRollbackCheckpointId: r.preRollbackCheckpointId ?? undefined,
      message: `Rolled back ${plural(r.filesWritten + r.filesRemoved, 'file')} to ${r.targetCheckpointId}; steps ${r.abandonedSteps.join(', ') || '(none)'} are abandoned and ready to redo.`,
    };
  };
}
