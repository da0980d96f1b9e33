/**
 * What the engine answers without changing the store: a task with everything under
 * it, its events, its resume context, diffs and drift against the workspace now, and
 * metrics. Scans of the workspace go through the runner's line, so none sees a
 * half-done write.
 */
import type { CheckpointMeta, SideEffect, Step, Task, WaypointEvent } from '../model/schema';
import { diffManifests, type FileChangeWithLines, type Manifest } from '../snapshot';
import type { EngineCore } from './engineCore';
import { forkInheritance } from './forkInheritance';
import { DiffInput } from './inputs';
import { buildResumeContext, type DriftInfo, type ResumeContext } from './resumeContext';
import { computeStats, type Stats, type StatsFilter } from './stats';

export class Reads {
  constructor(
    private readonly core: EngineCore,
    /** Drift from the snapshot layer (an engine option); the engine's own scan without it. */
    private readonly driftOf: ((task: Task) => Promise<DriftInfo | null>) | undefined,
  ) {}

  /** One task with everything under it. */
  taskDetail(taskId: string): { task: Task; steps: Step[]; checkpoints: CheckpointMeta[]; sideEffects: SideEffect[] } {
    const task = this.core.queries.task(taskId);
    return { task, steps: this.core.queries.steps(taskId), checkpoints: this.core.queries.checkpoints(taskId), sideEffects: this.core.queries.sideEffects(taskId) };
  }

  async events(filter: { taskId?: string; afterSeq?: number; limit?: number } = {}): Promise<WaypointEvent[]> {
    if (filter.taskId) this.core.queries.task(filter.taskId);
    return this.core.eventLog.read(filter);
  }

  async resumeContext(taskId: string): Promise<ResumeContext> {
    const task = this.core.queries.task(taskId);
    const drift = this.driftOf ? await this.driftOf(task) : await this.drift(taskId).catch(() => null);
    const last = task.lastCheckpointId ? this.core.queries.checkpoint(task.lastCheckpointId) : null;
    // A fork's inheritance is read from the original's events, which outlive its deletion.
    const fork = task.forkedFrom ? forkInheritance(await this.core.eventLog.read({ taskId: task.forkedFrom.taskId }), task.forkedFrom.checkpointId) : null;
    return buildResumeContext(task, this.core.queries.steps(taskId), this.core.queries.sideEffects(taskId), last, drift, fork, this.core.queries.turns(taskId));
  }

  /** Changed paths between two checkpoints, or from a checkpoint to the workspace now, with line counts. */
  async diff(input: DiffInput): Promise<{ from: string; to: string; changes: FileChangeWithLines[] }> {
    const ws = this.core.snapshots();
    const from = this.core.requireCheckpoint(input.from);
    const a = await ws.load(from);
    const b = input.to ? await ws.load(this.core.requireCheckpoint(input.to)) : await this.core.exclusive(() => ws.scanNow(this.core.latestCheckpoint()));
    return { from: from.id, to: input.to ?? 'workspace', changes: await ws.diff(a, b) };
  }

  /**
   * The workspace now, as a manifest, recording nothing. Incremental from the
   * latest checkpoint (unchanged size and mtime reuse its hashes), and serialized
   * with checkpoints and rollbacks like every scan. Callers that need both a diff
   * and `changesByOwner` scan once with this and pass the result on.
   */
  async scanWorkspace(): Promise<Manifest> {
    const ws = this.core.snapshots();
    return this.core.exclusive(() => ws.scanNow(this.core.latestCheckpoint()));
  }

  /** Files changed since the task's last checkpoint (by the person, or by an unfinished step). */
  async drift(taskId: string): Promise<DriftInfo> {
    const task = this.core.queries.task(taskId);
    const ws = this.core.snapshots();
    const head = task.lastCheckpointId ? this.core.queries.checkpoint(task.lastCheckpointId) : null;
    if (!head?.manifestRef || head.damaged) return { since: null, files: [] };
    const now = await this.core.exclusive(() => ws.scanNow(this.core.latestCheckpoint()));
    const changes = diffManifests(await ws.load(head), now);
    return { since: head.id, files: changes.map((c) => ({ path: c.path, status: c.status })) };
  }

  /** Metrics (see stats.ts); with `taskId`, of that task only (an unknown one is refused). */
  async stats(filter: StatsFilter = {}): Promise<Stats> {
    if (filter.taskId) this.core.queries.task(filter.taskId);
    return computeStats(
      {
        tasks: this.core.queries.tasks(),
        steps: filter.taskId ? this.core.queries.steps(filter.taskId) : this.core.queries.allSteps(),
        checkpoints: this.core.queries.checkpoints(filter.taskId),
        sideEffects: filter.taskId ? this.core.queries.sideEffects(filter.taskId) : this.core.queries.allSideEffects(),
        // The events hold what the projections overwrite (each attempt, each interruption); older ones are read from the segments.
        events: await this.core.eventLog.read(filter.taskId ? { taskId: filter.taskId } : {}),
        storeBytes: this.core.workspaceSnapshots ? this.core.workspaceSnapshots.diskBytes() : null,
        now: this.core.now(),
      },
      filter,
    );
  }
}
