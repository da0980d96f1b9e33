/**
 * The Task Timeline's message protocol, imported by both the extension host and the
 * page (webview-ui/timeline.ts). Every message is a zod schema that each side
 * `safeParse`s on receipt; anything malformed is dropped with one log line. Every
 * string and array is bounded so a broken peer cannot make the other side allocate
 * without limit. No `vscode` import: this file is bundled into the browser build.
 * Written with `zod/mini`, as the review's protocol is (see there why).
 */
import * as z from 'zod/mini';
import { int, list, num, str, Text } from '../webview/schemaParts';

export const MAX_STEPS = 2_000;
export const MAX_ATTEMPTS = 20_000;
export const MAX_CHECKPOINTS = 10_000;
export const MAX_EFFECTS = 10_000;
export const MAX_MARKS = 5_000;

const Id = str(1, 256);
const Time = int(0);

export const TimelineTask = z.strictObject({
  id: Id,
  title: Text(1_000),
  state: Text(40),
  agent: z.nullable(Text(200)),
  correlationId: Text(256),
  createdAt: Time,
  updatedAt: Time,
  attempt: int(0),
  /** Why the task stopped being driven (interrupted, suspended, failed), for the header. */
  interruption: z.nullable(Text(2_000)),
});
export type TimelineTask = z.infer<typeof TimelineTask>;

export const TimelineStep = z.strictObject({
  id: Id,
  title: Text(500),
  status: Text(40),
  dependsOn: list(Id, 256),
  /** Column in the dependency graph: the longest path from a step with no dependencies. */
  layer: int(0, MAX_STEPS),
  /** Row inside the layer. */
  row: int(0, MAX_STEPS),
  adhoc: z.boolean(),
  error: z.nullable(Text(2_000)),
});
export type TimelineStep = z.infer<typeof TimelineStep>;

export const AttemptOutcome = z.enum(['running', 'completed', 'failed', 'interrupted', 'skipped', 'abandoned']);
export type AttemptOutcome = z.infer<typeof AttemptOutcome>;

export const TimelineAttempt = z.strictObject({
  /** `stepId#n`, or `stepId#n.k` for a later bar of the same numbered attempt (after a resume). */
  id: Text(300),
  stepId: Id,
  n: int(0),
  taskAttempt: int(0),
  start: Time,
  end: z.nullable(Time),
  outcome: AttemptOutcome,
  /** The lease owner that started it (an agent session, the editor, the CLI). */
  by: z.nullable(Text(200)),
  error: z.nullable(Text(2_000)),
  /** For a failure: recoverable, unrecoverable or inconsistent_state. */
  failureClass: z.nullable(Text(40)),
});
export type TimelineAttempt = z.infer<typeof TimelineAttempt>;

export const TimelineCheckpoint = z.strictObject({
  id: Id,
  kind: Text(40),
  label: z.nullable(Text(500)),
  /** What a person calls it: its label or its kind, and the step it belongs to. */
  title: Text(1_100),
  stepId: z.nullable(Id),
  at: Time,
  filesChanged: int(0),
  /** What it holds in words, one definition with the tree's (labelText checkpointChanges): a base holds N files, the others changed N. */
  changes: Text(100),
  /** It has a manifest and is not damaged: it can be compared, rolled back to and forked from. */
  restorable: z.boolean(),
});
export type TimelineCheckpoint = z.infer<typeof TimelineCheckpoint>;

export const TimelineEffect = z.strictObject({
  key: Id,
  kind: Text(100),
  description: Text(2_000),
  status: z.enum(['intent', 'done', 'failed', 'in_doubt']),
  stepId: z.nullable(Id),
  at: Time,
  endedAt: z.nullable(Time),
  attempts: int(0),
  error: z.nullable(Text(2_000)),
  resolvedBy: z.nullable(z.enum(['agent', 'person'])),
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
  events: int(0),
  lastSeq: int(0),
  range: z.strictObject({ start: Time, end: Time }),
  steps: list(TimelineStep, MAX_STEPS),
  attempts: list(TimelineAttempt, MAX_ATTEMPTS),
  checkpoints: list(TimelineCheckpoint, MAX_CHECKPOINTS),
  effects: list(TimelineEffect, MAX_EFFECTS),
  marks: list(TimelineMark, MAX_MARKS),
  /** How many of each kind were left out to stay within the bounds (shown, never silent). */
  omitted: z.strictObject({ steps: int(0), attempts: int(0), checkpoints: int(0), effects: int(0), marks: int(0) }),
  /**
   * Set only on a first screen (see firstScreen.ts): the page's document carries the
   * entries the first screen shows, and this says how many of each kind follow in the
   * whole model, which the host posts after the page says `ready`.
   */
  pending: z.optional(z.strictObject({ steps: int(0), attempts: int(0), checkpoints: int(0), effects: int(0), marks: int(0) })),
});
export type TimelineModel = z.infer<typeof TimelineModel>;

/** The keyed collections of the model, and the key of each. */
export const COLLECTIONS = ['steps', 'attempts', 'checkpoints', 'effects', 'marks'] as const;
export type Collection = (typeof COLLECTIONS)[number];

const Ids = (max: number) => list(Text(300), max);

/** What changed since the last model the page was sent: the header, and per collection the entries upserted and the keys removed. */
export const TimelinePatch = z.strictObject({
  task: TimelineTask,
  events: int(0),
  lastSeq: int(0),
  range: z.strictObject({ start: Time, end: Time }),
  omitted: TimelineModel.shape.omitted,
  upsert: z.strictObject({
    steps: list(TimelineStep, MAX_STEPS),
    attempts: list(TimelineAttempt, MAX_ATTEMPTS),
    checkpoints: list(TimelineCheckpoint, MAX_CHECKPOINTS),
    effects: list(TimelineEffect, MAX_EFFECTS),
    marks: list(TimelineMark, MAX_MARKS),
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

export const StepAction = z.enum(['complete', 'skip', 'fail', 'retry']);
export type StepAction = z.infer<typeof StepAction>;

export const TimelinePageMessage = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('ready') }),
  /**
   * The page has drawn the timeline (first content, then each patch); `at` is the frame's
   * wall-clock time, `pageMs` how long after the page's own navigation began (loading
   * the document, the script, validating and drawing): the page's share of an open.
   */
  z.strictObject({
    type: z.literal('shown'),
    steps: int(0, MAX_STEPS),
    attempts: int(0, MAX_ATTEMPTS),
    at: Time,
    pageMs: num(0, 3_600_000),
    /** False for a first screen drawn before the whole model arrived; true once the page holds all of it. */
    whole: z.boolean(),
  }),
  z.strictObject({ type: z.literal('refresh') }),
  z.strictObject({ type: z.literal('checkpoint'), action: CheckpointAction, checkpointId: Id }),
  z.strictObject({ type: z.literal('showEvents') }),
  /** A person settles or retries one of the task's steps by hand (the same commands as the Tasks view's). */
  z.strictObject({ type: z.literal('step'), action: StepAction, stepId: Id }),
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
  focus: z.optional(Text(400)),
});
export type TimelinePageState = z.infer<typeof TimelinePageState>;

/** The id of the data block that carries the first model inside the page's document. */
export const FIRST_TIMELINE_ID = 'waypoint-timeline-data';
