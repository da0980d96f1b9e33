import type { PhaseSummary } from './driver';

/** The crash matrix's summary table, one row per phase and a total. */
export function table(rows: readonly PhaseSummary[]): string {
  const head = ['phase', 'kills', 'acked calls', 'ops interrupted', 'repaired on open', 'invariant checks', 'violations', 'seconds'];
  const body = rows.map((r) => [r.phase, r.kills, r.acked, r.interruptedOps, r.repaired, r.checks, r.violations, r.seconds.toFixed(0)].map(String));
  const total = ['total', ...[1, 2, 3, 4, 5, 6].map((i) => String(body.reduce((a, r) => a + Number(r[i]), 0))), rows.reduce((a, r) => a + r.seconds, 0).toFixed(0)];
  const all = [head, ...body, total];
  const w = head.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(w[i]!) : c.padStart(w[i]!))).join('  ');
  return [line(head), w.map((n) => '-'.repeat(n)).join('  '), ...body.map(line), line(total)].join('\n');
}
