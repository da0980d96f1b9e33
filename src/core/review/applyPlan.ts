import { applyDecisions, computeHunks } from './hunks';

/**
 * What applying a review does, decided purely from content: the base (the task's
 * starting point), the workspace now, and the person's decision. Each change is
 * approved (committed, kept), left out (not committed, kept in the working tree)
 * or discarded (not committed, put back to the base in the working tree). Kept
 * free of I/O so it can be property-tested: approving everything commits the
 * workspace as it is; discarding everything brings back the base exactly.
 */
export type FileDecision =
  | { path: string; action: 'approve' }
  /** Left out of this commit: not committed, kept in the working tree as it is. */
  | { path: string; action: 'leave' }
  /** Discarded: not committed, and put back to the base in the working tree. */
  | { path: string; action: 'reject' }
  /**
   * Hunk by hunk; indices are `computeHunks(base, current)` hunks. `approved` are
   * committed, `left` are kept uncommitted, every other hunk is discarded.
   */
  | { path: string; action: 'hunks'; approved: readonly number[]; left?: readonly number[]; hunkCount: number };

export interface PlanInput {
  path: string;
  /** Content at the base checkpoint; null when the file did not exist then. */
  base: Buffer | null;
  /** Content in the workspace now; null when the file is gone. */
  current: Buffer | null;
  decision: FileDecision;
}

export type FileAction =
  | { path: string; kind: 'unchanged' }
  /** Write these bytes (a partly discarded file, or a discarded one put back to its base). */
  | { path: string; kind: 'write'; content: Buffer; restored: boolean }
  /** A discarded added file. */
  | { path: string; kind: 'delete' };

export interface ApplyPlan {
  /** Working-tree actions, one per decided path (discards only; the commit never writes the working tree). */
  actions: FileAction[];
  /** What the commit holds per path: the approved content, or null for an approved deletion. */
  commit: { path: string; content: Buffer | null; asInWorkTree: boolean }[];
  /** Paths whose changes are committed (wholly or in part). */
  commitPaths: string[];
  /** Paths with something discarded (put back, or removed, to match the base). */
  reverted: string[];
  /** Paths with something left out of the commit and kept in the working tree. */
  left: string[];
}

export class StaleDecisionError extends Error {}

export function planApply(inputs: readonly PlanInput[]): ApplyPlan {
  const plan: ApplyPlan = { actions: [], commit: [], commitPaths: [], reverted: [], left: [] };
  const approveAll = (f: PlanInput) => {
    plan.actions.push({ path: f.path, kind: 'unchanged' });
    plan.commit.push({ path: f.path, content: f.current, asInWorkTree: true });
    plan.commitPaths.push(f.path);
  };
  const leave = (f: PlanInput) => {
    plan.actions.push({ path: f.path, kind: 'unchanged' });
    plan.left.push(f.path);
  };
  const discard = (f: PlanInput) => {
    plan.actions.push(revert(f));
    plan.reverted.push(f.path);
  };
  for (const f of inputs) {
    const d = f.decision;
    if (d.path !== f.path) throw new Error(`decision for ${d.path} given for ${f.path}`);
    if (d.action === 'approve') approveAll(f);
    else if (d.action === 'leave') leave(f);
    else if (d.action === 'reject') discard(f);
    else if (f.base === null || f.current === null) {
      // An added or deleted file is one hunk: its first decision is the file's.
      if (d.approved.length > 0) approveAll(f);
      else if ((d.left ?? []).length > 0) leave(f);
      else discard(f);
    } else partial(plan, { path: f.path, base: f.base, current: f.current }, d);
  }
  return plan;
}

/** A text file decided hunk by hunk (both sides exist). */
function partial(plan: ApplyPlan, f: { path: string; base: Buffer; current: Buffer }, d: Extract<FileDecision, { action: 'hunks' }>): void {
  const oldText = f.base.toString('utf8');
  const newText = f.current.toString('utf8');
  // Hunks are cut from decoded text; bytes that are not UTF-8 would not survive the
  // round trip, so such a file can only be decided as a whole.
  if (!Buffer.from(oldText, 'utf8').equals(f.base) || !Buffer.from(newText, 'utf8').equals(f.current)) {
    throw new StaleDecisionError(`${f.path} is not UTF-8 text: approve, leave out or discard it as a whole.`);
  }
  const changes = computeHunks(oldText, newText);
  if (changes.hunks.length !== d.hunkCount) {
    throw new StaleDecisionError(`${f.path} changed since it was reviewed (${changes.hunks.length} hunks now, ${d.hunkCount} reviewed). Refresh the review.`);
  }
  const inRange = (i: number) => i >= 0 && i < d.hunkCount;
  const approved = new Set(d.approved.filter(inRange));
  const left = new Set((d.left ?? []).filter((i) => inRange(i) && !approved.has(i)));
  const kept = new Set([...approved, ...left]);
  const n = changes.hunks.length;
  if (approved.size === n) plan.commit.push({ path: f.path, content: f.current, asInWorkTree: true });
  else if (approved.size > 0) plan.commit.push({ path: f.path, content: Buffer.from(applyDecisions(changes, approved), 'utf8'), asInWorkTree: false });
  if (approved.size > 0) plan.commitPaths.push(f.path);
  if (left.size > 0) plan.left.push(f.path);
  if (kept.size === n) plan.actions.push({ path: f.path, kind: 'unchanged' });
  else {
    plan.reverted.push(f.path);
    if (kept.size === 0) plan.actions.push(revert(f));
    else plan.actions.push({ path: f.path, kind: 'write', content: Buffer.from(applyDecisions(changes, kept), 'utf8'), restored: false });
  }
}
function revert(f: Pick<PlanInput, 'path' | 'base' | 'current'>): FileAction {
  if (f.base === null) return f.current === null ? { path: f.path, kind: 'unchanged' } : { path: f.path, kind: 'delete' };
  if (f.current !== null && f.current.equals(f.base)) return { path: f.path, kind: 'unchanged' };
  return { path: f.path, kind: 'write', content: f.base, restored: true };
}
