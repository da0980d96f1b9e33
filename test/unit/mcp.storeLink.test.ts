import * as assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { ChangeEvent } from '../../src/core/engine/engine';
import { Logger } from '../../src/core/log';
import { OwnerLock, readLock } from '../../src/core/store/ownerLock';
import { StoreLink } from '../../src/ownership/storeLink';
import { bundleScript } from '../support/bundle';
import { buildCli, cli, isAlive, serve, waitExit, waitFor, type Served } from '../support/mcp';
import { openEngine, tmpDir } from '../support/tmp';
import { embeddedStore } from '../support/embedded';

/**
 * The window's store link with real owners in other processes: it relays while a
 * `waypoint serve` (the shipped CLI) owns the store, sees that owner's changes,
 * writes through it, and takes the store over when the owner is SIGKILLed or hangs
 * past its lease — with every acknowledged write still there.
 */
const POLL_MS = 200;

function newLink(workspace: string, lines: string[] = []): StoreLink {
  return new StoreLink({
    storeDir: path.join(workspace, '.waypoint'),
    log: new Logger((_l, line) => lines.push(line), 'test', 'debug'),
    openEngine: () => openEngine(workspace, { store: { lock: { waitMs: 250, ownerId: 'vscode-window:test' } } }),
    pollMs: POLL_MS,
  });
}

async function waitMode(link: StoreLink, kind: string, ms = 20_000): Promise<number> {
  const t0 = Date.now();
  await waitFor(`link mode ${kind} (is ${link.mode.kind})`, () => link.mode.kind === kind, ms);
  return Date.now() - t0;
}

function cliJson<T>(args: string[]): T {
  const r = cli([...args, '--json']);
  if (r.status !== 0) throw new Error(`waypoint ${args.join(' ')} failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

describe('store link: relay to the owner, take over when it goes away (real processes)', function () {
  this.timeout(90_000);
  let ws: ReturnType<typeof tmpDir>;
  let served: Served | undefined;
  let child: ChildProcess | undefined;
  let link: StoreLink | undefined;

  before(() => buildCli());

  beforeEach(() => {
    ws = tmpDir('wp-link-');
    fs.writeFileSync(path.join(ws.dir, 'a.txt'), 'one\n');
  });

  afterEach(async () => {
    await link?.close();
    link = undefined;
    if (served) await served.stop();
    served = undefined;
    if (child?.pid && isAlive(child.pid)) {
      child.kill('SIGKILL');
      await waitExit(child.pid);
    }
    child = undefined;
    ws.cleanup();
  });

  it('relays to a waypoint serve, follows its changes, writes through it, and owns the store once the serve process is killed', async () => {
    served = await serve(ws.dir);
    link = newLink(ws.dir);
    const changes: (ChangeEvent | undefined)[] = [];
    link.onDidChange((e) => changes.push(e));
    const modes: string[] = [];
    link.onDidChangeMode((m) => modes.push(m.kind));

    const m = await link.ready();
    assert.equal(m.kind, 'relay');
    assert.ok(m.kind === 'relay' && m.owner.ownerId.startsWith('waypoint-serve:'), 'the lock names the serve process as owner');
    assert.equal(m.kind === 'relay' && m.owner.pid, served.child.pid);
    assert.equal(link.engine, undefined, 'a relay never opens the database');

    // A task created through the owner by another process appears as a change event here.
    const other = cliJson<{ taskId: string }>(['task', 'start', '--goal', 'Started by another client', '--workspace', ws.dir]);
    await waitFor('the relay to see the other client’s task', () => changes.some((e) => e?.taskIds.includes(other.taskId)), 10_000);

    // Writes through the link land in the owner's store (seen by a third process).
    const mine = await link.api.startTask({ goal: 'Started in the relaying window', plan: [{ id: 's1', title: 'Edit a' }] });
    const step = await link.api.startStep({ taskId: mine.taskId, stepId: 's1' });
    fs.writeFileSync(path.join(ws.dir, 'a.txt'), 'two\n');
    const done = await link.api.completeStep({ taskId: mine.taskId, stepId: 's1', summary: 'edited a' });
    assert.equal(done.filesChanged, 1);
    const fx = await link.api.beginSideEffect({ taskId: mine.taskId, key: 'deploy-1', kind: 'shell', description: 'deploy' });
    assert.equal(fx.decision, 'proceed');
    const seen = cliJson<{ id: string }[]>(['tasks', '--workspace', ws.dir]).map((t) => t.id);
    assert.ok(seen.includes(mine.taskId) && seen.includes(other.taskId), `the owner holds both tasks: ${seen.join(', ')}`);
    const acknowledged = (await link.api.info()).events;
    assert.equal((await link.api.info()).relayed, true);

    // The owner vanishes without a word.
    const killedAt = Date.now();
    served.child.kill('SIGKILL');
    await waitExit(served.child.pid!);
    served = undefined;
    await waitMode(link, 'owner');
    const tookMs = Date.now() - killedAt;
    // The dead pid makes the lock stale at once: far inside the 30 s lease, a few polls at most.
    assert.ok(tookMs < 10_000, `took over in ${tookMs} ms`);
    console.log(`      (took over ${tookMs} ms after the owner was killed; lease 30 s)`);
    assert.deepEqual(modes, ['relay', 'owner']);
    assert.equal(changes.at(-1), undefined, 'a mode switch tells surfaces to re-read everything');

    // Everything acknowledged by the old owner is in the store this process now owns.
    const engine = link.engine!;
    assert.ok(engine.eventLog.lastSeq >= acknowledged, `events ${engine.eventLog.lastSeq} ≥ acknowledged ${acknowledged}`);
    const d = engine.taskDetail(mine.taskId);
    assert.equal(d.steps[0].status, 'completed');
    assert.ok(d.checkpoints.some((c) => c.id === step.checkpointId));
    assert.equal(d.sideEffects[0].key, 'deploy-1');
    assert.equal(engine.task(other.taskId).goal, 'Started by another client');
    assert.ok(readLock(path.join(ws.dir, '.waypoint')).info?.ownerId === 'vscode-window:test');

    // The same API object keeps working, now in-process; the side effect's write-ahead intent survived.
    const end = await link.api.endSideEffect({ taskId: mine.taskId, key: 'deploy-1', ok: true });
    assert.equal(end.state, 'done');
    assert.equal((await link.api.info()).relayed, false);
    const again = await link.api.beginSideEffect({ taskId: mine.taskId, key: 'deploy-1', kind: 'shell', description: 'deploy' });
    assert.equal(again.decision, 'already_done');
  });

  it('takes over from an owner that hangs (its pid lives) once its lease expires', async () => {
    const leaseMs = 1_500;
    const script = bundleScript(path.join(__dirname, '..', 'support', 'ownerChild.ts'));
    child = spawn(process.execPath, [script, ws.dir, String(leaseMs)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    await waitFor(`the owner child to be ready (${out})`, () => out.includes('ready'), 20_000);

    link = newLink(ws.dir);
    assert.equal((await link.ready()).kind, 'relay');
    const t = await link.api.startTask({ goal: 'Acknowledged before the owner hung' });

    const stoppedAt = Date.now();
    child.kill('SIGSTOP');
    await waitMode(link, 'owner');
    const tookMs = Date.now() - stoppedAt;
    assert.ok(isAlive(child.pid!), 'the hung owner is still alive: only its lease made the lock stale');
    // Its last renewal was at most a lease ago; the link notices within a poll or two (plus a loaded machine's slack).
    assert.ok(tookMs <= leaseMs + 10 * POLL_MS + 3_000, `took over ${tookMs} ms after the owner hung (lease ${leaseMs} ms)`);
    console.log(`      (took over ${tookMs} ms after the owner hung; lease ${leaseMs} ms)`);
    assert.equal(link.engine!.task(t.taskId).goal, 'Acknowledged before the owner hung');
  });

  it('a window that owned the store and was stalled past its lease refuses with lost_ownership, then relays to the new owner', async () => {
    const leaseMs = 800;
    link = new StoreLink({
      storeDir: path.join(ws.dir, '.waypoint'),
      log: new Logger(() => undefined, 'test', 'debug'),
      openEngine: () => openEngine(ws.dir, { store: { lock: { waitMs: 250, leaseMs, ownerId: 'vscode-window:stalled' } } }),
      pollMs: POLL_MS,
    });
    assert.equal((await link.ready()).kind, 'owner');
    const mine = await link.api.startTask({ goal: 'Acknowledged while this window owned the store' });
    // A stall as the extension host sees one under a debugger: its renewal stops, its lease runs out.
    await (embeddedStore(link.engine!).lock as unknown as { renewer?: { terminate(): Promise<number> } }).renewer?.terminate();
    await new Promise((r) => setTimeout(r, leaseMs + 300));
    const script = bundleScript(path.join(__dirname, '..', 'support', 'ownerChild.ts'));
    child = spawn(process.execPath, [script, ws.dir, '30000'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    await waitFor(`the new owner to be ready (${out})`, () => out.includes('ready'), 20_000);

    await assert.rejects(link.api.tasks({}), (e: Error & { code?: string }) => e.code === 'lost_ownership');
    await waitMode(link, 'relay');
    const theirs = await link.api.startTask({ goal: 'Written through the new owner' });
    const tasks = (await link.api.tasks({})).map((x) => x.id).sort();
    assert.deepEqual(tasks, [mine.taskId, theirs.taskId].sort());
  });

  it('waits, with a clear error, while a process without an endpoint holds the store, then owns it when released', async () => {
    // This process stands in for a CLI command mid-run: a live pid holding the lock, serving nothing.
    const storeDir = path.join(ws.dir, '.waypoint');
    fs.mkdirSync(storeDir, { recursive: true });
    const held = await OwnerLock.acquire(storeDir, { ownerId: 'cli-command' });
    link = newLink(ws.dir);
    await assert.rejects(link.ready(800), (e: Error & { code?: string }) => e.code === 'locked' && /serves no endpoint/.test(e.message) && new RegExp(`pid ${process.pid}`).test(e.message));
    assert.equal(link.mode.kind, 'waiting');
    held.release();
    await waitMode(link, 'owner', 10_000);
    assert.ok(link.engine);
  });
});
