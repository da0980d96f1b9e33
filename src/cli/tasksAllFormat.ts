import type { TaskListing } from '../core/store/eventLog';
import { listingObject } from '../core/store/taskListingJson';
import { displayText } from '../core/model/displayText';
import { age } from './age';

/**
 * How `tasks --all` prints its listings, for the full CLI and for its fast path
 * (tasksAllFast.ts) alike: the --json rows (the contract) and the human table.
 */
export function listingJson(listings: readonly TaskListing[]): unknown[] {
  return listings.map(listingObject);
}

export function listingTable(listings: readonly TaskListing[], embedded: boolean): string {
  const note = embedded ? '\n(No team store: this workspace only. Set WAYPOINT_STORE=postgresql://… or pass --store to list every workspace.)' : '';
  if (!listings.length) return `No tasks in ${embedded ? 'this workspace' : 'the team store'} yet.${note}`;
  // One line per task, whatever a title or a machine name holds (the fast path prints this as it is).
  const rows = listings.map((l) => [l.workspace.machine, l.workspace.path, l.task.id, l.task.state, age(l.task.updatedAt), l.task.title].map((c) => displayText(c)));
  const head = ['MACHINE', 'WORKSPACE', 'TASK', 'STATE', 'UPDATED', 'TITLE'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  return [head, ...rows].map((r) => r.map((cell, i) => (i < head.length - 1 ? cell.padEnd(widths[i]) : cell)).join('  ')).join('\n') + note;
}
