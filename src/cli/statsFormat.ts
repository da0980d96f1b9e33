import type { Stats, StatsTotals } from '../core/engine/stats';
import { STATE_ORDER, formatMs as ms } from '../core/engine/stats';
import { plural } from '../core/model/plural';

/** `waypoint stats` for eyes: aligned tables (the --json document is the contract). */

function table(head: string[], rows: string[][], textColumns: readonly number[] = [0]): string[] {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  // Numbers right-aligned so their digits line up; names and lists left-aligned.
  const line = (r: string[]) => r.map((c, i) => (textColumns.includes(i) ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ').trimEnd();
  return [line(head), ...rows.map(line)];
}

const counts = (m: Partial<Record<string, number>>) =>
  Object.entries(m)
    .filter(([, n]) => n)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ') || 'none';

function totalsRow(name: string, t: StatsTotals, extra: string[] = []): string[] {
  return [name, String(t.tasks), String(t.attempts), String(t.retries), String(t.stepFailures.recoverable + t.stepFailures.unrecoverable), String(t.interruptions), ms(t.durations.medianMs), ms(t.durations.p95Ms), ...extra];
}
const TOTALS_HEAD = ['', 'TASKS', 'ATTEMPTS', 'RETRIES', 'FAILURES', 'INTERRUPTIONS', 'MEDIAN', 'P95'];

export function statsText(s: Stats): string {
  const out: string[] = [];
  const scope = s.filter.taskId ? `task ${s.filter.taskId}` : s.filter.since ? `tasks active since ${s.filter.since}` : 'all tasks';
  out.push(`Waypoint metrics: ${scope} (${s.generatedAt})`, '');
  if (!s.totals.tasks) {
    out.push(s.filter.since ? 'No task was active in that period.' : 'No tasks yet. Start one with: waypoint task start --goal "…"');
    return out.join('\n');
  }
  out.push(`Tasks: ${s.totals.tasks} — ${STATE_ORDER.filter((st) => s.totals.byState[st]).map((st) => `${st} ${s.totals.byState[st]}`).join(', ')}`);
  out.push(`Steps: ${s.steps.total} — ${counts(s.steps.byStatus)}; ${s.steps.retried} retried (most attempts: ${s.steps.maxAttempts})`);
  out.push(`Attempts: ${s.totals.attempts} step starts, ${s.totals.retries} of them retries; failures: ${s.totals.stepFailures.recoverable} recoverable, ${s.totals.stepFailures.unrecoverable} unrecoverable`);
  const d = s.totals.durations;
  out.push(`Step durations (${d.count} finished attempts): median ${ms(d.medianMs)}, p95 ${ms(d.p95Ms)}, mean ${ms(d.meanMs)}, max ${ms(d.maxMs)}`);
  out.push(`Interruptions: ${s.interruptions.total} — ${counts(s.interruptions.byClass)}${s.interruptions.failedTasks ? ` (${s.interruptions.failedTasks} failed the task)` : ''}`);
  for (const r of s.interruptions.byReason.slice(0, 5)) out.push(`  ${String(r.count).padStart(4)}  ${r.reason}`);
  out.push(`Side effects: ${s.sideEffects.total} — ${counts(s.sideEffects.byOutcome)}${s.sideEffects.resolvedByPerson ? `; ${s.sideEffects.resolvedByPerson} settled by a person` : ''}`);
  out.push(`Checkpoints: ${s.checkpoints.total} (${counts(s.checkpoints.byKind)})${s.checkpoints.damaged ? `, ${s.checkpoints.damaged} damaged` : ''}; ${plural(s.filesChanged, 'file change')} recorded`);
  if (s.storeBytes !== null) out.push(`Storage: ${(s.storeBytes / 1e6).toFixed(2)} MB blob store on disk (all tasks; see waypoint storage)`);
  if (s.task) {
    out.push('', ...table(['STEP', 'STATUS', 'ATTEMPTS', 'DURATIONS'], s.task.steps.map((st) => [st.id, st.status, String(st.attempts), st.durationsMs.map(ms).join(', ') || '-']), [0, 1, 3]));
  }
  if (s.steps.mostRetried.length && !s.task) {
    out.push('', 'Most retried steps:');
    for (const r of s.steps.mostRetried.slice(0, 5)) out.push(`  ${String(r.attempts).padStart(3)} attempts  ${r.taskId} ${r.stepId} (${r.status})  ${r.title}`);
  }
  out.push('', 'Per agent:', ...table(TOTALS_HEAD.map((h, i) => (i === 0 ? 'AGENT' : h)), s.byAgent.map((a) => totalsRow(a.agent, a))).map((l) => `  ${l}`));
  out.push('', 'Per day (UTC; tasks: started that day):', ...table([...TOTALS_HEAD.map((h, i) => (i === 0 ? 'DAY' : h)), 'COMPLETED'], s.byDay.map((x) => totalsRow(x.day, x, [String(x.completed)]))).map((l) => `  ${l}`));
  return out.join('\n');
}
