import type { Task } from '../model/schema';
import type { ChangeStatus } from '../snapshot/manifest';

/**
 * The commit message a review proposes, about the change and for the people who read
 * the history: a subject from the task's title (imperative, at most 72 characters),
 * a body listing the files the commit changes, grouped and counted, and the
 * `Waypoint-Task:` trailer linking it back to the task. The steps' summaries are left
 * out: the agent wrote them for itself ("no length limit yet"), not for a reviewer.
 * The person edits the message before committing.
 */
export interface CommitFile {
  path: string;
  status: ChangeStatus;
}

/** Paths listed in the body at most; a long list ends in "… and N more", per group. */
export const MAX_LISTED_PATHS = 20;
export const MAX_SUBJECT = 72;

const GROUPS = [
  { word: 'added', of: (s: ChangeStatus) => s === 'added' },
  { word: 'modified', of: (s: ChangeStatus) => s === 'modified' || s === 'type_changed' || s === 'mode_changed' },
  { word: 'deleted', of: (s: ChangeStatus) => s === 'deleted' },
] as const;

export function commitMessage(task: Pick<Task, 'id' | 'title'>, files: readonly CommitFile[]): string {
  const parts = [commitSubject(task.title)];
  const body = filesBody(files);
  if (body) parts.push(body);
  parts.push(`Waypoint-Task: ${task.id}`);
  return parts.join('\n\n') + '\n';
}

/** "3 files changed: 1 added, 2 modified", then each group's paths (sorted), at most MAX_LISTED_PATHS in all. */
function filesBody(files: readonly CommitFile[]): string {
  if (!files.length) return '';
  const groups = GROUPS.map((g) => ({ word: g.word, paths: files.filter((f) => g.of(f.status)).map((f) => f.path).sort() })).filter((g) => g.paths.length);
  const counts = groups.map((g) => `${g.paths.length} ${g.word}`).join(', ');
  const lines = [`${files.length} file${files.length === 1 ? '' : 's'} changed: ${counts}`];
  let room = MAX_LISTED_PATHS;
  for (const g of groups) {
    lines.push('', `${g.word[0]!.toUpperCase()}${g.word.slice(1)}:`);
    const shown = g.paths.slice(0, Math.max(0, room));
    room -= shown.length;
    lines.push(...shown.map((p) => `- ${oneLine(p, 200)}`));
    if (g.paths.length > shown.length) lines.push(`- … and ${g.paths.length - shown.length} more`);
  }
  return lines.join('\n');
}

// Leading words a title may carry in a non-imperative form ("Adds", "Added", "Adding"): said as a command.
// Verbs whose forms read as nouns at the start of a title ("Changes to…", "Tests for…") are left out.
const VERBS = ['add', 'fix', 'update', 'remove', 'rename', 'refactor', 'implement', 'make', 'create', 'delete', 'move', 'improve', 'support', 'use', 'write', 'replace', 'clean', 'handle', 'allow', 'document', 'validate', 'extract', 'split', 'merge', 'drop', 'bump', 'upgrade'];

/** The subject: the title on one line, imperative where its first word is a known verb in another form, capitalised, no final period, cut at a word. */
export function commitSubject(title: string): string {
  let line = title.replace(/\s+/g, ' ').trim().replace(/\.+$/, '');
  const m = /^(\S+)(.*)$/.exec(line);
  if (m) line = `${imperative(m[1]!)}${m[2]}`;
  // A plain lowercase first word is capitalised as git subjects are; "iOS" or "t3-app" stays as written.
  if (/^[a-z]+(?: |$)/.test(line)) line = line.charAt(0).toUpperCase() + line.slice(1);
  if (line.length <= MAX_SUBJECT) return line || 'Changes';
  const cut = line.slice(0, MAX_SUBJECT - 1);
  const space = cut.lastIndexOf(' ');
  return `${(space > MAX_SUBJECT / 2 ? cut.slice(0, space) : cut).trimEnd()}…`;
}

function imperative(word: string): string {
  const lower = word.toLowerCase();
  for (const v of VERBS) {
    const stem = v.endsWith('e') ? v.slice(0, -1) : v;
    const forms = [v.endsWith('x') || v.endsWith('ch') ? `${v}es` : `${v}s`, `${stem}ed`, `${stem}ing`, `${v}${v.at(-1)}ed`, `${v}${v.at(-1)}ing`];
    if (forms.includes(lower)) return v;
  }
  return word;
}

function oneLine(s: string, max: number): string {
  const line = s.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}
