import { WaypointError, notFound } from '../model/errors';
import type { SideEffect } from '../model/schema';
import { boundedJson } from '../model/validate';
import type { NotCapturedReport } from './checkpointCapture';
import type { EngineCore } from './engineCore';
import { BeginSideEffectInput, EndSideEffectInput } from './inputs';

export type SideEffectDecision = 'proceed' | 'already_done' | 'in_doubt';

/**
 * Side effects: write-ahead intents under the agent's keys. An intent is durable
 * before the agent is told to go ahead; the ledger (not the idempotency table)
 * answers a repeated begin, so a resumed task never repeats a `done` effect
 * unknowingly. Over the engine's core (as rollbacks.ts is).
 */
export class SideEffects {
  constructor(private readonly core: EngineCore) {}

  /**
   * `proceed` only once the intent is durable; `already_done` with the recorded
   * result if the key completed before; `in_doubt` if an intent exists with no
   * outcome (the caller must verify before repeating, then report with end).
   */
  async begin(input: BeginSideEffectInput): Promise<{ taskId: string; key: string; decision: SideEffectDecision; result?: unknown; checkpointId?: string; attempt: number } & NotCapturedReport> {
    const args = boundedJson(input.args, 'side effect args');
    const owner = this.core.ownerOf(input.owner);
    type Begun = { taskId: string; key: string; decision: SideEffectDecision; result?: unknown; checkpointId?: string; attempt: number } & NotCapturedReport;
    // Not keyed by the idempotency table: the ledger itself is the record of this key, and
    // answers a repeat (done, or in doubt) even on a store opened read-only.
    return this.core.run<Begun>(
      'effect.begin',
      `effect.begin:${input.taskId}:${input.key}`,
      async () => {
        const task = this.core.requireTask(input.taskId);
        const existing = this.core.queries.sideEffect(task.id, input.key);
        this.core.requireActive(task, 'begin a side effect');
        if (input.stepId && !this.core.queries.step(task.id, input.stepId)) throw notFound(`step of task ${task.id}`, input.stepId);
        const stepId = input.stepId ?? this.core.queries.steps(task.id).find((s) => s.status === 'in_progress')?.id ?? null;
        const attempt = (existing?.attempts ?? 0) + 1;
        const { event, checkpoint, report } = await this.core.captureCheckpoint(task, 'before_side_effect', stepId, input.description.slice(0, 200));
        const intent = this.core.ev(
          'side_effect.intent',
          task,
          owner.id,
          { key: input.key, stepId, kind: input.kind, description: input.description, args, attempt },
          `effect.intent:${task.id}:${input.key}:${attempt}`,
        );
        return { result: { taskId: task.id, key: input.key, decision: 'proceed' as const, checkpointId: checkpoint.id, attempt, ...report }, events: [event, intent] };
      },
      {
        keyed: false,
        // Answered from the ledger even on a store opened read-only.
        space: false,
        repeat: () => {
          const task = this.core.requireTask(input.taskId);
          const existing = this.core.queries.sideEffect(task.id, input.key);
          // The answer waits until the events that made the ledger row are durable.
          const seq = this.core.queries.lastSideEffectSeq(task.id, input.key);
          if (existing?.status === 'done') return { result: { taskId: task.id, key: input.key, decision: 'already_done' as const, result: existing.result, attempt: existing.attempts }, seq };
          if (existing && (existing.status === 'intent' || existing.status === 'in_doubt')) return { result: { taskId: task.id, key: input.key, decision: 'in_doubt' as const, attempt: existing.attempts }, seq };
          return null;
        },
      },
    );
  }

  async end(input: EndSideEffectInput): Promise<{ taskId: string; key: string; state: SideEffect['status'] }> {
    const result = boundedJson(input.result, 'side effect result');
    const by = input.by ?? 'agent';
    const owner = this.core.ownerOf(input.owner);
    const pre = this.core.queries.sideEffect(input.taskId, input.key);
    const key = input.idempotencyKey ?? `effect.end:${input.taskId}:${input.key}:${pre?.attempts ?? 0}`;
    return this.core.run('effect.end', key, () => {
      const task = this.core.requireTask(input.taskId);
      const effect = this.core.queries.sideEffect(task.id, input.key);
      if (!effect) throw new WaypointError('not_found', `Task ${task.id} has no side effect '${input.key}'; begin it first.`);
      if (effect.status === 'done' || effect.status === 'failed') {
        throw new WaypointError('illegal_transition', `Side effect '${input.key}' of task ${task.id} is already ${effect.status}.`);
      }
      const status = input.ok ? ('done' as const) : ('failed' as const);
      const event = input.ok
        ? this.core.ev('side_effect.done', task, by === 'agent' ? owner.id : null, { key: input.key, result, by }, '')
        : this.core.ev('side_effect.failed', task, by === 'agent' ? owner.id : null, { key: input.key, error: input.error!, by }, '');
      return { events: [event], result: { taskId: task.id, key: input.key, state: status } };
    });
  }
}
