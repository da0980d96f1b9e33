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
