import * as assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import type { Engine } from '../../src/core/engine/engine';
import { planApply, type PlanInput } from '../../src/core/review/applyPlan';
import { applyReview } from '../../src/core/review/applyReview';
import { GitCliCommitter } from '../../src/core/review/gitCli';
import { computeHunks } from '../../src/core/review/hunks';
import { fileHunks, loadReview } from '../../src/core/review/reviewModel';
import { bundleScript } from '../support/bundle';
import { openEngine, tmpDir } from '../support/tmp';

/** Runs a plan against an in-memory workspace (path → bytes). */
function simulate(inputs: PlanInput[]): Map<string, Buffer | null> {
  const out = new Map(inputs.map((f) => [f.path, f.current]));
  for (const a of planApply(inputs).actions) {
    if (a.kind === 'write') out.set(a.path, a.content);
    else if (a.kind === 'delete') out.set(a.path, null);
  }
  return out;
}

const lines = fc.array(fc.constantFrom('a\n', 'b\n', 'c\n', 'd\r\n', 'e', '\n', 'x y\n'), { maxLength: 12 }).map((l) => l.join(''));
const content = fc.option(lines.map((s) => Buffer.from(s, 'utf8')), { nil: null });

describe('review: apply planner', () => {
  it('approving everything leaves the current content; rejecting everything restores the base', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(content, content), { minLength: 1, maxLength: 6 }), fc.boolean(), (pairs, useHunks) => {
        const mk = (action: 'approve' | 'reject'): PlanInput[] =>
          pairs.map(([base, current], i) => {
            const p = `f${i}.txt`;
            if (useHunks && base && current) {
              const n = computeHunks(base.toString(), current.toString()).hunks.length;
              if (n > 0) return { path: p, base, current, decision: { path: p, action: 'hunks', hunkCount: n, approved: action === 'approve' ? [...Array(n).keys()] : [] } };
            }
            return { path: p, base, current, decision: { path: p, action } };
          });
        const approved = simulate(mk('approve'));
        const rejected = simulate(mk('reject'));
        pairs.forEach(([base, current], i) => {
          assert.deepEqual(approved.get(`f${i}.txt`), current);
          assert.deepEqual(rejected.get(`f${i}.txt`), base);
        });
        assert.deepEqual(planApply(mk('reject')).commitPaths, []);
        assert.equal(planApply(mk('approve')).commitPaths.length, pairs.length);
      }),
      { numRuns: 300 },
    );
  });

  it('a partial approval writes the base with exactly the approved hunks', () => {
    const base = Buffer.from('1\n2\n3\n4\n5\n6\n7\n8\n9\n');
    const current = Buffer.from('1\nTWO\n3\n4\n5\n6\n7\nEIGHT\n9\n');
    const plan = planApply([{ path: 'f', base, current, decision: { path: 'f', action: 'hunks', approved: [1], hunkCount: 2 } }]);
    assert.deepEqual(plan.commitPaths, ['f']);
    const a = plan.actions[0]!;
    assert.equal(a.kind, 'write');
    assert.equal(a.kind === 'write' && a.content.toString(), '1\n2\n3\n4\n5\n6\n7\nEIGHT\n9\n');
  });

  it('refuses hunk decisions made on other content', () => {
    const base = Buffer.from('a\n');
    const current = Buffer.from('b\n');
    assert.throws(() => planApply([{ path: 'f', base, current, decision: { path: 'f', action: 'hunks', approved: [0], hunkCount: 3 } }]), /changed since/);
  });
});

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8' });
}

describe('review: apply with the git command', function () {
  this.timeout(60_000);
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine;
  const write = (rel: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(ws.dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(ws.dir, rel), text);
  };
  const read = (rel: string) => (fs.existsSync(path.join(ws.dir, rel)) ? fs.readFileSync(path.join(ws.dir, rel), 'utf8') : null);

  beforeEach(async () => {
    ws = tmpDir('wp-review-');
    git(ws.dir, 'init', '-q', '-b', 'main');
    git(ws.dir, 'config', 'user.email', 'test@example.com');
    git(ws.dir, 'config', 'user.name', 'Test');
    write('.gitignore', '.waypoint/\n');
    write('a.txt', '1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n');
    write('b.txt', 'keep me\n');
    write('c.txt', 'c\n');
    write('unrelated.txt', 'u\n');
    git(ws.dir, 'add', '.');
    git(ws.dir, 'commit', '-q', '-m', 'init');
    engine = await openEngine(ws.dir);
  });
  afterEach(async () => {
    await engine.close();
    ws.cleanup();
  });

  async function agentTask(): Promise<string> {
    const { taskId } = await engine.startTask({ goal: 'Edit three files', plan: [{ id: 's1', title: 'Edit' }] });
    await engine.startStep({ taskId, stepId: 's1' });
    write('a.txt', '1\nTWO\n3\n4\n5\n6\n7\n8\nNINE\n10\n');
    write('b.txt', 'agent rewrote b\n');
    write('new.txt', 'brand new\n');
    fs.rmSync(path.join(ws.dir, 'c.txt'));
    await engine.completeStep({ taskId, stepId: 's1', summary: 'edited a, b, added new, removed c' });
    write('mine.txt', 'the person wrote this\n'); // after the step: drift
    await engine.requestReview({ taskId });
    return taskId;
  }

  it('lists drift apart, commits exactly the approved changes, reverts the rejected, keeps unrelated staged work staged', async () => {
    const taskId = await agentTask();
    const review = await loadReview(engine, taskId);
    assert.deepEqual(review.files.map((f) => [f.path, f.status, f.drift]), [
      ['a.txt', 'modified', false],
      ['b.txt', 'modified', false],
      ['c.txt', 'deleted', false],
      ['mine.txt', 'added', true],
      ['new.txt', 'added', false],
    ]);
    const a = await fileHunks(engine, review.base, 'a.txt');
    assert.equal(a.kind, 'hunks');
    assert.equal(a.kind === 'hunks' && a.hunks.length, 2);
    // The person has something else staged: it must stay out of the commit, and staged.
    write('unrelated.txt', 'u staged\n');
    git(ws.dir, 'add', 'unrelated.txt');

    const r = await applyReview(
      engine,
      {
        taskId,
        message: 'Edit three files\n\nWaypoint-Task: ' + taskId + '\n',
        decisions: [
          { path: 'a.txt', action: 'hunks', approved: [0], hunkCount: 2, fingerprint: a.fingerprint },
          { path: 'b.txt', action: 'reject' },
          { path: 'c.txt', action: 'approve' },
          { path: 'new.txt', action: 'approve' },
        ],
      },
      new GitCliCommitter(ws.dir),
    );
    assert.ok(r.commit.sha);
    assert.deepEqual(git(ws.dir, 'show', '--name-status', '--format=', 'HEAD').trim().split('\n').sort(), ['A\tnew.txt', 'D\tc.txt', 'M\ta.txt']);
    assert.match(git(ws.dir, 'log', '-1', '--format=%B'), /Waypoint-Task: /);
    assert.equal(git(ws.dir, 'show', 'HEAD:a.txt'), '1\nTWO\n3\n4\n5\n6\n7\n8\n9\n10\n');
    assert.equal(read('a.txt'), '1\nTWO\n3\n4\n5\n6\n7\n8\n9\n10\n');
    assert.equal(read('b.txt'), 'keep me\n');
    assert.equal(read('mine.txt'), 'the person wrote this\n', 'drift is left alone');
    assert.equal(git(ws.dir, 'diff', '--cached', '--name-only').trim(), 'unrelated.txt', 'unrelated staged change is still staged');
    const task = engine.task(taskId);
    assert.equal(task.state, 'completed');
    assert.equal(task.commit, r.commit.sha);

    // The pre-apply checkpoint undoes the reverts.
    await engine.rollback({ taskId, checkpointId: r.preApplyCheckpointId });
    assert.equal(read('b.txt'), 'agent rewrote b\n');
    assert.equal(read('a.txt'), '1\nTWO\n3\n4\n5\n6\n7\n8\nNINE\n10\n');
  });

  it('refuses a decision on content that changed since it was reviewed, changing nothing', async () => {
    const taskId = await agentTask();
    const review = await loadReview(engine, taskId);
    const a = await fileHunks(engine, review.base, 'a.txt');
    write('a.txt', 'changed again\n');
    await assert.rejects(
      applyReview(engine, { taskId, message: 'm', decisions: [{ path: 'a.txt', action: 'reject', fingerprint: a.fingerprint }] }, new GitCliCommitter(ws.dir)),
      /changed since you reviewed it/,
    );
    assert.equal(engine.task(taskId).state, 'waiting_review');
    assert.equal(read('a.txt'), 'changed again\n');
  });

  it('outside a git repository the rejections still apply and the task completes without a commit', async () => {
    fs.rmSync(path.join(ws.dir, '.git'), { recursive: true });
    const taskId = await agentTask();
    const r = await applyReview(engine, { taskId, message: 'm', decisions: [{ path: 'b.txt', action: 'reject' }, { path: 'new.txt', action: 'reject' }] }, new GitCliCommitter(ws.dir));
    assert.equal(r.commit.sha, null);
    assert.match('reason' in r.commit ? r.commit.reason : '', /not a git repository/);
    assert.equal(read('b.txt'), 'keep me\n');
    assert.equal(read('new.txt'), null);
    assert.equal(engine.task(taskId).state, 'completed');
  });

  it('a crash mid-apply is finished on the next open, and open says so', async () => {
    const taskId = await agentTask();
    await engine.close();
    const child = spawn(process.execPath, [bundleScript(path.join(__dirname, '..', 'support', 'reviewApplyChild.ts')), ws.dir, taskId, JSON.stringify([
      { path: 'a.txt', action: 'hunks', approved: [0], hunkCount: 2 },
      { path: 'b.txt', action: 'reject' },
      { path: 'new.txt', action: 'reject' },
    ])], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    const signal = await new Promise((r) => child.on('exit', (_code, sig) => r(sig)));
    assert.equal(signal, 'SIGKILL', `the child should have died where the commit begins: ${err}`);
    // As if the kill had landed between two file writes: b.txt not yet reverted.
    write('b.txt', 'agent rewrote b\n');
    engine = await openEngine(ws.dir);
    assert.equal(engine.recoveryNotes.length, 1);
    assert.match(engine.recoveryNotes[0]!, /review apply .* was interrupted; it was finished on open/);
    assert.equal(read('a.txt'), '1\nTWO\n3\n4\n5\n6\n7\n8\n9\n10\n');
    assert.equal(read('b.txt'), 'keep me\n');
    assert.equal(read('new.txt'), null);
    assert.equal(engine.task(taskId).state, 'waiting_review', 'no commit was recorded, so the review is still open');
    assert.ok((await engine.verify()).ok);
    assert.deepEqual(fs.readdirSync(ws.dir).filter((n) => n.includes('tmp')), []);
    // Reviewing again commits what the person approved; nothing is "recovered" twice.
    const r = await applyReview(engine, { taskId, message: 'm', decisions: [{ path: 'a.txt', action: 'approve' }] }, new GitCliCommitter(ws.dir));
    assert.ok(r.commit.sha);
    assert.equal(engine.task(taskId).state, 'completed');
    await engine.close();
    engine = await openEngine(ws.dir);
    assert.deepEqual(engine.recoveryNotes, []);
  });

  it('a failed commit is recorded, leaves the decisions applied and the review open, and is not "recovered" later', async () => {
    const taskId = await agentTask();
    const failing = { commit: async (): Promise<never> => Promise.reject(new Error('hook said no')) };
    await assert.rejects(applyReview(engine, { taskId, message: 'm', decisions: [{ path: 'b.txt', action: 'reject' }] }, failing), /hook said no/);
    assert.equal(read('b.txt'), 'keep me\n');
    assert.equal(engine.task(taskId).state, 'waiting_review');
    await engine.close();
    engine = await openEngine(ws.dir);
    assert.deepEqual(engine.recoveryNotes, []);
  });

  it('a file only staged, then deleted by the agent: approving the deletion does not fail the commit (found by npm run chaos)', async () => {
    write('staged.txt', 'staged, never committed\n');
    git(ws.dir, 'add', 'staged.txt');
    const { taskId } = await engine.startTask({ goal: 'Remove a file', plan: [{ id: 's1', title: 'Edit' }] });
    await engine.startStep({ taskId, stepId: 's1' });
    fs.rmSync(path.join(ws.dir, 'staged.txt'));
    write('b.txt', 'agent rewrote b\n');
    await engine.completeStep({ taskId, stepId: 's1' });
    const r = await applyReview(
      engine,
      { taskId, message: 'm', decisions: [{ path: 'staged.txt', action: 'approve' }, { path: 'b.txt', action: 'approve' }] },
      new GitCliCommitter(ws.dir),
    );
    assert.ok(r.commit.sha);
    assert.deepEqual(git(ws.dir, 'show', '--name-status', '--format=', 'HEAD').trim().split('\n'), ['M\tb.txt']);
    assert.equal(git(ws.dir, 'ls-files', '--', 'staged.txt').trim(), '');
    assert.equal(engine.task(taskId).state, 'completed');
  });

  it('refuses a path that leaves the workspace', async () => {
    const taskId = await agentTask();
    await assert.rejects(applyReview(engine, { taskId, message: 'm', decisions: [{ path: '../evil', action: 'reject' }] }, new GitCliCommitter(ws.dir)));
    assert.equal(engine.task(taskId).state, 'waiting_review');
  });
});
