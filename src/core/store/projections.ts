import type { WaypointEvent, EventType, EventDataOf } from '../model/schema';
import type { Db } from './db';
import { PROJECTION_TABLES } from './migrations';
import { DEFAULT_RETRY_POLICY } from '../model/schema';

/**
 * Projections: the tables are folds over the events. `project` must be a pure
 * function of the event and the tables (it never reads the clock or the disk), so
 * rebuilding from the events alone gives the same tables — `verify` proves it.
 */

const json = (v: unknown): string | null => (v === undefined || v === null ? null : JSON.stringify(v));

export function insertEvent(db: Db, e: WaypointEvent): void {
  db.run(
    'INSERT INTO events (seq, ts, type, v, task_id, corr, key, by, data, op, result) VALUES (?,?,?,?,?,?,?,?,?,?,?)',
    [e.seq, e.ts, e.type, e.v, e.taskId, e.corr, e.key, e.by, JSON.stringify(e.data), e.op ?? null, json(e.result)],
  );
}

type Handler<T extends EventType> = (db: Db, e: WaypointEvent<T>, d: EventDataOf<T>) => void;
type Handlers = { [T in EventType]: Handler<T> };

/** A task's new state at the event's time, with the columns that say why (`also`: column names written here, never from input). */
function setTaskState(db: Db, taskId: string, state: string, ts: number, also: Partial<Record<'interruption' | 'hold', string | null>> = {}): void {
  const cols = Object.keys(also) as (keyof typeof also)[];
  db.run(`UPDATE tasks SET state = ?, ${cols.map((c) => `${c} = ?, `).join('')}updated_at = ? WHERE id = ?`, [state, ...cols.map((c) => also[c] ?? null), ts, taskId]);
}

/** Why a task stopped (failed, interrupted), as the tasks table keeps it. */
const stopRecord = (e: WaypointEvent, d: { reason: string; class: string; stepId?: string | null }): string => JSON.stringify({ reason: d.reason, class: d.class, at: e.ts, stepId: d.stepId });

function dropLease(db: Db, taskId: string): void {
  db.run('DELETE FROM leases WHERE task_id = ?', [taskId]);
}

/**
 * The task's driver went away (interrupted, suspended, held): an intent with no outcome
 * cannot be known to have run or not, and nobody holds the lease any more.
 */
function driverGone(db: Db, taskId: string): void {
  db.run("UPDATE side_effects SET status = 'in_doubt' WHERE task_id = ? AND status = 'intent'", [taskId]);
  dropLease(db, taskId);
}

/** A task waiting on a side effect goes back to running when no intent is open. */
function settleWaitingTool(db: Db, taskId: string, ts: number): void {
  const open = db.get<{ n: number }>("SELECT COUNT(*) AS n FROM side_effects WHERE task_id = ? AND status = 'intent'", [taskId]);
  if ((open?.n ?? 0) === 0) {
    db.run("UPDATE tasks SET state = 'running', updated_at = ? WHERE id = ? AND state = 'waiting_tool'", [ts, taskId]);
  }
}

/** The lease an owner takes when it starts or resumes a task (renewed by its later calls). */
function takeLease(db: Db, taskId: string, owner: { id: string; pid?: number; host?: string }, ttlMs: number, ts: number): void {
  db.run('INSERT OR REPLACE INTO leases (task_id, owner, pid, host, ttl_ms, heartbeat_at, expires_at) VALUES (?,?,?,?,?,?,?)', [
    taskId,
    owner.id,
    owner.pid ?? null,
    owner.host ?? null,
    ttlMs,
    ts,
    ts + ttlMs,
  ]);
}

/** The attempts a step of this task may use when its plan item sets none: the task's recorded policy. */
function taskMaxAttempts(db: Db, taskId: string): number {
  const r = db.get<{ retry: string | null }>('SELECT retry FROM tasks WHERE id = ?', [taskId]);
  return r?.retry ? (JSON.parse(r.retry) as { maxAttempts: number }).maxAttempts : DEFAULT_RETRY_POLICY.maxAttempts;
}

function insertPlan(db: Db, taskId: string, items: { id: string; title: string; dependsOn?: string[]; maxAttempts?: number }[]): void {
  const max = db.get<{ m: number | null }>('SELECT MAX(ord) AS m FROM steps WHERE task_id = ?', [taskId])?.m ?? -1;
  const policyMax = taskMaxAttempts(db, taskId);
  items.forEach((item, i) => {
    db.run(
      `INSERT INTO steps (task_id, id, ord, title, depends_on, status, attempts, adhoc, max_attempts) VALUES (?,?,?,?,?, 'pending', 0, 0, ?)`,
      [taskId, item.id, max + 1 + i, item.title, JSON.stringify(item.dependsOn ?? []), item.maxAttempts ?? policyMax],
    );
  });
}

const handlers: Handlers = {
  'task.started': (db, e, d) => {
    db.run(
      `INSERT INTO tasks (id, title, goal, agent, state, correlation_id, created_at, updated_at, attempt, forked_from, retry, kind)
       VALUES (?,?,?,?, 'running', ?,?,?, 1, ?, ?, ?)`,
      [e.taskId, d.title, d.goal, d.agent, e.corr ?? e.taskId, e.ts, e.ts, json(d.forkedFrom), json(d.retry ?? DEFAULT_RETRY_POLICY), d.kind ?? 'task'],
    );
    insertPlan(db, e.taskId!, d.plan);
    takeLease(db, e.taskId!, d.owner, d.leaseTtlMs, e.ts);
  },
  'task.plan_updated': (db, e, d) => insertPlan(db, e.taskId!, d.added),
  'command.started': (db, e, d) => {
    db.run(
      `INSERT INTO terminal_commands (task_id, id, command_line, cwd, terminal, owner, agent, step_id, started_at, before_checkpoint_id)
       VALUES (?,?,?,?,?,?,?,?,?,?)`,
      [e.taskId, d.commandId, d.commandLine, d.cwd, d.terminal, d.owner, d.agent, d.stepId, e.ts, d.checkpointId],
    );
  },
  'command.ended': (db, e, d) => {
    db.run(
      `UPDATE terminal_commands SET ended_at = ?, exit_code = ?, after_checkpoint_id = ?, changed = ?, created = ?, deleted = ?, files_total = ? WHERE task_id = ? AND id = ?`,
      [e.ts, d.exitCode, d.checkpointId, JSON.stringify(d.changed), JSON.stringify(d.created), JSON.stringify(d.deleted), d.filesTotal, e.taskId, d.commandId],
    );
  },
  'task.review_requested': (db, e, d) => {
    db.run("UPDATE tasks SET state = 'waiting_review', summary = COALESCE(?, summary), updated_at = ? WHERE id = ?", [d.summary, e.ts, e.taskId]);
    dropLease(db, e.taskId!);
  },
  'task.completed': (db, e, d) => {
    db.run("UPDATE tasks SET state = 'completed', summary = COALESCE(?, summary), commit_hash = ?, updated_at = ? WHERE id = ?", [
      d.summary,
      d.commit,
      e.ts,
      e.taskId,
    ]);
    dropLease(db, e.taskId!);
  },
  'task.reopened': (db, e, d) => {
    // The commit is gone from git, so the record forgets it too; the undo itself is kept (tooltips, the timeline).
    db.run("UPDATE tasks SET state = 'waiting_review', commit_hash = NULL, reopened = ?, updated_at = ? WHERE id = ?", [
      JSON.stringify({ commit: d.commit, at: e.ts, reason: d.reason }),
      e.ts,
      e.taskId,
    ]);
  },
  'task.abandoned': (db, e) => {
    setTaskState(db, e.taskId!, 'abandoned', e.ts);
    db.run('UPDATE tasks SET hold = NULL WHERE id = ?', [e.taskId]);
    dropLease(db, e.taskId!);
  },
  'task.failed': (db, e, d) => {
    setTaskState(db, e.taskId!, 'failed', e.ts, { interruption: stopRecord(e, d), hold: null });
    dropLease(db, e.taskId!);
  },
  'task.interrupted': (db, e, d) => {
    setTaskState(db, e.taskId!, 'interrupted', e.ts, { interruption: stopRecord(e, d) });
    driverGone(db, e.taskId!);
  },
  'task.suspended': (db, e) => {
    setTaskState(db, e.taskId!, 'suspended', e.ts);
    driverGone(db, e.taskId!);
  },
  'task.held': (db, e, d) => {
    setTaskState(db, e.taskId!, 'suspended', e.ts, { hold: JSON.stringify({ cause: d.cause, stepId: d.stepId, reason: d.reason, since: e.ts }) });
    driverGone(db, e.taskId!);
  },
  'task.resumed': (db, e, d) => {
    db.run("UPDATE tasks SET state = 'running', attempt = ?, interruption = NULL, hold = NULL, updated_at = ? WHERE id = ?", [d.attempt, e.ts, e.taskId]);
    takeLease(db, e.taskId!, d.owner, d.leaseTtlMs, e.ts);
  },
  'task.deleted': (db, e) => {
    for (const t of ['steps', 'side_effects', 'leases', 'checkpoints', 'rollbacks', 'turns', 'terminal_commands']) {
      db.run(`DELETE FROM ${t} WHERE task_id = ?`, [e.taskId]);
    }
    db.run('DELETE FROM tasks WHERE id = ?', [e.taskId]);
  },
  'turn.recorded': (db, e, d) => {
    // A turn recorded again (the same session's turn number) keeps its latest digest.
    db.run('INSERT OR REPLACE INTO turns (task_id, session_id, turn, step_id, prompt, last_message, tools, compactions, started_at, ended_at) VALUES (?,?,?,?,?,?,?,?,?,?)', [
      e.taskId,
      d.sessionId,
      d.turn,
      d.stepId,
      d.prompt,
      d.lastMessage,
      JSON.stringify(d.tools),
      d.compactions,
      d.startedAt,
      e.ts,
    ]);
  },
  'lease.heartbeat': () => undefined, // the common lease renewal below does the work
  'step.started': (db, e, d) => {
    if (d.adhoc) {
      const exists = db.get('SELECT 1 AS x FROM steps WHERE task_id = ? AND id = ?', [e.taskId, d.stepId]);
      if (!exists) {
        const max = db.get<{ m: number | null }>('SELECT MAX(ord) AS m FROM steps WHERE task_id = ?', [e.taskId])?.m ?? -1;
        db.run(`INSERT INTO steps (task_id, id, ord, title, depends_on, status, attempts, adhoc, max_attempts) VALUES (?,?,?,?,?, 'pending', 0, 1, ?)`, [
          e.taskId,
          d.stepId,
          max + 1,
          d.title,
          JSON.stringify(d.dependsOn),
          taskMaxAttempts(db, e.taskId!),
        ]);
      }
    }
    db.run(
      `UPDATE steps SET status = 'in_progress', attempts = ?, task_attempt = ?, inputs = ?, started_at = ?, ended_at = NULL, error = NULL
       WHERE task_id = ? AND id = ?`,
      [d.attempt, d.taskAttempt, json(d.inputs), e.ts, e.taskId, d.stepId],
    );
  },
  'step.completed': (db, e, d) => {
    db.run(
      `UPDATE steps SET status = 'completed', outputs = ?, summary = ?, ended_at = ?, error = NULL WHERE task_id = ? AND id = ?`,
      [json(d.outputs), d.summary, e.ts, e.taskId, d.stepId],
    );
  },
  'step.failed': (db, e, d) => {
    const error = { message: d.error, recoverable: d.recoverable, class: d.class, attempt: d.attempt, at: e.ts, backoffMs: d.backoffMs ?? undefined };
    db.run(`UPDATE steps SET status = 'failed', error = ?, ended_at = ? WHERE task_id = ? AND id = ?`, [JSON.stringify(error), e.ts, e.taskId, d.stepId]);
  },
  'step.attempts_granted': (db, e, d) => {
    // The grant waives the backoff of the failure it answers: the person said go.
    const row = db.get<{ error: string | null }>('SELECT error FROM steps WHERE task_id = ? AND id = ?', [e.taskId, d.stepId]);
    const error = row?.error ? (JSON.parse(row.error) as Record<string, unknown>) : null;
    if (error) delete error.backoffMs;
    db.run('UPDATE steps SET max_attempts = ?, error = ? WHERE task_id = ? AND id = ?', [d.maxAttempts, json(error), e.taskId, d.stepId]);
  },
  'step.skipped': (db, e, d) => {
    db.run(`UPDATE steps SET status = 'skipped', summary = COALESCE(?, summary), ended_at = ? WHERE task_id = ? AND id = ?`, [d.reason, e.ts, e.taskId, d.stepId]);
  },
  'step.abandoned': (db, e, d) => {
    // SET reads the row as it was: the status before this abandon is kept (once; abandoning twice keeps the first).
    db.run(
      `UPDATE steps SET abandoned_from = CASE WHEN status = 'abandoned' THEN abandoned_from ELSE status END, status = 'abandoned', ended_at = COALESCE(ended_at, ?)
       WHERE task_id = ? AND id = ?`,
      [e.ts, e.taskId, d.stepId],
    );
  },
  'step.restored': (db, e, d) => {
    // A step that was running before the rollback is running again: its abandon-time end goes with it.
    db.run(
      `UPDATE steps SET status = ?, abandoned_from = NULL, ended_at = CASE WHEN ? IN ('in_progress', 'pending') THEN NULL ELSE ended_at END WHERE task_id = ? AND id = ?`,
      [d.status, d.status, e.taskId, d.stepId],
    );
  },
  'checkpoint.created': (db, e, d) => {
    db.run(
      `INSERT INTO checkpoints (id, task_id, step_id, kind, label, parent_id, created_at, manifest_ref, files, files_changed, bytes)
       VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
      [d.checkpointId, e.taskId, d.stepId, d.kind, d.label, d.parentId, e.ts, d.manifestRef, d.files, d.filesChanged, d.bytes],
    );
    if (e.taskId) {
      db.run('UPDATE tasks SET last_checkpoint_id = ? WHERE id = ?', [d.checkpointId, e.taskId]);
      if (d.kind === 'task_base') db.run('UPDATE tasks SET base_checkpoint_id = ? WHERE id = ?', [d.checkpointId, e.taskId]);
    }
  },
  'checkpoint.damaged': (db, _e, d) => {
    for (const c of d.checkpoints) db.run('UPDATE checkpoints SET damaged = ? WHERE id = ?', [c.reason, c.checkpointId]);
  },
  'checkpoint.pruned': (db, _e, d) => {
    for (const id of d.checkpointIds) db.run('DELETE FROM checkpoints WHERE id = ?', [id]);
  },
  'side_effect.intent': (db, e, d) => {
    db.run(
      `INSERT INTO side_effects (task_id, key, step_id, kind, description, args, status, attempts, intent_at)
       VALUES (?,?,?,?,?,?, 'intent', ?, ?)
       ON CONFLICT (task_id, key) DO UPDATE SET status = 'intent', attempts = excluded.attempts, intent_at = excluded.intent_at,
         step_id = excluded.step_id, args = excluded.args, description = excluded.description, error = NULL, ended_at = NULL, resolved_by = NULL`,
      [e.taskId, d.key, d.stepId, d.kind, d.description, json(d.args), d.attempt, e.ts],
    );
    db.run("UPDATE tasks SET state = 'waiting_tool', updated_at = ? WHERE id = ? AND state = 'running'", [e.ts, e.taskId]);
  },
  'side_effect.done': (db, e, d) => {
    db.run(`UPDATE side_effects SET status = 'done', result = ?, error = NULL, ended_at = ?, resolved_by = ? WHERE task_id = ? AND key = ?`, [
      json(d.result),
      e.ts,
      d.by,
      e.taskId,
      d.key,
    ]);
    settleWaitingTool(db, e.taskId!, e.ts);
  },
  'side_effect.failed': (db, e, d) => {
    db.run(`UPDATE side_effects SET status = 'failed', error = ?, ended_at = ?, resolved_by = ? WHERE task_id = ? AND key = ?`, [d.error, e.ts, d.by, e.taskId, d.key]);
    settleWaitingTool(db, e.taskId!, e.ts);
  },
  'rollback.started': (db, e, d) => {
    db.run(
      `INSERT INTO rollbacks (id, task_id, target_checkpoint_id, pre_rollback_checkpoint_id, paths, mode, plan_ref, state, started_at)
       VALUES (?,?,?,?,?,?,?, 'started', ?)`,
      [d.rollbackId, e.taskId, d.targetCheckpointId, d.preRollbackCheckpointId, json(d.paths), d.mode, d.planRef, e.ts],
    );
  },
  'rollback.done': (db, e, d) => {
    db.run('UPDATE rollbacks SET state = ?, ended_at = ?, outcome = ? WHERE id = ?', [d.outcome, e.ts, JSON.stringify(d), d.rollbackId]);
    if (d.outcome === 'applied') {
      // New checkpoints branch from the rollback target.
      const r = db.get<{ t: string }>('SELECT target_checkpoint_id AS t FROM rollbacks WHERE id = ?', [d.rollbackId]);
      if (r && e.taskId) db.run('UPDATE tasks SET last_checkpoint_id = ? WHERE id = ?', [r.t, e.taskId]);
    }
  },
  // Open recovery finds unfinished applies here; the task's own state changes come
  // from its task.* events in the same batches.
  'review.apply_started': (db, e, d) => {
    db.run('INSERT INTO review_applies (apply_id, task_id, start_key, data) VALUES (?,?,?,?)', [d.applyId, e.taskId, e.key, JSON.stringify(d)]);
  },
  'review.apply_done': (db, _e, d) => {
    db.run('UPDATE review_applies SET done = 1, recovered = ? WHERE apply_id = ?', [d.recovered ? 1 : 0, d.applyId]);
  },
};

export function project(db: Db, e: WaypointEvent): void {
  (handlers[e.type] as Handler<EventType>)(db, e, e.data);
  if (e.taskId && e.type !== 'task.deleted') {
    db.run('UPDATE tasks SET updated_at = MAX(updated_at, ?) WHERE id = ?', [e.ts, e.taskId]);
    if (e.by) {
      // Every call from the lease holder renews its lease.
      db.run('UPDATE leases SET heartbeat_at = ?, expires_at = ? + ttl_ms WHERE task_id = ? AND owner = ?', [e.ts, e.ts, e.taskId, e.by]);
    }
  }
  if (e.op) {
    db.run('INSERT INTO idempotency (key, op, seq, result) VALUES (?,?,?,?)', [e.key, e.op, e.seq, json(e.result)]);
  }
}

export function clearProjections(db: Db): void {
  for (const t of PROJECTION_TABLES) db.run(`DELETE FROM ${t}`);
}

/** A stable text dump of every projection table, for comparing a store with its rebuild. */
export function dumpProjections(db: Db): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const t of PROJECTION_TABLES) {
    const cols = db.all<{ name: string }>(`PRAGMA table_info(${t})`).map((c) => c.name);
    out[t] = db.all(`SELECT * FROM ${t} ORDER BY ${cols.join(', ')}`).map((r) => JSON.stringify(r));
  }
  return out;
}
