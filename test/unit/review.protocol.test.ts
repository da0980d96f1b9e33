import * as assert from 'node:assert/strict';
import { embedJson, HostMessage, INIT_FILES, inPageOrder, listingMessages, PageMessage, PageState } from '../../src/extension/review/protocol';

describe('review: panel protocol', () => {
  it('accepts the messages the page sends', () => {
    for (const m of [
      { type: 'ready' },
      { type: 'shown', files: 1000, at: 1_764_500_000_000, pageMs: 120.5, scriptMs: 80, receivedMs: 95, drawnMs: 104.2, loadMs: 90 },
      { type: 'requestHunks', path: 'src/a.ts' },
      { type: 'openDiff', path: '<img src=x onerror=alert(1)>' },
      { type: 'apply', message: 'Subject\n\nWaypoint-Task: t_1\n', decisions: [{ path: 'a', action: 'approve' }, { path: 'b', action: 'hunks', approved: [0], hunkCount: 2, fingerprint: 'a'.repeat(32) }], finish: true },
      { type: 'apply', message: 'm', decisions: [{ path: 'a', action: 'leave' }, { path: 'b', action: 'hunks', approved: [0], left: [1], hunkCount: 3, fingerprint: 'a'.repeat(32) }], finish: false },
      { type: 'undoCommit' },
      { type: 'rollback' },
      { type: 'resume' },
    ]) {
      assert.equal(PageMessage.safeParse(m).success, true, JSON.stringify(m));
    }
  });

  it('refuses malformed page messages', () => {
    for (const m of [
      null,
      'ready',
      {},
      { type: 'nope' },
      { type: 'ready', extra: 1 },
      { type: 'shown' },
      { type: 'shown', files: -1, at: 1 },
      { type: 'shown', files: 1.5, at: 1 },
      { type: 'shown', files: 1 },
      { type: 'requestHunks' },
      { type: 'requestHunks', path: '' },
      { type: 'requestHunks', path: 42 },
      { type: 'apply', message: '   ', decisions: [], finish: true },
      { type: 'apply', message: 'm', decisions: [] },
      { type: 'apply', message: 'm', decisions: [], finish: 'yes' },
      { type: 'apply', message: 'm', decisions: [{ path: 'a', action: 'hunks', approved: [0], left: [-2], hunkCount: 1, fingerprint: 'a'.repeat(32) }], finish: true },
      { type: 'undoCommit', sha: 'x' },
      { type: 'apply', message: 'm', decisions: [{ path: 'a', action: 'delete' }] , finish: true },
      { type: 'apply', message: 'm', decisions: [{ path: 'a', action: 'hunks', approved: [-1], hunkCount: 1, fingerprint: 'a'.repeat(32) }], finish: true },
      { type: 'apply', message: 'm', decisions: [{ path: 'a', action: 'hunks', approved: [0], hunkCount: 1 }], finish: true },
      { type: 'apply', message: 'm', decisions: [{ path: 'a', action: 'approve', fingerprint: 'not hex' }], finish: true },
    ]) {
      assert.equal(PageMessage.safeParse(m).success, false, JSON.stringify(m));
    }
  });

  it('refuses oversized page messages', () => {
    assert.equal(PageMessage.safeParse({ type: 'openDiff', path: 'x'.repeat(4097) }).success, false);
    assert.equal(PageMessage.safeParse({ type: 'apply', message: 'm'.repeat(20_001), decisions: [], finish: true }).success, false);
    const many = Array.from({ length: 20_001 }, (_, i) => ({ path: `f${i}`, action: 'approve' }));
    assert.equal(PageMessage.safeParse({ type: 'apply', message: 'm', decisions: many, finish: true }).success, false);
    assert.equal(PageMessage.safeParse({ type: 'apply', message: 'm', decisions: many.slice(0, 20_000), finish: true }).success, true);
  });

  it('bounds what the host sends and what the page restores', () => {
    const hunk = { index: 0, oldStart: 1, oldLines: 1, newStart: 1, newLines: 1, removed: ['a'], added: ['b'], before: [], after: [] };
    const ok = { type: 'hunks', path: 'a', fingerprint: 'f'.repeat(32), hunks: [hunk] };
    assert.equal(HostMessage.safeParse(ok).success, true);
    assert.equal(HostMessage.safeParse({ ...ok, hunks: [{ ...hunk, added: ['x'.repeat(10_001)] }] }).success, false);
    assert.equal(HostMessage.safeParse({ type: 'busy', busy: 'yes', label: '' }).success, false);
    // The list first (counts null), then counted entries in bounded batches.
    const file = { path: 'a', status: 'modified', lines: null, oversized: false, drift: false, hunkable: true, revertible: true };
    const counted = { ...file, lines: { added: 3, removed: 1, binary: false } };
    assert.equal(HostMessage.safeParse({ type: 'files', files: [file, counted] }).success, true);
    assert.equal(HostMessage.safeParse({ type: 'files', files: [{ ...counted, lines: { added: -1, removed: 0, binary: false } }] }).success, false);
    assert.equal(HostMessage.safeParse({ type: 'files', files: [{ ...file, added: 3 }] }).success, false);
    assert.equal(HostMessage.safeParse({ type: 'files', files: Array.from({ length: 1001 }, () => counted) }).success, false);
  });

  it('embeds the first listing inertly: no text in it can close the data block, and it reads back the same', () => {
    const hostile = ['</script><script>alert(1)</script>', '<!--', 'a<b>.ts', '\u2028 line\u2029sep'];
    const init = {
      type: 'init',
      task: { id: 't_1', title: '</script>', goal: '<!-- -->', state: 'waiting_review', agent: null, createdAt: 1, durationMs: 2, commit: null },
      steps: [],
      effects: [],
      files: hostile.map((p) => ({ path: p, status: 'added', lines: null, oversized: false, drift: false, hunkable: true, revertible: true })),
      counts: { task: hostile.length, drift: 0 },
      message: 'm',
      git: true,
      planDone: true,
      committed: null,
    };
    const text = embedJson(init);
    assert.equal(text.includes('<'), false);
    assert.deepEqual(JSON.parse(text), init);
    assert.equal(HostMessage.safeParse(JSON.parse(text)).success, true);
    assert.equal(PageState.safeParse({ taskId: 't_1', decisions: { a: { whole: 'a', hunks: null, included: true, fingerprint: null } } }).success, true);
    assert.equal(PageState.safeParse({ taskId: 't_1', decisions: { a: { whole: 'yes', hunks: null, included: true, fingerprint: null } } }).success, false);
    assert.equal(PageState.safeParse(undefined).success, false);
  });

  it('sends a long listing as its first files in init, then the rest in one listed message, each a valid message', () => {
    const file = (i: number, drift = false) => ({ path: `f${i}`, status: 'added' as const, lines: null, oversized: false, drift, hunkable: true, revertible: true });
    const init = (files: ReturnType<typeof file>[]) => ({
      type: 'init' as const,
      task: { id: 't_1', title: 't', goal: 'g', state: 'waiting_review', agent: null, createdAt: 1, durationMs: 2, commit: null },
      steps: [],
      effects: [],
      files,
      counts: { task: files.filter((f) => !f.drift).length, drift: files.filter((f) => f.drift).length },
      message: 'm',
      git: true,
      planDone: true,
      committed: null,
    });
    const short = init(Array.from({ length: INIT_FILES }, (_, i) => file(i)));
    assert.deepEqual(listingMessages(short), [short], 'a screenful and more goes whole');
    const files = [...Array.from({ length: 240 }, (_, i) => file(i)), ...Array.from({ length: 10 }, (_, i) => file(1000 + i, true))];
    const long = init(files);
    const [first, rest, ...none] = listingMessages(long);
    assert.equal(none.length, 0);
    assert.equal(first!.type === 'init' && first!.files.length, INIT_FILES);
    assert.deepEqual(first!.type === 'init' && first!.counts, { task: 240, drift: 10 }, 'the counts are the whole listing’s');
    assert.deepEqual(rest, { type: 'listed', files: files.slice(INIT_FILES) });
    assert.deepEqual([...(first as typeof long).files, ...(rest as { files: typeof files }).files], files, 'together, the listing in its order');
    for (const m of [first, rest]) assert.equal(HostMessage.safeParse(m).success, true, JSON.stringify(m).slice(0, 80));
    assert.equal(HostMessage.safeParse({ type: 'listed', files: [{ ...file(1), extra: 1 }] }).success, false);
    assert.equal(HostMessage.safeParse({ ...long, counts: { task: -1, drift: 0 } }).success, false);
    assert.equal(HostMessage.safeParse({ ...long, counts: undefined }).success, false);
    // The page's order: the task's files, then the person's, each kind as it came.
    const mixed = [file(1, true), file(2), file(3, true), file(4)];
    assert.deepEqual(inPageOrder(mixed).map((f) => f.path), ['f2', 'f4', 'f1', 'f3']);
  });
});
