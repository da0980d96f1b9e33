import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { activated, eventually, type WaypointApi } from './extension';

/**
 * Issue #19 in the editor: a step that uses its attempts puts the task on hold; the
 * tree, the status bar and an alert (raised once, with Grant More Attempts) show it,
 * and a grant lets it run again.
 */
interface AlertsApi extends WaypointApi {
  checkAlerts(now?: number): Promise<string[]>;
  shownAlerts(): string[];
}

/** The alert keys raised so far: by engine changes (checked by themselves) and by explicit checks. */
async function alertFor(api: AlertsApi, prefix: string, now?: number): Promise<string> {
  return eventually(async () => {
    await api.checkAlerts(now);
    return api.shownAlerts().find((k) => k.startsWith(prefix));
  }, `an alert ${prefix}…`);
}

describe('retry hold and alerts', function () {
  this.timeout(60_000);
  let api: AlertsApi;

  before(async () => {
    api = (await activated()) as AlertsApi;
  });

  it('shows a held task in the tree and the status bar, alerts once, and a grant lets the step run', async () => {
    const engine = await api.engine();
    const { taskId } = await engine.startTask({ goal: 'Fetch the rates (held)', plan: [{ id: 'fetch', title: 'Fetch the rates', maxAttempts: 2 }], retry: { backoffMs: 0 } });
    for (let i = 0; i < 2; i++) {
      await engine.startStep({ taskId, stepId: 'fetch' });
      await engine.failStep({ taskId, stepId: 'fetch', error: 'HTTP 503', recoverable: true });
    }
    assert.equal(engine.task(taskId).hold?.cause, 'retries_exhausted');
    try {
      await heldTaskShown(taskId);
    } finally {
      // A task left on hold would be the status bar's task for the suites after this one.
      if (engine.task(taskId).state !== 'abandoned') await engine.abandonTask({ taskId, reason: 'test done' });
    }
  });

  async function heldTaskShown(taskId: string): Promise<void> {
    const engine = await api.engine();
    const row = await eventually(async () => (await api.treeRows()).find((r) => r.id === `task:${taskId}` && /waits for you/.test(r.description)), 'the tree to show the hold');
    assert.match(row.contextValue, /:held-retries/);
    assert.doesNotMatch(row.contextValue, /:resumable/, 'Resume is not offered: it would be refused');
    const step = (await api.treeRows(`task:${taskId}`)).find((r) => r.id === `step:${taskId}:fetch`);
    assert.ok(step, 'the step row');
    assert.match(step.description, /attempt 2 of 2 · attempts used up/);
    assert.match(step.contextValue, /^step:failed:exhausted:open$/, 'a held task is open: its step offers Grant and Retry');
    await eventually(() => /waits for you/.test(api.statusText()), 'the status bar to show the hold');

    const key = await alertFor(api, `${taskId}:retries_exhausted:fetch:`);
    assert.ok(!(await api.checkAlerts()).includes(key), 'raised once');
    const commands = await vscode.commands.getCommands(true);
    assert.ok(commands.includes('waypoint.grantAttempts'));

    await engine.grantAttempts({ taskId, stepId: 'fetch' });
    const s = await engine.startStep({ taskId, stepId: 'fetch' });
    assert.equal(s.attempt, 3);
    await eventually(async () => (await api.treeRows()).some((r) => r.id === `task:${taskId}` && !/waits for you/.test(r.description)), 'the hold to clear in the tree');
    await engine.completeStep({ taskId, stepId: 'fetch' });
  }

  it('alerts a failed task at once and an interruption only past the threshold', async () => {
    const engine = await api.engine();
    const failed = await engine.startTask({ goal: 'Migrate (fails)', plan: [{ id: 'm', title: 'Migrate' }] });
    await engine.startStep({ taskId: failed.taskId, stepId: 'm' });
    await engine.failStep({ taskId: failed.taskId, stepId: 'm', error: 'schema drift', recoverable: false });
    const stopped = await engine.startTask({ goal: 'Long job (interrupted)' });
    await engine.interruptTask({ taskId: stopped.taskId, reason: 'test' });
    try {
      await alertFor(api, `${failed.taskId}:failed:`);
      assert.ok(!api.shownAlerts().some((k) => k.startsWith(`${stopped.taskId}:interrupted:`)), 'not yet: under the threshold');
      const later = await api.checkAlerts(Date.now() + 11 * 60_000);
      assert.ok(later.some((k) => k.startsWith(`${stopped.taskId}:interrupted:`)), later.join(', '));
      assert.ok(!later.some((k) => k.startsWith(`${failed.taskId}:failed:`)), 'the failure is not raised twice');
    } finally {
      await engine.abandonTask({ taskId: stopped.taskId });
    }
  });
});
