// The counts the in-host runner writes, and the closing line CI reads.
import fs from 'node:fs';

export interface SuiteResult {
  passes: number;
  failures: number;
  pending: number;
}

export function readResult(file: string): SuiteResult | undefined {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')) as SuiteResult;
  } catch {
    return undefined;
  }
}

/** "label: N passed, N failed" alone on a line; a missing result counts as one failure. */
export function printSummary(label: string, r: SuiteResult | undefined): void {
  if (!r) {
    console.log(`\n[${label}] the extension host reported no result`);
    console.log(`${label}: 0 passed, 1 failed`);
    return;
  }
  const skipped = r.pending ? `, ${r.pending} skipped` : '';
  console.log(`\n${label}: ${r.passes} passed, ${r.failures} failed${skipped}`);
}
