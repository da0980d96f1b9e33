/**
 * Rollback: rolling the workspace back to a
 * checkpoint (all of it, some paths, or only the agent's changes), undoing the last
 * rollback, who changed what since a checkpoint (agent or person), and finishing on
 * open a rollback a crash interrupted. It runs over the engine's serialized runner
 * and helpers (EngineCore) and holds no state of its own.
 */
import { randomUUID } from 'node:crypto';
import { WaypointError, errorMessage } from '../model/errors';
import type { CheckpointMeta, EventDataOf, Step, Task } from '../model/schema';
import type { NewEvent } from '../store/eventLog';
import { diffManifests, type Manifest } from '../snapshot';
import type { FileEntry, ManifestEntry } from '../snapshot/manifest';
import type { PlannedWrite } from '../snapshot/restore';
import { asMergeableText, revertAgentHunks, type AgentInterval } from '../snapshot/revertHunks';
import type { NotCapturedReport } from './checkpointCapture';
import type { EngineCore } from './engineCore';
import { newId } from './ids';
import { plural } from '../model/plural';
import { endsAgentInterval, trailingIsAgent } from './attribution';
import { ownWritesByKey } from './ownWrites';
import type { RollbackInput, RollbackPreviewInput, UndoRollbackInput } from './inputs';
import type { Outcome } from './runner';
import { isNoSpace } from './noSpace';
import { finishInterruptedPlans, type InterruptedPlan } from './interruptedPlans';
import type { Queries } from '../store/queries';

export interface RollbackResult extends NotCapturedReport {
  rollbackId: string;
  taskId: string;
  targetCheckpointId: string;
  preRollbackCheckpointId: string | null;
  preview: boolean;
  mode: 'all' | 'agent-only';
  /**
   * Exactly what is (or would be) written or deleted. A delete of a file that no step
   * of the task created (it appeared outside the task's steps: made by the person, a
   * terminal, another tool) carries `createdOutsideTask` (the pre-rollback checkpoint
   * holds it, so undo brings it back).
   */
  changes: { path: string; action: 'create' | 'modify' | 'delete'; createdOutsideTask?: true; agentHunksOnly?: true; mergedHash?: string }[];
  /**
   * A preview of a whole rollback (`all`): the files of `changes` that the person (or
   * a terminal) changed too since the checkpoint, whose edits a whole rollback loses
   * and an `agent-only` one keeps; empty when only the agent changed them.
   */
  personChanged?: string[];
  /** Paths deliberately left alone, with why (content not held, too large, conflicts). */
  kept: { path: string; reason: string }[];
  conflicts: string[];
  /**
   * `agent-only`: files the agent and the person both changed whose agent hunks were
   * reverted by a three-way merge, keeping the person's (their `changes` entry carries
   * `agentHunksOnly`, and `mergedHash`: the blob of the merged content, for a preview
   * to show). Files where the two overlap stay in `conflicts`, untouched.
   */
  merged?: string[];
  filesWritten: number;
  filesRemoved: number;
  abandonedSteps: string[];
  /** Undoing a rollback: the steps it had abandoned, given back their earlier status. */
  restoredSteps: string[];
}

/**
 * The steps a full rollback to `target` abandons: those started at or after it that
 * did (or were doing) work. One definition for a rollback and for its recovery on open.
 */
export function stepsToAbandon(queries: Queries, taskId: string, target: CheckpointMeta): Step[] {
  return queries.steps(taskId).filter((s) => s.startedAt !== null && s.startedAt >= target.createdAt && ['completed', 'in_progress', 'failed'].includes(s.status));
}

export class Rollbacks {
  constructor(private readonly core: EngineCore) {}

  /**
   * Rolls the workspace back to a checkpoint: a `pre_rollback` checkpoint of the
   * current workspace is taken and the plan is stored (durably, before any file is
   * touched) so a crash half-way is finished on the next open; files are written via
   * temp + rename; files the target lacks are removed only if a blob holds their
   * content; steps started after the target are abandoned. `agent-only` reverts only
   * paths changed inside step windows and reports paths the person also changed as
   * conflicts, untouched.
   */
  rollback(input: RollbackInput): Promise<RollbackResult> {
    return this.rollbackNow(input, {});
  }

  /**
   * Exactly what `rollback` with the same input would change, recording nothing: a
   * query (its scan may store new content, as any diff does). It runs after every
   * earlier operation, so it never sees a half-done one.
   */
  preview(input: RollbackPreviewInput): Promise<RollbackResult> {
    return this.rollbackNow(input, { preview: true });
  }

  /**
   * `preview`: plan only (see `preview` above);
   * `undoOf`: the rollback this one undoes, whose abandoned steps get their earlier status back in the same batch;
   * `leaveAlone`: the paths that rollback left as they were (its conflicts), which its undo leaves too.
   */
  async rollbackNow(
    input: RollbackPreviewInput & Pick<RollbackInput, 'idempotencyKey' | 'reason'>,
    { preview = false, undoOf, leaveAlone }: { preview?: boolean; undoOf?: string; leaveAlone?: ReadonlySet<string> },
  ): Promise<RollbackResult> {
    const ws = this.core.snapshots();
    const key = input.idempotencyKey ?? `rollback:${randomUUID()}`;
    const body = async (): Promise<Outcome<RollbackResult>> => {
      const task = this.core.requireTask(input.taskId);
      const target = this.core.requireCheckpoint(input.checkpointId);
      if (target.taskId !== task.id) {
        throw new WaypointError('invalid_input', `Checkpoint ${target.id} belongs to ${target.taskId ? `task ${target.taskId}` : 'no task'}, not ${task.id}.`);
      }
      const targetManifest = await ws.load(target);
      const mode = input.mode ?? 'all';
      // Before the scan: a file whose inode changed after this is re-hashed before the plan replaces it.
      const scannedAtMs = Date.now();
      const current = await ws.scanNow(this.core.latestCheckpoint());
      let paths = input.paths;
      let agentConflicts: string[] = [];
      let conflictReasons = new Map<string, string>();
      let mergedWrites: PlannedWrite[] = [];
      if (mode === 'agent-only') {
        const wanted = (p: string) => !input.paths || input.paths.some((q) => p === q || p.startsWith(`${q}/`));
        const split = await this.agentOnlyPaths(task, target, current);
        const merged = await this.mergeAgentHunks(task, target, current, split.conflicts.filter(wanted));
        mergedWrites = merged.writes;
        conflictReasons = merged.refused;
        agentConflicts = split.conflicts.filter((p) => !mergedWrites.some((w) => w.path === p));
        paths = split.revert.filter(wanted);
      }
      const plan = paths && paths.length === 0 ? { writes: [], removes: [], kept: [], unchanged: 0 } : await ws.plan(current, targetManifest, paths);
      plan.writes.push(...mergedWrites);
      plan.scannedAtMs = scannedAtMs;
      // Undoing a rollback: what it kept as a conflict (an edit it found) it never changed, so the undo leaves it too.
      const leftAlone: string[] = [];
      if (leaveAlone?.size) {
        const out = (p: { path: string }) => (leaveAlone.has(p.path) ? (leftAlone.push(p.path), false) : true);
        plan.writes = plan.writes.filter(out);
        plan.removes = plan.removes.filter(out);
        mergedWrites = mergedWrites.filter((w) => !leaveAlone.has(w.path));
      }
      const outside = plan.removes.length ? await this.createdOutsideSteps(task.id, target, current, plan.removes.map((r) => r.path)) : new Set<string>();
      const changes: RollbackResult['changes'] = [
        ...plan.writes.map((w) =>
          mergedWrites.includes(w) && w.entry.type === 'file' ? { path: w.path, action: 'modify' as const, agentHunksOnly: true as const, mergedHash: w.entry.hash } : { path: w.path, action: current.has(w.path) ? ('modify' as const) : ('create' as const) },
        ),
        ...plan.removes.map((r) => (outside.has(r.path) ? { path: r.path, action: 'delete' as const, createdOutsideTask: true as const } : { path: r.path, action: 'delete' as const })),
      ].sort((a, b) => (a.path < b.path ? -1 : 1));
      const kept = [
        ...plan.kept.map((k) => ({ path: k.path, reason: k.reason as string })),
        ...leftAlone.sort().map((p) => ({ path: p, reason: 'the rollback being undone kept it as it was (changed while that rollback ran); left as it is' })),
        ...agentConflicts.map((p) => ({ path: p, reason: `changed by both the agent and you${conflictReasons.has(p) ? ` (${conflictReasons.get(p)})` : ''}; left for you to choose` }))];
      const fullRollback = !input.paths && mode === 'all';
      const toAbandon = fullRollback
        ? stepsToAbandon(this.core.queries, task.id, target)
        : [];
      const base: RollbackResult = {
        rollbackId: '',
        taskId: task.id,
        targetCheckpointId: target.id,
        preRollbackCheckpointId: null,
        preview,
        mode,
        changes,
        kept,
        conflicts: agentConflicts,
        ...(mode === 'agent-only' ? { merged: mergedWrites.map((w) => w.path) } : {}),
        filesWritten: 0,
        filesRemoved: 0,
        abandonedSteps: toAbandon.map((s) => s.id),
        restoredSteps: [],
      };
      const toRestore = undoOf ? this.core.queries.stepsToRestore(task.id, undoOf).filter((r) => !toAbandon.some((s) => s.id === r.stepId)) : [];
      base.restoredSteps = toRestore.map((r) => r.stepId);
      if (preview) {
        if (mode === 'all' && changes.length > 0) {
          const { person } = await this.changesByOwner(task.id, target.id, current);
          base.personChanged = changes.filter((c) => person.has(c.path)).map((c) => c.path);
        }
        return { result: base };
      }
      // A plan that applying would refuse (a hostile manifest, a symlinked parent) is refused now, before anything is recorded.
      await ws.validate(plan);

      // 1. The before state becomes a checkpoint, and the plan is durable, before any file changes.
      const { event: preEvent, checkpoint: pre, report: preReport } = await this.core.captureCheckpoint(task, 'pre_rollback', null, input.reason ?? `before rolling back to ${target.id}`);
      const planRef = await ws.savePlan(plan);
      const rollbackId = newId('r');
      await this.core.record([
        { ...preEvent, key: `${key}#pre` },
        this.core.ev('rollback.started', task, null, { rollbackId, targetCheckpointId: target.id, preRollbackCheckpointId: pre.id, paths: mergedWrites.length ? [...(paths ?? []), ...mergedWrites.map((w) => w.path)].sort() : (paths ?? null), mode, planRef }, `${key}#start`),
      ]);
      // 2. Apply (idempotent: a crash here is finished on the next open).
      let applied: Awaited<ReturnType<typeof ws.apply>>;
      try {
        applied = await ws.apply(plan);
      } catch (e) {
        // Stopped part-way (a full disk, a file in the way): recorded as failed, so it is not
        // re-applied on open, and undoable like any other (the pre-rollback checkpoint holds the before state).
        // No temp outlives it (a write that ran out of space leaves its temp beside the file).
        await ws.sweepTemps(plan).catch((err: unknown) => this.core.log.warn(`[rollback] could not remove its temp files: ${errorMessage(err)}`, task.correlationId));
        const note = `The rollback to ${target.id} stopped part-way (${errorMessage(e)}); the workspace is partly rolled back. Everything it held before is in checkpoint ${pre.id}: undo this rollback to return to it, or roll back again.`;
        await this.core.record([this.core.ev('rollback.done', task, null, { rollbackId, outcome: 'failed', filesWritten: 0, filesRemoved: 0, recovered: false, abandonedSteps: [], conflicts: [], note }, `${key}#failed`)]).catch(() => undefined); // no space even for this: the next open recovers it instead
        this.core.log.warn(note, task.correlationId);
        if (isNoSpace(e)) throw new WaypointError('io', `No space left for the rollback to ${target.id}: ${errorMessage(e)}. The workspace is partly rolled back; free space on the disk holding ${this.core.workspace}, then undo it (waypoint rollback --task ${task.id} --undo) or roll back again.`, { preRollbackCheckpointId: pre.id });
        throw e;
      }
      // 3. Record the outcome; the task continues from the target.
      const keptNow = new Set(applied.conflicts.map((c) => c.path));
      const result: RollbackResult = {
        ...base,
        ...preReport, // what the before state could not hold: the rollback left those paths alone
        rollbackId,
        preRollbackCheckpointId: pre.id,
        filesWritten: applied.written.length,
        filesRemoved: applied.removed.length,
        conflicts: [...agentConflicts, ...applied.conflicts.map((c) => c.path)],
        // What was planned but found changed on disk was not written: it is kept, not a change.
        changes: applied.conflicts.length ? changes.filter((c) => !keptNow.has(c.path)) : changes,
        kept: [...kept, ...applied.conflicts.map((c) => ({ path: c.path, reason: c.reason }))],
      };
      const events = [
        {
          ...this.core.ev(
            'rollback.done',
            task,
            null,
            {
              rollbackId,
              outcome: 'applied',
              filesWritten: result.filesWritten,
              filesRemoved: result.filesRemoved,
              recovered: false,
              abandonedSteps: result.abandonedSteps,
              conflicts: result.conflicts,
              note: null,
            },
            key,
          ),
          op: 'rollback',
          result,
        },
        ...toAbandon.map((s, i) => this.core.ev('step.abandoned', task, null, { stepId: s.id, reason: `rolled back to ${target.id}` }, `${key}#abandon${i}`)),
        ...toRestore.map((r, i) => this.core.ev('step.restored', task, null, { stepId: r.stepId, status: r.status, rollbackId: undoOf!, reason: `undo of rollback ${undoOf}` }, `${key}#restore${i}`)),
      ];
      this.core.log.info(`rolled back task ${task.id} to ${target.id}: ${result.filesWritten} written, ${result.filesRemoved} removed`, task.correlationId);
      // The outcome comes back to the runner, which records it under the call's key.
      return { result, events };
    };
    if (preview) return (await this.core.exclusive(async () => body())).result;
    return this.core.run<RollbackResult>('rollback', key, body, { space: 'a rollback' });
  }

  /** Undoes the task's last rollback by rolling back to the checkpoint taken just before it. */
  undoRollback(input: UndoRollbackInput): Promise<RollbackResult> {
    return this.undo(input.taskId, input.idempotencyKey, false);
  }

  /** What undoing the task's last rollback would change, recording nothing (a query, like `preview`). */
  undoPreview(taskId: string): Promise<RollbackResult> {
    return this.undo(taskId, undefined, true);
  }

  private async undo(taskId: string, idempotencyKey: string | undefined, preview: boolean): Promise<RollbackResult> {
    this.core.requireTask(taskId);
    const last = this.core.queries.lastUndoableRollback(taskId);
    if (!last) throw new WaypointError('not_found', `Task ${taskId} has no rollback to undo.`);
    // Files and record together: the steps the rollback abandoned get their earlier status back in the undo's own batch.
    return this.rollbackNow(
      { taskId, checkpointId: last.preRollbackCheckpointId, paths: last.paths ?? undefined, reason: `undo of rollback ${last.id}`, idempotencyKey },
      { preview, undoOf: last.id, leaveAlone: new Set(last.conflicts) },
    );
  }

  /** For `agent-only`: paths changed inside step windows since the target, minus those the person touched too. */
  private async agentOnlyPaths(task: Task, target: CheckpointMeta, current: Manifest): Promise<{ revert: string[]; conflicts: string[] }> {
    const { agent, person } = await this.changesByOwner(task.id, target.id, current);
    const revert = [...agent].filter((p) => !person.has(p)).sort();
    const conflicts = [...agent].filter((p) => person.has(p)).sort();
    return { revert, conflicts };
  }

  /**
   * For `agent-only`, the files both the agent and the person changed: each one whose
   * agent hunks revert cleanly (see revertHunks.ts) becomes a write of the merged
   * content — stored as a blob now, so the plan made durable before any file changes
   * holds it; the others are refused with why. Only text files the agent modified in
   * place qualify: an agent step that created or deleted the file, a binary or
   * non-UTF-8 file, or one too large to hold, is the person's to decide.
   */
  private async mergeAgentHunks(task: Task, target: CheckpointMeta, current: Manifest, paths: readonly string[]): Promise<{ writes: PlannedWrite[]; refused: Map<string, string> }> {
    const writes: PlannedWrite[] = [];
    const refused = new Map<string, string>();
    if (paths.length === 0) return { writes, refused };
    const ws = this.core.snapshots();
    const intervals = await this.agentIntervals(task.id, target, current, paths);
    const text = async (e: FileEntry): Promise<string | null> => asMergeableText(await ws.blobs.get(e.hash));
    for (const p of paths) {
      const now = current.get(p);
      const steps = intervals.get(p) ?? [];
      if (now?.type !== 'file') {
        refused.set(p, 'it is not a file now');
        continue;
      }
      if (steps.some((s) => s.before?.type !== 'file' || s.after?.type !== 'file')) {
        refused.set(p, 'the agent created or deleted it');
        continue;
      }
      const texts: AgentInterval[] = [];
      let binary = (await text(now)) === null;
      for (const s of steps) {
        if (binary) break;
        const before = await text(s.before as FileEntry);
        const after = await text(s.after as FileEntry);
        if (before === null || after === null) binary = true;
        else texts.push({ before, after });
      }
      const currentText = binary ? null : await text(now);
      if (currentText === null) {
        refused.set(p, 'it is not a text file');
        continue;
      }
      const out = revertAgentHunks(currentText, texts);
      if (!out.ok) {
        refused.set(p, out.reason);
        continue;
      }
      if (out.text === currentText) continue; // nothing of the agent's is left in it
      const bytes = Buffer.from(out.text, 'utf8');
      const { hash } = await ws.blobs.put(bytes);
      writes.push({ path: p, entry: { type: 'file', hash, size: bytes.length, mode: now.mode, mtimeMs: 0, ino: 0 }, expectAbsent: false, was: now });
    }
    return { writes, refused };
  }

  /**
   * For each of `paths`, the agent's intervals that changed it since checkpoint
   * `from`, oldest first: its entry at the interval's start and end (the same
   * classification as changesByOwner; the open step's work since the last
   * checkpoint ends at `current`).
   */
  private async agentIntervals(taskId: string, from: CheckpointMeta, current: Manifest, paths: readonly string[]): Promise<Map<string, { before: ManifestEntry | undefined; after: ManifestEntry | undefined }[]>> {
    const ws = this.core.snapshots();
    const chain = this.core.queries.checkpoints(taskId).filter((c) => c.manifestRef && !c.damaged && c.createdAt >= from.createdAt && c.id !== from.id);
    const out = new Map<string, { before: ManifestEntry | undefined; after: ManifestEntry | undefined }[]>();
    const foreign = await this.notThisTasks(taskId, from);
    const note = (prev: Manifest, next: Manifest) => {
      for (const p of paths) {
        const a = prev.get(p);
        const b = next.get(p);
        const same = a?.type === 'file' && b?.type === 'file' ? a.hash === b.hash : JSON.stringify(a) === JSON.stringify(b);
        if (!same && !foreign(p, b)) out.set(p, [...(out.get(p) ?? []), { before: a, after: b }]);
      }
    };
    const agents = this.agentsInterval(taskId);
    let prev = await ws.load(from);
    for (const c of chain) {
      const next = await ws.load(c);
      if (agents(c)) note(prev, next);
      prev = next;
    }
    if (trailingIsAgent(chain[chain.length - 1] ?? from, this.core.queries.steps(taskId).some((s) => s.status === 'in_progress'))) note(prev, current);
    return out;
  }

  /**
   * The paths changed since checkpoint `fromId`, split by who changed them: an
   * interval ending in a checkpoint taken while a step was open is the agent's
   * work, any other interval the person's; edits since the last checkpoint belong
   * to the agent if a step is open now. Rollback (agent-only) and review (drift)
   * both classify with this. Pass `current` when already scanned (inside the runner).
   */
  async changesByOwner(taskId: string, fromId: string, current?: Manifest): Promise<{ agent: Set<string>; person: Set<string> }> {
    const ws = this.core.snapshots();
    const from = this.core.requireCheckpoint(fromId);
    const chain = this.core.queries.checkpoints(taskId).filter((c) => c.manifestRef && !c.damaged && c.createdAt >= from.createdAt && c.id !== from.id);
    const now = current ?? (await this.core.exclusive(() => ws.scanNow(this.core.latestCheckpoint())));
    const agent = new Set<string>();
    const person = new Set<string>();
    const agents = this.agentsInterval(taskId);
    const foreign = await this.notThisTasks(taskId, from);
    let prev = await ws.load(from);
    for (const c of chain) {
      const next = await ws.load(c);
      const inStep = agents(c);
      for (const ch of diffManifests(prev, next)) (inStep && !foreign(ch.path, ch.after) ? agent : person).add(ch.path);
      prev = next;
    }
    const trailing = trailingIsAgent(chain[chain.length - 1] ?? from, this.core.queries.steps(taskId).some((s) => s.status === 'in_progress'));
    for (const ch of diffManifests(prev, now)) (trailing && !foreign(ch.path, ch.after) ? agent : person).add(ch.path);
    return { agent, person };
  }

  /**
   * Whether the interval ending in checkpoint `c` is the agent's work: one ending in a
   * terminal command's `command_end` belongs to whoever ran the command (the agent
   * whose terminal it was, else the person); any other is the agent's when it ends in
   * a checkpoint taken while a step was open.
   */
  private agentsInterval(taskId: string): (c: CheckpointMeta) => boolean {
    const byEnd = new Map(this.core.queries.commands(taskId).filter((x) => x.afterCheckpointId).map((x) => [x.afterCheckpointId!, x.owner]));
    return (c) => {
      const command = c.kind === 'command_end' ? byEnd.get(c.id) : undefined;
      if (command) return command === 'agent';
      return endsAgentInterval(c);
    };
  }

  /**
   * Changes that are never this task's, whichever interval they fall in: what Waypoint
   * itself wrote (Connect an Agent's config files; see ownWrites.ts), and what another
   * hook-recorded task changed inside one of its own tool calls since `from` — that
   * file is the other task's. Matched by path and the entry the change left, so a later
   * edit of the same file by this task's agent is still its own.
   */
  private async notThisTasks(taskId: string, from: CheckpointMeta): Promise<(path: string, after: ManifestEntry | undefined) => boolean> {
    const ws = this.core.workspaceSnapshots;
    if (!ws) return () => false;
    const own = ownWritesByKey(this.core.storeDir, ws.roots);
    const others = new Map<string, Set<string>>();
    const tools = this.core.queries.toolCheckpointsSince(taskId, from.createdAt).filter((c) => c.manifestRef && !c.damaged);
    for (let i = 1; i < tools.length; i++) {
      const [a, b] = [tools[i - 1]!, tools[i]!];
      if (a.taskId !== b.taskId || a.kind !== 'tool_start' || b.kind !== 'tool_end') continue;
      // Attribution only: an unreadable manifest is passed over.
      const pair = await Promise.all([ws.load(a), ws.load(b)]).catch(() => null);
      if (!pair) continue;
      for (const ch of diffManifests(pair[0], pair[1])) {
        let set = others.get(ch.path);
        if (!set) others.set(ch.path, (set = new Set()));
        set.add(entryKey(ch.after));
      }
    }
    if (!own.size && !others.size) return () => false;
    return (p, after) => (after?.type === 'file' && own.get(p)?.has(after.hash) === true) || others.get(p)?.has(entryKey(after)) === true;
  }

  /**
   * Of `paths` (present now, absent at checkpoint `from`), those no step of the task
   * created: each path's last appearance (absent in one of the task's checkpoints,
   * present in the next) fell in an interval that is not a step's (see
   * changesByOwner), or after the last checkpoint while no step is open.
   */
  private async createdOutsideSteps(taskId: string, from: CheckpointMeta, current: Manifest, paths: readonly string[]): Promise<Set<string>> {
    const ws = this.core.snapshots();
    const chain = this.core.queries.checkpoints(taskId).filter((c) => c.manifestRef && c.createdAt >= from.createdAt && c.id !== from.id);
    const byStep = new Map<string, boolean>();
    const agents = this.agentsInterval(taskId);
    const foreign = await this.notThisTasks(taskId, from);
    let prev = await ws.load(from);
    const appeared = (next: Manifest, inStep: boolean) => {
      for (const p of paths) if (!prev.has(p) && next.has(p)) byStep.set(p, inStep && !foreign(p, next.get(p)));
    };
    let last: CheckpointMeta = from;
    for (const c of chain) {
      // Attribution only: a checkpoint whose manifest cannot be read (corrupt) is passed over, never a reason to refuse the rollback.
      const next = await ws.load(c).catch(() => null);
      if (next === null) continue;
      appeared(next, agents(c));
      prev = next;
      last = c;
    }
    appeared(current, trailingIsAgent(last, this.core.queries.steps(taskId).some((s) => s.status === 'in_progress')));
    return new Set(paths.filter((p) => byStep.get(p) !== true));
  }

  /**
   * Finishes rollbacks that a crash interrupted: the stored plan is applied again
   * (it converges), so the workspace ends in the after state. Returns a sentence per
   * rollback for the person.
   */
  async recoverRollbacks(): Promise<string[]> {
    const plans: InterruptedPlan[] = this.core.queries.startedRollbacks().map((r) => ({
      taskId: r.taskId,
      planRef: r.planRef!,
      outcome: async (replay, task) => {
        // Read from the task's events (the export may have moved them to the segments): recovery is rare.
        const startKey =
          (await this.core.eventLog.read({ taskId: r.taskId })).find((e) => e.type === 'rollback.started' && (e.data as EventDataOf<'rollback.started'>).rollbackId === r.id)?.key ?? `rollback:${r.id}#start`;
        const key = startKey.replace(/#start$/, '');
        const conflicts = replay.ok ? replay.conflicts : [];
        const kept = conflicts.length ? ` ${plural(conflicts.length, 'file')} changed since it was planned ${conflicts.length === 1 ? 'was' : 'were'} left as ${conflicts.length === 1 ? 'it was' : 'they were'}: ${conflicts.slice(0, 5).join(', ')}${conflicts.length > 5 ? ', …' : ''}.` : '';
        const note = replay.ok
          ? `A rollback to ${r.targetCheckpointId} was interrupted; it was finished on open, so the workspace is in the rolled-back state (undo it with the task's Undo Last Rollback).${kept}`
          : `A rollback to ${r.targetCheckpointId} was interrupted and could not be finished (${replay.error}); the workspace may be partly rolled back. Undo it (Undo Last Rollback, or waypoint rollback --undo) to return to the before state.`;
        const target = this.core.queries.checkpoint(r.targetCheckpointId);
        const toAbandon = task && target && replay.ok ? stepsToAbandon(this.core.queries, task.id, target) : [];
        const ev: NewEvent = {
          type: 'rollback.done',
          taskId: r.taskId,
          corr: task?.correlationId ?? null,
          by: null,
          key: this.core.queries.idempotent(key) ? `${key}#recovered` : key,
          data: { rollbackId: r.id, outcome: replay.ok ? 'applied' : 'failed', filesWritten: replay.ok ? replay.written : 0, filesRemoved: replay.ok ? replay.removed : 0, recovered: true, abandonedSteps: toAbandon.map((s) => s.id), conflicts, note },
        };
        const events: NewEvent[] = [ev, ...toAbandon.map((s, i) => ({ ...this.core.ev('step.abandoned', task!, null, { stepId: s.id, reason: `rolled back to ${r.targetCheckpointId}` }, `${key}#abandon${i}`) }))];
        // A fork stopped before its base was taken: its base is the workspace the finished restore left.
        if (task?.forkedFrom && !task.baseCheckpointId && replay.ok) {
          const { event } = await this.core.captureCheckpoint({ ...task, lastCheckpointId: r.targetCheckpointId }, 'task_base', null, `forked from ${r.targetCheckpointId}`);
          events.push({ ...event, key: `${key}#base` });
        }
        return { events, note };
      },
    }));
    return finishInterruptedPlans(this.core, plans);
  }
}

/** What a change left at a path, comparable across manifests (content, not stat fields). */
function entryKey(e: ManifestEntry | undefined): string {
  if (!e) return 'absent';
  if (e.type === 'file') return `file:${e.hash}:${e.mode}`;
  if (e.type === 'symlink') return `link:${e.target}`;
  return `${e.type}:${JSON.stringify(e)}`;
}
