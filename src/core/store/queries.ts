import type { Db } from './db';
import type { Projection } from './eventLog';
import { DEFAULT_RETRY_POLICY, type CheckpointMeta, type Lease, type SideEffect, type Step, type StepStatus, type Task, type TaskHold, type TaskState, type TerminalCommand, type Turn } from '../model/schema';
import { notFound } from '../model/errors';

/** Read side of the engine: projection rows → model objects. */

const parse = (v: unknown): unknown => (v === null || v === undefined ? null : JSON.parse(String(v)));

function toLease(r: Record<string, unknown> | undefined): Lease | null {
  if (!r) return null;
  return {
    owner: String(r.owner),
    pid: r.pid == null ? null : Number(r.pid),
    host: (r.host as string | null) ?? null,
    ttlMs: Number(r.ttl_ms),
    heartbeatAt: Number(r.heartbeat_at),
    expiresAt: Number(r.expires_at),
  };
}

export function toTask(r: Record<string, unknown>, lease: Record<string, unknown> | undefined): Task {
  return {
    id: String(r.id),
    title: String(r.title),
    goal: String(r.goal),
    agent: (r.agent as string | null) ?? null,
    state: r.state as TaskState,
    correlationId: String(r.correlation_id),
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
    attempt: Number(r.attempt),
    baseCheckpointId: (r.base_checkpoint_id as string | null) ?? null,
    lastCheckpointId: (r.last_checkpoint_id as string | null) ?? null,
    summary: (r.summary as string | null) ?? null,
    commit: (r.commit_hash as string | null) ?? null,
    interruption: parse(r.interruption) as Task['interruption'],
    lease: toLease(lease),
    forkedFrom: parse(r.forked_from) as Task['forkedFrom'],
    retry: (parse(r.retry) as Task['retry'] | null) ?? { ...DEFAULT_RETRY_POLICY },
    hold: holdOf(r),
    reopened: parse(r.reopened) as Task['reopened'],
    kind: r.kind === 'history' ? 'history' : 'task',
  };
}

const list = (v: unknown): string[] => (v == null ? [] : (JSON.parse(String(v)) as string[]));

export function toCommand(r: Record<string, unknown>): TerminalCommand {
  return {
    taskId: String(r.task_id),
    id: String(r.id),
    commandLine: String(r.command_line),
    cwd: (r.cwd as string | null) ?? null,
    terminal: String(r.terminal),
    owner: r.owner === 'agent' ? 'agent' : 'terminal',
    agent: (r.agent as string | null) ?? null,
    stepId: (r.step_id as string | null) ?? null,
    startedAt: Number(r.started_at),
    endedAt: r.ended_at == null ? null : Number(r.ended_at),
    exitCode: r.exit_code == null ? null : Number(r.exit_code),
    beforeCheckpointId: (r.before_checkpoint_id as string | null) ?? null,
    afterCheckpointId: (r.after_checkpoint_id as string | null) ?? null,
    changed: list(r.changed),
    created: list(r.created),
    deleted: list(r.deleted),
    filesTotal: Number(r.files_total ?? 0),
  };
}

/**
 * The task's hold: recorded when retries ran out; otherwise derived while a stopped
 * task has side effects in doubt (`in_doubt` counted by the query), which only a
 * person can settle — it lifts by itself once they are.
 */
function holdOf(r: Record<string, unknown>): TaskHold | null {
  const recorded = parse(r.hold) as TaskHold | null;
  if (recorded) return recorded;
  const stopped = r.state === 'interrupted' || r.state === 'suspended';
  const inDoubt = Number(r.in_doubt ?? 0);
  if (!stopped || inDoubt === 0) return null;
  const why = parse(r.interruption) as Task['interruption'];
  return {
    cause: 'inconsistent_state',
    stepId: why?.stepId ?? null,
    reason: `${inDoubt} side effect${inDoubt === 1 ? ' is' : 's are'} in doubt (it may or may not have happened)${why ? ` after: ${why.reason}` : ''}`,
    since: why?.at ?? Number(r.updated_at),
  };
}

export function toStep(r: Record<string, unknown>): Step {
  return {
    taskId: String(r.task_id),
    id: String(r.id),
    order: Number(r.ord),
    title: String(r.title),
    dependsOn: JSON.parse(String(r.depends_on)) as string[],
    status: r.status as Step['status'],
    attempts: Number(r.attempts),
    inputs: parse(r.inputs),
    outputs: parse(r.outputs),
    summary: (r.summary as string | null) ?? null,
    error: parse(r.error) as Step['error'],
    startedAt: r.started_at == null ? null : Number(r.started_at),
    endedAt: r.ended_at == null ? null : Number(r.ended_at),
    adhoc: Number(r.adhoc) === 1,
    taskAttempt: r.task_attempt == null ? null : Number(r.task_attempt),
    maxAttempts: r.max_attempts == null ? DEFAULT_RETRY_POLICY.maxAttempts : Number(r.max_attempts),
  };
}

export function toCheckpoint(r: Record<string, unknown>): CheckpointMeta {
  return {
    id: String(r.id),
    taskId: (r.task_id as string | null) ?? null,
    stepId: (r.step_id as string | null) ?? null,
    kind: r.kind as CheckpointMeta['kind'],
    label: (r.label as string | null) ?? null,
    parentId: (r.parent_id as string | null) ?? null,
    createdAt: Number(r.created_at),
    manifestRef: (r.manifest_ref as string | null) ?? null,
    files: Number(r.files),
    filesChanged: Number(r.files_changed),
    bytes: Number(r.bytes ?? 0),
    ...(r.damaged != null ? { damaged: String(r.damaged) } : {}),
  };
}

export function toSideEffect(r: Record<string, unknown>): SideEffect {
  return {
    taskId: String(r.task_id),
    key: String(r.key),
    stepId: (r.step_id as string | null) ?? null,
    kind: String(r.kind),
    description: String(r.description),
    args: parse(r.args),
    status: r.status as SideEffect['status'],
    result: parse(r.result),
    error: (r.error as string | null) ?? null,
    attempts: Number(r.attempts),
    intentAt: Number(r.intent_at),
    endedAt: r.ended_at == null ? null : Number(r.ended_at),
    resolvedBy: (r.resolved_by as SideEffect['resolvedBy']) ?? null,
  };
}

const IN_DOUBT = "(SELECT COUNT(*) FROM side_effects x WHERE x.task_id = tasks.id AND x.status = 'in_doubt') AS in_doubt";

/** Up to this many tasks, each one's lease is read on its own (see tasks). */
const FEW_ROWS = 8;

export class Queries {
  constructor(private readonly db: () => Db) {}

  /** The reader over a projection's database: the one place outside the store that holds it (the lint rule against `.db` exempts this file). */
  static of(projection: Projection): Queries {
    return new Queries(() => projection.db);
  }

  findTask(id: string): Task | null {
    const r = this.db().get(`SELECT *, ${IN_DOUBT} FROM tasks WHERE id = ?`, [id]);
    if (!r) return null;
    return toTask(r, this.db().get('SELECT * FROM leases WHERE task_id = ?', [id]));
  }

  task(id: string): Task {
    const t = this.findTask(id);
    if (!t) throw notFound('task', id);
    return t;
  }

  /**
   * Tasks, newest first. Workspace history records (kind `history`) are left out
   * unless asked for: they are the engine's, not a job anyone started, so no list,
   * count, lease sweep or alert should see them as tasks.
   */
  tasks(filter: { states?: readonly TaskState[]; limit?: number; kind?: Task['kind'] } = {}): Task[] {
    const states = filter.states?.length ? `AND state IN (${filter.states.map(() => '?').join(',')})` : '';
    const rows = this.db().all(`SELECT *, ${IN_DOUBT} FROM tasks WHERE kind = ? ${states} ORDER BY updated_at DESC, id LIMIT ?`, [filter.kind ?? 'task', ...(filter.states ?? []), filter.limit ?? -1]);
    // A few rows (the latest active task, asked on every watcher event and auto checkpoint):
    // their own leases, not every lease of a store that may hold thousands of tasks.
    if (rows.length <= FEW_ROWS) return rows.map((r) => toTask(r, this.db().get('SELECT * FROM leases WHERE task_id = ?', [r.id as string])));
    const leases = new Map(this.db().all('SELECT * FROM leases').map((l) => [String(l.task_id), l]));
    return rows.map((r) => toTask(r, leases.get(String(r.id))));
  }

  /** The earliest lease end among active tasks (0 when one has no lease: the sweep takes it now), or null when none is active. */
  earliestLeaseEnd(activeStates: readonly TaskState[]): number | null {
    const r = this.db().get<{ n: number; at: number | null }>(
      `SELECT COUNT(*) AS n, MIN(COALESCE(l.expires_at, 0)) AS at FROM tasks t LEFT JOIN leases l ON l.task_id = t.id WHERE t.kind = 'task' AND t.state IN (${activeStates.map(() => '?').join(',')})`,
      [...activeStates],
    );
    return r && Number(r.n) > 0 ? Number(r.at) : null;
  }

  /** The same among these tasks only, each looked up by its key (what a commit changed). */
  earliestLeaseEndOf(taskIds: readonly string[], activeStates: readonly TaskState[]): number | null {
    let earliest: number | null = null;
    for (const id of new Set(taskIds)) {
      const r = this.db().get<{ state: TaskState; kind: string; at: number | null }>('SELECT t.state, t.kind, l.expires_at AS at FROM tasks t LEFT JOIN leases l ON l.task_id = t.id WHERE t.id = ?', [id]);
      if (!r || r.kind !== 'task' || !activeStates.includes(r.state)) continue;
      const at = r.at === null ? 0 : Number(r.at);
      earliest = earliest === null ? at : Math.min(earliest, at);
    }
    return earliest;
  }

  /** A task's terminal commands, in the order they started. */
  commands(taskId: string): TerminalCommand[] {
    return this.db().all('SELECT * FROM terminal_commands WHERE task_id = ? ORDER BY started_at, rowid', [taskId]).map(toCommand);
  }

  command(taskId: string, id: string): TerminalCommand | null {
    const r = this.db().get('SELECT * FROM terminal_commands WHERE task_id = ? AND id = ?', [taskId, id]);
    return r ? toCommand(r) : null;
  }

  steps(taskId: string): Step[] {
    return this.db().all('SELECT * FROM steps WHERE task_id = ? ORDER BY ord', [taskId]).map(toStep);
  }

  /** Every task's steps in one query (for views listing many tasks). */
  allSteps(): Step[] {
    return this.db().all('SELECT * FROM steps ORDER BY task_id, ord').map(toStep);
  }

  /** A task's conversation turns (hook-recorded agents), oldest first. */
  turns(taskId: string): Turn[] {
    return this.db()
      .all('SELECT * FROM turns WHERE task_id = ? ORDER BY ended_at, session_id, turn', [taskId])
      .map((r) => ({
        taskId: String(r.task_id),
        sessionId: String(r.session_id),
        turn: Number(r.turn),
        stepId: (r.step_id as string | null) ?? null,
        prompt: String(r.prompt),
        lastMessage: (r.last_message as string | null) ?? null,
        tools: JSON.parse(String(r.tools)) as Turn['tools'],
        compactions: Number(r.compactions),
        startedAt: Number(r.started_at),
        endedAt: Number(r.ended_at),
      }));
  }

  step(taskId: string, stepId: string): Step | null {
    const r = this.db().get('SELECT * FROM steps WHERE task_id = ? AND id = ?', [taskId, stepId]);
    return r ? toStep(r) : null;
  }

  checkpoints(taskId?: string): CheckpointMeta[] {
    const rows = taskId
      ? this.db().all('SELECT * FROM checkpoints WHERE task_id = ? ORDER BY created_at, rowid', [taskId])
      : this.db().all('SELECT * FROM checkpoints ORDER BY created_at, rowid');
    return rows.map(toCheckpoint);
  }

  /** Other tasks' tool-call checkpoints (hook-recorded work) taken since `since`, by task, then in order. */
  toolCheckpointsSince(exceptTaskId: string, since: number): CheckpointMeta[] {
    return this.db()
      .all("SELECT * FROM checkpoints WHERE task_id <> ? AND created_at >= ? AND kind IN ('tool_start', 'tool_end') ORDER BY task_id, created_at, rowid", [exceptTaskId, since])
      .map(toCheckpoint);
  }

  checkpoint(id: string): CheckpointMeta | null {
    const r = this.db().get('SELECT * FROM checkpoints WHERE id = ?', [id]);
    return r ? toCheckpoint(r) : null;
  }

  /** Every task's side effects in doubt (begun, outcome unknown), oldest first: what alerts watch. */
  sideEffectsInDoubt(): SideEffect[] {
    return this.db().all("SELECT * FROM side_effects WHERE status = 'in_doubt' ORDER BY intent_at, task_id, key").map(toSideEffect);
  }

  sideEffects(taskId: string): SideEffect[] {
    return this.db().all('SELECT * FROM side_effects WHERE task_id = ? ORDER BY intent_at, key', [taskId]).map(toSideEffect);
  }

  /** Every task's side effects in one query (metrics). */
  allSideEffects(): SideEffect[] {
    return this.db().all('SELECT * FROM side_effects ORDER BY task_id, intent_at, key').map(toSideEffect);
  }

  sideEffect(taskId: string, key: string): SideEffect | null {
    const r = this.db().get('SELECT * FROM side_effects WHERE task_id = ? AND key = ?', [taskId, key]);
    return r ? toSideEffect(r) : null;
  }

  idempotent(key: string): { op: string; seq: number; result: unknown } | null {
    const r = this.db().get<{ op: string; seq: number; result: string | null }>('SELECT op, seq, result FROM idempotency WHERE key = ?', [key]);
    return r ? { op: r.op, seq: Number(r.seq), result: r.result == null ? null : JSON.parse(r.result) } : null;
  }

  // --- rollbacks, recovery and retention: every read the engine (and the UI) makes of these tables lives here ---

  /** The newest checkpoint with a manifest that is not marked damaged (the base of the next scan). */
  latestIntactCheckpointId(): string | null {
    const r = this.db().get<{ id: string }>('SELECT id FROM checkpoints WHERE manifest_ref IS NOT NULL AND damaged IS NULL ORDER BY created_at DESC, rowid DESC LIMIT 1');
    return r ? String(r.id) : null;
  }

  /** The seq of the last side-effect event of a task's key still in the events table (0 if none). */
  lastSideEffectSeq(taskId: string, key: string): number {
    const r = this.db().get<{ m: number | null }>("SELECT MAX(seq) AS m FROM events WHERE task_id = ? AND type LIKE 'side_effect.%' AND json_extract(data, '$.key') = ?", [taskId, key]);
    return Number(r?.m ?? 0);
  }

  /**
   * The task's rollback an undo reverses: the newest one applied, or one that stopped
   * part-way (failed, or started and not yet recovered), which is undone like an applied one.
   */
  /**
   * The task's latest rollback, when it is one to undo: not itself an undo (its target
   * is an earlier rollback's before state) and not undone since (a later rollback went
   * back to its before state). Undoing an undo is a new rollback to that checkpoint,
   * from the tree, not "Undo Last Rollback" again.
   */
  lastUndoableRollback(taskId: string): { id: string; preRollbackCheckpointId: string; targetCheckpointId: string; paths: string[] | null; conflicts: string[] } | null {
    const r = this.db().get<{ pre: string; target: string; paths: string | null; id: string; outcome: string | null }>(
      `SELECT r.pre_rollback_checkpoint_id AS pre, r.target_checkpoint_id AS target, r.paths, r.id, r.outcome FROM rollbacks r
       WHERE r.task_id = ? AND r.state IN ('applied', 'failed', 'started')
         AND NOT EXISTS (SELECT 1 FROM rollbacks o WHERE o.task_id = r.task_id AND o.id <> r.id AND o.pre_rollback_checkpoint_id = r.target_checkpoint_id)
       ORDER BY r.started_at DESC, r.rowid DESC LIMIT 1`,
      [taskId],
    );
    if (!r) return null;
    const undone = this.db().get('SELECT 1 AS x FROM rollbacks WHERE task_id = ? AND id <> ? AND target_checkpoint_id = ?', [taskId, r.id, r.pre]);
    if (undone) return null;
    // The paths it left as they were (its outcome's conflicts): its undo leaves them too.
    const conflicts = r.outcome ? (JSON.parse(r.outcome) as { conflicts?: unknown }).conflicts : undefined;
    return {
      id: String(r.id),
      preRollbackCheckpointId: String(r.pre),
      targetCheckpointId: String(r.target),
      paths: r.paths ? (JSON.parse(r.paths) as string[]) : null,
      conflicts: Array.isArray(conflicts) ? conflicts.filter((c): c is string => typeof c === 'string') : [],
    };
  }

  /** The tasks whose latest rollback can be undone (for the "Undo Last Rollback" menu item and palette entry). */
  undoableTaskIds(): string[] {
    return this.db()
      .all<{ id: string }>('SELECT DISTINCT task_id AS id FROM rollbacks')
      .map((r) => r.id)
      .filter((id) => this.lastUndoableRollback(id) !== null);
  }

  /**
   * The steps `rollbackId` abandoned that are still abandoned, with the status each had
   * before: what undoing that rollback gives back.
   */
  stepsToRestore(taskId: string, rollbackId: string): { stepId: string; status: StepStatus }[] {
    const r = this.db().get<{ outcome: string | null }>('SELECT outcome FROM rollbacks WHERE id = ? AND task_id = ?', [rollbackId, taskId]);
    const abandoned = r?.outcome ? ((JSON.parse(r.outcome) as { abandonedSteps?: string[] }).abandonedSteps ?? []) : [];
    const out: { stepId: string; status: StepStatus }[] = [];
    for (const stepId of abandoned) {
      const s = this.db().get<{ status: string; from: string | null }>('SELECT status, abandoned_from AS "from" FROM steps WHERE task_id = ? AND id = ?', [taskId, stepId]);
      if (s?.status === 'abandoned' && s.from && s.from !== 'abandoned') out.push({ stepId, status: s.from as StepStatus });
    }
    return out;
  }

  /** Rollbacks whose outcome was never recorded (a crash, or a stop part-way): recovery finishes them. */
  startedRollbacks(): { id: string; taskId: string; planRef: string | null; targetCheckpointId: string }[] {
    return this.db()
      .all<{ id: string; task_id: string; plan_ref: string | null; target_checkpoint_id: string }>("SELECT id, task_id, plan_ref, target_checkpoint_id FROM rollbacks WHERE state = 'started'")
      .map((r) => ({ id: r.id, taskId: r.task_id, planRef: r.plan_ref, targetCheckpointId: r.target_checkpoint_id }));
  }

  /** Checkpoints retention must keep: every task's base and latest, every rollback's target and pre-rollback state. */
  protectedCheckpointIds(): Set<string> {
    const keep = new Set<string>();
    for (const t of this.db().all<{ b: string | null; l: string | null }>('SELECT base_checkpoint_id AS b, last_checkpoint_id AS l FROM tasks')) {
      if (t.b) keep.add(t.b);
      if (t.l) keep.add(t.l);
    }
    for (const r of this.db().all<{ t: string; p: string }>('SELECT target_checkpoint_id AS t, pre_rollback_checkpoint_id AS p FROM rollbacks')) {
      keep.add(r.t);
      keep.add(r.p);
    }
    return keep;
  }

  /**
   * The task a checkpoint no longer in the projection belonged to, when that task was
   * deleted (its creation event is still in the events table): lets a refusal say why.
   */
  deletedCheckpointTask(checkpointId: string): string | null {
    const r = this.db().get<{ t: string | null }>(
      `SELECT c.task_id AS t FROM events c WHERE c.type = 'checkpoint.created' AND json_extract(c.data, '$.checkpointId') = ?
         AND EXISTS (SELECT 1 FROM events d WHERE d.type = 'task.deleted' AND d.task_id = c.task_id) LIMIT 1`,
      [checkpointId],
    );
    return r?.t ?? null;
  }

  /**
   * Review applies whose outcome was never recorded, on tasks not finished. The task need
   * not be waiting for review: an apply that keeps the task open, or one that finishes it
   * (its review request is recorded with the outcome, after the commit), runs while the
   * task is still running.
   */
  unfinishedReviewApplies(): { key: string; taskId: string; data: string }[] {
    return this.db()
      .all<{ key: string; task_id: string; data: string }>(
        `SELECT a.start_key AS key, a.task_id, a.data FROM review_applies a JOIN tasks t ON t.id = a.task_id
         WHERE t.state NOT IN ('completed', 'abandoned') AND a.done = 0 ORDER BY a.rowid`,
      )
      .map((r) => ({ key: r.key, taskId: r.task_id, data: r.data }));
  }
}
