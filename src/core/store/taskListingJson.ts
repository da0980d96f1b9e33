import type { TaskListing } from './eventLog';

/**
 * One task of `waypoint tasks --all --json`: the contract's fields, in its order. The
 * CLI prints a list of these with `JSON.stringify(list, null, 2)`; the team store keeps
 * each task's entry as that text (`listingEntryText`), written with its summary, so a
 * listing of 10,000 tasks is PostgreSQL joining stored text, not building it.
 */
export function listingObject(l: TaskListing): Record<string, unknown> {
  return {
    id: l.task.id,
    title: l.task.title,
    goal: l.task.goal,
    agent: l.task.agent,
    state: l.task.state,
    attempt: l.task.attempt,
    createdAt: l.task.createdAt,
    updatedAt: l.task.updatedAt,
    workspace: l.workspace.path,
    workspaceId: l.workspace.id || null,
    machine: l.workspace.machine,
  };
}

/**
 * The entry as it stands inside the printed list: `JSON.stringify(list, null, 2)` writes
 * each element as the element's own `JSON.stringify(element, null, 2)` indented by two
 * more spaces. Line by line is safe: JSON text never holds a raw line break inside a
 * string (it is escaped), and it never holds a NUL or a lone surrogate either (escaped
 * too), so the text is always storable as PostgreSQL text.
 */
export function listingEntryText(l: TaskListing): string {
  return '  ' + JSON.stringify(listingObject(l), null, 2).replace(/\n/g, '\n  ');
}

const UPDATED_AT_KEY = '\n    "updatedAt": ';
const AFTER_UPDATED_AT = ',\n    "workspace": ';

/**
 * The entry in the two parts the team store keeps (v4): `head + updatedAt + tail` is
 * `listingEntryText`. An event that moves only the task's time leaves both parts as
 * they were, so PostgreSQL's update of the row logs the time, not the whole entry.
 * Cut from the entry itself, so the two can never disagree; the keys before them are
 * the JSON text of values that cannot hold a raw line break, so the first match is the key.
 */
export function listingEntryParts(l: TaskListing): { head: string; tail: string } {
  const text = listingEntryText(l);
  const at = text.indexOf(UPDATED_AT_KEY);
  const end = text.indexOf(AFTER_UPDATED_AT, at);
  return { head: text.slice(0, at + UPDATED_AT_KEY.length), tail: text.slice(end) };
}
