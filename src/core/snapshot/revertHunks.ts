import { diff3Merge } from 'node-diff3';

/**
 * Reverting only the agent's hunks of a file the person edited too, so an agent-only
 * rollback keeps the person's edits in a file both changed.
 *
 * Each agent step that changed the file is one interval: the file's content when the
 * step began (`before`) and when its checkpoint was taken (`after`). Undoing a step
 * while keeping everything else is a three-way merge of the current content (ours),
 * the step's `after` (the common ancestor) and its `before` (theirs): the person's
 * later edits are the ours-side changes, the undo is the theirs-side change. Steps are
 * undone newest first, each merge starting from the previous one's result, so an
 * older step's hunks are reverted in the text that still holds them. The person's
 * edits made before a step are part of that step's `before`, so they survive too.
 *
 * A region both sides changed is a conflict and the whole file is refused — a
 * conflict is shown to the person, never guessed. diff3 counts touching (adjacent)
 * changes as overlapping, which errs the same way. A "false conflict" (both sides made
 * the same change, e.g. the person already undid a hunk by hand) is not one.
 */

export interface AgentInterval {
  before: string;
  after: string;
}

export type RevertOutcome = { ok: true; text: string } | { ok: false; reason: string };

/** Lines with their terminators, so joining them gives back the exact text (CRLF, a missing final newline). */
function lines(text: string): string[] {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

export function revertAgentHunks(current: string, intervals: readonly AgentInterval[]): RevertOutcome {
  let text = current;
  for (let i = intervals.length - 1; i >= 0; i--) {
    const step = intervals[i]!;
    if (step.before === step.after) continue;
    const regions = diff3Merge(lines(text), lines(step.after), lines(step.before), { excludeFalseConflicts: true });
    const out: string[] = [];
    for (const r of regions) {
      if (r.conflict) {
        const at = r.conflict.aIndex + 1;
        return { ok: false, reason: `the agent’s change and yours overlap near line ${at}` };
      }
      if (r.ok) out.push(...r.ok);
    }
    text = out.join('');
  }
  return { ok: true, text };
}

/** Text the merge may handle: valid UTF-8 without NUL bytes (anything else is left to the person). */
export function asMergeableText(bytes: Buffer): string | null {
  if (bytes.includes(0)) return null;
  const text = bytes.toString('utf8');
  // A lossy decode (invalid UTF-8) would not round-trip: refuse rather than rewrite bytes.
  if (!Buffer.from(text, 'utf8').equals(bytes)) return null;
  return text;
}
