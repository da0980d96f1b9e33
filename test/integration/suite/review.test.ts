import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { Engine } from '../../../src/core/engine/engine';
import { applyReview } from '../../../src/core/review/applyReview';
import { fileHunks, loadReview } from '../../../src/core/review/reviewModel';
import { VsCodeGitCommitter } from '../../../src/extension/review/gitCommitter';
import { undoReviewCommit } from '../../../src/core/review/undoCommit';
import { activated, eventually, type WaypointApi } from './extension';

/**
 * The review's apply path in the real editor, on a real git repository: the
 * built-in git extension (or the git command) commits exactly the approved
 * changes; rejected ones are reverted; Undo Commit puts the changes and the task
 * (waiting for review) back; the pre-apply checkpoint undoes it all.
 */
describe('review: approve, reject, commit', function () {
  this.timeout(120_000);
  let engine: Engine;
  let dir: string;
  const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, encoding: 'utf8' });
  const write = (rel: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text);
  };
  const read = (rel: string) => (fs.existsSync(path.join(dir, rel)) ? fs.readFileSync(path.join(dir, rel), 'utf8') : null);

  before(async () => {
    const api = (await activated()) as unknown as { engine(): Promise<Engine> };
    engine = await api.engine();
    dir = engine.workspace;
    if (!fs.existsSync(path.join(dir, '.git'))) {
      git('init', '-q');
      git('config', 'user.email', 'it@example.com');
      git('config', 'user.name', 'Integration');
    }
    write('.gitignore', '.waypoint/\n');
    write('review/a.txt', '1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n');
    write('review/b.txt', 'b as committed\n');
    write('review/c.txt', 'c as committed\n');
    git('add', '.');
    git('commit', '-q', '-m', 'fixture');
  });

  it('commits exactly the approved changes with the trailer, and the pre-apply checkpoint restores everything', async () => {
    const { taskId } = await engine.startTask({ goal: 'Change three files', plan: [{ id: 'edit', title: 'Edit the files' }] });
    await engine.startStep({ taskId, stepId: 'edit' });
    write('review/a.txt', '1\nTWO\n3\n4\n5\n6\n7\n8\nNINE\n10\n');
    write('review/b.txt', 'b by the agent\n');
    write('review/c.txt', 'c by the agent\n');
    await engine.completeStep({ taskId, stepId: 'edit', summary: 'edited a, b and c' });
    await engine.requestReview({ taskId });

    // The panel opens for the task (and a second open focuses the same one).
    await vscode.commands.executeCommand('waypoint.reviewTask', taskId);
    await vscode.commands.executeCommand('waypoint.reviewTask', taskId);
    const reviewTabs = () => vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) => t.input instanceof vscode.TabInputWebview && t.input.viewType.includes('waypoint.review'));
    for (let i = 0; i < 50 && reviewTabs().length === 0; i++) await new Promise((r) => setTimeout(r, 100));
    const all = vscode.window.tabGroups.all.flatMap((g) => g.tabs).map((t) => `${t.label}:${t.input instanceof vscode.TabInputWebview ? t.input.viewType : typeof t.input}`);
    assert.equal(reviewTabs().length, 1, `one review panel per task; tabs: ${all.join(', ')}`);

    const review = await loadReview(engine, taskId);
    assert.deepEqual(review.files.map((f) => f.path), ['review/a.txt', 'review/b.txt', 'review/c.txt']);
    const a = await fileHunks(engine, review.base, 'review/a.txt');
    assert.ok(a.kind === 'hunks' && a.hunks.length === 2);
    const before = fs.readFileSync(path.join(dir, 'review/a.txt'), 'utf8');

    const folder = vscode.workspace.workspaceFolders![0]!.uri;
    const log = vscode.window.createOutputChannel('Waypoint review test', { log: true });
    const input = {
      taskId,
      message: `Change three files\n\nWaypoint-Task: ${taskId}\n`,
      decisions: [
        { path: 'review/a.txt', action: 'hunks' as const, approved: [1], hunkCount: 2, fingerprint: a.fingerprint }, // discard the first hunk
        { path: 'review/b.txt', action: 'reject' as const },
        { path: 'review/c.txt', action: 'approve' as const },
      ],
    };
    // A pre-commit hook that refuses: nothing may change — files, git status, HEAD, the index, the task.
    const hook = path.join(dir, '.git', 'hooks', 'pre-commit');
    fs.mkdirSync(path.dirname(hook), { recursive: true });
    fs.writeFileSync(hook, '#!/bin/sh\necho "hook: not today" >&2\nexit 1\n', { mode: 0o755 });
    const state = () => ({
      files: ['review/a.txt', 'review/b.txt', 'review/c.txt'].map(read),
      status: git('status', '--porcelain'),
      head: git('rev-parse', 'HEAD'),
      index: git('ls-files', '-s'),
      task: engine.task(taskId).state,
    });
    const untouched = state();
    await assert.rejects(applyReview(engine, input, new VsCodeGitCommitter(folder, log)), /hook: not today/);
    assert.deepEqual(state(), untouched, 'a refused commit changes nothing');
    fs.rmSync(hook);
    // The same decisions, unchanged, commit once the hook lets them.
    const r = await applyReview(engine, input, new VsCodeGitCommitter(folder, log));
    log.dispose();
    assert.equal(git('rev-parse', 'HEAD~1'), untouched.head, 'exactly one new commit');
    assert.ok(r.commit.sha, 'a commit was made');
    assert.equal(git('rev-parse', 'HEAD').trim(), r.commit.sha);
    assert.deepEqual(git('show', '--name-only', '--format=', 'HEAD').trim().split('\n').sort(), ['review/a.txt', 'review/c.txt']);
    assert.equal(git('show', 'HEAD:review/a.txt'), '1\n2\n3\n4\n5\n6\n7\n8\nNINE\n10\n');
    assert.equal(git('show', 'HEAD:review/c.txt'), 'c by the agent\n');
    assert.match(git('log', '-1', '--format=%B'), new RegExp(`Waypoint-Task: ${taskId}`));
    assert.equal(read('review/b.txt'), 'b as committed\n', 'the rejected file is reverted');
    assert.equal(read('review/a.txt'), '1\n2\n3\n4\n5\n6\n7\n8\nNINE\n10\n', 'the rejected hunk is reverted');
    assert.equal(engine.task(taskId).state, 'completed');
    assert.equal(engine.task(taskId).commit, r.commit.sha);

    // Undo Commit takes the record back too: the task waits for review again (the tree says so), and the
    // same decisions commit once more.
    await undoReviewCommit(engine, { taskId, sha: r.commit.sha, committed: r.committed, discarded: r.reverted, preApplyCheckpointId: r.preApplyCheckpointId });
    assert.deepEqual(state(), untouched, 'files, git status, HEAD, the index and the task (waiting for review) as before the review');
    assert.equal(engine.task(taskId).commit, null);
    assert.equal(engine.task(taskId).reopened?.commit, r.commit.sha);
    const probes = (await activated()) as unknown as WaypointApi;
    await eventually(async () => (await probes.treeRows()).find((row) => row.id === `task:${taskId}`)?.contextValue.startsWith('task:waiting_review:'), 'the tree to show the task waiting for review');
    const log2 = vscode.window.createOutputChannel('Waypoint review test', { log: true });
    const again = await applyReview(engine, input, new VsCodeGitCommitter(folder, log2));
    log2.dispose();
    assert.ok(again.commit.sha);
    assert.equal(git('rev-parse', 'HEAD~1'), untouched.head, 'still exactly one commit on top of the fixture');
    assert.equal(engine.task(taskId).state, 'completed');
    assert.equal(engine.task(taskId).commit, again.commit.sha);

    await engine.rollback({ taskId, checkpointId: again.preApplyCheckpointId });
    assert.equal(read('review/a.txt'), before);
    assert.equal(read('review/b.txt'), 'b by the agent\n');
    assert.equal(read('review/c.txt'), 'c by the agent\n');
  });

  it('draws the review on its first open, and again when its tab comes back after being hidden (its page loads anew)', async () => {
    const api = await activated();
    const { taskId } = await engine.startTask({ goal: 'Review shown twice', plan: [{ id: 'e', title: 'Edit two files' }] });
    await engine.startStep({ taskId, stepId: 'e' });
    write('reshown/x.txt', 'x by the agent\n');
    write('reshown/y.txt', 'y by the agent\n');
    await engine.completeStep({ taskId, stepId: 'e' });
    await engine.requestReview({ taskId });
    const within = <T>(p: Promise<T>, what: string) => Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what}: no first content within 30 s`)), 30_000))]);
    // The first listing goes out as soon as it is made (VS Code holds it until the page has loaded).
    const firstLabels: string[] = [];
    const watch = vscode.window.tabGroups.onDidChangeTabs((e) => firstLabels.push(...e.opened.filter((t) => t.input instanceof vscode.TabInputWebview).map((t) => t.label)));
    const first = await within(api.openReview(taskId), 'first open');
    watch.dispose();
    assert.ok(first.files >= 2, `the review listed ${first.files} files`);
    // The tab has the task's title from its first appearance (the panel is created with it, not retitled once listed).
    assert.deepEqual(firstLabels, ['Review: Review shown twice']);
    // Another editor in the same group hides the panel, and VS Code drops its page (no retained context):
    // the page that comes back never saw that first listing, so its ready must bring a fresh one.
    const doc = await vscode.workspace.openTextDocument({ content: 'on top of the review' });
    await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.Active, preview: false });
    const again = await within(api.openReview(taskId), 'shown again');
    assert.equal(again.files, first.files);
    assert.ok(again.at > first.at);
    const tabs = vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) => (t.input instanceof vscode.TabInputWebview && t.input.viewType.includes('waypoint.review')) || t.label.startsWith('Untitled'));
    await vscode.window.tabGroups.close(tabs);
  });
});
