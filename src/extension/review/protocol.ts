/**
 * The review panel's message protocol, imported by both the extension host and the
 * page (webview-ui/). Every message is a zod schema; each side `safeParse`s what it
 * receives and ignores (with a log line) anything malformed. Every string and array
 * is bounded so a hostile or broken peer cannot make the other side allocate without
 * limit. No `vscode` import: this file is bundled into the browser build too.
 *
 * Written with `zod/mini` (the same validation as zod's classic API, functions instead
 * of methods): the page's bundle carries only the checks it uses, 222 KB → 59 KB,
 * which the page parses and builds before it can draw.
 */
import * as z from 'zod/mini';
import { int, list, num, str, Text } from '../webview/schemaParts';

const MAX_PATH = 4096;
const MAX_FILES = 20_000;
const MAX_HUNKS = 20_000;
export const MAX_FILE_BATCH = 1_000;
/** Longer lines are cut for display only; applying works on the host's own bytes. */
export const MAX_LINE = 10_000;
const MAX_LINES_PER_HUNK = 100_000;

const Path = str(1, MAX_PATH);
const Fingerprint = z.string().check(z.regex(/^[0-9a-f]{32}$/));
const TaskId = str(1, 200);
const Lines = list(Text(MAX_LINE), MAX_LINES_PER_HUNK);

// ---------------------------------------------------------------------------
// Page → host.

// Page → host schemas are parsed only by the host: each is built in a function marked pure, so
// the page's bundle (which takes only their types) drops them and never builds them before it can draw.
export const FileDecisionMsg = /* @__PURE__ */ (() =>
  z.discriminatedUnion('action', [
    z.strictObject({ path: Path, action: z.literal('approve'), fingerprint: z.optional(Fingerprint) }),
    /** Left out of this commit, kept in the working tree. */
    z.strictObject({ path: Path, action: z.literal('leave'), fingerprint: z.optional(Fingerprint) }),
    /** Discarded: removed from the working tree (restorable from the pre-apply checkpoint). */
    z.strictObject({ path: Path, action: z.literal('reject'), fingerprint: z.optional(Fingerprint) }),
    z.strictObject({
      path: Path,
      action: z.literal('hunks'),
      approved: list(int(0, MAX_HUNKS), MAX_HUNKS),
      /** Hunks left out of the commit and kept; the others not approved are discarded. */
      left: z.optional(list(int(0, MAX_HUNKS), MAX_HUNKS)),
      hunkCount: int(1, MAX_HUNKS),
      // Partial decisions need the exact content the person saw.
      fingerprint: Fingerprint,
    }),
  ]))();
export type FileDecisionMsg = z.infer<typeof FileDecisionMsg>;

export const PageMessage = /* @__PURE__ */ (() =>
  z.discriminatedUnion('type', [
    z.strictObject({ type: z.literal('ready') }),
    /**
     * The page has drawn a review (goal and file list): its first content, then each refresh; `at` is the frame's
     * wall-clock time, `pageMs` how long after the page's navigation began; then, on that clock, when its script
     * began to run, its listing arrived, was drawn, and its document's `load` came (where the page's share goes).
     */
    z.strictObject({
      type: z.literal('shown'),
      files: int(0, MAX_FILES),
      at: int(0),
      pageMs: num(0, 3_600_000),
      scriptMs: num(0, 3_600_000),
      receivedMs: num(0, 3_600_000),
      drawnMs: num(0, 3_600_000),
      loadMs: num(0, 3_600_000),
    }),
    z.strictObject({ type: z.literal('refresh') }),
    z.strictObject({ type: z.literal('requestHunks'), path: Path }),
    z.strictObject({ type: z.literal('openDiff'), path: Path }),
    z.strictObject({
      type: z.literal('apply'),
      message: z.string().check(z.trim(), z.minLength(1), z.maxLength(20_000)),
      decisions: list(FileDecisionMsg, MAX_FILES),
      /** Complete the task with the commit (the page asks when its plan is not done). */
      finish: z.boolean(),
    }),
    /** Undo the commit this panel made (soft reset, working tree back to before the apply). */
    z.strictObject({ type: z.literal('undoCommit') }),
    z.strictObject({ type: z.literal('rollback') }),
    z.strictObject({ type: z.literal('resume') }),
    /** A person settles one of the task's open steps from the finish row (so the task can be finished with the commit). */
    z.strictObject({ type: z.literal('step'), action: z.enum(['complete', 'skip', 'fail']), stepId: str(1, 128) }),
  ]))();
export type PageMessage = z.infer<typeof PageMessage>;

// ---------------------------------------------------------------------------
// Host → page.

const ChangeStatus = z.enum(['added', 'modified', 'deleted', 'type_changed', 'mode_changed']);

export const ReviewFileMsg = z.strictObject({
  path: Path,
  status: ChangeStatus,
  /** Null until counted: the list comes first, counts follow in `files` updates. */
  lines: z.nullable(z.strictObject({ added: int(0), removed: int(0), binary: z.boolean() })),
  oversized: z.boolean(),
  drift: z.boolean(),
  hunkable: z.boolean(),
  revertible: z.boolean(),
});
export type ReviewFileMsg = z.infer<typeof ReviewFileMsg>;

export const StepMsg = z.strictObject({
  id: Text(200),
  title: Text(500),
  status: Text(40),
  durationMs: z.nullable(z.number()),
  summary: z.nullable(Text(2_000)),
  error: z.nullable(Text(2_000)),
});

export const EffectMsg = z.strictObject({
  key: Text(256),
  kind: Text(100),
  description: Text(2_000),
  status: Text(40),
  inDoubt: z.boolean(),
});

export const TaskMsg = z.strictObject({
  id: TaskId,
  title: Text(1_000),
  goal: Text(10_000),
  state: Text(40),
  agent: z.nullable(Text(200)),
  createdAt: z.number(),
  durationMs: z.number(),
  commit: z.nullable(Text(64)),
});

export const HunkMsg = z.strictObject({
  index: int(0, MAX_HUNKS),
  oldStart: int(0),
  oldLines: int(0),
  newStart: int(0),
  newLines: int(0),
  removed: Lines,
  added: Lines,
  before: list(Text(MAX_LINE), 10),
  after: list(Text(MAX_LINE), 10),
});
export type HunkMsg = z.infer<typeof HunkMsg>;

/** What a commit from the review made, as the panel shows it afterwards. */
export const CommittedMsg = z.strictObject({
  sha: z.nullable(Text(64)),
  subject: Text(500),
  /** Why there is no commit, when `sha` is null (no git repository, nothing to commit). */
  reason: z.nullable(Text(1_000)),
  committed: list(Path, MAX_FILES),
  discarded: list(Path, MAX_FILES),
  left: list(Path, MAX_FILES),
  finished: z.boolean(),
  /** Undo is offered while HEAD is still this commit and the pre-apply checkpoint is known. */
  canUndo: z.boolean(),
});
export type CommittedMsg = z.infer<typeof CommittedMsg>;

export const HostMessage = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('init'),
    task: TaskMsg,
    steps: list(StepMsg, 1_000),
    effects: list(EffectMsg, 10_000),
    /**
     * The listing's first files (the task's, then drift): a screenful and more. The rest, when
     * there are more, follow in one `listed` message, so the page draws before it reads them.
     */
    files: list(ReviewFileMsg, MAX_FILES),
    /** How many files the whole listing holds, of the task's and of the person's own edits. */
    counts: z.strictObject({ task: int(0, MAX_FILES), drift: int(0, MAX_FILES) }),
    message: Text(20_000),
    /** True when the workspace is a git repository (else applying only reverts). */
    git: z.boolean(),
    /** Every step completed or skipped: committing finishes the task unless the person says otherwise. */
    planDone: z.boolean(),
    /** The review's last commit, when one was made: the page shows it instead of the decisions. */
    committed: z.nullable(CommittedMsg),
  }),
  /** The rest of the listing after `init`'s first files, in the same order. */
  z.strictObject({ type: z.literal('listed'), files: list(ReviewFileMsg, MAX_FILES) }),
  /** Updated entries of listed files (line counts, streamed in batches after `init`). */
  z.strictObject({ type: z.literal('files'), files: list(ReviewFileMsg, MAX_FILE_BATCH) }),
  z.strictObject({ type: z.literal('hunks'), path: Path, fingerprint: Fingerprint, hunks: list(HunkMsg, MAX_HUNKS) }),
  z.strictObject({ type: z.literal('summary'), path: Path, fingerprint: Fingerprint, reason: Text(500) }),
  z.strictObject({ type: z.literal('busy'), busy: z.boolean(), label: Text(200) }),
  z.strictObject({ type: z.literal('applied'), ok: z.boolean(), text: Text(4_000), commit: z.nullable(Text(64)) }),
  /** The commit was made: the page switches to the committed view. */
  z.strictObject({ type: z.literal('committed'), committed: CommittedMsg }),
  z.strictObject({ type: z.literal('error'), text: Text(4_000) }),
]);
export type HostMessage = z.infer<typeof HostMessage>;

/**
 * Files in `init`: more than the tallest window's first screenful (rows are at least 24 px).
 * The rest go in one `listed` message after it: the page validates and draws these first
 * (on the first open of 1,000 files, reading them all was about a fifth of its drawing).
 */
export const INIT_FILES = 100;

/** Files in the page's order: the task's, then the person's own edits (drift), each kind in the order given. */
export function inPageOrder<F extends { drift: boolean }>(files: readonly F[]): F[] {
  return [...files.filter((f) => !f.drift), ...files.filter((f) => f.drift)];
}

/** The messages that carry a listing to the page: `init` with its first files, then the rest. */
export function listingMessages(msg: Extract<HostMessage, { type: 'init' }>): HostMessage[] {
  if (msg.files.length <= INIT_FILES) return [msg];
  return [{ ...msg, files: msg.files.slice(0, INIT_FILES) }, { type: 'listed', files: msg.files.slice(INIT_FILES) }];
}

/** What the page keeps across reloads (vscode.setState); parsed on restore like any input. */
export const PageState = z.strictObject({
  taskId: TaskId,
  message: z.optional(Text(20_000)),
  expanded: z.optional(list(Path, MAX_FILES)),
  /** path → per-hunk decisions ('a' approve, 'l' leave out, 'r' discard, 'u' undecided) or a whole-file decision ('m' mixed). */
  decisions: z.optional(
    z.record(
      Path,
      z.strictObject({ whole: z.enum(['a', 'l', 'r', 'u', 'm']), hunks: z.nullable(list(z.enum(['a', 'l', 'r', 'u']), MAX_HUNKS)), included: z.boolean(), fingerprint: z.nullable(Fingerprint) }),
    ),
  ),
});
export type PageState = z.infer<typeof PageState>;

/** Kept here for the review's own imports; it lives on its own so other pages need not bundle this protocol. */
export { parseInbound } from '../webview/parseInbound';

/** Cuts a line for display so no message breaks the protocol's bounds. */
export function clipLine(line: string): string {
  return line.length > MAX_LINE ? `${line.slice(0, MAX_LINE - 1)}…` : line;
}

/** JSON that is inert inside a `<script type="application/json">` block: no `<` at all, so no `</script>` or `<!--`. */
export function embedJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c');
}
