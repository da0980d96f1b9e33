import { applyDecisions, computeHunks } from './hunks';

/**
 * What applying a review does to each file, decided purely from content: the base
 * (the task's starting point), the workspace now, and the person's decision. Kept
 * free of I/O so it can be property-tested: approving everything leaves the
 * workspace as it is; rejecting everything brings back the base exactly.
 */
export type FileDecision =
  | { path: string; action: 'approve' }
  | { path: string; action: 'reject' }
  /** Some hunks approved, the rest rejected; indices are `computeHunks(base, current)` hunks. */
  | { path: string; action: 'hunks'; approved: readonly number[]; hunkCount: number };

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
  /** Write these bytes (a partly approved file, or a rejected one put back to its base). */
  | { path: string; kind: 'write'; content: Buffer; restored: boolean }
  /** A rejected added file. */
  | { path: string; kind: 'delete' };

export interface ApplyPlan {
  actions: FileAction[];
  /** Paths whose workspace content after the actions is what the commit should hold. */
  commitPaths: string[];
  /** Paths put back to (or removed to match) the base. */
  reverted: string[];
}

export class StaleDecisionError extends Error {}

export function planApply(inputs: readonly PlanInput[]): ApplyPlan {
  const actions: FileAction[] = [];
  const commitPaths: string[] = [];
  const reverted: string[] = [];
  for (const f of inputs) {
    const d = f.decision;
    if (d.path !== f.path) throw new Error(`decision for ${d.path} given for ${f.path}`);
    if (d.action === 'approve') {
      actions.push({ path: f.path, kind: 'unchanged' });
      commitPaths.push(f.path);
      continue;
    }
    if (d.action === 'reject') {
      actions.push(revert(f));
      reverted.push(f.path);
      continue;
    }
    // Partial approval works on text only; the page offers it only for text files.
    if (f.base === null || f.current === null) {
      // An added or deleted file is one hunk: "some approved" means all or none.
      const all = d.approved.length > 0;
      actions.push(all ? { path: f.path, kind: 'unchanged' } : revert(f));
      (all ? commitPaths : reverted).push(f.path);
      continue;
    }
    const oldText = f.base.toString('utf8');
    const newText = f.current.toString('utf8');
    // Hunks are cut from decoded text; bytes that are not UTF-8 would not survive the
    // round trip, so such a file can only be approved or rejected whole.
    if (!Buffer.from(oldText, 'utf8').equals(f.base) || !Buffer.from(newText, 'utf8').equals(f.current)) {
      throw new StaleDecisionError(`${f.path} is not UTF-8 text: approve or reject it as a whole.`);
    }
    const changes = computeHunks(oldText, newText);
    if (changes.hunks.length !== d.hunkCount) {
      throw new StaleDecisionError(`${f.path} changed since it was reviewed (${changes.hunks.length} hunks now, ${d.hunkCount} reviewed). Refresh the review.`);
    }
    const approved = new Set(d.approved.filter((i) => i >= 0 && i < d.hunkCount));
    if (approved.size === changes.hunks.length) {
      actions.push({ path: f.path, kind: 'unchanged' });
      commitPaths.push(f.path);
    } else if (approved.size === 0) {
      actions.push(revert(f));
      reverted.push(f.path);
    } else {
      actions.push({ path: f.path, kind: 'write', content: Buffer.from(applyDecisions(changes, approved), 'utf8'), restored: false });
      commitPaths.push(f.path);
    }
  }
  return { actions, commitPaths, reverted };
}

function revert(f: PlanInput): FileAction {
  if (f.base === null) return f.current === null ? { path: f.path, kind: 'unchanged' } : { path: f.path, kind: 'delete' };
  if (f.current !== null && f.current.equals(f.base)) return { path: f.path, kind: 'unchanged' };
  return { path: f.path, kind: 'write', content: f.base, restored: true };
}
