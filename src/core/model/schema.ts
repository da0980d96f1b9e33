import { z } from 'zod';

/**
 * The shapes of everything Waypoint records. Everything read from disk or from a
 * surface is parsed with these schemas, never cast.
 *
 * SCHEMA_VERSION is the version of the event format; the database schema has its
 * own numbered migrations (store/migrations.ts). Events written by an older version
 * are upcast on read (model/upcast.ts) so replay always sees the current shapes.
 */
export const SCHEMA_VERSION = 1;

export const TASK_STATES = [
  'pending',
  'planning',
  'running',
  'waiting_tool',
  'waiting_review',
  'completed',
  'interrupted',
  'suspended',
  'failed',
  'abandoned',
] as const;
export const TaskState = z.enum(TASK_STATES);
export type TaskState = z.infer<typeof TaskState>;

export const STEP_STATUSES = ['pending', 'in_progress', 'completed', 'failed', 'skipped', 'abandoned'] as const;
export const StepStatus = z.enum(STEP_STATUSES);
export type StepStatus = z.infer<typeof StepStatus>;

export const CHECKPOINT_KINDS = [
  'task_base',
  'step_start',
  'step_end',
  'before_side_effect',
  'manual',
  'auto',
  'pre_rollback',
  'periodic',
  // Around one tool call of a hook-recorded agent: the interval ending at `tool_start` is the
  // person's (the agent changes files only through its tools), the one ending at `tool_end` the agent's.
  'tool_start',
  'tool_end',
  /** A terminal command is about to run: the workspace as it was before it. */
  'command_start',
  /** A terminal command ended: what it changed is the interval since its command_start. */
  'command_end',
] as const;
export const CheckpointKind = z.enum(CHECKPOINT_KINDS);
export type CheckpointKind = z.infer<typeof CheckpointKind>;

/** Why a step or task stopped, in the three classes a resume decides by (retry it, give up, or repair state first), kept visible in the data. */
export const FailureClass = z.enum(['recoverable', 'unrecoverable', 'inconsistent_state']);
export type FailureClass = z.infer<typeof FailureClass>;

export const SideEffectStatus = z.enum(['intent', 'done', 'failed', 'in_doubt']);
export type SideEffectStatus = z.infer<typeof SideEffectStatus>;

/** Ids a person or an agent may choose (plan step ids, keys): short, printable, no path tricks. */
export const Identifier = z
  .string()
  .min(1, 'must not be empty')
  .max(128, 'must be at most 128 characters')
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:\-/]*$/, 'may hold only letters, digits and . _ : - / and must start with a letter or digit');

export const IdempotencyKey = z
  .string()
  .min(1, 'must not be empty')
  .max(256, 'must be at most 256 characters')
  .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces');

/** Free text from agents (goals, titles, errors): bounded so one call cannot bloat the journal. */
const Text = (max: number) => z.string().max(max, `must be at most ${max} characters`);

/**
 * Arbitrary JSON from agents (inputs, outputs, results). Bounded in size when
 * serialised; see boundedJson.
 */
export const JsonValue: z.ZodType<unknown> = z.unknown();

export const PlanItem = z.strictObject({
  id: Identifier,
  title: Text(500).min(1, 'must not be empty'),
  dependsOn: z.array(Identifier).max(256).optional(),
  /** This step's own attempt limit, over the task's retry policy. */
  maxAttempts: z.number().int().min(1, 'must be at least 1').max(100, 'must be at most 100').optional(),
});
export type PlanItem = z.infer<typeof PlanItem>;
/**
 * The most steps one task's plan may hold, over all its plan calls together: a plan
 * grown call by call past it made every read of the task (tree, resume context) slow
 * and large. One call may bring at most as many.
 */
export const MAX_PLAN_STEPS = 1000;
export const Plan = z.array(PlanItem).max(MAX_PLAN_STEPS, `a plan may hold at most ${MAX_PLAN_STEPS} steps`);

export const LeaseOwner = z.strictObject({
  id: Text(200).min(1),
  /** Set for owners that are long-lived processes (MCP sessions, the editor); an exited pid means the owner is gone. */
  pid: z.number().int().positive().optional(),
  host: Text(255).optional(),
});
export type LeaseOwner = z.infer<typeof LeaseOwner>;

// ---------------------------------------------------------------------------
// Projections as the engine returns them.

export interface Task {
  id: string;
  title: string;
  goal: string;
  agent: string | null;
  state: TaskState;
  correlationId: string;
  createdAt: number;
  updatedAt: number;
  /** Starts at 1; every resume begins a new attempt. */
  attempt: number;
  baseCheckpointId: string | null;
  lastCheckpointId: string | null;
  summary: string | null;
  commit: string | null;
  /** Why the task stopped being driven, when it is interrupted, suspended or failed. */
  interruption: { reason: string; class: FailureClass; at: number; stepId: string | null; error?: string } | null;
  lease: Lease | null;
  /** Set when the task was forked from another task's checkpoint: where it came from. */
  forkedFrom: ForkOrigin | null;
  /** The retry policy the task was started with (recorded, so a replay decides retries as the call did): attempts per step, backoff. */
  retry: { maxAttempts: number; backoffMs: number; maxBackoffMs: number };
  /** Set while the task waits for a person's decision; null otherwise. */
  hold: TaskHold | null;
  /** Set when the person undid the review commit that completed the task: it waits for review again. The last such undo. */
  reopened: { commit: string; at: number; reason: string } | null;
  /** `history` for a day of workspace history (see engine/history.ts), `task` for every task an agent or person started. */
  kind: 'task' | 'history';
}

/** A terminal command recorded under a task, with the files it changed (projection of command.* events). */
export interface TerminalCommand {
  taskId: string;
  id: string;
  commandLine: string;
  cwd: string | null;
  terminal: string;
  /** Who owns what it changed: the task's agent (its terminal) or the terminal's person. */
  owner: 'agent' | 'terminal';
  agent: string | null;
  stepId: string | null;
  startedAt: number;
  endedAt: number | null;
  exitCode: number | null;
  beforeCheckpointId: string | null;
  afterCheckpointId: string | null;
  changed: string[];
  created: string[];
  deleted: string[];
  /** How many files it changed, created or deleted in all (the lists hold the first 500 of each). */
  filesTotal: number;
}

/** The retry policy of a task that sets none (and of tasks recorded before policies were). */
export const DEFAULT_RETRY_POLICY: Readonly<Task['retry']> = Object.freeze({ maxAttempts: 3, backoffMs: 1000, maxBackoffMs: 300_000 });

/**
 * Why a task waits for a person: a step used every attempt the retry policy allows
 * (`retries_exhausted`, the task is suspended), or it stopped with side effects in
 * doubt (`inconsistent_state`) that someone must settle before it goes on.
 */
export interface TaskHold {
  cause: 'retries_exhausted' | 'inconsistent_state';
  stepId: string | null;
  reason: string;
  since: number;
}

/** Where a forked task came from: the original task, the checkpoint, and that checkpoint's step. */
export const ForkOrigin = z.strictObject({ taskId: z.string(), checkpointId: z.string(), stepId: z.string().nullable() });
export type ForkOrigin = z.infer<typeof ForkOrigin>;

export interface Lease {
  owner: string;
  pid: number | null;
  host: string | null;
  ttlMs: number;
  heartbeatAt: number;
  expiresAt: number;
}

export interface StepError {
  message: string;
  recoverable: boolean;
  class: FailureClass;
  attempt: number;
  at: number;
  /** The wait before the next start (exponential with jitter, capped); a start before `at + backoffMs` is refused. */
  backoffMs?: number;
}

export interface Step {
  taskId: string;
  id: string;
  order: number;
  title: string;
  dependsOn: string[];
  status: StepStatus;
  attempts: number;
  inputs: unknown;
  outputs: unknown;
  summary: string | null;
  error: StepError | null;
  startedAt: number | null;
  endedAt: number | null;
  /** Started without being in the plan (an agent's ad hoc step). */
  adhoc: boolean;
  /** The task attempt in which the step last started. */
  taskAttempt: number | null;
  /** Attempts it may use: its plan item's limit or the task's policy, plus what a person granted. */
  maxAttempts: number;
}

/** A turn's conversation digest (see the `turn.recorded` event). */
export interface Turn {
  taskId: string;
  sessionId: string;
  turn: number;
  stepId: string | null;
  prompt: string;
  lastMessage: string | null;
  tools: { edit: number; shell: number; todo: number; other: number };
  compactions: number;
  startedAt: number;
  endedAt: number;
}

export interface CheckpointMeta {
  id: string;
  taskId: string | null;
  stepId: string | null;
  kind: CheckpointKind;
  label: string | null;
  parentId: string | null;
  createdAt: number;
  /** Reference to the manifest object (the snapshot layer's), null for metadata-only checkpoints. */
  manifestRef: string | null;
  files: number;
  filesChanged: number;
  bytes: number;
  /**
   * Set when `waypoint verify --repair` found objects this checkpoint needs missing or
   * corrupt and could not restore them: why. It cannot be rolled back to or diffed,
   * and new checkpoints do not build on it.
   */
  damaged?: string;
}

export interface SideEffect {
  taskId: string;
  key: string;
  stepId: string | null;
  kind: string;
  description: string;
  args: unknown;
  status: SideEffectStatus;
  result: unknown;
  error: string | null;
  attempts: number;
  intentAt: number;
  endedAt: number | null;
  resolvedBy: 'agent' | 'person' | null;
}

// ---------------------------------------------------------------------------
// Events. Every change is one of these; projections are folds over them.

const CheckpointData = z.strictObject({
  checkpointId: z.string(),
  kind: CheckpointKind,
  stepId: z.string().nullable(),
  label: z.string().nullable(),
  parentId: z.string().nullable(),
  manifestRef: z.string().nullable(),
  files: z.number().int().nonnegative(),
  filesChanged: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
  /** What the scan met and did not capture (the first 200 by path), and how many in all; absent when nothing. */
  notCaptured: z
    .array(z.strictObject({ path: z.string().max(4096), reason: z.enum(['unreadable', 'too_large', 'unsafe_name', 'reserved_name']), code: z.string().max(40) }))
    .max(200)
    .optional(),
  notCapturedCount: z.number().int().nonnegative().optional(),
});
export type CheckpointData = z.infer<typeof CheckpointData>;

export const EventData = {
  'task.started': z.strictObject({
    goal: z.string(),
    title: z.string(),
    agent: z.string().nullable(),
    plan: z.array(PlanItem),
    owner: LeaseOwner,
    leaseTtlMs: z.number().int().positive(),
    /** A fork: the task and checkpoint it started from (absent on every task started fresh, and on events before forks existed). */
    forkedFrom: ForkOrigin.optional(),
    /** Absent in tasks started before the policy was enforced: they have the default. */
    retry: z.strictObject({ maxAttempts: z.number().int().min(1), backoffMs: z.number().int().min(0), maxBackoffMs: z.number().int().min(0) }).optional(),
    /** `history`: a day of workspace history (checkpoints taken while no task ran), owned by the engine; absent on every ordinary task. */
    kind: z.enum(['history']).optional(),
  }),
  'task.plan_updated': z.strictObject({ added: z.array(PlanItem) }),
  /**
   * A terminal command began (shell integration) while a task ran. Who ran it decides
   * who owns what it changed: `agent` when the terminal is an agent's (its tool opened
   * it), `terminal` otherwise (the person's, kept by an agent-only rollback).
   */
  'command.started': z.strictObject({
    commandId: z.string(),
    commandLine: z.string(),
    cwd: z.string().nullable(),
    terminal: z.string(),
    owner: z.enum(['agent', 'terminal']),
    agent: z.string().nullable(),
    stepId: z.string().nullable(),
    checkpointId: z.string().nullable(),
  }),
  /** The command ended: its exit code and the files that differ between its two checkpoints (the first 500 of each kind). */
  'command.ended': z.strictObject({
    commandId: z.string(),
    exitCode: z.number().int().nullable(),
    checkpointId: z.string().nullable(),
    changed: z.array(z.string()).max(500),
    created: z.array(z.string()).max(500),
    deleted: z.array(z.string()).max(500),
    filesTotal: z.number().int().nonnegative(),
  }),
  'task.review_requested': z.strictObject({ summary: z.string().nullable() }),
  'task.completed': z.strictObject({ summary: z.string().nullable(), commit: z.string().nullable() }),
  /**
   * The person undid the review commit that completed the task (`commit`): the task
   * waits for review again, its steps and side effects as they were. The only way
   * out of `completed` (see REOPEN_TRANSITION in stateMachine.ts).
   */
  'task.reopened': z.strictObject({ commit: z.string(), reason: z.string() }),
  'task.abandoned': z.strictObject({ reason: z.string().nullable() }),
  'task.failed': z.strictObject({ reason: z.string(), stepId: z.string().nullable(), class: FailureClass }),
  'task.interrupted': z.strictObject({ reason: z.string(), class: FailureClass, stepId: z.string().nullable() }),
  'task.suspended': z.strictObject({ reason: z.string().nullable() }),
  /** The task waits for a person (suspended, with why): a step used every attempt its retry policy allows. */
  'task.held': z.strictObject({ cause: z.enum(['retries_exhausted']), stepId: z.string(), reason: z.string() }),
  'task.resumed': z.strictObject({ owner: LeaseOwner, leaseTtlMs: z.number().int().positive(), attempt: z.number().int() }),
  'task.deleted': z.strictObject({}),
  'lease.heartbeat': z.strictObject({}),
  'step.started': z.strictObject({
    stepId: z.string(),
    title: z.string(),
    attempt: z.number().int().positive(),
    /** The task attempt this step attempt belongs to (a repeat within it is the same start). */
    taskAttempt: z.number().int().positive(),
    inputs: JsonValue,
    adhoc: z.boolean(),
    dependsOn: z.array(z.string()),
  }),
  'step.completed': z.strictObject({ stepId: z.string(), outputs: JsonValue, summary: z.string().nullable() }),
  'step.failed': z.strictObject({
    stepId: z.string(),
    error: z.string(),
    recoverable: z.boolean(),
    class: FailureClass,
    attempt: z.number().int(),
    backoffMs: z.number().int().nonnegative().nullable(),
  }),
  /** A person let a step that used its attempts try `attempts` more times (its backoff is waived). */
  'step.attempts_granted': z.strictObject({ stepId: z.string(), attempts: z.number().int().positive(), maxAttempts: z.number().int().positive(), reason: z.string().nullable() }),
  'step.skipped': z.strictObject({ stepId: z.string(), reason: z.string().nullable() }),
  'step.abandoned': z.strictObject({ stepId: z.string(), reason: z.string() }),
  /**
   * Undoing a rollback gives a step it abandoned back the status it had before
   * (so the record, and the resume context, say again what was already done).
   */
  'step.restored': z.strictObject({ stepId: z.string(), status: StepStatus, rollbackId: z.string(), reason: z.string() }),
  'checkpoint.created': CheckpointData,
  /** Retention dropped these checkpoints; their unique blobs become garbage. */
  'checkpoint.pruned': z.strictObject({ checkpointIds: z.array(z.string()).min(1), reason: z.string() }),
  /**
   * `waypoint verify --repair` found these checkpoints' objects (manifest or file
   * content) missing or corrupt and could not restore them from the workspace. Part
   * of the record, so a rebuild keeps them marked.
   */
  'checkpoint.damaged': z.strictObject({
    checkpoints: z.array(z.strictObject({ checkpointId: z.string(), reason: z.string() })).min(1),
  }),
  'side_effect.intent': z.strictObject({
    key: z.string(),
    stepId: z.string().nullable(),
    kind: z.string(),
    description: z.string(),
    args: JsonValue,
    attempt: z.number().int().positive(),
  }),
  'side_effect.done': z.strictObject({ key: z.string(), result: JsonValue, by: z.enum(['agent', 'person']) }),
  'side_effect.failed': z.strictObject({ key: z.string(), error: z.string(), by: z.enum(['agent', 'person']) }),
  'rollback.started': z.strictObject({
    rollbackId: z.string(),
    targetCheckpointId: z.string(),
    preRollbackCheckpointId: z.string(),
    paths: z.array(z.string()).nullable(),
    mode: z.enum(['all', 'agent-only']),
    /** The exact plan to apply, so a crash half-way can be finished deterministically. */
    planRef: z.string().nullable(),
  }),
  'rollback.done': z.strictObject({
    rollbackId: z.string(),
    outcome: z.enum(['applied', 'reverted', 'failed']),
    filesWritten: z.number().int().nonnegative(),
    filesRemoved: z.number().int().nonnegative(),
    recovered: z.boolean(),
    abandonedSteps: z.array(z.string()),
    conflicts: z.array(z.string()),
    note: z.string().nullable(),
  }),
  /**
   * A review's decisions are about to be written into the workspace (rejected hunks
   * and files reverted). Durable before any file changes, with the exact plan, so an
   * apply a crash interrupts is finished on the next open.
   */
  'review.apply_started': z.strictObject({
    applyId: z.string(),
    preApplyCheckpointId: z.string(),
    planRef: z.string(),
    paths: z.array(z.string()),
  }),
  'review.apply_done': z.strictObject({
    applyId: z.string(),
    outcome: z.enum(['applied', 'failed']),
    filesWritten: z.number().int().nonnegative(),
    filesRemoved: z.number().int().nonnegative(),
    recovered: z.boolean(),
    commit: z.string().nullable(),
    note: z.string().nullable(),
  }),
  /**
   * One exchange of the person and a hook-recorded agent, as a bounded digest (never the
   * whole transcript): the prompt, the agent's last message, its tool calls by kind and
   * the compactions during the turn; `stepId` is the step the turn worked in.
   */
  'turn.recorded': z.strictObject({
    turn: z.number().int().positive(),
    sessionId: z.string(),
    stepId: z.string().nullable(),
    prompt: z.string(),
    lastMessage: z.string().nullable(),
    tools: z.strictObject({ edit: z.number().int().nonnegative(), shell: z.number().int().nonnegative(), todo: z.number().int().nonnegative(), other: z.number().int().nonnegative() }),
    compactions: z.number().int().nonnegative(),
    startedAt: z.number().int().nonnegative(),
  }),
} as const;

export type EventType = keyof typeof EventData;
export const EVENT_TYPES = Object.keys(EventData) as EventType[];
export type EventDataOf<T extends EventType> = z.infer<(typeof EventData)[T]>;

/** The envelope every event carries, on disk and in the events table. */
export const EventEnvelope = z.strictObject({
  seq: z.number().int().positive(),
  ts: z.number().int().nonnegative(),
  type: z.enum(EVENT_TYPES as [EventType, ...EventType[]]),
  v: z.number().int().positive(),
  taskId: z.string().nullable(),
  corr: z.string().nullable(),
  key: z.string(),
  /** The lease owner on whose behalf the event was appended (renews that owner's lease). */
  by: z.string().nullable(),
  data: z.record(z.string(), z.unknown()),
  /** On the first event of a call: the call's operation and result, returned again on a repeat. */
  op: z.string().optional(),
  result: z.unknown().optional(),
});
export type EventEnvelope = z.infer<typeof EventEnvelope>;

export interface WaypointEvent<T extends EventType = EventType> extends Omit<EventEnvelope, 'type' | 'data'> {
  type: T;
  data: EventDataOf<T>;
}

/** Validates an event's payload against its type's schema. */
export function parseEvent(raw: unknown): WaypointEvent {
  const env = EventEnvelope.parse(raw);
  const data = EventData[env.type].parse(env.data);
  return { ...env, data } as WaypointEvent;
}
