import type { Step, Task } from '../model/schema';

/**
 * The commit message a review proposes: a subject from the task's title, a body from
 * its goal and the completed steps' summaries, and a `Waypoint-Task:` trailer linking
 * the commit back to the task. The person edits it before committing.
 */
export function commitMessage(task: Pick<Task, 'id' | 'title' | 'goal' | 'summary'>, steps: Pick<Step, 'title' | 'summary' | 'status'>[]): string {
  const subject = oneLine(task.title, 72);
  const body: string[] = [];
  if (task.goal.trim() && task.goal.trim() !== task.title.trim()) body.push(wrap(task.goal.trim()));
  if (task.summary?.trim()) body.push(wrap(task.summary.trim()));
  const done = steps.filter((s) => s.status === 'completed');
  if (done.length) body.push(done.map((s) => `- ${oneLine(s.summary?.trim() || s.title, 200)}`).join('\n'));
  return [subject, ...body, `Waypoint-Task: ${task.id}`].join('\n\n') + '\n';
}

function oneLine(s: string, max: number): string {
  const line = s.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

function wrap(text: string, width = 72): string {
  return text
    .split(/\n{2,}/)
    .map((para) => {
      const words = para.replace(/\s+/g, ' ').split(' ');
      const lines: string[] = [];
      let cur = '';
      for (const w of words) {
        if (cur && cur.length + 1 + w.length > width) {
          lines.push(cur);
          cur = w;
        } else cur = cur ? `${cur} ${w}` : w;
      }
      if (cur) lines.push(cur);
      return lines.join('\n');
    })
    .join('\n\n');
}
