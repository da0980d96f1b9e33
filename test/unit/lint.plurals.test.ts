import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import ts from 'typescript';

/**
 * No "file(s)" in what a person reads: counts are said with `plural()`
 * (src/core/model/plural.ts) — "1 file", "3 files". Every string literal and
 * template text in src/ and webview-ui/ is read with the TypeScript parser (so
 * `map((s) => …)` and comments do not count) and checked for a word followed by
 * "(s)".
 *
 * A few files are being reworked on other branches; their remaining uses are
 * counted here so that a new one still fails, and the count must come down to zero
 * as they are fixed (a lower count fails too, asking for the baseline to drop).
 */
const ROOT = path.resolve(__dirname, '..', '..');
const PATTERN = /[A-Za-z]\(s\)/;
const BASELINE: Record<string, number> = {
  'webview-ui/main.ts': 1,
};

function sources(dir: string): string[] {
  return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((d) => {
    const rel = `${dir}/${d.name}`;
    if (d.isDirectory()) return sources(rel);
    return /\.tsx?$/.test(d.name) && !d.name.endsWith('.d.ts') ? [rel] : [];
  });
}

/** The "(s)" plurals in a file's string literals and template texts, as `line: text`. */
function pluralsIn(fileName: string, text: string): string[] {
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false, fileName.endsWith('x') ? ts.ScriptKind.TSX : ts.ScriptKind.TS);
  const hits: string[] = [];
  const visit = (n: ts.Node) => {
    if (ts.isStringLiteral(n) || ts.isNoSubstitutionTemplateLiteral(n) || ts.isTemplateHead(n) || ts.isTemplateMiddle(n) || ts.isTemplateTail(n)) {
      if (PATTERN.test(n.text)) hits.push(`${sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1}: ${n.text.trim().slice(0, 120)}`);
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return hits;
}

describe('lint: counts are said with plural(), never "file(s)"', () => {
  it('finds "(s)" in strings and templates, not in code or comments', () => {
    const hits = pluralsIn('x.ts', [
      "const a = `${n} file(s) changed`;",
      "const b = 'checkpoint(s)';",
      'const c = `a ${x} b ${y} step(s) done`;',
      'const d = list.map((s) => s.id);',
      '// a comment about file(s)',
      "const e = `${plural(n, 'file')} changed`;",
    ].join('\n'));
    assert.deepEqual(hits, ['1: file(s) changed', '2: checkpoint(s)', '3: step(s) done']);
  });

  it('no new "(s)" in src/ or webview-ui/, and the files still being reworked only go down', () => {
    const found: Record<string, string[]> = {};
    for (const f of [...sources('src'), ...sources('webview-ui')]) {
      const hits = pluralsIn(f, fs.readFileSync(path.join(ROOT, f), 'utf8'));
      if (hits.length) found[f] = hits;
    }
    const problems: string[] = [];
    for (const [f, hits] of Object.entries(found)) {
      const allowed = BASELINE[f] ?? 0;
      if (hits.length > allowed) problems.push(`${f} says "(s)" where plural() should count (${hits.length} found, ${allowed} allowed):\n    ${hits.join('\n    ')}`);
    }
    for (const [f, allowed] of Object.entries(BASELINE)) {
      const n = found[f]?.length ?? 0;
      if (n < allowed) problems.push(`${f} is down to ${n} "(s)" from ${allowed}: lower its BASELINE entry in test/unit/lint.plurals.test.ts${n === 0 ? ' (remove it)' : ''}.`);
    }
    assert.deepEqual(problems, []);
  });
});
