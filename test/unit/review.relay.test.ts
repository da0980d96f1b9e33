import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { remoteApi } from '../../src/core/engine/api';
import { buildCli, serve, type Served } from '../support/mcp';
import { tmpDir } from '../support/tmp';

/**
 * The review panel's operations through another owner's `/rpc` (the shipped
 * `waypoint serve`, as when `waypoint mcp` opened the store before the window): list,
 * count, hunks, a commit of exactly the approved changes, its undo; and a malformed
 * or hostile request is refused with nothing changed.
 */
describe('review through the owner (relay)', function () {
  this.timeout(120_000);
  let w: { dir: string; cleanup: () => void };
  let owner: Served | undefined;
  const git = (...args: string[]) => execFileSync('git', args, { cwd: w.dir, encoding: 'utf8' }).trim();

  before(() => buildCli());
  beforeEach(() => {
    w = tmpDir('wp-review-relay-');
    git('init', '-q');
    git('config', 'user.name', 'Test');
    git('config', 'user.email', 'test@example.com');
    fs.writeFileSync(path.join(w.dir, 'a.txt'), 'one\ntwo\n');
    fs.writeFileSync(path.join(w.dir, 'b.txt'), 'keep\n');
    git('add', '-A');
    git('commit', '-qm', 'base');
  });
  afterEach(async () => {
    await owner?.stop();
    owner = undefined;
    w.cleanup();
  });

  it('lists, counts, shows hunks, commits and undoes through the owner', async () => {
    owner = await serve(w.dir);
    const api = remoteApi(owner);
    const { taskId } = await api.startTask({ goal: 'edit through the relay', plan: [{ id: 's', title: 'edit' }] });
    await api.startStep({ taskId, stepId: 's' });
    fs.writeFileSync(path.join(w.dir, 'a.txt'), 'one\nTWO\n');
    fs.writeFileSync(path.join(w.dir, 'b.txt'), 'changed\n');
    await api.completeStep({ taskId, stepId: 's' });
    const { data, steps } = await api.reviewListing({ taskId });
    assert.deepEqual(data.files.map((f) => f.path), ['a.txt', 'b.txt']);
    assert.equal(steps.length, 1);
    const counted = await api.reviewLineCounts({ taskId, paths: ['a.txt'] });
    assert.deepEqual(counted[0]!.lines, { added: 1, removed: 1, binary: false });
    const h = await api.reviewHunks({ taskId, path: 'a.txt' });
    assert.ok(h.kind === 'hunks' && h.hunks.length === 1);
    // Hostile or unknown paths are refused before anything is read.
    await assert.rejects(api.reviewHunks({ taskId, path: '../etc/passwd' }), /unsafe path/);
    await assert.rejects(api.reviewHunks({ taskId, path: '.git/config' }), /unsafe path/);
    await assert.rejects(api.reviewHunks({ taskId, path: 'nope.txt' }), /not one of the files/);
    await assert.rejects(api.applyReview({ taskId, message: 'x', decisions: [{ path: 'a.txt', action: 'hunks', approved: [0], hunkCount: 1, fingerprint: 'bad' }] } as never), /fingerprint/);
    const head = git('rev-parse', 'HEAD');
    const r = await api.applyReview({ taskId, message: 'Edit a\n', decisions: [{ path: 'a.txt', action: 'approve', fingerprint: h.fingerprint }, { path: 'b.txt', action: 'reject' }], finish: false });
    assert.ok(r.commit.sha);
    assert.equal(git('rev-parse', 'HEAD~1'), head);
    assert.equal(git('show', '--name-only', '--format=', 'HEAD'), 'a.txt');
    assert.equal(fs.readFileSync(path.join(w.dir, 'b.txt'), 'utf8'), 'keep\n', 'the rejected change is discarded');
    const u = await api.undoReviewCommit({ taskId, sha: r.commit.sha, committed: r.committed, discarded: r.reverted, preApplyCheckpointId: r.preApplyCheckpointId });
    assert.equal(u.state, 'running');
    assert.equal(git('rev-parse', 'HEAD'), head);
    assert.equal(fs.readFileSync(path.join(w.dir, 'b.txt'), 'utf8'), 'changed\n', 'the discarded change is back');
    assert.equal(fs.readFileSync(path.join(w.dir, 'a.txt'), 'utf8'), 'one\nTWO\n');
  });
});
