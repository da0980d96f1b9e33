/**
 * Rollbacks under hostile workspaces: a directory swapped for a symlink to the outside
 * while the write phase runs, file names at the length limit, and a person's own files
 * whose names look like a restore's temps.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fss from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Engine } from '../../src/core/engine/engine';
import { RestoreStoppedError, applyRestore, planRestore, scan, type BlobStore, type RestorePlan } from '../../src/core/snapshot/index.js';
import { TempDirs, newStore, readTree, writeTree } from './snapshot.helpers.js';
import { embeddedStore } from '../support/embedded';

/**
 * Exchanges `a` and `b` (a directory and a symlink) in one atomic renameat2(RENAME_EXCHANGE),
 * over and over, until killed; prints "go" after the first exchange.
 */
const SWAPPER = `
import ctypes, sys, os
libc = ctypes.CDLL(None, use_errno=True)
a, b = sys.argv[1].encode(), sys.argv[2].encode()
n = 0
while True:
    if libc.renameat2(-100, a, -100, b, 2) != 0:
        sys.stderr.write("renameat2: errno %d\\n" % ctypes.get_errno()); sys.exit(2)
    n += 1
    if n == 1:
        sys.stdout.write("go\\n"); sys.stdout.flush()
`;

function canExchange(): boolean {
  if (process.platform !== 'linux') return false;
  const r = spawnSync('python3', ['-c', 'import ctypes; ctypes.CDLL(None).renameat2'], { stdio: 'ignore' });
  return r.status === 0;
}

async function startSwapper(a: string, b: string): Promise<ChildProcess> {
  const child = spawn('python3', ['-c', SWAPPER, a, b], { stdio: ['ignore', 'pipe', 'pipe'] });
  await new Promise<void>((resolve, reject) => {
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`swapper exited ${code}: ${err}`)));
  });
  return child;
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
}

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const d of fss.readdirSync(dir, { withFileTypes: true })) {
    out.push(d.name);
    if (d.isDirectory()) out.push(...filesUnder(path.join(dir, d.name)).map((n) => `${d.name}/${n}`));
  }
  return out;
}

describe('rollback under hostile workspaces', () => {
  const tmp = new TempDirs();
  afterEach(() => tmp.cleanup());

  it('a directory swapped for a symlink to the outside while the write phase runs: nothing is ever written outside', async function () {
    if (!canExchange()) this.skip(); // needs Linux renameat2 through python3
    this.timeout(0);
    const FILES = Number(process.env.WAYPOINT_SWAP_FILES ?? 2000);
    const TRIES = Number(process.env.WAYPOINT_SWAP_TRIES ?? 12);
    const ws = await tmp.make('wp-swap-ws-');
    const outside = await tmp.make('wp-swap-out-');
    const blobs = await newStore(tmp);
    const roots = [{ name: 'w', dir: ws }];
    const files: Record<string, string> = {};
    for (let i = 0; i < FILES; i++) files[`d/f${i}.txt`] = `before ${i}\n`;
    await writeTree(ws, files);
    const target = (await scan({ roots, blobs })).manifest;
    let failedLoudly = 0;
    for (let t = 0; t < TRIES; t++) {
      for (let i = 0; i < FILES; i++) fss.writeFileSync(path.join(ws, `d/f${i}.txt`), `after ${t} ${i}\n`);
      const current = (await scan({ roots, blobs })).manifest;
      const plan = planRestore(current, target, { isHeld: () => true });
      assert.equal(plan.writes.length, FILES);
      // The agent's move: `swap` points outside; `d` and `swap` trade places, over and over.
      fss.symlinkSync(outside, path.join(ws, 'swap'));
      const swapper = await startSwapper(path.join(ws, 'd'), path.join(ws, 'swap'));
      let outcome: string;
      try {
        const res = await applyRestore(plan, roots, blobs);
        outcome = `applied, ${res.written.length} written, conflicts: ${JSON.stringify(res.conflicts.slice(0, 3))}`;
      } catch (e) {
        outcome = `failed: ${(e as Error).message}`;
        failedLoudly++;
      } finally {
        await stop(swapper);
      }
      // Put the real directory back at `d` and drop the link.
      if (fss.lstatSync(path.join(ws, 'd')).isSymbolicLink()) {
        fss.renameSync(path.join(ws, 'swap'), path.join(ws, 'd.real'));
        fss.unlinkSync(path.join(ws, 'd'));
        fss.renameSync(path.join(ws, 'd.real'), path.join(ws, 'd'));
      } else fss.unlinkSync(path.join(ws, 'swap'));
      const escaped = filesUnder(outside);
      assert.deepEqual(escaped.slice(0, 5), [], `try ${t + 1} (${outcome}): ${escaped.length} file(s) written outside the workspace`);
      if (outcome.startsWith('applied')) {
        // Success means every file is restored, inside.
        for (let i = 0; i < FILES; i += 97) assert.equal(fss.readFileSync(path.join(ws, `d/f${i}.txt`), 'utf8'), `before ${i}\n`, `try ${t + 1} (${outcome}): d/f${i}.txt`);
      }
    }
    process.stdout.write(`      ${TRIES} tries, ${failedLoudly} refused loudly, none wrote outside\n`);
  });

  it('a directory turned into a symlink to the outside after the restore began: it stops there, loudly, saying what it had written', async () => {
    const ws = await tmp.make('wp-stop-ws-');
    const outside = await tmp.make('wp-stop-out-');
    await writeTree(ws, { 'a/1.txt': 'old 1', 'b/2.txt': 'old 2' });
    const roots = [{ name: 'w', dir: ws }];
    const entry = (n: number) => ({ type: 'file' as const, hash: String(n).repeat(64), size: 200 * 1024 * 1024, mode: 0o644 as const, mtimeMs: 1, ino: 1 });
    const plan: RestorePlan = {
      writes: [
        { path: 'a/1.txt', entry: entry(1), expectAbsent: false },
        { path: 'b/2.txt', entry: entry(2), expectAbsent: false },
      ],
      removes: [],
      kept: [],
      unchanged: 0,
    };
    // Entries past the preload budget are read while phase 3 writes: the first read is
    // the moment the agent swaps `b` for a link to the outside.
    let reads = 0;
    const blobs = {
      batchReader: () => ({ get: () => Buffer.alloc(0), close: () => undefined }),
      hasSync: () => true,
      getSync: () => {
        if (reads++ === 0) {
          fss.renameSync(path.join(ws, 'b'), path.join(ws, 'b.moved'));
          fss.symlinkSync(outside, path.join(ws, 'b'));
        }
        return Buffer.from(`new ${reads}`);
      },
    } as unknown as BlobStore;
    await assert.rejects(applyRestore(plan, roots, blobs), (e: Error) => {
      assert.ok(e instanceof RestoreStoppedError, `${e.name}: ${e.message}`);
      assert.equal(e.code, 'unsafe_path');
      assert.match(e.message, /symlink leading outside.*stopped there, with 1 path\(s\) written/);
      return true;
    });
    assert.equal(fss.readFileSync(path.join(ws, 'a/1.txt'), 'utf8'), 'new 1');
    assert.deepEqual(filesUnder(outside), []);
    assert.deepEqual(fss.readdirSync(path.join(ws, 'a')), ['1.txt'], 'no temp left');
  });

  describe('through the engine', () => {
    let ws: string;
    let engine: Engine;
    beforeEach(async () => {
      ws = await tmp.make('wp-hostile-');
    });
    afterEach(async () => {
      await engine?.close();
    });

    it('a 250-byte file name: rollback and undo both restore it exactly', async () => {
      const name = `${'n'.repeat(246)}.txt`;
      assert.equal(Buffer.byteLength(name), 250);
      const long = `dir/${name}`;
      await writeTree(ws, { [long]: 'base content\n', 'short.txt': 'base\n' });
      engine = await Engine.open({ workspace: ws, store: { lock: { waitMs: 500 } } });
      const { taskId, baseCheckpointId } = await engine.startTask({ goal: 'long names' });
      await writeTree(ws, { [long]: 'edited by the agent\n', 'short.txt': 'edited\n' });
      const edited = await readTree(ws);
      edited.delete('.waypoint');
      const r = await engine.rollback({ taskId, checkpointId: baseCheckpointId });
      assert.deepEqual(r.conflicts, []);
      assert.equal(fss.readFileSync(path.join(ws, long), 'utf8'), 'base content\n');
      assert.equal(fss.readFileSync(path.join(ws, 'short.txt'), 'utf8'), 'base\n');
      await engine.undoRollback({ taskId });
      assert.equal(fss.readFileSync(path.join(ws, long), 'utf8'), 'edited by the agent\n');
      const names = fss.readdirSync(path.join(ws, 'dir'));
      assert.deepEqual(names, [name], 'nothing but the file itself in its directory');
      const rows = embeddedStore(engine).db.all<{ state: string; outcome: string | null }>('SELECT state, outcome FROM rollbacks');
      assert.ok(rows.every((x) => x.state === 'applied'), JSON.stringify(rows));
    });

    it("a person's own *.waypoint-tmp file is checkpointed and survives a rollback of the file beside it", async () => {
      await writeTree(ws, { 'notes.txt': 'v1\n', 'notes.txt.waypoint-tmp': 'my own scratch file\n' });
      engine = await Engine.open({ workspace: ws, store: { lock: { waitMs: 500 } } });
      const { taskId, baseCheckpointId } = await engine.startTask({ goal: 'notes' });
      const base = await engine.workspaceSnapshots!.load(engine.queries.checkpoint(baseCheckpointId)!);
      assert.ok(base.has('notes.txt.waypoint-tmp'), 'the person’s file is in the checkpoint');
      await writeTree(ws, { 'notes.txt': 'v2\n' });
      await engine.rollback({ taskId, checkpointId: baseCheckpointId });
      assert.equal(fss.readFileSync(path.join(ws, 'notes.txt'), 'utf8'), 'v1\n');
      assert.equal(fss.readFileSync(path.join(ws, 'notes.txt.waypoint-tmp'), 'utf8'), 'my own scratch file\n');
      // And it is restored like any other file.
      await fs.writeFile(path.join(ws, 'notes.txt.waypoint-tmp'), 'changed\n');
      const { checkpointId } = await engine.checkpoint({ taskId });
      await engine.rollback({ taskId, checkpointId: baseCheckpointId });
      assert.equal(fss.readFileSync(path.join(ws, 'notes.txt.waypoint-tmp'), 'utf8'), 'my own scratch file\n');
      await engine.rollback({ taskId, checkpointId });
      assert.equal(fss.readFileSync(path.join(ws, 'notes.txt.waypoint-tmp'), 'utf8'), 'changed\n');
    });
  });
});
