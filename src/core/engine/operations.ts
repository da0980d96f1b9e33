import { z } from 'zod';
import { TaskState, type SideEffect, type Step, type Task } from '../model/schema';
import {
  AbandonTaskInput,
  BeginSideEffectInput,
  CheckpointId,
  CheckpointInput,
  CompleteStepInput,
  CompleteTaskInput,
  DiffInput,
  EndSideEffectInput,
  ExtendPlanInput,
  FailStepInput,
  GrantAttemptsInput,
  RequestReviewInput,
  ReopenTaskInput,
  ResumeTaskInput,
  RetentionInput,
  RollbackInput,
  RollbackPreviewInput,
  SkipStepInput,
  StartStepInput,
  StartTaskInput,
  ForkTaskInput,
  StatsInput,
  SuspendTaskInput,
  TaskId,
  TaskRef,
  UndoRollbackInput,
  VerifyInput,
  ReviewTaskInput,
  ReviewFileInput,
  ReviewCountInput,
  ApplyReviewInput,
  UndoReviewCommitInput,
  BeginCommandInput,
  EndCommandInput,
  RecordHistoryInput,
  HistoryRetentionInput,
} from './inputs';
import { applyReviewOp, reviewHunks, reviewLineCounts, reviewListing, undoReviewCommitOp } from '../review/reviewOps';
import type { Engine } from './engine';
import { RecordTurnInput } from './turns';
import { WaypointError } from '../model/errors';

/**
 * Every engine operation, declared once: its name, whether it changes the store
 * (`mutation`) or only reads it (`query`), the zod schema of its one argument, and
 * how the engine runs it. Everything else is derived from this table: the typed
 * `EngineApi` every surface calls, the in-process adapter (`localApi`), the owner's
 * `/rpc` dispatch (`serveRpc`), the remote client (`remoteApi`) and the method list
 * a relaying window routes. A new operation is one entry here; a misspelt field in
 * any caller fails to compile, and a malformed argument from another process is an
 * `invalid_input` refusal before the engine sees it.
 */
const TaskFilter = z.strictObject({ states: z.array(TaskState).max(20).readonly().optional(), limit: z.number().int().min(1).max(100_000).optional() });
const EventsFilter = z.strictObject({ taskId: TaskId.optional(), afterSeq: z.number().int().min(0).optional(), limit: z.number().int().min(0).max(1_000_000).optional() });
const CheckpointFileInput = z.strictObject({ checkpointId: CheckpointId, path: z.string().min(1).max(4096) });
const ObjectFileInput = z.strictObject({ hash: z.string().regex(/^[0-9a-f]{64}$/, 'a SHA-256 content hash') });
const None = z.undefined();

type Kind = 'mutation' | 'query';
interface Operation<S extends z.ZodType, R> {
  kind: Kind;
  /** How refusals name it: "Invalid step start: …". */
  label: string;
  input: S;
  run: (engine: Engine, input: z.output<S>) => Promise<R> | R;
}
const mutation = <S extends z.ZodType, R>(label: string, input: S, run: (engine: Engine, input: z.output<S>) => Promise<R> | R): Operation<S, R> => ({ kind: 'mutation', label, input, run });
const query = <S extends z.ZodType, R>(label: string, input: S, run: (engine: Engine, input: z.output<S>) => Promise<R> | R): Operation<S, R> => ({ kind: 'query', label, input, run });

export const OPERATIONS = {
  startTask: mutation('task start', StartTaskInput, (e, a) => e.startTask(a)),
  /** A new task from a checkpoint of another; the workspace goes to the checkpoint (undoable), the original is untouched. */
  forkTask: mutation('task fork', ForkTaskInput, (e, a) => e.forkTask(a)),
  extendPlan: mutation('plan update', ExtendPlanInput, (e, a) => e.extendPlan(a)),
  requestReview: mutation('task complete', RequestReviewInput, (e, a) => e.requestReview(a)),
  completeTask: mutation('task approve', CompleteTaskInput, (e, a) => e.completeTask(a)),
  /** Undoing the review commit that completed a task: it waits for review again (the one way out of completed). */
  reopenTask: mutation('task reopen', ReopenTaskInput, (e, a) => e.reopenTask(a)),
  abandonTask: mutation('task abandon', AbandonTaskInput, (e, a) => e.abandonTask(a)),
  suspendTask: mutation('task suspend', SuspendTaskInput, (e, a) => e.suspendTask(a)),
  interruptTask: mutation('task interrupt', AbandonTaskInput, (e, a) => e.interruptTask(a)),
  deleteTask: mutation('task delete', TaskRef, (e, a) => e.deleteTask(a)),
  resumeTask: mutation('task resume', ResumeTaskInput, (e, a) => e.resumeTask(a)),
  heartbeat: mutation('heartbeat', TaskRef, (e, a) => e.heartbeat(a)),
  startStep: mutation('step start', StartStepInput, (e, a) => e.startStep(a)),
  completeStep: mutation('step complete', CompleteStepInput, (e, a) => e.completeStep(a)),
  failStep: mutation('step fail', FailStepInput, (e, a) => e.failStep(a)),
  skipStep: mutation('step skip', SkipStepInput, (e, a) => e.skipStep(a)),
  grantAttempts: mutation('step grant', GrantAttemptsInput, (e, a) => e.grantAttempts(a)),
  checkpoint: mutation('checkpoint', CheckpointInput, (e, a) => e.checkpoint(a)),
  beginSideEffect: mutation('side effect begin', BeginSideEffectInput, (e, a) => e.beginSideEffect(a)),
  endSideEffect: mutation('side effect end', EndSideEffectInput, (e, a) => e.endSideEffect(a)),
  /** A hook-recorded agent's turn: its bounded conversation digest, kept with the step it worked in. */
  recordTurn: mutation('turn digest', RecordTurnInput, (e, a) => e.recordTurn(a)),
  turns: query('task id', TaskId, (e, id) => e.queries.turns(e.queries.task(id).id)),
  /** A terminal command begins under a running task: a checkpoint before it (O(changes) with `dirty`) and its record. */
  beginCommand: mutation('command start', BeginCommandInput, (e, a) => e.beginCommand(a)),
  /** It ended: a checkpoint after it, its exit code and the files it changed, created or deleted, owned by whoever ran it. */
  endCommand: mutation('command end', EndCommandInput, (e, a) => e.endCommand(a)),
  /** A task's terminal commands with the files each changed. */
  commands: query('task id', TaskId, (e, id) => {
    e.queries.task(id);
    return e.queries.commands(id);
  }),
  /** File activity while no task runs, checkpointed into today's workspace history record. */
  recordHistory: mutation('history record', RecordHistoryInput.optional(), (e, a) => e.history.record(a ?? {})),
  /** Drops whole days of workspace history past an age or over a byte budget, then unreferenced blobs. */
  pruneHistory: mutation('history retention', HistoryRetentionInput.optional(), (e, a) => e.history.prune(a ?? {})),
  /** The days of workspace history and what they hold (checkpoints, bytes). */
  history: query('none', None, (e) => e.history.footprint()),
  rollback: mutation('rollback', RollbackInput, (e, a) => e.rollback(a)),
  /** What `rollback` with the same fields would change (files, steps it abandons, what the person changed too); records nothing. */
  rollbackPreview: query('rollback preview', RollbackPreviewInput, (e, a) => e.rollbackPreview(a)),
  undoRollback: mutation('undo rollback', UndoRollbackInput, (e, a) => e.undoRollback(a)),
  /** What undoing the task's last rollback would change; records nothing. */
  undoRollbackPreview: query('task id', TaskId, (e, id) => e.undoRollbackPreview(id)),
  gc: mutation('retention policy', RetentionInput.optional(), (e, a) => e.gc(a ?? {})),
  rebuild: mutation('rebuild', None, (e) => e.rebuild()),
  diff: query('diff', DiffInput, (e, a) => e.diff(a)),
  resumeContext: query('task id', TaskId, (e, id) => e.resumeContext(id)),
  lastUndoableRollback: query('task id', TaskId, (e, id) => e.queries.lastUndoableRollback(id)),
  undoableTaskIds: query('none', None, (e) => e.queries.undoableTaskIds()),
  taskDetail: query('task id', TaskId, (e, id) => e.taskDetail(id)),
  tasks: query('task filter', TaskFilter.optional(), (e, f) =>
    e.tasks(f).map((t) => {
      const steps = e.queries.steps(t.id);
      return { ...t, progress: { done: steps.filter((s) => s.status === 'completed' || s.status === 'skipped').length, total: steps.length } };
    }),
  ),
  /**
   * The tasks (without progress) and every step of the store in one call: a window lists its
   * tree with it, one query for all the steps rather than one per task (what mattered at
   * 1,000 tasks), the same in-process and over /rpc.
   */
  taskListing: query('task filter', TaskFilter.optional(), (e, f): { tasks: Task[]; steps: Step[] } => ({ tasks: e.tasks(f), steps: e.queries.allSteps() })),
  /** A file as a checkpoint holds it (base64; null when the checkpoint lacks the path), for diff editors in other processes. */
  checkpointFile: query('checkpoint file', CheckpointFileInput, async (e, { checkpointId, path }) => {
    const c = e.queries.checkpoint(checkpointId);
    if (!c) throw new WaypointError('not_found', `Unknown checkpoint '${checkpointId}'.`);
    if (!e.workspaceSnapshots) throw new WaypointError('invalid_input', 'This store keeps no file snapshots.');
    const bytes = await e.workspaceSnapshots.fileAt(c, path);
    return { createdAt: c.createdAt, base64: bytes ? bytes.toString('base64') : null };
  }),
  /** Content the store holds by its hash (an agent-only rollback's merged file, for its preview), base64. */
  objectFile: query('object file', ObjectFileInput, async (e, { hash }) => {
    if (!e.workspaceSnapshots) throw new WaypointError('invalid_input', 'This store keeps no file snapshots.');
    if (!(await e.workspaceSnapshots.blobs.has(hash))) throw new WaypointError('not_found', `The store holds no content ${hash}.`);
    return { base64: (await e.workspaceSnapshots.blobs.get(hash)).toString('base64') };
  }),
  /** Side effects in doubt across tasks, so every window (relaying ones too) can alert on them in one call. */
  sideEffectsInDoubt: query('side effects query', None, (e): SideEffect[] => e.queries.sideEffectsInDoubt()),
  events: query('events filter', EventsFilter.optional(), (e, f) => e.events(f)),
  storage: query('storage query', None, (e) => e.storage()),
  /** Metrics: tasks by state, interruptions by cause, retries, step durations, checkpoints, side effects, per agent and per day. */
  stats: query('stats query', StatsInput.optional(), (e, a) => e.stats(a ?? {})),
  drift: query('task id', TaskId, (e, id) => e.drift(id)),
  /** A mutation: with `repair` it stores lost content again and records damaged checkpoints. */
  verify: mutation('verify', VerifyInput.optional(), (e, a) => e.verify(a ?? {})),
  /** The review panel's listing of a task (files from manifests, steps, side effects), in any window, relaying ones too. */
  reviewListing: query('review', ReviewTaskInput, (e, a) => reviewListing(e, a.taskId)),
  /** Line counts of some of the review's files (only files the review lists). */
  reviewLineCounts: query('review line counts', ReviewCountInput, (e, a) => reviewLineCounts(e, a)),
  /** One review file's hunks and content fingerprint. */
  reviewHunks: query('review hunks', ReviewFileInput, (e, a) => reviewHunks(e, a.taskId, a.path)),
  /** The review's decisions: a commit of exactly what was approved, discards, whole or nothing. */
  applyReview: mutation('review apply', ApplyReviewInput, (e, a) => applyReviewOp(e, a)),
  /** Undoes a review's commit while HEAD is still that commit. */
  undoReviewCommit: mutation('review undo commit', UndoReviewCommitInput, (e, a) => undoReviewCommitOp(e, a)),
  info: query('info', None, (e) => ({ storeDir: e.storeDir, storeId: e.eventLog.workspace.id, events: e.eventLog.lastSeq, pid: process.pid, relayed: false })),
} as const;

export type OperationName = keyof typeof OPERATIONS;
export const OPERATION_NAMES = Object.keys(OPERATIONS) as OperationName[];

type Op<N extends OperationName> = (typeof OPERATIONS)[N];
/** What a caller passes: the schema's input type (optional when the schema takes undefined). */
export type OperationInput<N extends OperationName> = z.input<Op<N>['input']>;
export type OperationResult<N extends OperationName> = Awaited<ReturnType<Op<N>['run']>>;

/** The engine as every surface calls it, in-process or through the owner: typed by the table. */
export type EngineApi = {
  [N in OperationName]: undefined extends OperationInput<N> ? (a?: OperationInput<N>) => Promise<OperationResult<N>> : (a: OperationInput<N>) => Promise<OperationResult<N>>;
};
