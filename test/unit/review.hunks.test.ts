import * as assert from 'node:assert/strict';
import fc from 'fast-check';
import { applyDecisions, computeHunks, lineStats } from '../../src/core/review/hunks';

const lineArb = fc.oneof(fc.constantFrom('a', 'b', 'c', '', '  x', 'const y = 1;'), fc.string({ maxLength: 8 }).map((s) => s.replace(/[\r\n]/g, '')));
const textArb = fc
  .tuple(fc.array(lineArb, { maxLength: 30 }), fc.constantFrom('\n', '\r\n'), fc.boolean())
  .map(([lines, eol, finalNl]) => (lines.length ? lines.join(eol) + (finalNl ? eol : '') : ''));

describe('review: hunks', () => {
  it('splits a change into independent hunks with positions and context', () => {
    const a = 'one\ntwo\nthree\nfour\nfive\nsix\nseven\n';
    const b = 'one\nTWO\nthree\nfour\nfive\nsix\nseven\neight\n';
    const c = computeHunks(a, b);
    assert.equal(c.hunks.length, 2);
    assert.deepEqual(c.hunks[0], { index: 0, oldStart: 2, oldLines: 1, newStart: 2, newLines: 1, removed: ['two'], added: ['TWO'], before: ['one'], after: ['three', 'four', 'five'] });
    assert.deepEqual(c.hunks[1].added, ['eight']);
    assert.deepEqual(lineStats(c), { added: 2, removed: 1 });
  });

  it('applies a mixed decision exactly', () => {
    const a = 'one\ntwo\nthree\nfour\nfive\nsix\nseven\n';
    const b = 'one\nTWO\nthree\nfour\nfive\nsix\nseven\neight\n';
    const c = computeHunks(a, b);
    assert.equal(applyDecisions(c, new Set([1])), 'one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n');
    assert.equal(applyDecisions(c, new Set([0])), 'one\nTWO\nthree\nfour\nfive\nsix\nseven\n');
  });

  it('property: approving all hunks reproduces the new content, rejecting all the old', () => {
    fc.assert(
      fc.property(textArb, textArb, (a, b) => {
        const c = computeHunks(a, b);
        assert.equal(applyDecisions(c, new Set(c.hunks.map((h) => h.index))), b);
        assert.equal(applyDecisions(c, new Set()), a);
      }),
      { numRuns: 500 },
    );
  });

  it('property: any selection only mixes whole hunks (each hunk is all old or all new)', () => {
    fc.assert(
      fc.property(textArb, textArb, fc.array(fc.boolean(), { maxLength: 40 }), (a, b, picks) => {
        const c = computeHunks(a, b);
        const approved = new Set(c.hunks.filter((_, i) => picks[i]).map((h) => h.index));
        const out = applyDecisions(c, approved);
        // Re-diffing old → result finds only the approved hunks' changes.
        const again = computeHunks(a, out);
        const expectedAdded = c.hunks.filter((h) => approved.has(h.index)).reduce((n, h) => n + h.newLines, 0);
        const expectedRemoved = c.hunks.filter((h) => approved.has(h.index)).reduce((n, h) => n + h.oldLines, 0);
        const s = lineStats(again);
        assert.ok(s.added <= expectedAdded && s.removed <= expectedRemoved, `${JSON.stringify(s)} vs +${expectedAdded} -${expectedRemoved}`);
      }),
      { numRuns: 300 },
    );
  });
});
