import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** Shared helpers for the benchmarks: medians, percentiles and a plain table. */

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

export function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

export interface Row {
  measure: string;
  waypoint: string;
  baseline: string;
  ratio: string;
  target: string;
  ok: boolean | null;
}

export function printTable(title: string, rows: Row[]): void {
  const head: Row = { measure: 'measure', waypoint: 'waypoint', baseline: 'baseline', ratio: 'ratio', target: 'target', ok: null };
  const cols: (keyof Row)[] = ['measure', 'waypoint', 'baseline', 'ratio', 'target'];
  const all = [head, ...rows];
  const w = cols.map((c) => Math.max(...all.map((r) => String(r[c]).length)));
  const line = (r: Row) => cols.map((c, i) => String(r[c]).padEnd(w[i])).join('  ') + (r.ok === null ? '' : r.ok ? '  ok' : '  MISSED');
  process.stdout.write(`\n## ${title}\n\n${line(head)}\n${w.map((n) => '-'.repeat(n)).join('  ')}\n${rows.map(line).join('\n')}\n`);
}

export function benchDir(prefix: string): { dir: string; cleanup: () => void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  return { dir, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

export const fmtMs = (ms: number): string => (ms < 10 ? `${ms.toFixed(2)} ms` : `${ms.toFixed(0)} ms`);
