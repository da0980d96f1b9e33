import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { Engine } from '../../../src/core/engine/engine';
import { isShownCheckpoint } from '../../../src/extension/labelText';
import { activated, eventually, type WaypointApi } from './extension';

/**
 * The Task Timeline in the real editor: `Waypoint: Show Task Timeline` opens one
 * panel per task, the page draws the steps and attempts it was given, and an engine
 * change reaches the open page as a patch it applies (its next report counts the
 * new attempt) without the panel being reloaded.
 */
describe('timeline: open through the command, live updates', function () {
  this.timeout(120_000);
  let engine: Engine;
  let api: WaypointApi;
  const tabs = () => vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) => t.input instanceof vscode.TabInputWebview && t.input.viewType.includes('waypoint.timeline'));

  before(async () => {
    api = await activated();
    engine = await api.engine();
  });

  after(async () => {
    await vscode.window.tabGroups.close(tabs());
  });

  it('shows the steps, the attempts (a failed one included) and the checkpoints, and follows the task live', async () => {
    const plan = [
      { id: 'read', title: 'Read the code' },
      { id: 'fix', title: 'Fix it', dependsOn: ['read'] },
      { id: 'test', title: 'Test it', dependsOn: ['fix'] },
    ];
    const { taskId } = await engine.startTask({ goal: 'Timeline integration', plan, leaseTtlMs: 3_600_000 });
    await engine.startStep({ taskId, stepId: 'read' });
    await engine.completeStep({ taskId, stepId: 'read' });
    await engine.startStep({ taskId, stepId: 'fix' });
    await engine.failStep({ taskId, stepId: 'fix', error: 'compile error', recoverable: true });
    await engine.startStep({ taskId, stepId: 'fix', wait: true });
    fs.writeFileSync(path.join(engine.workspace, 'timeline-it.txt'), 'x\n');

    // The tab has the task's title from its first appearance (the panel is created with it, not retitled once built).
    const firstLabels: string[] = [];
    const watch = vscode.window.tabGroups.onDidChangeTabs((e) => firstLabels.push(...e.opened.filter((t) => t.input instanceof vscode.TabInputWebview).map((t) => t.label)));
    await vscode.commands.executeCommand('waypoint.showTimeline', taskId);
    await vscode.commands.executeCommand('waypoint.showTimeline', taskId);
    await eventually(() => tabs().length === 1, 'the timeline tab');
    watch.dispose();
    assert.deepEqual(firstLabels, ['Timeline: Timeline integration']);
    assert.equal(tabs().length, 1, 'one timeline per task');
    assert.match(tabs()[0].label, /^Timeline: Timeline integration/);
    await eventually(() => api.timelineState(taskId)?.shown !== undefined, 'the page to report it drew the timeline');
    const first = api.timelineState(taskId)!;
    assert.equal(first.shown!.steps, 3);
    assert.equal(first.shown!.attempts, 3, 'read#1, fix#1 (failed), fix#2');
    const m = first.model!;
    assert.deepEqual(m.steps.map((s) => [s.id, s.layer]), [['read', 0], ['fix', 1], ['test', 2]]);
    assert.deepEqual(m.attempts.filter((a) => a.stepId === 'fix').map((a) => a.outcome), ['failed', 'running']);
    // The file written above is checkpointed by the watcher after its quiet period, which may land after the
    // first paint: the live page must then catch up, so wait for the two lists to agree rather than compare once.
    // The page leaves out auto checkpoints that captured nothing, as the tree does.
    const sameCheckpoints = () => JSON.stringify(api.timelineState(taskId)?.model?.checkpoints.map((c) => c.id)) === JSON.stringify(engine.queries.checkpoints(taskId).filter(isShownCheckpoint).map((c) => c.id));
    await eventually(sameCheckpoints, 'the page’s checkpoints to match the engine’s');
    assert.ok(api.timelineState(taskId)!.model!.checkpoints.length >= 4, 'task base and the steps’ checkpoints');

    // A change in the engine: the page gets a patch and reports the new attempt.
    const at = first.shown!.at;
    await engine.completeStep({ taskId, stepId: 'fix' });
    await engine.startStep({ taskId, stepId: 'test' });
    await eventually(() => (api.timelineState(taskId)?.shown?.attempts ?? 0) === 4, 'the page to draw the patch');
    const second = api.timelineState(taskId)!;
    assert.ok(second.shown!.at > at);
    assert.deepEqual(second.model!.attempts.map((a) => a.id), ['read#1', 'fix#1', 'fix#2', 'test#1']);
    assert.equal(second.model!.attempts.find((a) => a.id === 'fix#2')!.outcome, 'completed');
    await engine.abandonTask({ taskId });
  });

  it('refuses an unknown task with a clear message and opens nothing', async () => {
    const before = tabs().length;
    await vscode.commands.executeCommand('waypoint.showTimeline', 't_does_not_exist');
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(tabs().length, before);
    assert.equal(api.timelineState('t_does_not_exist'), undefined);
  });
});
