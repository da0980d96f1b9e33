import type { Stats, StatsTotals } from '../core/engine/stats';
import { STATE_ORDER, formatMs as ms } from '../core/engine/stats';
import { plural } from '../core/model/plural';

/**
 * `Waypoint: Show Metrics` as Markdown (rendered by VS Code's Markdown preview, which
 * themes it and needs no webview of ours). Plain text in table cells is escaped, so an
 * agent's reason or name cannot inject markup.
 */
// Cells never start a line, so only inline markup needs escaping (and the cell separator).
const esc = (s: string) => s.replace(/[\\`*_[\]()<>|~]/g, (c) => `\\${c}`).replace(/\r?\n/g, ' ');

function counts(m: Partial<Record<string, number>>): string {
  const parts = Object.entries(m)
    .filter(([, n]) => n)
    .map(([k, n]) => `${esc(k.replace(/_/g, ' '))} ${n}`);
  return parts.join(' · ') || 'none';
}

function totalsTable(first: string, rows: { name: string; t: StatsTotals; extra?: string[] }[], extraHead: string[] = []): string[] {
  const head = [first, 'tasks', 'attempts', 'retries', 'failures', 'interruptions', 'median', 'p95', ...extraHead];
  return [
    `| ${head.join(' | ')} |`,
    `| --- |${' ---: |'.repeat(head.length - 1)}`,
    ...rows.map(({ name, t, extra = [] }) => {
      const cells = [esc(name), t.tasks, t.attempts, t.retries, t.stepFailures.recoverable + t.stepFailures.unrecoverable, t.interruptions, ms(t.durations.medianMs), ms(t.durations.p95Ms), ...extra];
      return `| ${cells.join(' | ')} |`;
    }),
  ];
}

export function metricsMarkdown(s: Stats): string {
  const out: string[] = ['# Waypoint metrics', ''];
  out.push(`${s.filter.taskId ? `Task \`${s.filter.taskId}\`` : 'All tasks in this workspace'} · computed ${new Date(s.generatedAt).toLocaleString()} · refreshes as tasks change.`, '');
  if (!s.totals.tasks) {
    out.push('No tasks yet. Start one with **Waypoint: Start Task**, or connect an agent with **Waypoint: Connect an Agent**; its tasks, retries, interruptions and step durations appear here.', '');
    return out.join('\n');
  }
  const d = s.totals.durations;
  out.push('## Overview', '');
  out.push('| | |', '| --- | --- |');
  out.push(`| Tasks | ${s.totals.tasks}: ${STATE_ORDER.filter((st) => s.totals.byState[st]).map((st) => `${st.replace(/_/g, ' ')} ${s.totals.byState[st]}`).join(' · ')} |`);
  out.push(`| Steps | ${s.steps.total}: ${counts(s.steps.byStatus)} |`);
  out.push(`| Attempts | ${s.totals.attempts} step starts, **${s.totals.retries} retries**; ${s.steps.retried === 1 ? '1 step' : `${s.steps.retried} steps`} needed more than one attempt (most: ${s.steps.maxAttempts}) |`);
  out.push(`| Step failures | ${s.totals.stepFailures.recoverable} recoverable · ${s.totals.stepFailures.unrecoverable} unrecoverable |`);
  out.push(`| Step durations | median **${ms(d.medianMs)}** · p95 **${ms(d.p95Ms)}** · mean ${ms(d.meanMs)} · max ${ms(d.maxMs)} (${d.count} finished attempts) |`);
  out.push(`| Interruptions | ${s.interruptions.total}: ${counts(s.interruptions.byClass)}${s.interruptions.failedTasks ? ` (${s.interruptions.failedTasks} failed the task)` : ''} |`);
  out.push(`| Side effects | ${s.sideEffects.total}: ${counts(s.sideEffects.byOutcome)}${s.sideEffects.resolvedByPerson ? ` · ${s.sideEffects.resolvedByPerson} settled by you` : ''} |`);
  out.push(`| Checkpoints | ${s.checkpoints.total}: ${counts(s.checkpoints.byKind)}${s.checkpoints.damaged ? ` · **${s.checkpoints.damaged} damaged**` : ''} · ${plural(s.filesChanged, 'file change')} recorded |`);
  if (s.storeBytes !== null) out.push(`| Storage | ${(s.storeBytes / 1e6).toFixed(2)} MB blob store on disk (see **Waypoint: Show Storage Usage**) |`);
  out.push('');
  if (s.interruptions.byReason.length) {
    out.push('## Interruptions by cause', '', '| reason | count |', '| --- | ---: |');
    for (const r of s.interruptions.byReason) out.push(`| ${esc(r.reason)} | ${r.count} |`);
    out.push('');
  }
  if (s.steps.mostRetried.length) {
    out.push('## Most retried steps', '', '| task | step | attempts | status |', '| --- | --- | ---: | --- |');
    // Titles, as the Tasks view names them: ids stay in `waypoint stats --json`.
    for (const r of s.steps.mostRetried) out.push(`| ${esc(r.taskTitle)} | ${esc(r.title)} | ${r.attempts} | ${r.status.replace('_', ' ')} |`);
    out.push('');
  }
  out.push('## Per agent', '', ...totalsTable('agent', s.byAgent.map((a) => ({ name: a.agent, t: a }))), '');
  out.push('## Per day (UTC)', '', 'Tasks counted on the day they started.', '', ...totalsTable('day', s.byDay.map((x) => ({ name: x.day, t: x, extra: [String(x.completed)] })), ['completed']), '');
  out.push('Median: the middle finished step attempt (the mean of the two middle ones for an even count). p95: nearest rank, the shortest duration that at least 95% of attempts did not exceed. A retry is an attempt beyond a step’s first.', '');
  return out.join('\n');
}
