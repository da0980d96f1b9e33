import * as path from 'node:path';
import { TASK_STATES, type TaskState } from '../core/model/schema';
import { WaypointError } from '../core/model/errors';
import { UsageError } from './usageError';

/**
 * "Did you mean" for the command line: a mistyped option, command, step id or state is
 * answered with the nearest valid one, so a typo costs one more try instead of a silent
 * wrong result.
 */

/** Edit distance (insert, delete, substitute, swap of neighbours), case-insensitive. */
export function distance(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  const d: number[][] = Array.from({ length: x.length + 1 }, (_, i) => Array.from({ length: y.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= x.length; i++) {
    for (let j = 1; j <= y.length; j++) {
      const cost = x[i - 1] === y[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && x[i - 1] === y[j - 2] && x[i - 2] === y[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[x.length][y.length];
}

/** The candidate nearest to `word`, when it is near enough to be a typo of it (a third of its length, at least 1, at most 3 edits). */
export function nearest(word: string, candidates: Iterable<string>): string | undefined {
  const limit = Math.min(3, Math.max(1, Math.floor(word.length / 3)));
  let best: { c: string; d: number } | undefined;
  for (const c of candidates) {
    const d = c.toLowerCase().startsWith(word.toLowerCase()) && word.length >= 3 ? 0.5 : distance(word, c);
    if (d <= limit && (!best || d < best.d)) best = { c, d };
  }
  return best?.c;
}

/** `; did you mean X?` or nothing. */
export function didYouMean(word: string, candidates: Iterable<string>, show: (c: string) => string = (c) => c): string {
  const n = nearest(word, candidates);
  return n === undefined ? '' : `; did you mean ${show(n)}?`;
}

/**
 * A workspace-relative path given on the command line (`--dirty`, `--paths`): refused
 * when it leads outside the workspace (`..`, an absolute path elsewhere), as Waypoint
 * never reads or writes there. An absolute path inside the workspace is made relative.
 */
export function workspacePath(workspace: string, p: string, option: string): string {
  const abs = path.resolve(workspace, p);
  const rel = path.relative(workspace, abs);
  if (rel === '' || rel === '..' || rel.startsWith(`..${path.sep}`) || path.isAbsolute(rel)) {
    throw new UsageError(`${option} ${p} is outside the workspace ${workspace}; give paths inside it (relative to it, or absolute under it).`);
  }
  return rel.split(path.sep).join('/');
}

/**
 * The answer to command words that name no command: a group (`connect`, `task`) lists
 * what it takes; a typo gets the nearest command.
 */
export function unknownCommand(words: readonly string[], commands: readonly string[]): string {
  const said = words.join(' ');
  if (words.length === 0) return "No command given. Run 'waypoint --help'.";
  const group = commands.filter((c) => c.startsWith(`${words[0]} `)).map((c) => c.slice(words[0].length + 1));
  if (group.length) {
    const sub = words[1];
    const hint = sub === undefined ? '' : didYouMean(sub, group, (g) => `'waypoint ${words[0]} ${g}'`);
    const what = words[0] === 'connect' || words[0] === 'hook' ? 'an agent' : 'one of';
    return `${sub === undefined ? `'waypoint ${words[0]}' needs ${what}` : `Unknown command '${said}'${hint || '.'} 'waypoint ${words[0]}' takes ${what}`}: ${group.join(', ')}.`;
  }
  return `Unknown command '${said}'${didYouMean(words.length > 1 ? said : words[0], commands, (c) => `'waypoint ${c}'`) || '.'} Run 'waypoint --help'.`;
}

/** `--state a,b`: each a task state (a usage error listing the states otherwise). */
export function stateOption(raw: string | undefined): TaskState[] | undefined {
  if (raw === undefined) return undefined;
  const states = raw.split(',').map((x) => x.trim()).filter(Boolean);
  for (const st of states) {
    if (!(TASK_STATES as readonly string[]).includes(st)) throw new UsageError(`--state ${st} is not a task state${didYouMean(st, TASK_STATES)} (states: ${TASK_STATES.join(', ')}).`);
  }
  return states as TaskState[];
}

/**
 * `step start --step ID` where the task has no step ID: a typo would silently start an
 * ad hoc step, so it is refused (naming the plan's steps and the nearest) unless
 * `--ad-hoc` says a new step is meant.
 */
export function stepIdCheck(taskId: string, stepId: string, steps: readonly { id: string; status: string }[]): WaypointError | null {
  if (steps.some((st) => st.id === stepId)) return null;
  const ids = steps.map((st) => st.id);
  const list = ids.length ? `its steps: ${steps.map((st) => `${st.id} (${st.status})`).join(', ')}` : 'it has no steps yet';
  return new WaypointError(
    'invalid_input',
    `Task ${taskId} has no step '${stepId}'${didYouMean(stepId, ids, (x) => `'${x}'`)} (${list}). To start a new step that is not in the plan, add --ad-hoc.`,
    { taskId, stepId, steps: ids },
  );
}
