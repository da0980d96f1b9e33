/**
 * The review panel's message protocol, imported by both the extension host and the
 * page (webview-ui/). Every message is a zod schema; each side `safeParse`s what it
 * receives and ignores (with a log line) anything malformed. Every string and array
 * is bounded so a hostile or broken peer cannot make the other side allocate without
 * limit. No `vscode` import: this file is bundled into the browser build too.
 */
import { z } from 'zod';

const MAX_PATH = 4096;
const MAX_FILES = 20_000;
const MAX_HUNKS = 20_000;
export const MAX_FILE_BATCH = 1_000;
/** Longer lines are cut for display only; applying works on the host's own bytes. */
export const MAX_LINE = 10_000;
const MAX_LINES_PER_HUNK = 100_000;

const Path = z.string().min(1).max(MAX_PATH);
const Fingerprint = z.string().regex(/^[0-9a-f]{32}$/);
const TaskId = z.string().min(1).max(200);
const Text = (max: number) => z.string().max(max);
const Lines = z.array(Text(MAX_LINE)).max(MAX_LINES_PER_HUNK);

// ---------------------------------------------------------------------------
// Page → host.

export const FileDecisionMsg = z.discriminatedUnion('action', [
  z.strictObject({ path: Path, action: z.literal('approve'), fingerprint: Fingerprint.optional() }),
  /** Left out of this commit, kept in the working tree. */
  z.strictObject({ path: Path, action: z.literal('leave'), fingerprint: Fingerprint.optional() }),
  /** Discarded: removed from the working tree (restorable from the pre-apply checkpoint). */
  z.strictObject({ path: Path, action: z.literal('reject'), fingerprint: Fingerprint.optional() }),
  z.strictObject({
    path: Path,
    action: z.literal('hunks'),
    approved: z.array(z.number().int().min(0).max(MAX_HUNKS)).max(MAX_HUNKS),
    /** Hunks left out of the commit and kept; the others not approved are discarded. */
    left: z.array(z.number().int().min(0).max(MAX_HUNKS)).max(MAX_HUNKS).optional(),
    hunkCount: z.number().int().min(1).max(MAX_HUNKS),
    // Partial decisions need the exact content the person saw.
    fingerprint: Fingerprint,
  }),
]);
export type FileDecisionMsg = z.infer<typeof FileDecisionMsg>;

export const PageMessage = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('ready') }),
  /**
   * The page has drawn a review (goal and file list): its first content, then each refresh; `at` is the frame's
   * wall-clock time, `pageMs` how long after the page's navigation began, `scriptMs` when its script began to run.
   */
  z.strictObject({ type: z.literal('shown'), files: z.number().int().min(0).max(MAX_FILES), at: z.number().int().min(0), pageMs: z.number().min(0).max(3_600_000), scriptMs: z.number().min(0).max(3_600_000) }),
  z.strictObject({ type: z.literal('refresh') }),
  z.strictObject({ type: z.literal('requestHunks'), path: Path }),
  z.strictObject({ type: z.literal('openDiff'), path: Path }),
  z.strictObject({
    type: z.literal('apply'),
    message: z.string().trim().min(1).max(20_000),
    decisions: z.array(FileDecisionMsg).max(MAX_FILES),
    /** Complete the task with the commit (the page asks when its plan is not done). */
    finish: z.boolean(),
  }),
  /** Undo the commit this panel made (soft reset, working tree back to before the apply). */
  z.strictObject({ type: z.literal('undoCommit') }),
  z.strictObject({ type: z.literal('rollback') }),
  z.strictObject({ type: z.literal('resume') }),
]);
export type PageMessage = z.infer<typeof PageMessage>;

// ---------------------------------------------------------------------------
// Host → page.

const ChangeStatus = z.enum(['added', 'modified', 'deleted', 'type_changed', 'mode_changed']);

export const ReviewFileMsg = z.strictObject({
  path: Path,
  status: ChangeStatus,
  /** Null until counted: the list comes first, counts follow in `files` updates. */
  lines: z.strictObject({ added: z.number().int().min(0), removed: z.number().int().min(0), binary: z.boolean() }).nullable(),
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
  durationMs: z.number().nullable(),
  summary: Text(2_000).nullable(),
  error: Text(2_000).nullable(),
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
  agent: Text(200).nullable(),
  createdAt: z.number(),
  durationMs: z.number(),
  commit: Text(64).nullable(),
});

export const HunkMsg = z.strictObject({
  index: z.number().int().min(0).max(MAX_HUNKS),
  oldStart: z.number().int().min(0),
  oldLines: z.number().int().min(0),
  newStart: z.number().int().min(0),
  newLines: z.number().int().min(0),
  removed: Lines,
  added: Lines,
  before: z.array(Text(MAX_LINE)).max(10),
  after: z.array(Text(MAX_LINE)).max(10),
});
export type HunkMsg = z.infer<typeof HunkMsg>;

/** What a commit from the review made, as the panel shows it afterwards. */
export const CommittedMsg = z.strictObject({
  sha: Text(64).nullable(),
  subject: Text(500),
  /** Why there is no commit, when `sha` is null (no git repository, nothing to commit). */
  reason: Text(1_000).nullable(),
  committed: z.array(Path).max(MAX_FILES),
  discarded: z.array(Path).max(MAX_FILES),
  left: z.array(Path).max(MAX_FILES),
  finished: z.boolean(),
  /** Undo is offered while HEAD is still this commit and the pre-apply checkpoint is known. */
  canUndo: z.boolean(),
});
export type CommittedMsg = z.infer<typeof CommittedMsg>;

export const HostMessage = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('init'),
    task: TaskMsg,
    steps: z.array(StepMsg).max(1_000),
    effects: z.array(EffectMsg).max(10_000),
    files: z.array(ReviewFileMsg).max(MAX_FILES),
    message: Text(20_000),
    /** True when the workspace is a git repository (else applying only reverts). */
    git: z.boolean(),
    /** Every step completed or skipped: committing finishes the task unless the person says otherwise. */
    planDone: z.boolean(),
    /** The review's last commit, when one was made: the page shows it instead of the decisions. */
    committed: CommittedMsg.nullable(),
  }),
  /** Updated entries of listed files (line counts, streamed in batches after `init`). */
  z.strictObject({ type: z.literal('files'), files: z.array(ReviewFileMsg).max(MAX_FILE_BATCH) }),
  z.strictObject({ type: z.literal('hunks'), path: Path, fingerprint: Fingerprint, hunks: z.array(HunkMsg).max(MAX_HUNKS) }),
  z.strictObject({ type: z.literal('summary'), path: Path, fingerprint: Fingerprint, reason: Text(500) }),
  z.strictObject({ type: z.literal('busy'), busy: z.boolean(), label: Text(200) }),
  z.strictObject({ type: z.literal('applied'), ok: z.boolean(), text: Text(4_000), commit: Text(64).nullable() }),
  /** The commit was made: the page switches to the committed view. */
  z.strictObject({ type: z.literal('committed'), committed: CommittedMsg }),
  z.strictObject({ type: z.literal('error'), text: Text(4_000) }),
]);
export type HostMessage = z.infer<typeof HostMessage>;

/** What the page keeps across reloads (vscode.setState); parsed on restore like any input. */
export const PageState = z.strictObject({
  taskId: TaskId,
  message: Text(20_000).optional(),
  expanded: z.array(Path).max(MAX_FILES).optional(),
  /** path → per-hunk decisions ('a' approve, 'l' leave out, 'r' discard, 'u' undecided) or a whole-file decision ('m' mixed). */
  decisions: z.record(Path, z.strictObject({ whole: z.enum(['a', 'l', 'r', 'u', 'm']), hunks: z.array(z.enum(['a', 'l', 'r', 'u'])).max(MAX_HUNKS).nullable(), included: z.boolean(), fingerprint: Fingerprint.nullable() })).optional(),
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
