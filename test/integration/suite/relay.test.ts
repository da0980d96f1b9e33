import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import * as vscode from 'vscode';
import { activated, eventually, report, waypoint, type WaypointApi } from './extension';

/**
 * Runs only in the launcher's relay pass: before this window opened, a
 * `waypoint serve` (the shipped CLI) took the workspace's store, so this window
 * must relay to it — show that it does and to whom, show the owner's tasks, write
 * through it — and, when that process is killed, take the store over within the
 * lease and keep working in-process, with nothing acknowledged lost.
 */
const ownerPid = Number(process.env.WAYPOINT_IT_RELAY_OWNER_PID ?? 0);
/** The owner lock's lease (OwnerLock's default): the takeover must happen inside it. */
const LEASE_MS = 30_000;

interface RelayApi extends WaypointApi {
  api(): Promise<import('../../../src/core/engine/api').EngineApi>;
  storeMode(): { kind: string; ownerPid?: number; ownerId?: string; url?: string };
  storeStatusText(): string;
  treeDescription(): string;
  mcpEndpoint(): Promise<{ url: string; token: string; relayed: boolean } | undefined>;
}

describe('second window: relays to the owner, takes over when it goes away', function () {
  this.timeout(90_000);
  let api: RelayApi;
  let ws: string;
  let cli: string;
  const run = async (...args: string[]) => JSON.parse((await promisify(execFile)(process.execPath, [cli, ...args, '--workspace', ws, '--json'], { timeout: 30_000 })).stdout) as unknown;
  let taskId = '';
  let baseCheckpointId = '';

  before(async function () {
    if (!ownerPid) this.skip(); // the main pass: this window owns the store
    api = (await activated()) as RelayApi;
    ws = vscode.workspace.workspaceFolders![0].uri.fsPath;
    cli = path.join(waypoint().extensionPath, 'dist', 'cli.js');
  });

  it('relays to the waypoint serve that owns the store, and says so in the status bar and the view', async () => {
    await eventually(() => api.storeMode().kind === 'relay', 'the window to relay');
    const mode = api.storeMode();
    assert.equal(mode.ownerPid, ownerPid);
    assert.match(mode.ownerId ?? '', /^waypoint-serve:/);
    await assert.rejects(api.engine(), /relays to the Waypoint store's owner, waypoint serve \(pid \d+\)/, 'no in-process engine while relaying');
    assert.equal(api.storeStatusText(), `$(radio-tower) Waypoint: relaying to waypoint serve (pid ${ownerPid})`);
    assert.equal(api.treeDescription(), `relaying to waypoint serve (pid ${ownerPid})`);
    // Copilot's definition points at the owner's endpoint.
    const discovery = JSON.parse(fs.readFileSync(path.join(ws, '.waypoint', 'mcp.json'), 'utf8')) as { url: string; token: string };
    const endpoint = await api.mcpEndpoint();
    assert.deepEqual(endpoint, { url: discovery.url, token: discovery.token, relayed: true });
    const def = api.mcpServerDefinitions()[0] as vscode.McpHttpServerDefinition;
    assert.equal(def.uri.toString(true), discovery.url);
  });

  it('shows a task created through the owner by another process, and its commands write through to the owner', async () => {
    fs.writeFileSync(path.join(ws, 'notes.txt'), 'first\n');
    const started = (await run('task', 'start', '--goal', 'Created through the serve process')) as { taskId: string; baseCheckpointId: string };
    taskId = started.taskId;
    baseCheckpointId = started.baseCheckpointId;
    await eventually(async () => (await api.treeRows()).some((r) => r.id === `task:${taskId}`), 'the tree to show the owner’s task');
    const children = await api.treeRows(`task:${taskId}`);
    assert.ok(children.some((r) => r.id === `checkpoint:${baseCheckpointId}`), 'the task’s base checkpoint, read from the owner');

    // The window's Roll Back command goes to the owner, which restores the file.
    fs.writeFileSync(path.join(ws, 'notes.txt'), 'changed by a person\n');
    await vscode.commands.executeCommand('waypoint.rollback', { taskId, checkpointId: baseCheckpointId, confirmed: true });
    assert.equal(fs.readFileSync(path.join(ws, 'notes.txt'), 'utf8'), 'first\n');
    const events = (await run('events', '--task', taskId)) as { type: string }[];
    assert.ok(events.some((e) => e.type === 'rollback.done'), `the owner recorded the rollback: ${events.map((e) => e.type).join(', ')}`);
    // And the extension API writes through as well.
    const ext = await api.api();
    await ext.checkpoint({ taskId, label: 'from the relaying window' });
    const detail = (await run('show', '--task', taskId)) as { checkpoints?: { label: string | null }[] };
    assert.ok(JSON.stringify(detail).includes('from the relaying window'), 'the owner holds the window’s checkpoint');
  });

  it('alerts in this relaying window too: a step that used its attempts on the owner raises Grant More Attempts here', async () => {
    const t = (await run('task', 'start', '--goal', 'Held on the owner', '--max-attempts', '1')) as { taskId: string };
    await run('step', 'start', '--task', t.taskId, '--step', 'fetch', '--ad-hoc');
    await run('step', 'fail', '--task', t.taskId, '--step', 'fetch', '--error', 'HTTP 503', '--recoverable');
    const alerts = api as RelayApi & { checkAlerts(now?: number): Promise<string[]>; shownAlerts(): string[] };
    await eventually(async () => {
      await alerts.checkAlerts();
      return alerts.shownAlerts().some((k) => k.startsWith(`${t.taskId}:retries_exhausted:fetch:`));
    }, 'the relaying window to alert on the owner’s held task');
    await run('task', 'abandon', '--task', t.taskId);
  });

  it('opens the review panel and applies its decisions through the owner', async () => {
    // The review's listing, hunks and apply are engine operations: no in-process engine is needed.
    fs.writeFileSync(path.join(ws, 'review-relay.txt'), 'before\n');
    const t = (await run('task', 'start', '--goal', 'Reviewed from the relaying window')) as { taskId: string };
    fs.writeFileSync(path.join(ws, 'review-relay.txt'), 'after\n');
    fs.writeFileSync(path.join(ws, 'review-relay-new.txt'), 'new\n');
    await run('checkpoint', '--task', t.taskId, '--label', 'edited');
    const reviewApi = api as RelayApi & {
      openReview(taskId: string): Promise<{ files: number }>;
      applyReview(taskId: string, message: string, decisions: unknown[], finish?: boolean): Promise<{ reverted: string[]; finished: boolean } | undefined>;
    };
    const shown = await reviewApi.openReview(t.taskId);
    assert.ok(shown.files >= 2, `the panel listed the owner's review: ${shown.files} file(s)`);
    assert.equal(api.storeMode().kind, 'relay', 'still relaying: the panel opened without owning the store');
    const r = await reviewApi.applyReview(t.taskId, 'Discard the relay edits', [
      { path: 'review-relay.txt', action: 'reject' },
      { path: 'review-relay-new.txt', action: 'reject' },
    ], false);
    assert.ok(r, 'the apply ran');
    assert.deepEqual([...r.reverted].sort(), ['review-relay-new.txt', 'review-relay.txt']);
    assert.equal(fs.readFileSync(path.join(ws, 'review-relay.txt'), 'utf8'), 'before\n', 'the owner put the file back');
    assert.equal(fs.existsSync(path.join(ws, 'review-relay-new.txt')), false);
    const events = (await run('events', '--task', t.taskId)) as { type: string }[];
    assert.ok(events.some((e) => e.type === 'review.apply_done'), `the owner recorded the apply: ${events.map((e) => e.type).join(', ')}`);
    await run('task', 'abandon', '--task', t.taskId);
  });

  it('takes the store over within the lease when the serve process is killed, and keeps working', async () => {
    const before = await (await api.api()).info();
    const killedAt = Date.now();
    process.kill(ownerPid, 'SIGKILL');
    await eventually(() => api.storeMode().kind === 'owner', 'the window to own the store', LEASE_MS);
    const tookMs = Date.now() - killedAt;
    report(`      (took over ${tookMs} ms after the serve process was killed; lease ${LEASE_MS / 1000} s)`);
    assert.ok(tookMs < LEASE_MS, `took over in ${tookMs} ms`);

    const engine = await api.engine();
    assert.ok(engine.eventLog.lastSeq >= before.events, 'every event the owner acknowledged is here');
    const d = engine.taskDetail(taskId);
    assert.ok(d.checkpoints.some((c) => c.label === 'from the relaying window'));
    assert.ok((await engine.events({ taskId })).some((e) => e.type === 'rollback.done'));
    await eventually(() => api.storeStatusText() === '' && api.treeDescription() === '', 'the relay indicators to go away');
    await eventually(async () => (await api.treeRows()).some((r) => r.id === `task:${taskId}`), 'the tree to show the task from the in-process engine');

    // It serves its own MCP endpoint now, and Copilot's definition follows.
    const endpoint = await eventually(async () => {
      const e = await api.mcpEndpoint();
      return e && !e.relayed ? e : undefined;
    }, 'this window to serve MCP');
    const def = api.mcpServerDefinitions()[0] as vscode.McpHttpServerDefinition;
    assert.equal(def.uri.toString(true), endpoint.url);
    // The CLI now relays to this window.
    const tasks = (await run('tasks')) as { id: string }[];
    assert.ok(tasks.some((t) => t.id === taskId));

    // Commands work in-process: undo the rollback done through the old owner.
    fs.writeFileSync(path.join(ws, 'notes.txt'), 'first\n');
    await vscode.commands.executeCommand('waypoint.undoRollback', { taskId, confirmed: true });
    assert.equal(fs.readFileSync(path.join(ws, 'notes.txt'), 'utf8'), 'changed by a person\n');
  });
});
