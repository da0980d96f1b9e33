import * as assert from 'node:assert/strict';
import fc from 'fast-check';
import { asMergeableText, revertAgentHunks } from '../../src/core/snapshot/revertHunks';

/** n lines, with `edits` replacing some of them. */
const text = (n: number, edits: ReadonlyMap<number, string>) => Array.from({ length: n }, (_, i) => `${edits.get(i) ?? `line ${i}`}\n`).join('');

describe('revertAgentHunks: three-way undo of an agent step', () => {
  it('undoes the agent’s lines and keeps the person’s, for any two edits at least two lines apart', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 6, max: 60 }).chain((n) => fc.tuple(fc.constant(n), fc.integer({ min: 0, max: n - 1 }), fc.integer({ min: 0, max: n - 1 }), fc.boolean())),
        ([n, agentLine, personLine, personFirst]) => {
          fc.pre(Math.abs(agentLine - personLine) >= 2);
          const agent = new Map([[agentLine, 'agent']]);
          const person = new Map([[personLine, 'person']]);
          const both = new Map([...agent, ...person]);
          // The person edited before the agent's step (part of its `before`) or after it (only in `current`).
          const before = personFirst ? text(n, person) : text(n, new Map());
          const after = personFirst ? text(n, both) : text(n, agent);
          const out = revertAgentHunks(text(n, both), [{ before, after }]);
          assert.deepEqual(out, { ok: true, text: text(n, person) });
        },
      ),
    );
  });

  it('refuses, naming the line, when the person changed the agent’s own lines', () => {
    const out = revertAgentHunks(text(10, new Map([[4, 'agent + mine']])), [{ before: text(10, new Map()), after: text(10, new Map([[4, 'agent']])) }]);
    assert.deepEqual(out, { ok: false, reason: 'the agent’s change and yours overlap near line 5' });
  });

  it('a hunk the person already undid by hand is not a conflict', () => {
    const base = text(10, new Map());
    const out = revertAgentHunks(text(10, new Map([[8, 'mine']])), [{ before: base, after: text(10, new Map([[2, 'agent']])) }]);
    assert.deepEqual(out, { ok: true, text: text(10, new Map([[8, 'mine']])) });
  });

  it('undoes steps newest first, so a later step’s edit of an earlier step’s line reverts to the original', () => {
    const s0 = text(10, new Map());
    const s1 = text(10, new Map([[3, 'agent 1']]));
    const s2 = text(10, new Map([[3, 'agent 2'], [7, 'agent 2']]));
    const out = revertAgentHunks(text(10, new Map([[3, 'agent 2'], [7, 'agent 2'], [0, 'mine']])), [
      { before: s0, after: s1 },
      { before: s1, after: s2 },
    ]);
    assert.deepEqual(out, { ok: true, text: text(10, new Map([[0, 'mine']])) });
  });

  it('only valid UTF-8 without NUL bytes is text to merge', () => {
    assert.equal(asMergeableText(Buffer.from('héllo\n')), 'héllo\n');
    assert.equal(asMergeableText(Buffer.from([0x61, 0x00, 0x62])), null);
    assert.equal(asMergeableText(Buffer.from([0x61, 0xff, 0x62])), null);
  });
});
