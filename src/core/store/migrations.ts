import type { Db } from './db';

/**
 * Numbered database migrations. `PRAGMA user_version` holds the number applied.
 * Never edit a released migration: add the next one (and, per the replay
 * conformance suite, a fixture store written by the previous version).
 *
 * `rebuildProjections` marks migrations whose projection tables must be refilled
 * from the events after they run (a new projection, a changed fold).
 */
export interface Migration {
  version: number;
  description: string;
  up: string;
  rebuildProjections: boolean;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'events, tasks, steps, checkpoints, side effects, leases, idempotency',
    rebuildProjections: false,
    up: `
      CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
      CREATE TABLE events (
        seq INTEGER PRIMARY KEY, ts INTEGER NOT NULL, type TEXT NOT NULL, v INTEGER NOT NULL,
        task_id TEXT, corr TEXT, key TEXT NOT NULL UNIQUE, by TEXT, data TEXT NOT NULL,
        op TEXT, result TEXT
      );
      CREATE TABLE tasks (
        id TEXT PRIMARY KEY, title TEXT NOT NULL, goal TEXT NOT NULL, agent TEXT, state TEXT NOT NULL,
        correlation_id TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
        attempt INTEGER NOT NULL, base_checkpoint_id TEXT, last_checkpoint_id TEXT,
        summary TEXT, commit_hash TEXT, interruption TEXT
      );
      CREATE TABLE steps (
        task_id TEXT NOT NULL, id TEXT NOT NULL, ord INTEGER NOT NULL, title TEXT NOT NULL,
        depends_on TEXT NOT NULL, status TEXT NOT NULL, attempts INTEGER NOT NULL,
        inputs TEXT, outputs TEXT, summary TEXT, error TEXT, started_at INTEGER, ended_at INTEGER,
        adhoc INTEGER NOT NULL, PRIMARY KEY (task_id, id)
      );
      CREATE TABLE checkpoints (
        id TEXT PRIMARY KEY, task_id TEXT, step_id TEXT, kind TEXT NOT NULL, label TEXT,
        parent_id TEXT, created_at INTEGER NOT NULL, manifest_ref TEXT,
        files INTEGER NOT NULL, files_changed INTEGER NOT NULL
      );
      CREATE TABLE side_effects (
        task_id TEXT NOT NULL, key TEXT NOT NULL, step_id TEXT, kind TEXT NOT NULL,
        description TEXT NOT NULL, args TEXT, status TEXT NOT NULL, result TEXT, error TEXT,
        attempts INTEGER NOT NULL, intent_at INTEGER NOT NULL, ended_at INTEGER, resolved_by TEXT,
        PRIMARY KEY (task_id, key)
      );
      CREATE TABLE leases (
        task_id TEXT PRIMARY KEY, owner TEXT NOT NULL, pid INTEGER, host TEXT,
        ttl_ms INTEGER NOT NULL, heartbeat_at INTEGER NOT NULL, expires_at INTEGER NOT NULL
      );
      CREATE TABLE idempotency (key TEXT PRIMARY KEY, op TEXT NOT NULL, seq INTEGER NOT NULL, result TEXT);
    `,
  },
  {
    version: 2,
    description: 'storage bytes per checkpoint, task attempt per step, rollbacks, per-task event index',
    rebuildProjections: true,
    up: `
      ALTER TABLE checkpoints ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE steps ADD COLUMN task_attempt INTEGER;
      CREATE INDEX events_task ON events (task_id, seq);
      CREATE INDEX checkpoints_task ON checkpoints (task_id, created_at);
      CREATE TABLE rollbacks (
        id TEXT PRIMARY KEY, task_id TEXT NOT NULL, target_checkpoint_id TEXT NOT NULL,
        pre_rollback_checkpoint_id TEXT NOT NULL, paths TEXT, mode TEXT NOT NULL, plan_ref TEXT,
        state TEXT NOT NULL, started_at INTEGER NOT NULL, ended_at INTEGER, outcome TEXT
      );
    `,
  },
  {
    version: 3,
    description: 'review applies as a projection: the events table keeps only the events since the last export',
    rebuildProjections: true,
    up: `
      CREATE TABLE review_applies (
        apply_id TEXT PRIMARY KEY, task_id TEXT NOT NULL, start_key TEXT NOT NULL, data TEXT NOT NULL,
        done INTEGER NOT NULL DEFAULT 0, recovered INTEGER
      );
      CREATE INDEX review_applies_task ON review_applies (task_id);
    `,
  },
  {
    version: 4,
    description: 'checkpoints verify --repair marked damaged (objects missing or corrupt), with why',
    // No event before this version marks a checkpoint damaged, so NULL is every row's fold
    // already; rebuilt anyway, once, as every migration that changes a projection is.
    rebuildProjections: true,
    up: `
      ALTER TABLE checkpoints ADD COLUMN damaged TEXT;
    `,
  },
  {
    version: 5,
    description:
      'enforced retry policy (each task\'s policy, why it waits for a person, each step\'s attempt limit); forks (the task and checkpoint a fork started from); the status a step had before a rollback abandoned it, so undoing the rollback restores it',
    // Tasks recorded before it get the default policy (their task.started has none), no fork
    // origin and no pre-abandon status: the rebuild folds exactly that.
    rebuildProjections: true,
    up: `
      ALTER TABLE tasks ADD COLUMN retry TEXT;
      ALTER TABLE tasks ADD COLUMN hold TEXT;
      ALTER TABLE steps ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 3;
      ALTER TABLE tasks ADD COLUMN forked_from TEXT;
      ALTER TABLE steps ADD COLUMN abandoned_from TEXT;
    `,
  },
  {
    version: 6,
    description: 'this release: a task whose review commit was undone waits for review again (tasks.reopened); conversation turns of hook-recorded agents (turns); terminal commands with the checkpoints around them and the files they changed, and task kinds (a day of workspace history is a task of kind history)',
    // No event before this version reopens a task, records a turn or a command, or is
    // history: the rebuild folds exactly what the older events say (NULL, no rows, 'task').
    rebuildProjections: true,
    up: `
      ALTER TABLE tasks ADD COLUMN reopened TEXT;
      CREATE TABLE turns (
        task_id TEXT NOT NULL, session_id TEXT NOT NULL, turn INTEGER NOT NULL, step_id TEXT,
        prompt TEXT NOT NULL, last_message TEXT, tools TEXT NOT NULL, compactions INTEGER NOT NULL,
        started_at INTEGER NOT NULL, ended_at INTEGER NOT NULL, PRIMARY KEY (task_id, session_id, turn)
      );
      ALTER TABLE tasks ADD COLUMN kind TEXT NOT NULL DEFAULT 'task';
      CREATE TABLE terminal_commands (
        task_id TEXT NOT NULL, id TEXT NOT NULL, command_line TEXT NOT NULL, cwd TEXT, terminal TEXT NOT NULL,
        owner TEXT NOT NULL, agent TEXT, step_id TEXT, started_at INTEGER NOT NULL, ended_at INTEGER, exit_code INTEGER,
        before_checkpoint_id TEXT, after_checkpoint_id TEXT, changed TEXT, created TEXT, deleted TEXT, files_total INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (task_id, id)
      );
      CREATE INDEX terminal_commands_after ON terminal_commands (after_checkpoint_id);
    `,
  },
];

export const DB_VERSION = MIGRATIONS[MIGRATIONS.length - 1].version;

export function dbVersion(db: Db): number {
  return Number(db.get<{ user_version: number }>('PRAGMA user_version')?.user_version ?? 0);
}

/** Applies pending migrations; returns whether projections must be rebuilt. */
export function migrate(db: Db, upTo = DB_VERSION): { from: number; to: number; rebuild: boolean } {
  const from = dbVersion(db);
  let rebuild = false;
  for (const m of MIGRATIONS) {
    if (m.version <= from || m.version > upTo) continue;
    db.transaction(() => {
      db.exec(m.up);
      db.exec(`PRAGMA user_version = ${m.version}`);
    });
    rebuild ||= m.rebuildProjections && from > 0;
  }
  return { from, to: Math.max(from, Math.min(upTo, DB_VERSION)), rebuild };
}

/** The projection tables: everything but the events themselves and store metadata. */
export const PROJECTION_TABLES = ['tasks', 'steps', 'checkpoints', 'side_effects', 'leases', 'idempotency', 'rollbacks', 'review_applies', 'turns', 'terminal_commands'] as const;
