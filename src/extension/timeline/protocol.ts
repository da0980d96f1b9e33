/**
 * The Task Timeline's message protocol, imported by both the extension host and the
 * page (webview-ui/timeline.ts). Every message is a zod schema that each side
 * `safeParse`s on receipt; anything malformed is dropped with one log line. Every
 * string and array is bounded so a broken peer cannot make the other side allocate
 * without limit. No `vscode` import: this file is bundled into the browser build.
 */
import { z } from 'zod';

export const MAX_STEPS = 2_000;
export const MAX_ATTEMPTS = 20_000;
export const MAX_CHECKPOINTS = 10_000;
export const MAX_EFFECTS = 10_000;
export const MAX_MARKS = 5_000;

const Id = z.string().min(1).max(256);
const Text = (max: number) => z.string().max(max);
const Time = z.number().int().min(0);

export const TimelineTask = z.strictObject({
  id: Id,
  title: Text(1_000),
  state: Text(40),
  agent: Text(200).nullable(),
  correlationId: Text(256),
  createdAt: Time,
  updatedAt: Time,
  attempt: z.number().int().min(0),
  /** Why the task stopped being driven (interrupted, suspended, failed), for the header. */
  interruption: Text(2_000).nullable(),
});
export type TimelineTask = z.infer<typeof TimelineTask>;

export const TimelineStep = z.strictObject({
  id: Id,
  title: Text(500),
  status: Text(40),
  dependsOn: z.array(Id).max(256),
  /** Column in the dependency graph: the longest path from a step with no dependencies. */
  layer: z.number().int().min(0).max(MAX_STEPS),
  /** Row inside the layer. */
  row: z.number().int().min(0).max(MAX_STEPS),
  adhoc: z.boolean(),
  error: Text(2_000).nullable(),
});
export type TimelineStep = z.infer<typeof TimelineStep>;

export const AttemptOutcome = z.enum(['running', 'completed', 'failed', 'interrupted', 'skipped', 'abandoned']);
export type AttemptOutcome = z.infer<typeof AttemptOutcome>;

export const TimelineAttempt = z.strictObject({
  /** `stepId#n`, or `stepId#n.k` for a later bar of the same numbered attempt (after a resume). */
  id: Text(300),
  stepId: Id,
  n: z.number().int().min(0),
  taskAttempt: z.number().int().min(0),
  start: Time,
  end: Time.nullable(),
  outcome: AttemptOutcome,
  /** The lease owner that started it (an agent session, the editor, the CLI). */
  by: Text(200).nullable(),
  error: Text(2_000).nullable(),
  /** For a failure: recoverable, unrecoverable or inconsistent_state. */
  failureClass: Text(40).nullable(),
});
export type TimelineAttempt = z.infer<typeof TimelineAttempt>;

export const TimelineCheckpoint = z.strictObject({
  id: Id,
  kind: Text(40),
  label: Text(500).nullable(),
  /** What a person calls it: its label or its kind, and the step it belongs to. */
  title: Text(1_100),
  stepId: Id.nullable(),
  at: Time,
  filesChanged: z.number().int().min(0),
  /** It has a manifest and is not damaged: it can be compared, rolled back to and forked from. */
  restorable: z.boolean(),
});
export type TimelineCheckpoint = z.infer<typeof TimelineCheckpoint>;

export const TimelineEffect = z.strictObject({
  key: Id,
  kind: Text(100),
  description: Text(2_000),
  status: z.enum(['intent', 'done', 'failed', 'in_doubt']),
  stepId: Id.nullable(),
  at: Time,
  endedAt: Time.nullable(),
  attempts: z.number().int().min(0),
  error: Text(2_000).nullable(),
  resolvedBy: z.enum(['agent', 'person']).nullable(),
  /** A shell command the agent ran (the hooks record them as side effects of kind `shell`). */
  shell: z.boolean(),
});
export type TimelineEffect = z.infer<typeof TimelineEffect>;

/** A task-level moment on the axis: interrupted, resumed, rolled back, review asked, completed… */
export const TimelineMark = z.strictObject({
  id: Text(40),
  at: Time,
  type: Text(60),
  text: Text(2_000),
});
export type TimelineMark = z.infer<typeof TimelineMark>;

export const TimelineModel = z.strictObject({
  task: TimelineTask,
  /** Events the task holds, and the last one's sequence number. */
  events: z.number().int().min(0),
  lastSeq: z.number().int().min(0),
  range: z.strictObject({ start: Time, end: Time }),
  steps: z.array(TimelineStep).max(MAX_STEPS),
  attempts: z.array(TimelineAttempt).max(MAX_ATTEMPTS),
  checkpoints: z.array(TimelineCheckpoint).max(MAX_CHECKPOINTS),
  effects: z.array(TimelineEffect).max(MAX_EFFECTS),
  marks: z.array(TimelineMark).max(MAX_MARKS),
  /** How many of each kind were left out to stay within the bounds (shown, never silent). */
  omitted: z.strictObject({ steps: z.number().int().min(0), attempts: z.number().int().min(0), checkpoints: z.number().int().min(0), effects: z.number().int().min(0), marks: z.number().int().min(0) }),
  /**
   * Set only on a first screen (see firstScreen.ts): the page's document carries the
   * entries the first screen shows, and this says how many of each kind follow in the
   * whole model, which the host posts after the page says `ready`.
   */
  pending: z.strictObject({ steps: z.number().int().min(0), attempts: z.number().int().min(0), checkpoints: z.number().int().min(0), effects: z.number().int().min(0), marks: z.number().int().min(0) }).optional(),
});
export type TimelineModel = z.infer<typeof TimelineModel>;

/** The keyed collections of the model, and the key of each. */
export const COLLECTIONS = ['steps', 'attempts', 'checkpoints', 'effects', 'marks'] as const;
export type Collection = (typeof COLLECTIONS)[number];

const Ids = (max: number) => z.array(Text(300)).max(max);

/** What changed since the last model the page was sent: the header, and per collection the entries upserted and the keys removed. */
export const TimelinePatch = z.strictObject({
  task: TimelineTask,
  events: z.number().int().min(0),
  lastSeq: z.number().int().min(0),
  range: z.strictObject({ start: Time, end: Time }),
  omitted: TimelineModel.shape.omitted,
  upsert: z.strictObject({
    steps: z.array(TimelineStep).max(MAX_STEPS),
    attempts: z.array(TimelineAttempt).max(MAX_ATTEMPTS),
    checkpoints: z.array(TimelineCheckpoint).max(MAX_CHECKPOINTS),
    effects: z.array(TimelineEffect).max(MAX_EFFECTS),
    marks: z.array(TimelineMark).max(MAX_MARKS),
  }),
  remove: z.strictObject({
    steps: Ids(MAX_STEPS),
    attempts: Ids(MAX_ATTEMPTS),
    checkpoints: Ids(MAX_CHECKPOINTS),
    effects: Ids(MAX_EFFECTS),
    marks: Ids(MAX_MARKS),
  }),
});
export type TimelinePatch = z.infer<typeof TimelinePatch>;

// ---------------------------------------------------------------------------
// Page → host.

export const CheckpointAction = z.enum(['compare', 'rollback', 'fork']);
export type CheckpointAction = z.infer<typeof CheckpointAction>;

export const TimelinePageMessage = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('ready') }),
  /**
   * The page has drawn the timeline (first content, then each patch); `at` is the frame's
   * wall-clock time, `pageMs` how long after the page's own navigation began (loading
   * the document, the script, validating and drawing): the page's share of an open.
   */
  z.strictObject({
    type: z.literal('shown'),
    steps: z.number().int().min(0).max(MAX_STEPS),
    attempts: z.number().int().min(0).max(MAX_ATTEMPTS),
    at: Time,
    pageMs: z.number().min(0).max(3_600_000),
    /** False for a first screen drawn before the whole model arrived; true once the page holds all of it. */
    whole: z.boolean(),
  }),
  z.strictObject({ type: z.literal('refresh') }),
  z.strictObject({ type: z.literal('checkpoint'), action: CheckpointAction, checkpointId: Id }),
  z.strictObject({ type: z.literal('showEvents') }),
]);
export type TimelinePageMessage = z.infer<typeof TimelinePageMessage>;

// ---------------------------------------------------------------------------
// Host → page.

export const TimelineHostMessage = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('init'), model: TimelineModel }),
  z.strictObject({ type: z.literal('patch'), patch: TimelinePatch }),
  z.strictObject({ type: z.literal('error'), text: Text(4_000) }),
]);
export type TimelineHostMessage = z.infer<typeof TimelineHostMessage>;

/** What the page keeps across reloads (vscode.setState); parsed on restore like any input. */
export const TimelinePageState = z.strictObject({
  taskId: Id,
  /** The row that had focus, to put it back. */
  focus: Text(400).optional(),
});
export type TimelinePageState = z.infer<typeof TimelinePageState>;

/** The id of the data block that carries the first model inside the page's document. */
export const FIRST_TIMELINE_ID = 'waypoint-timeline-data';
