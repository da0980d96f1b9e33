/**
 * The engine: the one API every surface calls, composed of its concerns. Each
 * concern is a module over the one core (engineCore.ts) and its one runner:
 * tasks.ts, steps.ts, fork.ts, rollbacks.ts, reviewApply.ts, sideEffects.ts,
 * leases.ts, terminalCommands.ts, history.ts, storageUpkeep.ts, and reads.ts for
 * what only reads. This file opens the store, builds the core and the concerns in
 * order, and names the API; it holds no operation of its own.
 */
import * as path from 'node:path';
import type { LeaseOwner, Task, TaskState, WaypointEvent } from '../model/schema';
import { Logger, silentLogger } from '../log';
import type { EventLog, Projection, ProjectionReader, StoreBackend, ObjectUploader } from '../store/eventLog';
import { EmbeddedProjectionReader } from './projectionReader';
import { OperationRunner } from './runner';
import { openEmbeddedBackend } from '../store/embedded';
import { openPostgresBackend } from '../store/postgres/backend';
import { noteFolderIdentity } from '../store/folderIdentity';
import type { AbandonTaskInput, BeginCommandInput, BeginSideEffectInput, CheckpointInput, CompleteStepInput, CompleteTaskInput, DiffInput, EndCommandInput, EndSideEffectInput, ExtendPlanInput, FailStepInput, ForkTaskInput, GrantAttemptsInput, ReopenTaskInput, RequestReviewInput, ResumeTaskInput, RetentionInput, RollbackInput, RollbackPreviewInput, SkipStepInput, StartStepInput, StartTaskInput, SuspendTaskInput, TaskRef, UndoRollbackInput, VerifyInput } from './inputs';
import { Queries } from '../store/queries';
import type { DriftInfo } from './resumeContext';
import { metadataOnlySnapshotter, type Snapshotter } from './snapshotter';
import { WorkspaceSnapshots } from './workspaceSnapshots';
import type { WorkspaceEdit } from './reviewEdits';
import { isNoSpace } from './noSpace';
import { ReviewApplies, type FinishTask } from './reviewApply';
import { Rollbacks } from './rollbacks';
import { Leases } from './leases';
import { SideEffects } from './sideEffects';
import { EngineCore } from './engineCore';
import { CheckpointCapture } from './checkpointCapture';
import { reopenTask } from './reopen';
import { recordTurn, type RecordTurnInput } from './turns';
import { TerminalCommands } from './terminalCommands';
import { WorkspaceHistory } from './history';
import { StorageUpkeep } from './storageUpkeep';
import { Tasks } from './tasks';
import { Steps } from './steps';
import { Forks } from './fork';
import { Reads } from './reads';
import type { StatsFilter } from './stats';
import type { Manifest } from '../snapshot';

// Each concern's types live with it; surfaces import them from here, the engine's one entry.
export type { GcResult, StorageReport, VerifyReport } from './storageUpkeep';
export type { RollbackResult } from './rollbacks';
export type { FinishTask, ReviewApplyResult } from './reviewApply';
export type { SideEffectDecision } from './sideEffects';
export type { ForkResult } from './fork';
export { notCapturedLine, type NotCapturedReport } from './checkpointCapture';
export { isNoSpace } from './noSpace';
export type { ChangeEvent, EngineOptions } from './engineOptions';
import type { ChangeEvent, EngineOptions } from './engineOptions';


/** The one API every surface calls: mutations run through one serialized runner, idempotent by key, answered once durable. */
export class Engine {
  readonly queries: Queries;
  private readonly listeners = new Set<(e: ChangeEvent) => void>();
  private readonly log: Logger;
  private readonly snapshotter: Snapshotter;
  /** Set when checkpoints hold real workspace manifests (the default). */
  readonly workspaceSnapshots: WorkspaceSnapshots | null = null;
  private sweeps: { dispose(): void } | undefined;
  /** With a team store: the copy of checkpoints' objects into it, for review from other machines. */
  objectUpload: ObjectUploader | null = null;
  readonly defaultOwner: LeaseOwner;
  /** What open had to repair (an interrupted rollback finished), for surfaces to tell the person. */
  recoveryNotes: string[] = [];
  readonly defaultLeaseTtlMs: number;
  /** The durable log the engine appends to and reads history from (embedded or PostgreSQL). */
  readonly eventLog: EventLog;
  /** The projection the log feeds, which `queries` reads. */
  readonly projection: Projection;
  /** The asynchronous read side (listings and a task's events), for surfaces that must not depend on sql.js. */
  readonly reader: ProjectionReader;
  private readonly core: EngineCore;
  private readonly tasksOf: Tasks;
  private readonly steps: Steps;
  private readonly forks: Forks;
  private readonly reads: Reads;
  private readonly leases: Leases;
  private readonly sideEffects: SideEffects;
  private readonly rollbacks: Rollbacks;
  private readonly reviewApplies: ReviewApplies;
  private readonly terminalCommands: TerminalCommands;
  private readonly upkeep: StorageUpkeep;
  /** The day's workspace history (see history.ts). */
  readonly history: WorkspaceHistory;

  private constructor(
    backend: StoreBackend,
    /** The `.waypoint` directory: blobs, manifests, plans (and the embedded store's files). */
    readonly storeDir: string,
    readonly workspace: string,
    opts: EngineOptions,
  ) {
    this.eventLog = backend.log;
    this.projection = backend.projection;
    const clock = opts.store?.clock ?? Date.now;
    this.log = (opts.log ?? silentLogger).child('engine');
    this.queries = Queries.of(this.projection);
    this.reader = backend.reader ?? new EmbeddedProjectionReader(this.queries, this.eventLog);
    this.defaultOwner = opts.owner ?? { id: 'cli' };
    this.defaultLeaseTtlMs = opts.defaultLeaseTtlMs ?? 5 * 60_000;
    this.snapshotter = opts.snapshotter ?? metadataOnlySnapshotter;
    if (opts.snapshots !== false && !opts.snapshotter) {
      this.workspaceSnapshots = new WorkspaceSnapshots({
        roots: opts.snapshots?.roots ?? [{ name: path.basename(workspace) || 'workspace', dir: workspace }],
        storeDir,
        excludes: opts.snapshots?.excludes,
        maxFileBytes: opts.snapshots?.maxFileBytes,
        fullEvery: opts.snapshots?.fullEvery,
        releaseWorkersAfterScan: opts.snapshots?.releaseWorkersAfterScan,
        compactAtClose: opts.snapshots?.releaseWorkersAfterScan, // both mean: a process that opens the store for one call
        log: this.log,
      });
      this.snapshotter = this.workspaceSnapshots;
    }
    const core = new EngineCore({
      eventLog: this.eventLog,
      projection: this.projection,
      queries: this.queries,
      runner: new OperationRunner(this.eventLog, this.projection, this.queries),
      checkpoints: new CheckpointCapture(this.queries, this.snapshotter, this.log, clock, opts.changeFeed),
      log: this.log,
      workspace,
      storeDir,
      workspaceSnapshots: this.workspaceSnapshots,
      clock,
      defaultOwner: this.defaultOwner,
      defaultLeaseTtlMs: this.defaultLeaseTtlMs,
      retry: opts.retry,
    });
    this.core = core;
    this.reads = new Reads(core, opts.drift);
    this.tasksOf = new Tasks(core, (taskId) => this.reads.resumeContext(taskId));
    this.steps = new Steps(core);
    this.forks = new Forks(core);
    this.leases = new Leases(core);
    this.sideEffects = new SideEffects(core);
    this.rollbacks = new Rollbacks(core);
    this.reviewApplies = new ReviewApplies(core);
    this.terminalCommands = new TerminalCommands(core);
    this.upkeep = new StorageUpkeep(core, () => this.unfinishedReviewApplies().map((r) => r.data.planRef));
    this.history = new WorkspaceHistory(core, async () => {
      const r = await this.gc({});
      return { blobsDeleted: r.blobsDeleted, bytesFreed: r.bytesFreed };
    });
    this.eventLog.subscribe((events) => {
      const taskIds = [...new Set(events.map((e) => e.taskId).filter((t): t is string => !!t))];
      for (const l of this.listeners) l({ events, taskIds });
    });
  }

  static async open(opts: EngineOptions): Promise<Engine> {
    const workspace = path.resolve(opts.workspace);
    const dir = opts.storeDir ? path.resolve(workspace, opts.storeDir) : path.join(workspace, '.waypoint');
    // Before the lock is looked at: a copied folder drops the original's lock here.
    if (!opts.backend) noteFolderIdentity(dir, opts.log);
    const backend =
      opts.backend ??
      (opts.teamStore
        ? await openPostgresBackend({ url: opts.teamStore, storeDir: dir, workspacePath: workspace, log: opts.log, lock: opts.store?.lock, clock: opts.store?.clock })
        : await openEmbeddedBackend({ ...opts.store, dir, log: opts.log, workspace }, isNoSpace));
    const engine = new Engine(backend, dir, workspace, opts);
    const readOnly = backend.log.readOnlyReason;
    if (readOnly !== null) {
      // No temp sweep, no recovery, no lease sweep: each of them writes. They run on the next writable open.
      engine.recoveryNotes = [readOnly];
      return engine;
    }
    try {
      // A store created just now gets its record.
      if (!opts.backend) noteFolderIdentity(dir, opts.log);
      await engine.workspaceSnapshots?.blobs.sweepTemp();
      // Raw content a bulk checkpoint left before it could be compressed (a crash, a call that handed the store to this owner).
      const ws = engine.workspaceSnapshots;
      if (ws?.blobs.uncompactedPacks().length) ws.compactSoon(() => ws.namesOfLatest(engine.core.checkpoints.latest()));
      engine.recoveryNotes = [...(await engine.recoverRollbacks()), ...(await engine.recoverReviewApplies())];
      await engine.sweep();
      // After recovery: the upload reads objects the recovery may have finished writing.
      if (engine.workspaceSnapshots && backend.startObjectUpload) engine.objectUpload = backend.startObjectUpload(engine.workspaceSnapshots.blobs);
    } catch (e) {
      await engine.workspaceSnapshots?.close();
      await backend.log.close();
      backend.projection.close();
      throw e;
    }
    if (opts.sweepIntervalMs) engine.sweeps = engine.leases.schedule(opts.sweepIntervalMs);
    return engine;
  }

  get now(): number { return this.core.now(); }

  onDidChange(listener: (e: ChangeEvent) => void): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  /** `leaveRawContent`: a background owner takes the store next and compresses what this process stored raw (WorkspaceSnapshots.close). */
  async close(o: { leaveRawContent?: boolean } = {}): Promise<void> {
    this.sweeps?.dispose();
    await this.core.idle();
    await this.objectUpload?.close();
    await this.workspaceSnapshots?.close(o);
    await this.eventLog.close();
    this.projection.close();
    this.listeners.clear();
  }

  // The API, by concern. Types of inputs and results are the concerns' own.

  startTask(input: StartTaskInput) { return this.tasksOf.start(input); }
  extendPlan(input: ExtendPlanInput) { return this.tasksOf.extendPlan(input); }
  /** The agent says it is done: the task waits for the person's review. */
  requestReview(input: RequestReviewInput) { return this.tasksOf.requestReview(input); }
  /** The person accepts the task (after review, optionally with the commit that holds it). */
  completeTask(input: CompleteTaskInput) { return this.tasksOf.complete(input); }
  abandonTask(input: AbandonTaskInput) { return this.tasksOf.abandon(input); }
  suspendTask(input: SuspendTaskInput) { return this.tasksOf.suspend(input); }
  /** Marks a live task interrupted (its driver went away: a terminal closed, an editor quit). */
  interruptTask(input: AbandonTaskInput) { return this.tasksOf.interrupt(input); }
  /** Deletes a task's projections (its events stay in the log); its checkpoints' unique blobs become garbage. */
  deleteTask(input: TaskRef) { return this.tasksOf.delete(input); }
  /** Resumes a task under the caller: a new attempt, a fresh lease, and the resume context to continue from. */
  resumeTask(input: ResumeTaskInput) { return this.tasksOf.resume(input); }
  /** Undoing the review commit that completed a task reopens it for review (see reopen.ts). */
  reopenTask(input: ReopenTaskInput) { return reopenTask(this.core, input); }
  /** A new task from a checkpoint of another; the workspace goes to the checkpoint (see fork.ts). */
  forkTask(input: ForkTaskInput) { return this.forks.fork(input); }
  /** Renews the caller's lease on a task (see Leases.heartbeat). */
  heartbeat(input: TaskRef) { return this.leases.heartbeat(input); }
  /** Interrupts running tasks whose lease expired or whose owner process is gone (see Leases.sweep). */
  sweep(): Promise<string[]> { return this.leases.sweep(); }

  startStep(input: StartStepInput) { return this.steps.start(input); }
  completeStep(input: CompleteStepInput) { return this.steps.complete(input); }
  /** A recoverable failure keeps the step retryable; an unrecoverable one fails the task. */
  failStep(input: FailStepInput) { return this.steps.fail(input); }
  skipStep(input: SkipStepInput) { return this.steps.skip(input); }
  /** A person lets a step try more times (see Steps.grantAttempts). */
  grantAttempts(input: GrantAttemptsInput) { return this.steps.grantAttempts(input); }
  checkpoint(input: CheckpointInput) { return this.steps.checkpoint(input); }
  latestCheckpoint() { return this.core.latestCheckpoint(); }
  /** A change feed that just started vouches from the newest checkpoint on (see CheckpointCapture.warmUp). */
  warmUpChangeFeed(): Promise<boolean> { return this.core.exclusive(() => this.core.checkpoints.warmUp()); }

  /** `proceed` once the intent is durable; `already_done` or `in_doubt` from the ledger (see SideEffects.begin). */
  beginSideEffect(input: BeginSideEffectInput) { return this.sideEffects.begin(input); }
  endSideEffect(input: EndSideEffectInput) { return this.sideEffects.end(input); }
  /** Records a hook-recorded agent's turn digest (see turns.ts). */
  recordTurn(input: RecordTurnInput) { return recordTurn(this.core, input); }
  /** A terminal command starts under a running task (see terminalCommands.ts). */
  beginCommand(input: BeginCommandInput) { return this.terminalCommands.begin(input); }
  endCommand(input: EndCommandInput) { return this.terminalCommands.end(input); }

  /** Rolls the workspace back to a checkpoint (see Rollbacks.rollback). */
  rollback(input: RollbackInput) { return this.rollbacks.rollback(input); }
  /** What that rollback would change, recording nothing. */
  rollbackPreview(input: RollbackPreviewInput) { return this.rollbacks.preview(input); }
  /** Undoes the task's last rollback by rolling back to the checkpoint taken just before it (or previews that). */
  undoRollback(input: UndoRollbackInput) { return this.rollbacks.undoRollback(input); }
  undoRollbackPreview(taskId: string) { return this.rollbacks.undoPreview(taskId); }
  /** The paths changed since checkpoint `fromId`, split by who changed them (see Rollbacks.changesByOwner). */
  changesByOwner(taskId: string, fromId: string, current?: Manifest) { return this.rollbacks.changesByOwner(taskId, fromId, current); }
  recoverRollbacks(): Promise<string[]> { return this.rollbacks.recoverRollbacks(); }
  /** Applies a review whole or not at all (see ReviewApplies.applyReviewEdits). */
  applyReviewEdits<C extends { sha: string | null }>(input: { taskId: string; edits: readonly WorkspaceEdit[]; idempotencyKey?: string; finish?: FinishTask }, commit: () => Promise<C>) {
    return this.reviewApplies.applyReviewEdits(input, commit);
  }
  unfinishedReviewApplies() { return this.reviewApplies.unfinishedReviewApplies(); }
  recoverReviewApplies(): Promise<string[]> { return this.reviewApplies.recoverReviewApplies(); }

  task(taskId: string): Task { return this.queries.task(taskId); }
  tasks(filter?: { states?: readonly TaskState[]; limit?: number }): Task[] { return this.queries.tasks(filter); }
  /** One task with everything under it. */
  taskDetail(taskId: string) { return this.reads.taskDetail(taskId); }
  events(filter: { taskId?: string; afterSeq?: number; limit?: number } = {}): Promise<WaypointEvent[]> { return this.reads.events(filter); }
  resumeContext(taskId: string) { return this.reads.resumeContext(taskId); }
  /** Changed paths between two checkpoints, or from a checkpoint to the workspace now, with line counts. */
  diff(input: DiffInput) { return this.reads.diff(input); }
  /** The workspace now, as a manifest, recording nothing (see Reads.scanWorkspace). */
  scanWorkspace(): Promise<Manifest> { return this.reads.scanWorkspace(); }
  /** Files changed since the task's last checkpoint (by the person, or by an unfinished step). */
  drift(taskId: string): Promise<DriftInfo> { return this.reads.drift(taskId); }
  /** Metrics (see stats.ts); with `taskId`, of that task only (an unknown one is refused). */
  stats(filter: StatsFilter = {}) { return this.reads.stats(filter); }

  /** Bytes per task (unique to it, and shared with others) and in total, deduplicated. */
  storage() { return this.upkeep.storage(); }
  /** Applies the retention policy and collects garbage (see StorageUpkeep.gc). */
  gc(input: RetentionInput = {}) { return this.upkeep.gc(input); }
  /** Proves the store whole, repairing what it can with `repair` (see StorageUpkeep.verify). */
  verify(input: VerifyInput = {}) { return this.upkeep.verify(input); }
  async rebuild(): Promise<void> {
    await this.core.needingSpace('a rebuild', () => this.core.exclusive(async () => this.projection.rebuild(await this.eventLog.read())));
  }
}
