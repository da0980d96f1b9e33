import type { Step } from '../model/schema';

/**
 * A step as an error message names it: its title (what a person sees in the tree),
 * with the agent-chosen id after it where they differ, which the agent reading the
 * same message needs to call again. The extension's toasts show the title part.
 */
export function stepName(s: Pick<Step, 'id' | 'title'>): string {
  return s.title && s.title !== s.id ? `“${s.title}” (${s.id})` : `'${s.id}'`;
}
