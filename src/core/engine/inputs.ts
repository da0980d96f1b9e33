import { z } from 'zod';
import { IdempotencyKey, Identifier, LeaseOwner, Plan } from '../model/schema';
import { FreeJson } from '../model/validate';
import { pathKeyProblem } from '../snapshot/paths';
import { RetryPolicyInput } from './retryPolicy';

/**
 * The engine's inputs, one zod schema per operation, and the type of each. The
 * operation table (operations.ts) parses a call's argument with these once, at the
 * door it enters by (the in-process adapter, the owner's `/rpc`); the engine's
 * methods take the parsed type and never parse again, so validation and its
 * messages live in one place.
 */
const text = (max: number) => z.string().max(max, `must be at most ${max} characters`);
const TaskId = z.string().min(1, 'must not be empty').max(64).regex(/^[A-Za-z0-9_.-]+$/, 'is not a task id');
const Key = IdempotencyKey.optional();

export const StartTaskInput = z.strictObject({
  goal: text(10_000).min(1, 'must not be empty'),
  title: text(200).optional(),
  plan: Plan.optional(),
  agent: text(100).optional(),
  idempotencyKey: Key,
  leaseTtlMs: z.number().int().min(1000, 'must be at least 1000 ms').max(7 * 24 * 3600 * 1000).optional(),
  owner: LeaseOwner.optional(),
  /** Attempts per step and backoff; unset fields come from the engine's setting, then the default (3 attempts, 1 s doubling to 5 min). */
  retry: RetryPolicyInput.optional(),
});
export type StartTaskInput = z.output<typeof StartTaskInput>;

export const TaskRef = z.strictObject({ taskId: TaskId, idempotencyKey: Key, owner: LeaseOwner.optional() });
export type TaskRef = z.output<typeof TaskRef>;

/**
 * A preview is a query of its own (`rollbackPreview`, `undoRollbackPreview`), not a
 * flag on the operation that changes the workspace: a caller that still sends
 * `preview: true` to `rollback` or `undoRollback` is refused with the way to ask,
 * before anything changes. `false` (roll back for real) is what the call does anyway.
 */
const RefusedPreview = (query: string) =>
  z.literal(false, { error: `a preview is its own query now: call ${query} (CLI: --preview), which changes nothing; this call always changes the workspace` }).optional();

/** `undoRollback`: undoes the task's last rollback (what it would change: `undoRollbackPreview`). */
export const UndoRollbackInput = TaskRef.extend({ preview: RefusedPreview('undoRollbackPreview') });
export type UndoRollbackInput = z.output<typeof UndoRollbackInput>;

export const RequestReviewInput = TaskRef.extend({ summary: text(10_000).optional() });
export type RequestReviewInput = z.output<typeof RequestReviewInput>;
export const CompleteTaskInput = TaskRef.extend({ summary: text(10_000).optional(), commit: z.string().regex(/^[0-9a-f]{7,64}$/, 'is not a commit hash').optional() });
export type CompleteTaskInput = z.output<typeof CompleteTaskInput>;
/** Undoing a review's commit: the task completed by `commit` waits for review again. */
export const ReopenTaskInput = TaskRef.extend({ commit: z.string().regex(/^[0-9a-f]{7,64}$/, 'is not a commit hash'), reason: text(2_000).optional() });
export type ReopenTaskInput = z.output<typeof ReopenTaskInput>;
export const AbandonTaskInput = TaskRef.extend({ reason: text(2_000).optional() });
export type AbandonTaskInput = z.output<typeof AbandonTaskInput>;
export const SuspendTaskInput = TaskRef.extend({ reason: text(2_000).optional() });
export type SuspendTaskInput = z.output<typeof SuspendTaskInput>;
export const ResumeTaskInput = TaskRef.extend({ leaseTtlMs: StartTaskInput.shape.leaseTtlMs });
export type ResumeTaskInput = z.output<typeof ResumeTaskInput>;
export const ExtendPlanInput = TaskRef.extend({ plan: Plan.min(1, 'must hold at least one step') });
export type ExtendPlanInput = z.output<typeof ExtendPlanInput>;

export const StartStepInput = TaskRef.extend({
  stepId: Identifier.optional(),
  title: text(500).optional(),
  inputs: FreeJson.optional(),
  dependsOn: z.array(Identifier).max(256).optional(),
  dirty: z.array(z.string().max(4096)).max(100_000).optional(),
  /** Inside a retry backoff, wait (up to a minute) for it to pass instead of being refused with retry_later. */
  wait: z.boolean().optional(),
});
export type StartStepInput = z.output<typeof StartStepInput>;
/**
 * Who ends a step: its agent (the default), or a person settling it by hand from the
 * editor. A person may do so while the task is not driven (interrupted, suspended,
 * waiting for review): the agent is gone, the person is not, and their answer
 * neither takes nor renews the agent's lease.
 */
const StepBy = z.enum(['agent', 'person']).optional();
export const CompleteStepInput = TaskRef.extend({
  stepId: Identifier,
  by: StepBy,
  outputs: FreeJson.optional(),
  summary: text(10_000).optional(),
  dirty: z.array(z.string().max(4096)).max(100_000).optional(),
});
export type CompleteStepInput = z.output<typeof CompleteStepInput>;
export const FailStepInput = TaskRef.extend({
  stepId: Identifier,
  by: StepBy,
  error: text(10_000).min(1, 'must not be empty'),
  recoverable: z.boolean(),
});
export type FailStepInput = z.output<typeof FailStepInput>;
/** A person lets a step that used its attempts (or is about to) try `attempts` more times. */
export const GrantAttemptsInput = TaskRef.extend({
  stepId: Identifier,
  attempts: z.number().int().min(1, 'must be at least 1').max(100, 'must be at most 100').optional(),
  reason: text(2_000).optional(),
});
export type GrantAttemptsInput = z.output<typeof GrantAttemptsInput>;
export const SkipStepInput = TaskRef.extend({ stepId: Identifier, reason: text(2_000).optional(), by: StepBy });
export type SkipStepInput = z.output<typeof SkipStepInput>;

export const CheckpointInput = TaskRef.extend({
  label: text(200).optional(),
  kind: z.enum(['manual', 'auto', 'periodic', 'tool_start', 'tool_end']).optional(),
  /**
   * The step whose work ends here (default: the step in progress). `null`: what changed since
   * the last checkpoint was no step's work — a hook recorder's scan after an edit tool's own
   * files, for what others changed while the tool ran.
   */
  stepId: Identifier.nullable().optional(),
  dirty: z.array(z.string().max(4096)).max(100_000).optional(),
});
export type CheckpointInput = z.output<typeof CheckpointInput>;

export const SideEffectKey = z.string().min(1, 'must not be empty').max(256).regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces');
export const BeginSideEffectInput = TaskRef.extend({
  stepId: Identifier.optional(),
  key: SideEffectKey,
  kind: text(100).min(1, 'must not be empty'),
  description: text(2_000).min(1, 'must not be empty'),
  args: FreeJson.optional(),
});
export type BeginSideEffectInput = z.output<typeof BeginSideEffectInput>;
export const EndSideEffectInput = z
  .strictObject({
    taskId: TaskId,
    key: SideEffectKey,
    ok: z.boolean(),
    result: FreeJson.optional(),
    error: text(10_000).optional(),
    idempotencyKey: Key,
    owner: LeaseOwner.optional(),
    /** A person settling an in-doubt effect, rather than the agent reporting its outcome. */
    by: z.enum(['agent', 'person']).optional(),
  })
  .refine((v) => v.ok || (v.error !== undefined && v.error.length > 0), { message: 'a failed side effect needs an error message', path: ['error'] });
export type EndSideEffectInput = z.output<typeof EndSideEffectInput>;

const CheckpointId = z.string().min(1).max(64).regex(/^[A-Za-z0-9_.-]+$/, 'is not a checkpoint id');
/** A workspace path key: checked here so an unsafe one is invalid input before any work starts. */
const PathKey = z.string().superRefine((key, ctx) => {
  const problem = pathKeyProblem(key);
  if (problem) ctx.addIssue({ code: 'custom', message: `unsafe path ${JSON.stringify(key.length > 200 ? `${key.slice(0, 200)}…` : key)}: ${problem}` });
});

/** `rollbackPreview`: exactly what a rollback with these fields would change; it records nothing. */
export const RollbackPreviewInput = z.strictObject({
  taskId: TaskId,
  checkpointId: CheckpointId,
  paths: z.array(PathKey).max(100_000).optional(),
  mode: z.enum(['all', 'agent-only']).optional(),
});
export type RollbackPreviewInput = z.output<typeof RollbackPreviewInput>;

export const RollbackInput = TaskRef.extend({
  ...RollbackPreviewInput.shape,
  reason: text(2_000).optional(),
  preview: RefusedPreview('rollbackPreview'),
});
export type RollbackInput = z.output<typeof RollbackInput>;

/**
 * `forkTask`: a new task from a checkpoint of another. Without a plan the fork takes
 * the original's steps it had not finished by that checkpoint; without a goal, the
 * original's. `preview` lists what the workspace would become and records nothing.
 */
export const ForkTaskInput = z.strictObject({
  checkpointId: CheckpointId,
  goal: StartTaskInput.shape.goal.optional(),
  title: StartTaskInput.shape.title,
  plan: Plan.optional(),
  agent: StartTaskInput.shape.agent,
  idempotencyKey: Key,
  leaseTtlMs: StartTaskInput.shape.leaseTtlMs,
  owner: LeaseOwner.optional(),
  preview: z.boolean().optional(),
});
export type ForkTaskInput = z.output<typeof ForkTaskInput>;

/** `stats`: metrics over every task, those active since a time (ms since the epoch), or one task. */
export const StatsInput = z.strictObject({
  since: z.number().int('must be a whole number of ms since the epoch').min(0).max(8.64e15).optional(),
  taskId: TaskId.optional(),
});
export type StatsInput = z.output<typeof StatsInput>;

export const DiffInput = z.strictObject({ from: CheckpointId, to: CheckpointId.optional() });
export type DiffInput = z.output<typeof DiffInput>;

export const RetentionInput = z.strictObject({
  maxPerTask: z.number().int().min(1).optional(),
  maxAgeDays: z.number().min(0).optional(),
  maxTotalBytes: z.number().int().min(0).optional(),
});
export type RetentionInput = z.output<typeof RetentionInput>;

/** `waypoint verify`: with `repair`, lost content the workspace holds is stored again and damaged checkpoints are marked. */
export const VerifyInput = z.strictObject({ repair: z.boolean().optional() });
export type VerifyInput = z.output<typeof VerifyInput>;

/**
 * The review panel's engine operations (see src/core/review/reviewOps.ts), so a window
 * that relays to another owner reviews through the same API as the owner itself. The
 * bounds match the panel's own protocol (src/extension/review/protocol.ts).
 */
const REVIEW_MAX_FILES = 20_000;
const REVIEW_MAX_HUNKS = 20_000;
const Fingerprint = z.string().regex(/^[0-9a-f]{32}$/, 'is not a content fingerprint');
const HunkIndices = z.array(z.number().int().min(0).max(REVIEW_MAX_HUNKS)).max(REVIEW_MAX_HUNKS);
export const ReviewDecision = z.discriminatedUnion('action', [
  z.strictObject({ path: PathKey, action: z.literal('approve'), fingerprint: Fingerprint.optional() }),
  z.strictObject({ path: PathKey, action: z.literal('leave'), fingerprint: Fingerprint.optional() }),
  z.strictObject({ path: PathKey, action: z.literal('reject'), fingerprint: Fingerprint.optional() }),
  z.strictObject({ path: PathKey, action: z.literal('hunks'), approved: HunkIndices, left: HunkIndices.optional(), hunkCount: z.number().int().min(1).max(REVIEW_MAX_HUNKS), fingerprint: Fingerprint }),
]);
export const ReviewTaskInput = z.strictObject({ taskId: TaskId });
export type ReviewTaskInput = z.output<typeof ReviewTaskInput>;
export const ReviewFileInput = z.strictObject({ taskId: TaskId, path: PathKey });
export type ReviewFileInput = z.output<typeof ReviewFileInput>;
/** Files to count, by path: only files of the task's review are counted (the owner lists it). */
export const ReviewCountInput = z.strictObject({ taskId: TaskId, paths: z.array(PathKey).min(1).max(1_000) });
export type ReviewCountInput = z.output<typeof ReviewCountInput>;
export const ApplyReviewInput = z.strictObject({
  taskId: TaskId,
  message: z.string().min(1).max(100_000),
  decisions: z.array(ReviewDecision).max(REVIEW_MAX_FILES),
  finish: z.union([z.boolean(), z.literal('if_plan_done')]).optional(),
});
export type ApplyReviewInput = z.output<typeof ApplyReviewInput>;
export const UndoReviewCommitInput = z.strictObject({
  taskId: TaskId,
  sha: z.string().regex(/^[0-9a-f]{40}([0-9a-f]{24})?$/, 'is not a commit id'),
  committed: z.array(PathKey).max(REVIEW_MAX_FILES),
  discarded: z.array(PathKey).max(REVIEW_MAX_FILES),
  preApplyCheckpointId: CheckpointId,
});
export type UndoReviewCommitInput = z.output<typeof UndoReviewCommitInput>;

export { TaskId, CheckpointId };

const Dirty = z.array(z.string().max(4096)).max(100_000);

/**
 * `beginCommand`: a terminal command starts under a task (VS Code's shell
 * integration). `agent` names the agent whose terminal it is (its tool opened it);
 * without it the command is the terminal's (the person's). `dirty`: the paths the
 * watcher saw change since the last checkpoint, so the checkpoint costs O(changes).
 */
export const BeginCommandInput = TaskRef.extend({
  commandId: SideEffectKey,
  commandLine: text(10_000),
  cwd: text(4096).optional(),
  terminal: text(200).min(1, 'must not be empty'),
  agent: text(100).min(1, 'must not be empty').optional(),
  dirty: Dirty.optional(),
});
export type BeginCommandInput = z.output<typeof BeginCommandInput>;

/** `endCommand`: the command ended (exit code when the shell told it); `dirty`: the paths changed while it ran. */
export const EndCommandInput = TaskRef.extend({
  commandId: SideEffectKey,
  exitCode: z.number().int('must be a whole number').min(-2_147_483_648).max(4_294_967_295).nullable().optional(),
  dirty: Dirty.optional(),
});
export type EndCommandInput = z.output<typeof EndCommandInput>;

/** `recordHistory`: file activity while no task runs, checkpointed into today's workspace history. */
export const RecordHistoryInput = z.strictObject({
  dirty: Dirty.optional(),
  label: text(200).optional(),
  idempotencyKey: Key,
});
export type RecordHistoryInput = z.output<typeof RecordHistoryInput>;

/** `pruneHistory`: drops whole days of workspace history older than `maxAgeDays`, then the oldest days until it fits in `maxBytes`. */
export const HistoryRetentionInput = z.strictObject({
  maxAgeDays: z.number().min(0, 'must not be negative').max(36_500).optional(),
  maxBytes: z.number().int('must be a whole number of bytes').min(0, 'must not be negative').optional(),
});
export type HistoryRetentionInput = z.output<typeof HistoryRetentionInput>;
