import * as assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import type { Engine } from '../../src/core/engine/engine';
import { planApply, type PlanInput } from '../../src/core/review/applyPlan';
import { applyReview } from '../../src/core/review/applyReview';
import { CommitRefusedError, GitCliCommitter } from '../../src/core/review/gitCli';
import { undoReviewCommit } from '../../src/core/review/undoCommit';
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

  it('leaving everything out commits nothing and changes no file; a partly approved file commits its approved hunks only', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(content, content), { minLength: 1, maxLength: 6 }), (pairs) => {
        const inputs: PlanInput[] = pairs.map(([base, current], i) => ({ path: `f${i}.txt`, base, current, decision: { path: `f${i}.txt`, action: 'leave' } }));
        const plan = planApply(inputs);
        assert.deepEqual(plan.commit, []);
        assert.ok(plan.actions.every((a) => a.kind === 'unchanged'));
      }),
      { numRuns: 100 },
    );
    const base = Buffer.from('1\n2\n3\n4\n5\n6\n7\n8\n9\n');
    const current = Buffer.from('1\nTWO\n3\n4\n5\n6\n7\nEIGHT\n9\n');
    const plan = planApply([{ path: 'f', base, current, decision: { path: 'f', action: 'hunks', approved: [0], left: [1], hunkCount: 2 } }]);
    assert.equal(plan.commit[0]!.content!.toString(), '1\nTWO\n3\n4\n5\n6\n7\n8\n9\n');
    assert.deepEqual(plan.actions, [{ path: 'f', kind: 'unchanged' }], 'the left-out hunk stays');
    assert.deepEqual([plan.left, plan.reverted], [['f'], []]);
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

  /** Everything a refused commit must leave as it was: working tree bytes, git's view, the task. */
  function snapshot(taskId: string): unknown {
    const files: Record<string, string> = {};
    const walk = (rel: string) => {
      for (const d of fs.readdirSync(path.join(ws.dir, rel), { withFileTypes: true })) {
        const r = rel ? `${rel}/${d.name}` : d.name;
        if (r === '.git' || r === '.waypoint') continue;
        if (d.isDirectory()) walk(r);
        else files[r] = fs.readFileSync(path.join(ws.dir, r)).toString('base64');
      }
    };
    walk('');
    const task = engine.task(taskId);
    return {
      files,
      status: git(ws.dir, 'status', '--porcelain'),
      head: git(ws.dir, 'rev-parse', 'HEAD'),
      index: git(ws.dir, 'ls-files', '-s'),
      task: { state: task.state, commit: task.commit, steps: engine.queries.steps(taskId).map((s) => [s.id, s.status]) },
      gitDir: fs.readdirSync(path.join(ws.dir, '.git')).filter((n) => n.startsWith('waypoint-')),
    };
  }

  /** The review of the acceptance: one of a.txt's two hunks approved, the other left out; b.txt discarded. */
  async function decided(taskId: string) {
    const review = await loadReview(engine, taskId);
    const a = await fileHunks(engine, review.base, 'a.txt');
    assert.equal(a.kind, 'hunks');
    return [
      { path: 'a.txt', action: 'hunks' as const, approved: [0], left: [1], hunkCount: 2, fingerprint: a.fingerprint },
      { path: 'b.txt', action: 'reject' as const },
      { path: 'c.txt', action: 'approve' as const },
      { path: 'new.txt', action: 'approve' as const },
    ];
  }

  /** Commits the same decisions again and checks the one commit holds exactly the approved hunks. */
  async function commitsExactlyTheApproved(taskId: string, decisions: Awaited<ReturnType<typeof decided>>, headBefore: string) {
    const r = await applyReview(engine, { taskId, message: `Edit three files\n\nWaypoint-Task: ${taskId}\n`, decisions }, new GitCliCommitter(ws.dir));
    assert.ok(r.commit.sha);
    assert.equal(git(ws.dir, 'rev-parse', 'HEAD~1').trim(), headBefore.trim(), 'exactly one new commit');
    assert.match(git(ws.dir, 'log', '-1', '--format=%B'), new RegExp(`Waypoint-Task: ${taskId}`));
    assert.deepEqual(git(ws.dir, 'show', '--name-status', '--format=', 'HEAD').trim().split('\n').sort(), ['A\tnew.txt', 'D\tc.txt', 'M\ta.txt']);
    assert.equal(git(ws.dir, 'show', 'HEAD:a.txt'), '1\nTWO\n3\n4\n5\n6\n7\n8\n9\n10\n', 'only the approved hunk is committed');
    assert.equal(read('a.txt'), '1\nTWO\n3\n4\n5\n6\n7\n8\nNINE\n10\n', 'the left-out hunk stays in the working tree');
    assert.equal(read('b.txt'), 'keep me\n', 'the discarded file is back to its base');
    assert.equal(git(ws.dir, 'status', '--porcelain', '--', 'a.txt'), ' M a.txt\n', 'the left-out hunk is an unstaged change');
    assert.equal(engine.task(taskId).state, 'completed');
    assert.equal(engine.task(taskId).commit, r.commit.sha);
    return r;
  }

  it('no git identity: refused before anything changes, with a way out; after setting one the same decisions commit', async () => {
    const home = tmpDir('wp-home-');
    const saved = { HOME: process.env.HOME, GIT_CONFIG_NOSYSTEM: process.env.GIT_CONFIG_NOSYSTEM };
    try {
      process.env.HOME = home.dir;
      process.env.GIT_CONFIG_NOSYSTEM = '1';
      git(ws.dir, 'config', '--unset', 'user.email');
      git(ws.dir, 'config', '--unset', 'user.name');
      // Never guess one from the host name, on any machine.
      git(ws.dir, 'config', 'user.useConfigOnly', 'true');
      const taskId = await agentTask();
      const decisions = await decided(taskId);
      const before = snapshot(taskId);
      await assert.rejects(applyReview(engine, { taskId, message: 'm', decisions }, new GitCliCommitter(ws.dir)), (e: unknown) => {
        assert.ok(e instanceof CommitRefusedError);
        assert.equal(e.problem, 'identity');
        assert.match(e.message, /user\.name and user\.email/);
        return true;
      });
      assert.deepEqual(snapshot(taskId), before);
      git(ws.dir, 'config', 'user.email', 'test@example.com');
      git(ws.dir, 'config', 'user.name', 'Test');
      await commitsExactlyTheApproved(taskId, decisions, (before as { head: string }).head);
    } finally {
      for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k];
      else process.env[k] = v;
      home.cleanup();
    }
  });

  it('a pre-commit hook that fails: nothing changed, the error says why; the retry commits without new decisions', async () => {
    const taskId = await agentTask();
    const decisions = await decided(taskId);
    const hook = path.join(ws.dir, '.git', 'hooks', 'pre-commit');
    fs.mkdirSync(path.dirname(hook), { recursive: true });
    fs.writeFileSync(hook, '#!/bin/sh\necho "lint failed: a.txt" >&2\nexit 1\n', { mode: 0o755 });
    const before = snapshot(taskId);
    await assert.rejects(applyReview(engine, { taskId, message: 'm', decisions }, new GitCliCommitter(ws.dir)), (e: unknown) => {
      assert.ok(e instanceof CommitRefusedError);
      assert.equal(e.problem, 'commit_failed');
      assert.match(e.message, /lint failed: a\.txt/);
      return true;
    });
    assert.deepEqual(snapshot(taskId), before);
    await engine.close();
    engine = await openEngine(ws.dir);
    assert.deepEqual(engine.recoveryNotes, [], 'a refused commit is not an interrupted apply');
    fs.rmSync(hook);
    await commitsExactlyTheApproved(taskId, decisions, (before as { head: string }).head);
  });

  it('an index.lock: refused before anything changes; once it is gone the same decisions commit', async () => {
    const taskId = await agentTask();
    const decisions = await decided(taskId);
    const lock = path.join(ws.dir, '.git', 'index.lock');
    fs.writeFileSync(lock, '');
    const before = snapshot(taskId);
    await assert.rejects(applyReview(engine, { taskId, message: 'm', decisions }, new GitCliCommitter(ws.dir)), /Another git process is using this repository/);
    assert.deepEqual(snapshot(taskId), before);
    fs.rmSync(lock);
    await commitsExactlyTheApproved(taskId, decisions, (before as { head: string }).head);
  });

  it('a merge in progress: refused before anything changes; after it is finished the same decisions commit', async () => {
    git(ws.dir, 'checkout', '-q', '-b', 'side');
    write('unrelated.txt', 'from side\n');
    git(ws.dir, 'commit', '-q', '-am', 'side');
    git(ws.dir, 'checkout', '-q', 'main');
    git(ws.dir, 'merge', '-q', '--no-ff', '--no-commit', 'side');
    const taskId = await agentTask();
    const decisions = await decided(taskId);
    const before = snapshot(taskId);
    await assert.rejects(applyReview(engine, { taskId, message: 'm', decisions }, new GitCliCommitter(ws.dir)), (e: unknown) => e instanceof CommitRefusedError && e.problem === 'in_progress' && /middle of a merge/.test(e.message));
    assert.deepEqual(snapshot(taskId), before);
    git(ws.dir, 'commit', '-q', '--no-edit');
    await commitsExactlyTheApproved(taskId, decisions, git(ws.dir, 'rev-parse', 'HEAD'));
  });

  it('keeps the task open when its plan is not done, unless the person says to finish it (after settling its open steps)', async () => {
    const { taskId } = await engine.startTask({ goal: 'Two steps', plan: [{ id: 's1', title: 'Edit' }, { id: 's2', title: 'Later' }] });
    await engine.startStep({ taskId, stepId: 's1' });
    write('b.txt', 'agent rewrote b\n');
    await engine.completeStep({ taskId, stepId: 's1' });
    const r = await applyReview(engine, { taskId, message: 'm', decisions: [{ path: 'b.txt', action: 'approve' }] }, new GitCliCommitter(ws.dir));
    assert.ok(r.commit.sha);
    assert.equal(r.finished, false);
    assert.equal(engine.task(taskId).state, 'running', 'a pending step: the task stays open');
    write('b.txt', 'agent rewrote b again\n');
    // Finishing with a step not begun is refused by name; the person skips it, then finishes.
    await assert.rejects(applyReview(engine, { taskId, message: 'm2', decisions: [{ path: 'b.txt', action: 'approve' }], finish: true }, new GitCliCommitter(ws.dir)), /“Later” \(not begun\)/);
    await engine.skipStep({ taskId, stepId: 's2', by: 'person' });
    const r2 = await applyReview(engine, { taskId, message: 'm2', decisions: [{ path: 'b.txt', action: 'approve' }], finish: true }, new GitCliCommitter(ws.dir));
    assert.equal(r2.finished, true);
    assert.equal(engine.task(taskId).state, 'completed');
    assert.equal(engine.task(taskId).commit, r2.commit.sha);
  });

  /** The demo's state: a step done, one still in progress when the agent went away (interrupted), one not begun. */
  async function stoppedMidStep(): Promise<string> {
    const { taskId } = await engine.startTask({
      goal: 'Add maxLength',
      plan: [
        { id: 'code', title: 'Add the option' },
        { id: 'tests', title: 'Cover it with tests', dependsOn: ['code'] },
        { id: 'docs', title: 'Document it', dependsOn: ['code'] },
      ],
    });
    await engine.startStep({ taskId, stepId: 'code' });
    write('a.txt', '1\nTWO\n3\n4\n5\n6\n7\n8\n9\n10\n');
    await engine.completeStep({ taskId, stepId: 'code' });
    await engine.startStep({ taskId, stepId: 'tests' });
    write('new.txt', 'a test\n');
    await engine.interruptTask({ taskId, reason: 'the agent went away' });
    return taskId;
  }

  const stepsOf = (taskId: string) => engine.queries.steps(taskId).map((s) => ({ id: s.id, status: s.status, attempts: s.attempts, summary: s.summary, endedAt: s.endedAt }));

  it('a commit that keeps the task open is made with a step still in progress; the steps and the task are untouched', async () => {
    const taskId = await stoppedMidStep();
    const steps = stepsOf(taskId);
    assert.deepEqual(
      steps.map((s) => s.status),
      ['completed', 'in_progress', 'pending'],
    );
    const decisions: { path: string; action: 'approve' }[] = [
      { path: 'a.txt', action: 'approve' },
      { path: 'new.txt', action: 'approve' },
    ];
    // As the review page sends it with "Finish the task with this commit" unticked, then as the default (plan not done).
    let parent = git(ws.dir, 'rev-parse', 'HEAD').trim();
    for (const finish of [false, undefined]) {
      if (finish === undefined) write('new.txt', 'a test, edited again\n');
      const r = await applyReview(engine, { taskId, message: 'Add maxLength (part)', decisions, ...(finish === undefined ? {} : { finish }) }, new GitCliCommitter(ws.dir));
      assert.ok(r.commit.sha, 'a commit was made');
      assert.equal(r.finished, false);
      assert.equal(git(ws.dir, 'rev-parse', 'HEAD').trim(), r.commit.sha);
      assert.equal(git(ws.dir, 'rev-parse', 'HEAD~1').trim(), parent, 'exactly one new commit');
      assert.deepEqual(stepsOf(taskId), steps, 'the steps are untouched');
      assert.equal(engine.task(taskId).state, 'interrupted', 'the task is untouched');
      assert.equal(engine.task(taskId).commit, null);
      assert.equal(git(ws.dir, 'status', '--porcelain', '--', 'a.txt', 'new.txt'), '', 'the approved files are committed');
      parent = r.commit.sha;
      // The second round commits only new.txt (a.txt is committed already).
      decisions.splice(0, decisions.length, { path: 'new.txt', action: 'approve' });
    }
  });

  it('finishing the task with open steps is refused before anything changes, naming each open step', async () => {
    const taskId = await stoppedMidStep();
    const before = snapshot(taskId);
    const events = (await engine.eventLog.read({ taskId })).length;
    const decisions = [{ path: 'a.txt', action: 'approve' as const }];
    await assert.rejects(
      applyReview(engine, { taskId, message: 'm', decisions, finish: true }, new GitCliCommitter(ws.dir)),
      (e: unknown) => {
        const m = (e as Error).message;
        assert.match(m, /2 steps of its plan are still open/);
        assert.match(m, /“Cover it with tests” \(in progress\)/);
        assert.match(m, /“Document it” \(not begun\)/);
        assert.match(m, /or commit without finishing the task/);
        assert.deepEqual((e as { details?: { openSteps?: unknown } }).details?.openSteps, [
          { id: 'tests', title: 'Cover it with tests', status: 'in_progress' },
          { id: 'docs', title: 'Document it', status: 'pending' },
        ]);
        return true;
      },
    );
    assert.deepEqual(snapshot(taskId), before, 'no file, index entry, commit or task state changed');
    assert.equal((await engine.eventLog.read({ taskId })).length, events, 'nothing was recorded');
  });

  it('a person settles the steps of an interrupted task by hand, without taking the lease', async () => {
    const taskId = await stoppedMidStep();
    // The agent's own call is refused while the task is not driven...
    await assert.rejects(engine.completeStep({ taskId, stepId: 'tests' }), /interrupted; cannot complete a step\. Resume it first/);
    // ...a person's answer is recorded.
    await engine.completeStep({ taskId, stepId: 'tests', by: 'person', summary: 'checked by hand' });
    await engine.failStep({ taskId, stepId: 'docs', by: 'person', error: 'not wanted', recoverable: true }).then(
      () => assert.fail('a pending step cannot fail'),
      (e: Error) => assert.match(e.message, /pending; cannot fail it/),
    );
    await engine.skipStep({ taskId, stepId: 'docs', by: 'person', reason: 'not needed' });
    assert.deepEqual(
      engine.queries.steps(taskId).map((s) => [s.id, s.status]),
      [
        ['code', 'completed'],
        ['tests', 'completed'],
        ['docs', 'skipped'],
      ],
    );
    assert.equal(engine.task(taskId).state, 'interrupted', 'the task stays as it was: the person did not become its driver');
    const last = (await engine.eventLog.read({ taskId })).filter((e) => e.type === 'step.completed' || e.type === 'step.skipped').slice(-2);
    assert.deepEqual(
      last.map((e) => e.by),
      [null, null],
    );
    // A completed task is final, for a person too.
    const done = await agentTask();
    await assert.rejects(engine.skipStep({ taskId: done, stepId: 's1', by: 'person' }), /completed/);
  });

  it('Undo Commit: a soft reset and the discards restored, back to exactly the state before; refused once HEAD moved on', async () => {
    const taskId = await agentTask();
    const decisions = await decided(taskId);
    const before = snapshot(taskId) as { head: string; task: unknown };
    const r = await commitsExactlyTheApproved(taskId, decisions, before.head);
    const undo = { taskId, sha: r.commit.sha!, committed: r.committed, discarded: r.reverted, preApplyCheckpointId: r.preApplyCheckpointId };
    // Someone committed on top: undoing would drop that, so it is refused and nothing changes.
    write('unrelated.txt', 'later work\n');
    git(ws.dir, 'commit', '-q', '-am', 'later');
    const later = git(ws.dir, 'rev-parse', 'HEAD');
    await assert.rejects(undoReviewCommit(engine, undo), /no longer the review's commit/);
    assert.equal(git(ws.dir, 'rev-parse', 'HEAD'), later);
    git(ws.dir, 'reset', '-q', '--hard', 'HEAD~1');
    write('a.txt', '1\nTWO\n3\n4\n5\n6\n7\n8\nNINE\n10\n'); // reset --hard took the left-out hunk too: put it back
    await undoReviewCommit(engine, undo);
    const after = snapshot(taskId);
    assert.deepEqual(after, before, 'files, status, HEAD, index and the task (waiting for review, no commit) as before the review');
    const reopened = engine.task(taskId).reopened;
    assert.equal(reopened?.commit, r.commit.sha, 'the record says which commit was undone');
    assert.equal(reopened?.reason, `the review commit ${r.commit.sha!.slice(0, 10)} was undone`);
    // The same decisions commit again (their fingerprints still match): one new commit, the task completed by it.
    const again = await commitsExactlyTheApproved(taskId, decisions, before.head);
    assert.notEqual(engine.task(taskId).commit, null);
    assert.equal(engine.task(taskId).commit, again.commit.sha);
    assert.ok((await engine.verify()).ok, 'the projections equal a rebuild from the events');
  });

  it('Undo Commit whose restore is refused puts the commit and the completed task back', async () => {
    const taskId = await agentTask();
    const decisions = await decided(taskId);
    const before = snapshot(taskId) as { head: string };
    const r = await commitsExactlyTheApproved(taskId, decisions, before.head);
    const undo = { taskId, sha: r.commit.sha!, committed: r.committed, discarded: r.reverted, preApplyCheckpointId: 'c_unknown' };
    // The discards cannot be restored from an unknown checkpoint: the whole undo is refused.
    await assert.rejects(undoReviewCommit(engine, undo), /c_unknown/);
    assert.equal(git(ws.dir, 'rev-parse', 'HEAD').trim(), r.commit.sha, 'HEAD is the review commit again');
    assert.equal(engine.task(taskId).state, 'completed', 'and the task is completed by it again');
    assert.equal(engine.task(taskId).commit, r.commit.sha);
    assert.ok((await engine.verify()).ok);
  });

  it('a failing committer changes nothing and is not "recovered" later', async () => {
    const taskId = await agentTask();
    const failing = { check: async () => undefined, commit: async (): Promise<never> => Promise.reject(new Error('hook said no')) };
    await assert.rejects(applyReview(engine, { taskId, message: 'm', decisions: [{ path: 'b.txt', action: 'reject' }] }, failing), /hook said no/);
    assert.equal(read('b.txt'), 'agent rewrote b\n', 'the discard waits for the commit');
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
