import type { CheckpointMeta, SideEffect, Step, Task } from '../core/model/schema';
import { retryState } from '../core/engine/retryPolicy';
import { displayText } from '../core/model/displayText';

/** Human-readable renderings for the CLI (the --json output is the contract; this is for eyes). */

export { age } from './age';
import { age } from './age';

function pad(s: string, n: number): string {
  return s.length >= n ? s : s + ' '.repeat(n - s.length);
}

export function tasksTable(tasks: Task[], progress: (t: Task) => string): string {
  if (!tasks.length) return 'No tasks yet. Start one with: waypoint task start --goal "…"';
  // A task waiting for a person says so in its state column: that is what the reader must act on.
  // A title is one cell of one row, whatever it holds (the whole output is escaped again, keeping its own newlines).
  const rows = tasks.map((t) => [t.id, t.hold ? `${t.state} (waits for you)` : t.state, progress(t), age(t.updatedAt), displayText(t.title)]);
  const widths = [0, 1, 2, 3].map((i) => Math.max(...rows.map((r) => r[i].length), ['TASK', 'STATE', 'STEPS', 'UPDATED'][i].length));
  const head = ['TASK', 'STATE', 'STEPS', 'UPDATED', 'TITLE'];
  return [head, ...rows].map((r) => r.map((c, i) => (i < 4 ? pad(c, widths[i]) : c)).join('  ')).join('\n');
}

export function taskDetail(d: { task: Task; steps: Step[]; checkpoints: CheckpointMeta[]; sideEffects: SideEffect[] }): string {
  const { task } = d;
  const out: string[] = [];
  out.push(`${task.title}  [${task.state}]`);
  out.push(`  id ${task.id} · attempt ${task.attempt}${task.agent ? ` · agent ${task.agent}` : ''} · started ${age(task.createdAt)}`);
  out.push(`  goal: ${task.goal}`);
  if (task.forkedFrom) out.push(`  forked from task ${task.forkedFrom.taskId} at checkpoint ${task.forkedFrom.checkpointId}${task.forkedFrom.stepId ? ` (step ${task.forkedFrom.stepId})` : ''}`);
  if (task.hold) out.push(`  WAITS FOR A PERSON (${task.hold.cause.replace('_', ' ')}, since ${age(task.hold.since)}): ${task.hold.reason}`);
  if (task.interruption) out.push(`  stopped: ${task.interruption.reason} (${task.interruption.class})`);
  if (task.lease) out.push(`  lease: ${task.lease.owner}, expires ${new Date(task.lease.expiresAt).toISOString()}`);
  out.push('', 'Steps:');
  if (!d.steps.length) out.push('  (none)');
  for (const s of d.steps) {
    const deps = s.dependsOn.length ? ` ← ${s.dependsOn.join(', ')}` : '';
    const r = retryState(s, Date.now());
    out.push(`  ${pad(s.status, 11)} ${s.id}  ${s.title}${deps}${s.attempts > 0 ? `  (attempt ${s.attempts} of ${s.maxAttempts})` : ''}`);
    if (s.summary) out.push(`              ${s.summary}`);
    if (s.error) {
      const when = r.exhausted ? ', attempts used up' : r.retryAt !== null ? `, may retry at ${new Date(r.retryAt).toLocaleTimeString()}` : s.error.recoverable ? ', may retry now' : '';
      out.push(`              error: ${s.error.message}${s.error.recoverable ? ` (recoverable${when})` : ''}`);
    }
  }
  if (d.sideEffects.length) {
    out.push('', 'Side effects:');
    for (const e of d.sideEffects) out.push(`  ${pad(e.status === 'in_doubt' ? 'IN DOUBT' : e.status, 11)} ${e.key}  ${e.kind}: ${e.description}`);
  }
  out.push('', `Checkpoints: ${d.checkpoints.length}`);
  for (const c of d.checkpoints.slice(-10)) out.push(`  ${c.id}  ${pad(c.kind, 18)} ${c.stepId ?? ''} ${age(c.createdAt)}${c.label ? `  "${c.label}"` : ''}${c.damaged ? `  DAMAGED: ${c.damaged}` : ''}`);
  return out.join('\n');
}
