import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import * as crypto from 'node:crypto';
import { CLI, isAlive, waitExit } from '../support/mcp';
import { tmpDir } from '../support/tmp';
import { cli, json, ownedAfterEach, servingLines, servingOwner, tree, type Run, type Status } from '../support/backgroundOwner';
import { Engine } from '../../src/core/engine/engine';
import { Logger, silentLogger } from '../../src/core/log';
import { TreeWatcher, WATCH_COOKIE_DIR } from '../../src/core/snapshot/treeWatcher';
import { StoreLink } from '../../src/ownership/storeLink';
import { LOG_FILE } from '../../src/ownership/backgroundStart';
import { fastCheckpoint, parseCheckpointArgs } from '../../src/cli/checkpointFastPath';

/**
 * The background owner, with real processes: the built CLI (dist/cli.js) started in a
 * temporary workspace nobody owns, as an agent's hook or a person's shell would run it.
 */

describe('background owner (real processes)', function () {
  this.timeout(90_000);
  const { cleanups, pids } = ownedAfterEach();

  function workspace(): string {
    const t = tmpDir('wp-bg-');
    cleanups.push(t.cleanup);
    tree(t.dir, 5, 20);
    return t.dir;
  }

  async function ownerPid(ws: string): Promise<Status> {
    const s = await servingOwner(ws);
    if (s.owner) pids.push(s.owner.pid);
    return s;
  }

  it('the first CLI call does its work itself and then starts one; the next is relayed to it', async () => {
    const ws = workspace();
    const first = await json<{ relayed: boolean; pid: number }>(cli(['init', '--json', '-w', ws]));
    assert.equal(first.relayed, false, 'the first call owned the store itself (a fresh scan costs less than an owner’s start)');
    const s = await ownerPid(ws);
    assert.ok(s.owner?.background, `a background owner owns the store: ${JSON.stringify(s)}`);
    assert.notEqual(s.owner.pid, first.pid);
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

  for (const hints of ['0', undefined])
  it(`checkpoints taken through it record exactly what changed${hints === '0' ? ' (watcher hints off: full scans)' : ' (watcher hints)'} (new folders, removals, ignored files left out)`, async () => {
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
      // No pause: the owner's watcher catches up with these writes before it vouches for a list (its cookie).
      const cp = await json<{ checkpointId: string; filesChanged: number }>(cli(['checkpoint', '--task', task.taskId, '--json', '-w', ws]));
      assert.equal(cp.filesChanged, 6, `round ${round}: ${JSON.stringify(cp)}`);
    }
    const st = await ownerPid(ws);
    assert.equal(st.status?.watch.kind, 'watching');
    assert.equal(st.status?.watch.hinted, hints === '0' ? 0 : 3, "every checkpoint after the task's base looked only at what the watcher listed (or, hints off, at everything)");
    // What the watcher-led checkpoints recorded is what a full scan finds: a fresh process
    // (no owner) sees nothing changed since the last of them.
    process.kill(st.owner!.pid, 'SIGTERM');
    await waitExit(st.owner!.pid);
    const full = await json<{ filesChanged: number }>(cli(['checkpoint', '--task', task.taskId, '--json', '-w', ws], { WAYPOINT_NO_DAEMON: '1' }));
    assert.equal(full.filesChanged, 0);
  });

  it('leaves after its idle period, releasing the store', async () => {
    const ws = workspace();
    await json(cli(['init', '--json', '-w', ws], { WAYPOINT_DAEMON_IDLE_SECONDS: '1' }));
    // From its log, not from `status`: an owner idle for 1 s may leave between two looks at it.
    let pid = 0;
    for (const until = Date.now() + 30_000; !pid && Date.now() < until; await new Promise((r) => setTimeout(r, 50))) {
      const m = /serving .* \(pid (\d+);/.exec(fs.existsSync(path.join(ws, '.waypoint', LOG_FILE)) ? fs.readFileSync(path.join(ws, '.waypoint', LOG_FILE), 'utf8') : '');
      if (m) pid = Number(m[1]);
    }
    assert.ok(pid > 0, 'a background owner served');
    pids.push(pid);
    const deadline = Date.now() + 20_000;
    while (isAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    assert.equal(isAlive(pid), false, 'the background owner left after 1 s idle');
    const after = await json<Status>(cli(['status', '--json', '-w', ws], { WAYPOINT_NO_DAEMON: '1' }));
    assert.equal(after.owner, null, 'nobody owns the store');
    assert.match(fs.readFileSync(path.join(ws, '.waypoint', LOG_FILE), 'utf8'), /no call for 1 s: leaving/);
  });

  it('past its memory bound it keeps serving through a grace period, then leaves between calls, saying why', async () => {
    const ws = workspace();
    // A 1 MB bound: always past it. A peak right after a call is no reason to leave at once.
    const env = { WAYPOINT_DAEMON_MAX_RSS_MB: '1', WAYPOINT_DAEMON_MEMORY_GRACE_SECONDS: '4', WAYPOINT_DAEMON_IDLE_SECONDS: '60' };
    await json(cli(['init', '--json', '-w', ws], env));
    const first = { pid: (await ownerPid(ws)).owner!.pid };
    await new Promise((r) => setTimeout(r, 1500));
    const again = await json<{ relayed: boolean; pid: number }>(cli(['init', '--json', '-w', ws], env));
    assert.equal(again.pid, first.pid, 'the same owner still answers within the grace period');
    const deadline = Date.now() + 30_000;
    while (isAlive(first.pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    assert.equal(isAlive(first.pid), false, 'it left once the grace period passed with no call');
    assert.match(fs.readFileSync(path.join(ws, '.waypoint', LOG_FILE), 'utf8'), /resident memory past 1 MB for 4 s between calls: leaving/);
  });

  it('WAYPOINT_NO_DAEMON=1 starts none', async () => {
    const ws = workspace();
    const r = await json<{ relayed: boolean; pid: number }>(cli(['init', '--json', '-w', ws], { WAYPOINT_NO_DAEMON: '1' }));
    assert.equal(r.relayed, false);
    const s = await json<Status>(cli(['status', '--json', '-w', ws], { WAYPOINT_NO_DAEMON: '1' }));
    assert.equal(s.owner, null);
    assert.equal(fs.existsSync(path.join(ws, '.waypoint', LOG_FILE)), false, 'no background owner was ever started');
  });

  it('a first call’s bulk checkpoint is left stored raw for the owner it starts, which compresses it as the call would have; with none, the call compresses it', async () => {
    // The same 600 new files in two folders (past the first 256 a bulk scan stores new content raw).
    const make = (): string => {
      const ws = workspace();
      for (let i = 0; i < 600; i++) {
        const f = path.join(ws, `p${i % 30}`, i % 2 ? `m${i}.ts` : 'package.json');
        fs.mkdirSync(path.dirname(f), { recursive: true });
        if (!fs.existsSync(f)) fs.writeFileSync(f, `{ "name": "p${i % 30}", "version": "1.${i}.0", "files": [${Array.from({ length: 40 + (i % 13) }, (_, k) => `"src/f${k}.ts"`).join(', ')}] }\n`);
        else fs.writeFileSync(path.join(ws, `p${i % 30}`, `m${i}.ts`), `export const v${i} = ${i};\n`.repeat(20 + (i % 50)));
      }
      return ws;
    };
    const rawPacks = (ws: string) => fs.readdirSync(path.join(ws, '.waypoint', 'objects', 'pack')).filter((n) => n.endsWith('-u.pack'));
    const packBytes = (ws: string) => fs.readdirSync(path.join(ws, '.waypoint', 'objects', 'pack')).filter((n) => n.endsWith('.pack')).reduce((t, n) => t + fs.statSync(path.join(ws, '.waypoint', 'objects', 'pack', n)).size, 0);

    const alone = make();
    const a = await cli(['task', 'start', '--goal', 'g', '--json', '-w', alone], { WAYPOINT_NO_DAEMON: '1', WAYPOINT_LOG: 'info' });
    assert.equal(a.status, 0, a.stderr);
    assert.match(a.stderr, /compressed \d+ objects stored raw by a bulk checkpoint/, 'with no owner to come, the call compresses what it stored raw');
    assert.deepEqual(rawPacks(alone), []);

    const handed = make();
    const h = await cli(['task', 'start', '--goal', 'g', '--json', '-w', handed], { WAYPOINT_LOG: 'info' });
    assert.equal(h.status, 0, h.stderr);
    assert.doesNotMatch(h.stderr, /compressed/, 'the call left the compression to the owner it started');
    await ownerPid(handed);
    const ownerLog = () => fs.readFileSync(path.join(handed, '.waypoint', LOG_FILE), 'utf8');
    const deadline = Date.now() + 60_000;
    while ((rawPacks(handed).length || !/compressed \d+ objects/.test(ownerLog())) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(rawPacks(handed), [], 'the owner compressed what the call stored raw');
    assert.match(ownerLog(), /compressed \d+ objects stored raw by a bulk checkpoint/);
    // As small as the call's own compression (ordered by the files' names too: see namesOfLatest).
    assert.ok(packBytes(handed) < 1.05 * packBytes(alone), `${packBytes(handed)} bytes vs ${packBytes(alone)} compressed by the call itself`);
    const v = await json<{ ok: boolean }>(cli(['verify', '--json', '-w', handed]));
    assert.equal(v.ok, true, 'every checkpoint’s objects read back and hash right');
  });

  it('is on by default (no WAYPOINT_DAEMON); WAYPOINT_DAEMON=0 turns it off', async () => {
    const ws = workspace();
    const r = await json<{ relayed: boolean }>(cli(['init', '--json', '-w', ws], { WAYPOINT_DAEMON: undefined }));
    assert.equal(r.relayed, false);
    assert.ok((await ownerPid(ws)).owner?.background, 'a background owner took the store after the first call');
    const off = workspace();
    const r0 = await json<{ relayed: boolean }>(cli(['init', '--json', '-w', off], { WAYPOINT_DAEMON: '0' }));
    assert.equal(r0.relayed, false);
    const s = await json<Status & { background: { enabled: boolean; why?: string } }>(cli(['status', '--json', '-w', off], { WAYPOINT_DAEMON: '0' }));
    assert.equal(s.owner, null);
    assert.equal(s.background.enabled, false);
    assert.match(s.background.why ?? '', /WAYPOINT_DAEMON is 0/);
    assert.equal(fs.existsSync(path.join(off, '.waypoint', LOG_FILE)), false, 'no background owner was ever started');
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
    await json(cli(['init', '--json', '-w', ws], { WAYPOINT_DAEMON: undefined }));
    assert.ok((await ownerPid(ws)).owner?.background, 'the setting on: the call started a background owner');
  });

  it('racing first calls are all answered, and start one owner between them', async () => {
    const ws = workspace();
    const runs = await Promise.all([0, 1, 2].map((i) => json<{ relayed: boolean; pid: number }>(cli(['task', 'start', '--goal', `race ${i}`, '--json', '-w', ws], { RACE: String(i) }))));
    const s = await ownerPid(ws);
    assert.ok(s.owner?.background);
    // Whoever came after the owner served was relayed to it; the rest owned the store in turn.
    for (const r of runs) assert.ok(!r.relayed || r.pid === s.owner.pid, `a relayed call was answered by the one owner: ${JSON.stringify(runs)}`);
    const after = await json<{ relayed: boolean; pid: number }>(cli(['init', '--json', '-w', ws]));
    assert.equal(after.pid, s.owner.pid);
    assert.equal((await json<unknown[]>(cli(['tasks', '--json', '-w', ws]))).length, 3, 'all three tasks recorded');
    assert.equal(servingLines(ws), 1, 'exactly one background owner served');
  });

  it('an agent\'s first hook with no owner is recorded by the call itself and starts one; the next hooks are relayed to it', async () => {
    const ws = workspace();
    const session = '0b1e7c2a-5d4f-4e1a-9c3b-000000000038';
    const hook = (event: Record<string, unknown>) => {
      const e: NodeJS.ProcessEnv = { ...process.env, WAYPOINT_DAEMON_IDLE_SECONDS: '60' };
      delete e.WAYPOINT_NO_DAEMON;
      const r = spawnSync(process.execPath, [CLI, 'hook', 'claude-code'], { cwd: ws, input: JSON.stringify({ session_id: session, transcript_path: path.join(ws, '.t.jsonl'), cwd: ws, ...event }), encoding: 'utf8', env: e });
      assert.equal(r.status, 0, r.stderr);
    };
    hook({ hook_event_name: 'SessionStart', source: 'startup' });
    const s = await ownerPid(ws);
    assert.ok(s.owner?.background, 'the first hook started a background owner');
    hook({ hook_event_name: 'UserPromptSubmit', prompt: 'Change the greeting' });
    fs.writeFileSync(path.join(ws, 'd0', 'f0.txt'), 'changed by the agent\n');
    hook({ hook_event_name: 'Stop', stop_hook_active: false, last_assistant_message: 'done' });
    const after = await servingOwner(ws);
    assert.equal(after.owner!.pid, s.owner.pid, 'the same owner');
    assert.ok((after as Status & { status: { calls?: number } }).status.calls! >= 2, `the later hooks were answered by it: ${JSON.stringify(after.status)}`);
    const tasks = await json<{ title: string }[]>(cli(['tasks', '--json', '-w', ws]));
    assert.equal(tasks.length, 1);
    assert.match(tasks[0].title, /Change the greeting/);
    assert.equal(fs.existsSync(path.join(ws, '.waypoint', 'hooks.log')), false, 'nothing went unrecorded');
  });

  it('waypoint serve takes the store over from a background owner, with every event it recorded', async () => {
    const ws = workspace();
    const task = await json<{ taskId: string }>(cli(['task', 'start', '--goal', 'before serve', '--json', '-w', ws]));
    const bg = (await ownerPid(ws)).owner!.pid;
    await json(cli(['checkpoint', '--task', task.taskId, '--label', 'through the owner', '--json', '-w', ws]));
    const serve = spawn(process.execPath, [CLI, 'serve', '-w', ws], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, WAYPOINT_NO_DAEMON: '1' } });
    pids.push(serve.pid!);
    let out = '';
    let err = '';
    serve.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    serve.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    for (const until = Date.now() + 45_000; !/Serving Waypoint MCP/.test(out) && serve.exitCode === null && Date.now() < until; ) await new Promise((r) => setTimeout(r, 50));
    assert.match(out, /Serving Waypoint MCP/, `serve: ${out} ${err}`);
    await waitExit(bg, 20_000);
    assert.equal(isAlive(bg), false, 'the background owner left');
    const s = await json<Status>(cli(['status', '--json', '-w', ws], { WAYPOINT_NO_DAEMON: '1' }));
    assert.equal(s.owner?.pid, serve.pid, 'serve owns the store');
    assert.equal(s.owner?.background, false);
    const shown = await json<{ checkpoints: { label: string | null }[] }>(cli(['show', '--task', task.taskId, '--json', '-w', ws]));
    assert.ok(shown.checkpoints.some((c) => c.label === 'through the owner'), 'what the background owner recorded is there');
    assert.match(fs.readFileSync(path.join(ws, '.waypoint', LOG_FILE), 'utf8'), /handing it over/);
  });

  it('hands the store over without finishing a compression under way: the new owner compresses what is still raw', async () => {
    const ws = workspace();
    // ~22 MB of new content: the first call stores it raw and leaves it to the owner, whose compression takes seconds.
    for (let i = 0; i < 1_500; i++) {
      const f = path.join(ws, 'big', `d${i % 40}`, `f${i}.txt`);
      if (i < 40) fs.mkdirSync(path.dirname(f), { recursive: true });
      fs.writeFileSync(f, `${i}\n${crypto.randomBytes(7_500).toString('hex')}\n`);
    }
    const rawPacks = () => fs.readdirSync(path.join(ws, '.waypoint', 'objects', 'pack')).filter((n) => n.endsWith('-u.pack'));
    await json(cli(['task', 'start', '--goal', 'big first checkpoint', '--json', '-w', ws]));
    const bg = (await ownerPid(ws)).owner!.pid;
    assert.ok(rawPacks().length > 0, 'the owner is still compressing what the call stored raw');
    const serve = spawn(process.execPath, [CLI, 'serve', '-w', ws], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, WAYPOINT_NO_DAEMON: '1' } });
    pids.push(serve.pid!);
    let out = '';
    serve.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    for (const until = Date.now() + 45_000; !/Serving Waypoint MCP/.test(out) && serve.exitCode === null && Date.now() < until; ) await new Promise((r) => setTimeout(r, 50));
    assert.match(out, /Serving Waypoint MCP/);
    await waitExit(bg, 20_000);
    const bgLog = fs.readFileSync(path.join(ws, '.waypoint', LOG_FILE), 'utf8');
    assert.match(bgLog, /compression stopped as the store was handed over/, bgLog);
    assert.doesNotMatch(bgLog, /compressed \d+ objects/, 'it did not finish before handing over');
    // serve found the raw packs on open and compresses them.
    for (const until = Date.now() + 90_000; rawPacks().length && Date.now() < until; ) await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(rawPacks(), []);
    const v = await json<{ ok: boolean }>(cli(['verify', '--json', '-w', ws], { WAYPOINT_NO_DAEMON: '1' }));
    assert.equal(v.ok, true);
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

describe('checkpoint fast path (real processes)', function () {
  this.timeout(90_000);
  const { cleanups, pids } = ownedAfterEach();

  /** Runs the CLI with a preload that records, on exit, whether the full CLI (waypoint-cli.js) was loaded. */
  async function traced(args: string[], env: Record<string, string | undefined> = {}): Promise<Run & { full: boolean }> {
    const t = tmpDir('wp-trace-');
    cleanups.push(t.cleanup);
    const probe = path.join(t.dir, 'probe.cjs');
    const out = path.join(t.dir, 'loaded');
    fs.writeFileSync(probe, `process.on('exit', () => require('fs').writeFileSync(${JSON.stringify(out)}, String(Object.keys(require.cache).some((k) => k.endsWith('waypoint-cli.js')))));\n`);
    const r = await cli(args, { NODE_OPTIONS: `--require ${probe}`, ...env });
    return { ...r, full: fs.readFileSync(out, 'utf8') === 'true' };
  }

  async function served(): Promise<{ ws: string; taskId: string; pid: number }> {
    const t = tmpDir('wp-fast-');
    cleanups.push(t.cleanup);
    tree(t.dir, 3, 5);
    const task = await json<{ taskId: string }>(cli(['task', 'start', '--goal', 'fast', '--json', '-w', t.dir]));
    const s = await servingOwner(t.dir);
    assert.ok(s.owner?.background, 'a background owner serves the store');
    pids.push(s.owner.pid);
    return { ws: t.dir, taskId: task.taskId, pid: s.owner.pid };
  }

  it('answers a plain checkpoint without loading the full CLI, printing what the full CLI prints', async () => {
    const { ws, taskId } = await served();
    fs.writeFileSync(path.join(ws, 'd0', 'f0.txt'), 'changed\n');
    const text = await traced(['checkpoint', '--task', taskId, '-w', ws]);
    assert.equal(text.status, 0, text.stderr);
    assert.equal(text.full, false, 'the fast path answered');
    assert.match(text.stdout, /^Checkpoint c_\w+ \(1 file changed\)\n$/);
    fs.writeFileSync(path.join(ws, 'd1', 'f1.txt'), 'changed\n');
    fs.writeFileSync(path.join(ws, 'd1', 'new.txt'), 'new\n');
    const fast = await traced(['checkpoint', `--task=${taskId}`, '--label', 'two', '--json', '--workspace', ws]);
    assert.equal(fast.full, false);
    const r = JSON.parse(fast.stdout) as { taskId: string; checkpointId: string; filesChanged: number };
    assert.equal(r.taskId, taskId);
    assert.equal(r.filesChanged, 2);
    // The full CLI (--dirty is its own) prints the same shape.
    fs.writeFileSync(path.join(ws, 'd2', 'f2.txt'), 'changed\n');
    const slow = await traced(['checkpoint', '--task', taskId, '--dirty', 'd2/f2.txt', '--json', '-w', ws]);
    assert.equal(slow.full, true);
    assert.deepEqual(Object.keys(JSON.parse(slow.stdout) as object).sort(), Object.keys(r).sort());
    const list = await json<{ checkpoints: { id: string; label: string | null }[] }>(cli(['checkpoints', '--task', taskId, '--json', '-w', ws]));
    assert.equal(list.checkpoints.find((c) => c.id === r.checkpointId)?.label, 'two', 'the label reached the owner');
  });

  it('a repeated --key is answered from the record; a refusal is worded by the full CLI, exit code and --json as before', async () => {
    const { ws, taskId } = await served();
    fs.writeFileSync(path.join(ws, 'd0', 'f3.txt'), 'changed\n');
    const a = await json<{ checkpointId: string }>(traced(['checkpoint', '--task', taskId, '--key', 'k-1', '--json', '-w', ws]));
    fs.writeFileSync(path.join(ws, 'd0', 'f4.txt'), 'changed\n');
    const b = await json<{ checkpointId: string }>(traced(['checkpoint', '--task', taskId, '--key', 'k-1', '--json', '-w', ws]));
    assert.equal(b.checkpointId, a.checkpointId, 'the same key is the same checkpoint');
    const unknown = await traced(['checkpoint', '--task', 't_nope', '-w', ws]);
    assert.equal(unknown.status, 1);
    assert.equal(unknown.full, true, 'the refusal went to the full CLI');
    assert.match(unknown.stderr, /^waypoint: Unknown task 't_nope'\./);
    const unknownJson = await traced(['checkpoint', '--task', 't_nope', '--json', '-w', ws]);
    assert.equal(unknownJson.status, 1);
    assert.equal((JSON.parse(unknownJson.stdout) as { error: { code: string } }).error.code, 'not_found');
    const typo = await traced(['checkpoint', '--task', taskId, '--lable', 'x', '-w', ws]);
    assert.equal(typo.status, 2, 'an unknown flag is a usage error, as before');
    assert.match(typo.stderr, /--label/);
  });

  it('a stopped owner is left to the full CLI within the probe timeout, and nothing is recorded twice', async () => {
    const { ws, taskId, pid } = await served();
    process.kill(pid, 'SIGSTOP');
    try {
      const t0 = Date.now();
      const out = await fastCheckpoint(['checkpoint', '--task', taskId, '-w', ws]);
      assert.equal(out.handled, false);
      assert.ok(Date.now() - t0 < 10_000, `declined after ${Date.now() - t0} ms`);
      assert.deepEqual(!out.handled && out.argv, ['checkpoint', '--task', taskId, '-w', ws], 'nothing was sent, so no key is handed on');
    } finally {
      process.kill(pid, 'SIGCONT');
    }
  });
});

describe('checkpoint fast path: its arguments', () => {
  it('takes only the plain form; anything else is the full CLI’s', () => {
    const t = tmpDir('wp-args-');
    try {
      assert.deepEqual(parseCheckpointArgs(['checkpoint', '-t', 'T', '--label=a b', '--key', 'K', '--json', '-w', t.dir]), { workspace: t.dir, taskId: 'T', label: 'a b', key: 'K', json: true });
      assert.deepEqual(parseCheckpointArgs(['checkpoint', '--task', 'T'], t.dir), { workspace: t.dir, taskId: 'T', label: undefined, key: undefined, json: false });
      for (const argv of [
        ['checkpoint'],
        ['checkpoint', '--task'],
        ['checkpoint', '--task', '--json'],
        ['checkpoint', '--task', 'T', '--dirty', 'a'],
        ['checkpoint', '--task', 'T', '--task', 'U'],
        ['checkpoint', '--task', 'T', '--store', 'postgresql://x'],
        ['checkpoint', '--task', 'T', '--verbose'],
        ['checkpoint', '--task', 'T', '-w', path.join(t.dir, 'missing')],
        ['checkpoint', '--task', 'T', '-w', 'ws_0123456789abcdef'],
        ['checkpoints', '--task', 'T'],
      ]) {
        assert.equal(parseCheckpointArgs(argv, t.dir), null, argv.join(' '));
      }
    } finally {
      t.cleanup();
    }
  });
});

describe('tree watcher', () => {
  it('warms up from the newest checkpoint: the first checkpoint asked of it looks only at what changed, before and after it started', async () => {
    const t = tmpDir('wp-watch-warm-');
    try {
      tree(t.dir, 4, 5);
      const storeDir = path.join(t.dir, '.waypoint');
      // A call that owned the store alone (no watcher), as the first CLI call does.
      const alone = await Engine.open({ workspace: t.dir, storeDir, log: silentLogger });
      const { taskId } = await alone.startTask({ goal: 'warm' });
      await alone.close();
      // Changed while nobody watched: only the warm-up's scan can know.
      fs.writeFileSync(path.join(t.dir, 'd0', 'f0.txt'), 'before the owner\n');
      fs.rmSync(path.join(t.dir, 'd1', 'f1.txt'));
      const watcher = new TreeWatcher({ roots: [{ name: 'w', dir: t.dir }], storeDir, log: silentLogger });
      watcher.start();
      const owner = await Engine.open({ workspace: t.dir, storeDir, log: silentLogger, changeFeed: watcher });
      try {
        assert.equal(await owner.warmUpChangeFeed(), true, 'the watcher vouches from the newest checkpoint on');
        assert.equal(owner.workspaceSnapshots!.blobs.indexesLoaded, true, 'warm: new content is looked up in memory');
        fs.writeFileSync(path.join(t.dir, 'd2', 'new.txt'), 'after the owner started\n');
        const cp = await owner.checkpoint({ taskId });
        assert.equal(cp.filesChanged, 3, JSON.stringify(cp));
        assert.equal(watcher.hintedCheckpoints, 1, 'that checkpoint looked only at the listed paths');
      } finally {
        watcher.close();
        await owner.close();
      }
      // What it recorded is what a full scan finds: nothing changed since.
      const check = await Engine.open({ workspace: t.dir, storeDir, log: silentLogger });
      try {
        assert.equal((await check.checkpoint({ taskId })).filesChanged, 0);
      } finally {
        await check.close();
      }
      // With no checkpoint yet there is nothing to warm up from.
      const empty = tmpDir('wp-watch-warm0-');
      try {
        const w0 = new TreeWatcher({ roots: [{ name: 'w', dir: empty.dir }], storeDir: path.join(empty.dir, '.waypoint'), log: silentLogger });
        w0.start();
        const e0 = await Engine.open({ workspace: empty.dir, storeDir: path.join(empty.dir, '.waypoint'), log: silentLogger, changeFeed: w0 });
        assert.equal(await e0.warmUpChangeFeed(), false);
        w0.close();
        await e0.close();
      } finally {
        empty.cleanup();
      }
    } finally {
      t.cleanup();
    }
  });

  it('vouches only for a list that holds what was written just before the call (the cookie), round after round', async () => {
    const t = tmpDir('wp-watch-sync-');
    try {
      tree(t.dir, 3, 3);
      const w = new TreeWatcher({ roots: [{ name: 'w', dir: t.dir }], storeDir: path.join(t.dir, '.waypoint'), log: new Logger(() => undefined) });
      w.start();
      const first = await w.begin(null);
      first.done({ manifestRef: 'm0', files: 9, filesChanged: 9, bytes: 1 });
      for (let round = 1; round <= 50; round++) {
        // Written and asked about in the same turn of the event loop: no inotify event has been read yet.
        const f = path.join(t.dir, `d${round % 3}`, `f${round % 3}.txt`);
        fs.writeFileSync(f, `round ${round}`);
        const made = path.join(t.dir, `new${round}`);
        fs.mkdirSync(made);
        const ticket = await w.begin({ manifestRef: `m${round - 1}` } as Parameters<TreeWatcher['begin']>[0]);
        assert.ok(ticket.dirty, `round ${round}: a list is vouched for`);
        assert.ok(ticket.dirty.includes(f), `round ${round}: the file written just before is listed: ${JSON.stringify(ticket.dirty)}`);
        assert.ok(ticket.dirty.includes(made), `round ${round}: the folder made just before is listed`);
        ticket.done({ manifestRef: `m${round}`, files: 9, filesChanged: 2, bytes: 1 });
      }
      // The cookies went with their events: the store holds none.
      assert.deepEqual(fs.readdirSync(path.join(t.dir, '.waypoint', WATCH_COOKIE_DIR)), []);
      w.close();
    } finally {
      t.cleanup();
    }
  });

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
      const first = await w.begin(null);
      assert.equal(first.dirty, null);
      first.done({ manifestRef: 'm1', files: 9, filesChanged: 9, bytes: 1 });
      fs.writeFileSync(path.join(t.dir, 'd0', 'f0.txt'), 'changed');
      fs.mkdirSync(path.join(t.dir, 'd9'));
      await new Promise((r) => setTimeout(r, 100));
      fs.writeFileSync(path.join(t.dir, 'd9', 'n.txt'), 'new');
      await new Promise((r) => setTimeout(r, 200));
      const meta = { manifestRef: 'm1' } as Parameters<TreeWatcher['begin']>[0];
      const second = await w.begin(meta);
      assert.deepEqual([...(second.dirty ?? [])].sort(), [path.join(t.dir, 'd0', 'f0.txt'), path.join(t.dir, 'd9'), path.join(t.dir, 'd9', 'n.txt')].sort());
      second.done(null);
      // A failed capture keeps its paths; a previous this watcher did not make gets none.
      const third = await w.begin({ manifestRef: 'other' } as typeof meta);
      assert.equal(third.dirty, null);
      third.done({ manifestRef: 'm2', files: 1, filesChanged: 1, bytes: 1 });
      w.close();
      const capped = new TreeWatcher({ roots: [{ name: 'w', dir: t.dir }], storeDir: path.join(t.dir, '.waypoint'), log, maxDirs: 2 });
      capped.start();
      assert.equal(capped.state.kind, 'scanning');
      assert.equal((await capped.begin(null)).dirty, null);
      assert.equal(warnings.length, 1, warnings.join('\n'));
      assert.match(warnings[0], /more than 2 directories to watch.*scans the whole tree/);
      capped.close();
    } finally {
      t.cleanup();
    }
  });
});
