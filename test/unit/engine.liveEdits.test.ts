import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Engine } from '../../src/core/engine/engine';
import { sha256Hex } from '../../src/core/snapshot/blobStore';
import { restoreSeams, type RestorePhase } from '../../src/core/snapshot/restore';
import { main } from '../../src/cli/main';
import { openEngine, tmpDir } from '../support/tmp';

/**
 * A person keeps working while a rollback, its undo, a fork, a review apply or the
 * recovery of a crashed rollback writes the workspace: a save that lands after the
 * before state was captured and before the writer reaches the file is kept (reported
 * as a conflict), never overwritten, and undoing the rollback leaves it too. The race
 * is made exact with the restore's test seam, which runs at the instant the writer
 * checks a file ('check') or is about to swap its temp in ('swap').
 */

const FILES = 150;

function write(dir: string, rel: string, text: string): void {
  fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
  fs.writeFileSync(path.join(dir, rel), text);
}

function read(dir: string, rel: string): string | null {
  try {
    return fs.readFileSync(path.join(dir, rel), 'utf8');
  } catch {
    return null;
  }
}

function names(): string[] {
  return [...Array.from({ length: FILES }, (_v, i) => `d/f${String(i).padStart(4, '0')}.txt`), 'd/zz.txt'];
}

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let out = '';
  let err = '';
  const code = await main(args, {
    stdout: { write: (s: string) => ((out += s), true) } as never,
    stderr: { write: (s: string) => ((err += s), true) } as never,
  });
  return { code, stdout: out, stderr: err };
}

/** Runs `edit` once, when the restore reaches `key` in `phase`. */
function onReach(key: string, phase: RestorePhase, edit: () => void): void {
  restoreSeams.beforeReplace = (k, p) => {
    if (k !== key || p !== phase) return;
    restoreSeams.beforeReplace = undefined;
    edit();
  };
}

describe('live edits during a rollback are never lost', function () {
  this.timeout(60_000);
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine;
  beforeEach(async () => {
    ws = tmpDir('wp-live-');
    for (const n of names()) write(ws.dir, n, `${n} v0\n`);
    write(ws.dir, 'd/gone.txt', 'the agent deletes this\n');
    engine = await openEngine(ws.dir);
  });
  afterEach(async () => {
    restoreSeams.beforeReplace = undefined;
    await engine.close().catch(() => undefined);
    ws.cleanup();
  });

  /** A task that rewrote every file (v0 → v1) and deleted d/gone.txt; returns the checkpoint before it. */
  async function agentRewroteAll(): Promise<{ taskId: string; before: string }> {
    const { taskId } = await engine.startTask({ goal: 'rewrite', plan: [{ id: 's', title: 'Rewrite' }] });
    const before = (await engine.startStep({ taskId, stepId: 's' })).checkpointId!;
    for (const n of names()) write(ws.dir, n, `${n} v1\n`);
    fs.rmSync(path.join(ws.dir, 'd/gone.txt'));
    await engine.completeStep({ taskId, stepId: 's', summary: 'rewrote' });
    return { taskId, before };
  }

  function assertAll(version: 'v0' | 'v1', except: string[] = []): void {
    for (const n of names()) if (!except.includes(n)) assert.equal(read(ws.dir, n), `${n} ${version}\n`, n);
  }

  it('a save after the pre-rollback checkpoint, before the writer reaches the file, is kept; undo is exact and keeps it too', async () => {
    const { taskId, before } = await agentRewroteAll();
    let preDurable = false;
    onReach('d/zz.txt', 'check', () => {
      preDurable = engine.queries.checkpoints(taskId).some((c) => c.kind === 'pre_rollback');
      write(ws.dir, 'd/zz.txt', 'the person saved this\n');
    });
    const r = await engine.rollback({ taskId, checkpointId: before });
    assert.ok(preDurable, 'the save landed after the pre-rollback checkpoint was recorded');
    assert.deepEqual(r.conflicts, ['d/zz.txt']);
    assert.match(r.kept.find((k) => k.path === 'd/zz.txt')!.reason, /changed on disk/);
    assert.ok(!r.changes.some((c) => c.path === 'd/zz.txt'), 'a file left alone is not among the changes');
    assert.equal(r.filesWritten, FILES + 1, 'every other file, and d/gone.txt, written');
    assert.equal(read(ws.dir, 'd/zz.txt'), 'the person saved this\n');
    assertAll('v0', ['d/zz.txt']);
    const done = (await engine.events({ taskId })).filter((e) => e.type === 'rollback.done').at(-1)!;
    assert.deepEqual((done.data as { conflicts: string[] }).conflicts, ['d/zz.txt']);

    const u = await engine.undoRollback({ taskId });
    assert.equal(read(ws.dir, 'd/zz.txt'), 'the person saved this\n', 'undo does not bring back the version before the save');
    assertAll('v1', ['d/zz.txt']);
    assert.equal(read(ws.dir, 'd/gone.txt'), null);
    assert.ok(u.kept.some((k) => k.path === 'd/zz.txt'), 'the undo says it left the file alone');
  });

  it('a save while the temp is written (just before the swap) is kept', async () => {
    const { taskId, before } = await agentRewroteAll();
    onReach('d/zz.txt', 'swap', () => write(ws.dir, 'd/zz.txt', 'saved mid-write\n'));
    const r = await engine.rollback({ taskId, checkpointId: before });
    assert.deepEqual(r.conflicts, ['d/zz.txt']);
    assert.equal(read(ws.dir, 'd/zz.txt'), 'saved mid-write\n');
    assertAll('v0', ['d/zz.txt']);
    assert.deepEqual(fs.readdirSync(path.join(ws.dir, 'd')).filter((n) => n.includes('waypoint')), [], 'no temp left behind');
    await engine.undoRollback({ taskId });
    assert.equal(read(ws.dir, 'd/zz.txt'), 'saved mid-write\n');
    assertAll('v1', ['d/zz.txt']);
  });

  // The last instant before the path is taken: a save here used to be overwritten
  // (checked, then unlinked and renamed over). Both ways editors save: rewriting the
  // file in place, and a temp renamed over it.
  for (const how of ['in place', 'renamed over'] as const) {
    const save = (rel: string, text: string) => {
      if (how === 'in place') return write(ws.dir, rel, text);
      const tmp = path.join(ws.dir, `${rel}.editor-save`);
      fs.writeFileSync(tmp, text);
      fs.renameSync(tmp, path.join(ws.dir, rel));
    };

    it(`a save (${how}) after the last look, just before the file is replaced, is kept; undo keeps it`, async () => {
      const { taskId, before } = await agentRewroteAll();
      onReach('d/zz.txt', 'replace', () => save('d/zz.txt', 'saved at the last instant\n'));
      const r = await engine.rollback({ taskId, checkpointId: before });
      assert.deepEqual(r.conflicts, ['d/zz.txt']);
      assert.equal(read(ws.dir, 'd/zz.txt'), 'saved at the last instant\n');
      assertAll('v0', ['d/zz.txt']);
      assert.deepEqual(fs.readdirSync(path.join(ws.dir, 'd')).filter((n) => n.startsWith('.wp-') || n.includes('editor-save')), [], 'nothing left beside it');
      await engine.undoRollback({ taskId });
      assert.equal(read(ws.dir, 'd/zz.txt'), 'saved at the last instant\n');
      assertAll('v1', ['d/zz.txt']);
    });

    it(`a save (${how}) on the path while the old file is aside is kept`, async () => {
      const { taskId, before } = await agentRewroteAll();
      onReach('d/zz.txt', 'placed', () => save('d/zz.txt', 'saved while it was aside\n'));
      const r = await engine.rollback({ taskId, checkpointId: before });
      assert.deepEqual(r.conflicts, ['d/zz.txt']);
      assert.equal(read(ws.dir, 'd/zz.txt'), 'saved while it was aside\n');
      assertAll('v0', ['d/zz.txt']);
      assert.deepEqual(fs.readdirSync(path.join(ws.dir, 'd')).filter((n) => n.startsWith('.wp-')), [], 'no temp or moved file left behind');
    });

    it(`a save (${how}) to a file the rollback removes, just before it is removed, is kept`, async () => {
      const { taskId } = await engine.startTask({ goal: 'add a file', plan: [{ id: 's', title: 'Add' }] });
      const before = (await engine.startStep({ taskId, stepId: 's' })).checkpointId!;
      write(ws.dir, 'd/added.txt', 'the agent added this\n');
      await engine.completeStep({ taskId, stepId: 's', summary: 'added' });
      onReach('d/added.txt', 'replace', () => save('d/added.txt', 'the person kept working on it\n'));
      const r = await engine.rollback({ taskId, checkpointId: before });
      assert.deepEqual(r.conflicts, ['d/added.txt']);
      assert.equal(read(ws.dir, 'd/added.txt'), 'the person kept working on it\n');
      assert.deepEqual(fs.readdirSync(path.join(ws.dir, 'd')).filter((n) => n.startsWith('.wp-')), []);
    });
  }

  it('a file created where the rollback recreates one is kept', async () => {
    const { taskId, before } = await agentRewroteAll();
    onReach('d/gone.txt', 'swap', () => write(ws.dir, 'd/gone.txt', 'the person made a new one\n'));
    const r = await engine.rollback({ taskId, checkpointId: before });
    assert.deepEqual(r.conflicts, ['d/gone.txt']);
    assert.equal(read(ws.dir, 'd/gone.txt'), 'the person made a new one\n');
  });

  it('an edit that keeps size and mtime (set back) is still seen: the inode changed after the scan, so the file is re-hashed', async () => {
    const { taskId, before } = await agentRewroteAll();
    const file = path.join(ws.dir, 'd/zz.txt');
    // A whole-second mtime long past, so the edit can set it back exactly (and the scan trusts it: not racy).
    const t0 = new Date('2026-01-01T00:00:00Z');
    fs.utimesSync(file, t0, t0);
    onReach('d/zz.txt', 'check', () => {
      fs.writeFileSync(file, 'd/zz.txt vX\n'); // same length as 'd/zz.txt v1\n'
      fs.utimesSync(file, t0, t0);
    });
    const r = await engine.rollback({ taskId, checkpointId: before });
    assert.deepEqual(r.conflicts, ['d/zz.txt']);
    assert.equal(read(ws.dir, 'd/zz.txt'), 'd/zz.txt vX\n');
  });

  it('a file only touched (same content) is not a conflict: it is rolled back', async () => {
    const { taskId, before } = await agentRewroteAll();
    onReach('d/zz.txt', 'check', () => {
      const t = new Date(Date.now() + 5000);
      fs.utimesSync(path.join(ws.dir, 'd/zz.txt'), t, t);
    });
    const r = await engine.rollback({ taskId, checkpointId: before });
    assert.deepEqual(r.conflicts, []);
    assertAll('v0');
  });

  it('the CLI lists the file it left, with why, and --json carries it in conflicts', async () => {
    const { taskId, before } = await agentRewroteAll();
    await engine.close();
    onReach('d/zz.txt', 'check', () => write(ws.dir, 'd/zz.txt', 'the person saved this\n'));
    const human = await cli(['rollback', '--task', taskId, '--to', before, '--yes', '--workspace', ws.dir]);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /Left as you have it \(not rolled back\):\n {2}d\/zz\.txt {2}\(changed on disk since it was scanned; kept\)/);
    const undo = await cli(['rollback', '--task', taskId, '--undo', '--yes', '--workspace', ws.dir]);
    assert.equal(undo.code, 0, undo.stderr);
    assert.equal(read(ws.dir, 'd/zz.txt'), 'the person saved this\n');
    onReach('d/f0007.txt', 'check', () => write(ws.dir, 'd/f0007.txt', 'again\n'));
    const json = await cli(['rollback', '--task', taskId, '--to', before, '--yes', '--json', '--workspace', ws.dir]);
    assert.equal(json.code, 0, json.stderr);
    assert.deepEqual((JSON.parse(json.stdout) as { conflicts: string[] }).conflicts, ['d/f0007.txt']);
    engine = await openEngine(ws.dir);
  });

  it('crash recovery re-checks too: a file saved after the crash is kept, recorded, and the undo leaves it', async () => {
    const { taskId, before } = await agentRewroteAll();
    const snaps = engine.workspaceSnapshots!;
    // Freeze the rollback where a crash would hit: the before state and the plan durable, no file written.
    let frozen!: () => void;
    let release!: () => void;
    const atApply = new Promise<void>((resolve) => (frozen = resolve));
    snaps.apply = (() => {
      frozen();
      return new Promise((_resolve, reject) => (release = () => reject(new Error('test: the frozen rollback is let go'))));
    }) as typeof snaps.apply;
    const stuck = engine.rollback({ taskId, checkpointId: before }).catch((e: Error) => e);
    await atApply;
    const copy = tmpDir('wp-live-crash-');
    try {
      fs.cpSync(ws.dir, copy.dir, { recursive: true });
      for (const n of fs.readdirSync(path.join(copy.dir, '.waypoint'))) if (/lock/.test(n)) fs.rmSync(path.join(copy.dir, '.waypoint', n), { force: true });
      write(copy.dir, 'd/zz.txt', 'saved before the reopen\n');
      const again = await openEngine(copy.dir);
      try {
        assert.equal(again.recoveryNotes.length, 1);
        assert.match(again.recoveryNotes[0]!, /finished on open.*1 file changed since it was planned was left as it was: d\/zz\.txt/);
        assert.equal(read(copy.dir, 'd/zz.txt'), 'saved before the reopen\n');
        for (const n of names()) if (n !== 'd/zz.txt') assert.equal(read(copy.dir, n), `${n} v0\n`);
        const done = (await again.events({ taskId })).filter((e) => e.type === 'rollback.done').at(-1)!;
        assert.deepEqual((done.data as { conflicts: string[] }).conflicts, ['d/zz.txt']);
        await again.undoRollback({ taskId });
        assert.equal(read(copy.dir, 'd/zz.txt'), 'saved before the reopen\n');
        for (const n of names()) if (n !== 'd/zz.txt') assert.equal(read(copy.dir, n), `${n} v1\n`);
      } finally {
        await again.close();
      }
    } finally {
      release();
      await stuck;
      copy.cleanup();
    }
  });

  it('a fork keeps a file saved while it restores, and says so', async () => {
    const { before } = await agentRewroteAll();
    onReach('d/zz.txt', 'check', () => write(ws.dir, 'd/zz.txt', 'the person saved this\n'));
    const f = await engine.forkTask({ checkpointId: before });
    assert.deepEqual(f.conflicts, ['d/zz.txt']);
    assert.ok(f.kept.some((k) => k.path === 'd/zz.txt' && /changed on disk/.test(k.reason)));
    assert.equal(read(ws.dir, 'd/zz.txt'), 'the person saved this\n');
    assertAll('v0', ['d/zz.txt']);
  });

  it('a review apply keeps a file saved while it reverts, and reports it', async () => {
    const { taskId } = await agentRewroteAll();
    const edits = ['d/f0001.txt', 'd/zz.txt'].map((p) => ({ path: p, expect: sha256Hex(Buffer.from(`${p} v1\n`)), to: { kind: 'file' as const, content: Buffer.from(`${p} v0\n`) } }));
    onReach('d/zz.txt', 'check', () => write(ws.dir, 'd/zz.txt', 'the person saved this\n'));
    const r = await engine.applyReviewEdits({ taskId, edits, finish: false }, async () => ({ sha: null }));
    assert.deepEqual(r.conflicts.map((c) => c.path), ['d/zz.txt']);
    assert.deepEqual(r.written, ['d/f0001.txt']);
    assert.equal(read(ws.dir, 'd/zz.txt'), 'the person saved this\n');
    assert.equal(read(ws.dir, 'd/f0001.txt'), 'd/f0001.txt v0\n');
    const done = (await engine.events({ taskId })).filter((e) => e.type === 'review.apply_done').at(-1)!;
    assert.match(String((done.data as { note: string | null }).note), /1 file changed while it ran was left as you had it, not reverted: d\/zz\.txt/);
  });
});
