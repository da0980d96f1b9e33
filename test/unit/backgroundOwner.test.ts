import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawn } from 'node:child_process';
import { buildCli, CLI, isAlive, waitExit } from '../support/mcp';
import { tmpDir } from '../support/tmp';
import { Engine } from '../../src/core/engine/engine';
import { Logger, silentLogger } from '../../src/core/log';
import { TreeWatcher } from '../../src/core/snapshot/treeWatcher';
import { StoreLink } from '../../src/ownership/storeLink';
import { LOG_FILE } from '../../src/ownership/backgroundStart';

/**
 * The background owner, with real processes: the built CLI (dist/cli.js) started in a
 * temporary workspace nobody owns, as an agent's hook or a person's shell would run it.
 */

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

function cli(args: string[], env: Record<string, string | undefined> = {}, cwd?: string): Promise<Run> {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const e: NodeJS.ProcessEnv = { ...process.env, WAYPOINT_DAEMON: '1', WAYPOINT_DAEMON_IDLE_SECONDS: '60', ...env };
    // The unit suite turns background owners off for every other test (test/support/noBackgroundOwner.cjs).
    if (!('WAYPOINT_NO_DAEMON' in env)) delete e.WAYPOINT_NO_DAEMON;
    for (const [k, v] of Object.entries(e)) if (v === undefined) delete e[k];
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: e, cwd });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const kill = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.once('close', (status) => {
      clearTimeout(kill);
      resolve({ status, stdout, stderr, ms: Date.now() - t0 });
    });
  });
}

async function json<T = Record<string, unknown>>(p: Promise<Run>): Promise<T> {
  const r = await p;
  assert.equal(r.status, 0, `exit ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

type Status = { owner: { pid: number; ownerId: string; background: boolean } | null; status?: { pid: number; rssBytes: number; idleMs: number; watch: { kind: string } } };

function tree(dir: string, dirs: number, files: number): void {
  for (let d = 0; d < dirs; d++) {
    fs.mkdirSync(path.join(dir, `d${d}`), { recursive: true });
    for (let f = 0; f < files; f++) fs.writeFileSync(path.join(dir, `d${d}`, `f${f}.txt`), `file ${d}/${f}\n`);
  }
}

function servingLines(ws: string): number {
  const log = fs.readFileSync(path.join(ws, '.waypoint', LOG_FILE), 'utf8');
  return log.split('\n').filter((l) => / serving .* at http/.test(l)).length;
}

describe('background owner (real processes)', function () {
  this.timeout(90_000);
  const cleanups: (() => void)[] = [];
  const pids: number[] = [];

  before(() => buildCli());
  afterEach(async () => {
    for (const pid of pids.splice(0)) {
      if (isAlive(pid)) process.kill(pid, 'SIGTERM');
      await waitExit(pid);
    }
    for (const c of cleanups.splice(0)) c();
  });

  function workspace(): string {
    const t = tmpDir('wp-bg-');
    cleanups.push(t.cleanup);
    tree(t.dir, 5, 20);
    return t.dir;
  }

  async function ownerPid(ws: string): Promise<Status> {
    const s = await json<Status>(cli(['status', '--json', '-w', ws]));
    if (s.owner) pids.push(s.owner.pid);
    return s;
  }

  it('the first CLI call starts one; the second is relayed to it, and faster', async () => {
    const ws = workspace();
    const first = await json<{ relayed: boolean; pid: number }>(cli(['init', '--json', '-w', ws]));
    const s = await ownerPid(ws);
    assert.ok(s.owner?.background, `a background owner owns the store: ${JSON.stringify(s)}`);
    assert.notEqual(s.owner.pid, process.pid);
    assert.equal(first.relayed, true, 'the first call itself was answered by the owner it started');
    assert.equal(first.pid, s.owner.pid);
    assert.ok(s.status && s.status.rssBytes > 0 && s.status.rssBytes < 512 * 2 ** 20, 'status reports its resident memory');
    assert.equal(s.status.watch.kind, 'watching');
    const startedFirst = await cli(['task', 'start', '--goal', 'g', '--json', '-w', ws]);
    const second = await cli(['tasks', '--json', '-w', ws]);
    assert.equal(second.status, 0, second.stderr);
    const again = await json<{ relayed: boolean; pid: number }>(cli(['init', '--json', '-w', ws]));
    assert.equal(again.relayed, true);
    assert.equal(again.pid, s.owner.pid, 'the same owner answers later calls');
    assert.equal(startedFirst.status, 0, startedFirst.stderr);
    assert.equal(servingLines(ws), 1, 'one background owner was started');
  });

  for (const hints of ['0', '1'])
  it(`checkpoints taken through it record exactly what changed${hints === '1' ? ' (with watcher hints)' : ''} (new folders, removals, ignored files left out)`, async () => {
    const ws = workspace();
    fs.writeFileSync(path.join(ws, '.gitignore'), 'build/\n');
    const task = await json<{ taskId: string }>(cli(['task', 'start', '--goal', 'watch', '--json', '-w', ws], { WAYPOINT_WATCH_HINTS: hints }));
    await ownerPid(ws);
    // A first checkpoint makes the base the watcher vouches for.
    await json(cli(['checkpoint', '--task', task.taskId, '--json', '-w', ws]));
    for (let round = 0; round < 2; round++) {
      // Several files of one folder, of source-like size, written together (a hinted scan reads them in one go).
      for (const f of ['f1', 'f3', 'f5', 'f7']) fs.writeFileSync(path.join(ws, 'd1', `${f}.txt`), `${f} round ${round}\n`.repeat(80));
      fs.mkdirSync(path.join(ws, `new${round}`, 'deep'), { recursive: true });
      fs.writeFileSync(path.join(ws, `new${round}`, 'deep', 'x.txt'), 'new\n');
      fs.rmSync(path.join(ws, 'd2', `f${round}.txt`));
      fs.mkdirSync(path.join(ws, 'build'), { recursive: true });
      fs.writeFileSync(path.join(ws, 'build', `out${round}.txt`), 'ignored\n');
      // fs.watch reports after the write returns: give it a moment, as any real agent's next call would.
      await new Promise((r) => setTimeout(r, 300));
      const cp = await json<{ checkpointId: string; filesChanged: number }>(cli(['checkpoint', '--task', task.taskId, '--json', '-w', ws]));
      assert.equal(cp.filesChanged, 6, `round ${round}: ${JSON.stringify(cp)}`);
    }
    const st = await ownerPid(ws);
    assert.equal(st.status?.watch.kind, 'watching');
    // What the watcher-led checkpoints recorded is what a full scan finds: a fresh process
    // (no owner) sees nothing changed since the last of them.
    process.kill(st.owner!.pid, 'SIGTERM');
    await waitExit(st.owner!.pid);
    const full = await json<{ filesChanged: number }>(cli(['checkpoint', '--task', task.taskId, '--json', '-w', ws], { WAYPOINT_NO_DAEMON: '1' }));
    assert.equal(full.filesChanged, 0);
  });

  it('leaves after its idle period, releasing the store', async () => {
    const ws = workspace();
    const first = await json<{ relayed: boolean; pid: number }>(cli(['init', '--json', '-w', ws], { WAYPOINT_DAEMON_IDLE_SECONDS: '1' }));
    assert.equal(first.relayed, true);
    const pid = first.pid;
    pids.push(pid);
    const deadline = Date.now() + 20_000;
    while (isAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    assert.equal(isAlive(pid), false, 'the background owner left after 1 s idle');
    const after = await json<Status>(cli(['status', '--json', '-w', ws], { WAYPOINT_NO_DAEMON: '1' }));
    assert.equal(after.owner, null, 'nobody owns the store');
    assert.match(fs.readFileSync(path.join(ws, '.waypoint', LOG_FILE), 'utf8'), /no call for 1 s: leaving/);
  });

  it('WAYPOINT_NO_DAEMON=1 starts none', async () => {
    const ws = workspace();
    const r = await json<{ relayed: boolean; pid: number }>(cli(['init', '--json', '-w', ws], { WAYPOINT_NO_DAEMON: '1' }));
    assert.equal(r.relayed, false);
    const s = await json<Status>(cli(['status', '--json', '-w', ws], { WAYPOINT_NO_DAEMON: '1' }));
    assert.equal(s.owner, null);
    assert.equal(fs.existsSync(path.join(ws, '.waypoint', LOG_FILE)), false, 'no background owner was ever started');
  });

  it('is off unless asked for (WAYPOINT_DAEMON=1 or the setting): the call owns the store itself', async () => {
    const ws = workspace();
    const r = await json<{ relayed: boolean }>(cli(['init', '--json', '-w', ws], { WAYPOINT_DAEMON: undefined }));
    assert.equal(r.relayed, false);
    const s = await json<Status & { background: { enabled: boolean; why?: string } }>(cli(['status', '--json', '-w', ws], { WAYPOINT_DAEMON: undefined }));
    assert.equal(s.owner, null);
    assert.equal(s.background.enabled, false);
    assert.match(s.background.why ?? '', /WAYPOINT_DAEMON=1/);
    assert.equal(fs.existsSync(path.join(ws, '.waypoint', LOG_FILE)), false, 'no background owner was ever started');
  });

  it('the setting recorded by a window decides when the shell does not ask: off, then on', async () => {
    const ws = workspace();
    fs.mkdirSync(path.join(ws, '.waypoint'));
    fs.writeFileSync(path.join(ws, '.waypoint', 'background-owner.json'), JSON.stringify({ enabled: false }));
    const r = await json<{ relayed: boolean }>(cli(['init', '--json', '-w', ws], { WAYPOINT_DAEMON: undefined }));
    assert.equal(r.relayed, false);
    const s = await json<Status & { background: { enabled: boolean; why?: string } }>(cli(['status', '--json', '-w', ws], { WAYPOINT_DAEMON: undefined }));
    assert.equal(s.owner, null);
    assert.equal(s.background.enabled, false);
    assert.match(s.background.why ?? '', /setting is off/);
    fs.writeFileSync(path.join(ws, '.waypoint', 'background-owner.json'), JSON.stringify({ enabled: true }));
    const on = await json<{ relayed: boolean }>(cli(['init', '--json', '-w', ws], { WAYPOINT_DAEMON: undefined }));
    assert.equal(on.relayed, true, 'the setting on: the call started a background owner and was answered by it');
    assert.ok((await ownerPid(ws)).owner?.background);
  });

  it('a racing pair of first calls starts one owner, and both are answered by it', async () => {
    const ws = workspace();
    const runs = await Promise.all([0, 1, 2].map((i) => json<{ relayed: boolean; pid: number }>(cli(['init', '--json', '-w', ws], { RACE: String(i) }))));
    const s = await ownerPid(ws);
    assert.ok(s.owner?.background);
    for (const r of runs) assert.equal(r.pid, s.owner.pid, `every call was answered by the one owner: ${JSON.stringify(runs)}`);
    assert.equal(servingLines(ws), 1, 'exactly one background owner served');
  });

  it('a window that opens takes the store over with every event the background owner recorded', async () => {
    const ws = workspace();
    const task = await json<{ taskId: string }>(cli(['task', 'start', '--goal', 'before the window', '--json', '-w', ws]));
    for (let i = 0; i < 5; i++) {
      fs.appendFileSync(path.join(ws, 'd0', 'f0.txt'), `${i}\n`);
      await json(cli(['checkpoint', '--task', task.taskId, '--label', `c${i}`, '--json', '-w', ws]));
    }
    const s = await ownerPid(ws);
    const pid = s.owner!.pid;
    const events = await json<unknown[] | { events: unknown[] }>(cli(['events', '--json', '-w', ws]));
    const count = Array.isArray(events) ? events.length : events.events.length;
    assert.ok(count >= 6, `events recorded: ${count}`);
    // The window's side, as the extension host builds it: a store link that asks a background owner for the store.
    const storeDir = path.join(ws, '.waypoint');
    const link = new StoreLink({
      storeDir,
      log: new Logger(() => undefined),
      takeFromBackground: true,
      pollMs: 200,
      openEngine: () => Engine.open({ workspace: ws, storeDir, log: silentLogger, store: { lock: { waitMs: 250, ownerId: `waypoint-window:test:${process.pid}` } } }),
    });
    try {
      const m = await link.ready(30_000);
      assert.equal(m.kind, 'owner', 'the window owns the store');
      await waitExit(pid, 20_000);
      assert.equal(isAlive(pid), false, 'the background owner left');
      const engine = link.engine!;
      assert.equal(engine.eventLog.lastSeq, count, 'every event the background owner acknowledged is in the window');
      const t = (await link.api.tasks({})).find((x) => x.id === task.taskId);
      assert.ok(t, 'the task is there');
      assert.equal(engine.queries.checkpoints(task.taskId).filter((c) => c.kind === 'manual').length, 5);
      // A CLI call now goes to the window (no new background owner races it).
      const r = await cli(['tasks', '--json', '-w', ws]);
      assert.equal(r.status, 1, 'the window serves no endpoint in this test: the call waits and names the holder');
      assert.match(r.stderr, /waypoint-window:test/);
    } finally {
      await link.close();
    }
  });
});

describe('tree watcher', () => {
  it('names what changed since the checkpoint it vouches for, and falls back to scanning past its cap, saying so once', async () => {
    const t = tmpDir('wp-watch-');
    try {
      tree(t.dir, 3, 3);
      const warnings: string[] = [];
      const log = new Logger((level, line) => level === 'warn' && warnings.push(line));
      const w = new TreeWatcher({ roots: [{ name: 'w', dir: t.dir }], storeDir: path.join(t.dir, '.waypoint'), log, hints: true });
      w.start();
      assert.deepEqual(w.state, { kind: 'watching', dirs: 4 });
      // No checkpoint made while watching yet: nothing is vouched for.
      const first = w.begin(null);
      assert.equal(first.dirty, null);
      first.done({ manifestRef: 'm1', files: 9, filesChanged: 9, bytes: 1 });
      fs.writeFileSync(path.join(t.dir, 'd0', 'f0.txt'), 'changed');
      fs.mkdirSync(path.join(t.dir, 'd9'));
      await new Promise((r) => setTimeout(r, 100));
      fs.writeFileSync(path.join(t.dir, 'd9', 'n.txt'), 'new');
      await new Promise((r) => setTimeout(r, 200));
      const meta = { manifestRef: 'm1' } as Parameters<TreeWatcher['begin']>[0];
      const second = w.begin(meta);
      assert.deepEqual([...(second.dirty ?? [])].sort(), [path.join(t.dir, 'd0', 'f0.txt'), path.join(t.dir, 'd9'), path.join(t.dir, 'd9', 'n.txt')].sort());
      second.done(null);
      // A failed capture keeps its paths; a previous this watcher did not make gets none.
      const third = w.begin({ manifestRef: 'other' } as typeof meta);
      assert.equal(third.dirty, null);
      third.done({ manifestRef: 'm2', files: 1, filesChanged: 1, bytes: 1 });
      w.close();
      const capped = new TreeWatcher({ roots: [{ name: 'w', dir: t.dir }], storeDir: path.join(t.dir, '.waypoint'), log, maxDirs: 2 });
      capped.start();
      assert.equal(capped.state.kind, 'scanning');
      assert.equal(capped.begin(null).dirty, null);
      assert.equal(warnings.length, 1, warnings.join('\n'));
      assert.match(warnings[0], /more than 2 directories to watch.*scans the whole tree/);
      capped.close();
    } finally {
      t.cleanup();
    }
  });
});
