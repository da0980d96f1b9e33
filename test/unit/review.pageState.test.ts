import * as assert from 'node:assert/strict';
import { HostMessage, PageMessage, type HunkMsg, type ReviewFileMsg } from '../../src/extension/review/protocol';
import { outcome, ReviewState, type Init } from '../../webview-ui/reviewState';

/** The review page's state, without a page: what each decision and host message does to it. */

const file = (path: string, o: Partial<ReviewFileMsg> = {}): ReviewFileMsg => ({ path, status: 'modified', lines: null, oversized: false, drift: false, hunkable: true, revertible: true, ...o });
const hunk = (index: number): HunkMsg => ({ index, oldStart: index * 10 + 1, oldLines: 1, newStart: index * 10 + 1, newLines: 1, removed: ['old'], added: ['new'], before: [], after: [] });
const FP = 'a'.repeat(32);
const FP2 = 'b'.repeat(32);

function init(files: ReviewFileMsg[], o: { total?: { task: number; drift: number }; state?: string; planDone?: boolean; steps?: Init['steps'] } = {}): Init {
  const m = {
    type: 'init' as const,
    task: { id: 't_1', title: 'Fix it', goal: 'Fix it', state: o.state ?? 'running', agent: null, createdAt: 1, durationMs: 1, commit: null },
    steps: o.steps ?? [],
    effects: [],
    files,
    counts: o.total ?? { task: files.filter((f) => !f.drift).length, drift: files.filter((f) => f.drift).length },
    message: 'Fix it',
    git: true,
    planDone: o.planDone ?? true,
    committed: null,
  };
  // The fixture is a message the host could send: the page's parser accepts it.
  assert.equal(HostMessage.safeParse(m).success, true);
  return m;
}

describe('review page state', () => {
  it('keeps saved decisions for files still on their way, and drops those of files gone once the listing is whole', () => {
    const s = new ReviewState({ taskId: 't_1', message: 'kept words', expanded: ['b.ts', 'gone.ts'], decisions: { 'b.ts': { included: true, whole: 'a', hunks: null, fingerprint: null }, 'gone.ts': { included: true, whole: 'l', hunks: null, fingerprint: null } } });
    assert.deepEqual(s.begin(init([file('a.ts')], { total: { task: 2, drift: 0 } })), []);
    assert.equal(s.listingComplete(), false);
    assert.deepEqual(Object.keys(s.pageState()!.decisions ?? {}).sort(), ['b.ts', 'gone.ts']);
    const d = s.decisions();
    assert.equal(d.ok, false);
    assert.match(d.ok ? '' : d.why, /Listing the files \(1 of 2\)/);
    // b.ts arrives: it was expanded before the reload, so its hunks are asked for.
    assert.deepEqual(s.listed([file('b.ts')]).request, ['b.ts']);
    assert.equal(s.listingComplete(), true);
    const kept = s.pageState()!;
    assert.deepEqual(Object.keys(kept.decisions ?? {}), ['b.ts']);
    assert.deepEqual(kept.expanded, ['b.ts']);
    assert.equal(kept.message, 'kept words');
    // A repeat of the listing adds nothing.
    assert.deepEqual(s.listed([file('b.ts')]).fresh, []);
  });

  it('refuses to discard a file whose base is not held, and changes nothing', () => {
    const s = new ReviewState();
    const f = file('bin.dat', { revertible: false });
    s.begin(init([f]));
    const r = s.decideFile(f, 'r');
    assert.equal(r.changed, false);
    assert.match(r.text, /cannot be discarded/);
    assert.equal(s.stateOf(f).whole, 'u');
    // Discard all leaves it undecided too; approve all decides it.
    s.setAll('r');
    assert.equal(s.stateOf(f).whole, 'u');
    s.setAll('a');
    assert.equal(s.stateOf(f).whole, 'a');
  });

  it('per-change decisions make a mixed file whose commit approves, leaves and discards exactly those changes', () => {
    const s = new ReviewState();
    const f = file('a.ts');
    s.begin(init([f]));
    assert.equal(s.content({ type: 'hunks', path: 'a.ts', fingerprint: FP, hunks: [hunk(0), hunk(1), hunk(2)] }), true);
    assert.match(s.decideHunk(f, 0, 'a') ?? '', /Change 1 of 3 in a\.ts approved; the file is partly approved/);
    s.decideHunk(f, 1, 'l');
    assert.equal(s.decideHunk(f, 7, 'a'), null, 'no such change');
    const waiting = s.decisions();
    assert.equal(waiting.ok, false, 'one change is still undecided');
    s.decideHunk(f, 2, 'r');
    const d = s.decisions();
    assert.ok(d.ok);
    assert.deepEqual(d.list, [{ path: 'a.ts', action: 'hunks', approved: [0], left: [1], hunkCount: 3, fingerprint: FP }]);
    assert.deepEqual(outcome(d.list), { commit: ['a.ts'], left: ['a.ts'], discard: ['a.ts'] });
    // What the page sends is what the host accepts.
    assert.equal(PageMessage.safeParse({ type: 'apply', message: 'm', decisions: d.list, finish: true }).success, true);
  });

  it('new content drops the per-change decisions made on the old, and keeps a whole-file decision', () => {
    const s = new ReviewState();
    const f = file('a.ts');
    const g = file('b.ts');
    s.begin(init([f, g]));
    s.content({ type: 'hunks', path: 'a.ts', fingerprint: FP, hunks: [hunk(0), hunk(1)] });
    s.decideHunk(f, 0, 'a');
    s.decideHunk(f, 1, 'r');
    s.decideFile(g, 'a');
    s.content({ type: 'hunks', path: 'b.ts', fingerprint: FP, hunks: [hunk(0)] });
    s.content({ type: 'hunks', path: 'a.ts', fingerprint: FP2, hunks: [hunk(0), hunk(1)] });
    assert.deepEqual(s.stateOf(f).hunks, ['u', 'u']);
    assert.equal(s.stateOf(f).whole, 'u');
    s.content({ type: 'hunks', path: 'b.ts', fingerprint: FP2, hunks: [hunk(0), hunk(1)] });
    assert.deepEqual(s.stateOf(g).hunks, ['a', 'a']);
    assert.equal(s.content({ type: 'summary', path: 'unknown.ts', fingerprint: FP, reason: 'binary' }), false);
  });

  it('the person’s own edits are left out until included, and reset puts them back out', () => {
    const s = new ReviewState();
    const mine = file('notes.md', { drift: true });
    const task = file('a.ts');
    s.begin(init([task, mine]));
    s.setAll('a');
    assert.equal(s.stateOf(mine).whole, 'u');
    let d = s.decisions();
    assert.ok(d.ok);
    assert.deepEqual(d.list.map((x) => x.path), ['a.ts']);
    s.include(mine, true);
    assert.equal(s.decisions().ok, false, 'an included file needs a decision');
    s.decideFile(mine, 'l');
    d = s.decisions();
    assert.ok(d.ok);
    assert.deepEqual(outcome(d.list), { commit: ['a.ts'], left: ['notes.md'], discard: [] });
    assert.equal(s.setAll('reset'), 'Every decision reset');
    assert.equal(s.stateOf(mine).included, false);
  });

  it('finishing the task: by default when its plan is done, never for a task that is not driven, and open steps listed', () => {
    const steps = [
      { id: 's1', title: 'One', status: 'completed', durationMs: 1, summary: null, error: null },
      { id: 's2', title: 'Two', status: 'in_progress', durationMs: null, summary: null, error: null },
    ];
    const s = new ReviewState();
    s.begin(init([file('a.ts')], { planDone: false, steps }));
    assert.equal(s.finishTask(), false);
    s.setFinish(true);
    assert.equal(s.finishTask(), true);
    assert.deepEqual(s.openSteps().map((x) => x.id), ['s2']);
    const stopped = new ReviewState();
    stopped.begin(init([file('a.ts')], { state: 'interrupted' }));
    stopped.setFinish(true);
    assert.equal(stopped.finishable(), false);
    assert.equal(stopped.finishTask(), false);
  });

  it('a commit shows until the person goes back to the remaining changes', () => {
    const s = new ReviewState();
    s.begin(init([file('a.ts')]));
    assert.equal(s.committedNow({ sha: '0123456789abcdef', subject: 'Fix it', reason: null, committed: ['a.ts'], discarded: [], left: [], finished: true, canUndo: true }), 'Committed 0123456789.');
    assert.deepEqual(s.result, { ok: true, text: 'Committed 0123456789.' });
    s.leaveCommitted();
    assert.equal(s.committed, null);
    // A new listing clears the old result.
    s.begin(init([file('a.ts')]));
    assert.equal(s.result, null);
  });
});
