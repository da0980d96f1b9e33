import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Engine } from '../../src/core/engine/engine';
import { localApi } from '../../src/core/engine/api';
import { forkInheritance } from '../../src/core/engine/forkInheritance';
import { main } from '../../src/cli/main';
import { openEngine, tmpDir } from '../support/tmp';

/**
 * Fork from any checkpoint (issue 19, item 5), on a real store on disk and real files:
 * the workspace goes to the checkpoint (undoably), the new task records where it came
 * from, the original task's events and projection are exactly as before, and the
 * resume context says what the fork inherits.
 */

function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      if (e.name === '.waypoint') continue;
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out[path.relative(dir, p)] = fs.readFileSync(p, 'utf8');
    }
  };
  walk(dir);
  return out;
}

function write(dir: string, rel: string, text: string): void {
  fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
  fs.writeFileSync(path.join(dir, rel), text);
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

/** Everything recorded about a task: its events and its projection rows. */
function snapshotOf(engine: Engine, taskId: string): string {
  return JSON.stringify({ events: engine.events({ taskId }), detail: engine.taskDetail(taskId) });
}

describe('engine: fork a task from a checkpoint', function () {
  this.timeout(60_000);
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine;
  beforeEach(async () => {
    ws = tmpDir('wp-fork-');
    write(ws.dir, 'src/a.ts', 'export const a = 1;\n');
    write(ws.dir, 'src/b.ts', 'export const b = 2;\n');
    engine = await openEngine(ws.dir);
  });
  afterEach(async () => {
    await engine.close();
    ws.cleanup();
  });

  /** A three-step task: `read` done, `edit` done, `test` failed; returns the checkpoint at the end of `read`. */
  async function original() {
    const plan = [
      { id: 'read', title: 'Read the code' },
      { id: 'edit', title: 'Change a', dependsOn: ['read'] },
      { id: 'test', title: 'Run the tests', dependsOn: ['edit'] },
    ];
    const { taskId } = await engine.startTask({ goal: 'Make a bigger', plan, agent: 'agent-x' });
    await engine.startStep({ taskId, stepId: 'read' });
    write(ws.dir, 'notes.md', 'a is small\n');
    const read = await engine.completeStep({ taskId, stepId: 'read', outputs: { found: 'a = 1' }, summary: 'a is one' });
    const atRead = tree(ws.dir);
    await engine.startStep({ taskId, stepId: 'edit' });
    write(ws.dir, 'src/a.ts', 'export const a = 100;\n');
    fs.rmSync(path.join(ws.dir, 'src/b.ts'));
    await engine.completeStep({ taskId, stepId: 'edit', outputs: { a: 100 } });
    await engine.startStep({ taskId, stepId: 'test' });
    await engine.failStep({ taskId, stepId: 'test', error: 'tests fail', recoverable: true });
    return { taskId, checkpointId: read.checkpointId, atRead, after: tree(ws.dir) };
  }

  it('moves the workspace to the checkpoint, links the new task, leaves the original untouched, and undo brings the workspace back', async () => {
    const o = await original();
    const before = snapshotOf(engine, o.taskId);
    const preview = await engine.forkTask({ checkpointId: o.checkpointId, preview: true });
    assert.equal(preview.taskId, null);
    assert.deepEqual(
      preview.changes.map((c) => `${c.action} ${c.path}`),
      ['modify src/a.ts', 'create src/b.ts'],
    );
    assert.deepEqual(tree(ws.dir), o.after, 'a preview writes nothing');

    const r = await engine.forkTask({ checkpointId: o.checkpointId, goal: 'Make a bigger, differently' });
    assert.ok(r.taskId);
    assert.deepEqual(tree(ws.dir), o.atRead, 'the workspace is the checkpoint');
    assert.equal(r.filesWritten, 2);
    assert.deepEqual(r.inherited, ['read']);
    assert.deepEqual(r.leftBehind, ['edit', 'test']);
    assert.deepEqual(r.plan, ['edit', 'test']);

    const fork = engine.taskDetail(r.taskId);
    assert.deepEqual(fork.task.forkedFrom, { taskId: o.taskId, checkpointId: o.checkpointId, stepId: 'read' });
    assert.equal(fork.task.goal, 'Make a bigger, differently');
    assert.equal(fork.task.agent, 'agent-x', 'the agent carries over');
    assert.equal(fork.task.state, 'running');
    // Its plan: the steps not finished by the checkpoint; the dependency on the inherited step is met.
    assert.deepEqual(
      fork.steps.map((s) => [s.id, s.status, s.dependsOn]),
      [
        ['edit', 'pending', []],
        ['test', 'pending', ['edit']],
      ],
    );
    // The base holds the checkpoint's state and branches from it.
    const baseCp = fork.checkpoints.find((c) => c.id === fork.task.baseCheckpointId)!;
    assert.equal(baseCp.kind, 'task_base');
    assert.equal(baseCp.parentId, o.checkpointId);
    assert.deepEqual((await engine.diff({ from: o.checkpointId, to: baseCp.id })).changes, [], 'the base equals the forked checkpoint');
    assert.ok(fork.checkpoints.some((c) => c.kind === 'pre_rollback' && c.id === r.preRollbackCheckpointId));

    assert.equal(snapshotOf(engine, o.taskId), before, 'no event or projection row of the original changed');

    // Undo: the workspace as it was before the fork; the original still untouched.
    await engine.undoRollback({ taskId: r.taskId });
    assert.deepEqual(tree(ws.dir), o.after, 'undo brings the workspace back');
    assert.equal(snapshotOf(engine, o.taskId), before);

    // A rebuild from the events gives the same projections (the fold of forked_from included).
    await engine.rebuild();
    assert.deepEqual(engine.task(r.taskId).forkedFrom, fork.task.forkedFrom);
    assert.equal((await engine.verify()).ok, true);
  });

  it('the resume context lists what the fork inherits and what it left behind (JSON and Markdown)', async () => {
    const o = await original();
    const r = await engine.forkTask({ checkpointId: o.checkpointId });
    const ctx = await engine.resumeContext(r.taskId!);
    assert.ok(ctx.forkedFrom?.inheritance);
    const inh = ctx.forkedFrom.inheritance;
    assert.equal(inh.original.goal, 'Make a bigger');
    assert.deepEqual(inh.inherited, [{ id: 'read', title: 'Read the code', status: 'completed', outputs: { found: 'a = 1' }, summary: 'a is one' }]);
    assert.deepEqual(
      inh.leftBehind.map((s) => [s.id, s.statusAtCheckpoint, s.statusNow]),
      [
        ['edit', 'pending', 'completed'],
        ['test', 'pending', 'failed'],
      ],
    );
    assert.equal(ctx.task.goal, 'Make a bigger', 'without --goal the fork keeps the original goal');
    assert.deepEqual(
      ctx.nextSteps.map((s) => s.id),
      ['edit'],
    );
    assert.match(ctx.markdown, /## Forked from/);
    assert.match(ctx.markdown, /\*\*Original goal:\*\* Make a bigger/);
    assert.match(ctx.markdown, /`read` Read the code — completed\n {2}- summary: a is one\n {2}- outputs: \{"found":"a = 1"\}/);
    assert.match(ctx.markdown, /Left behind[^\n]*\n- `edit` Change a — pending at the checkpoint, completed in the original now/);

    // The original deleted later: its events remain, so the fork still knows what it inherited.
    await engine.abandonTask({ taskId: o.taskId });
    await engine.deleteTask({ taskId: o.taskId });
    const again = await engine.resumeContext(r.taskId!);
    assert.deepEqual(again.forkedFrom?.inheritance?.inherited.map((s) => s.id), ['read']);
  });

  it('a fork from a checkpoint taken after a rollback of the original inherits what was finished then, not what the projection shows now', async () => {
    const o = await original();
    const later = (await engine.checkpoint({ taskId: o.taskId, label: 'after edit' })).checkpointId;
    await engine.rollback({ taskId: o.taskId, checkpointId: o.checkpointId }); // abandons edit and test in the original
    assert.equal(engine.queries.step(o.taskId, 'edit')!.status, 'abandoned');
    const r = await engine.forkTask({ checkpointId: later, preview: true });
    assert.deepEqual(r.inherited, ['read', 'edit']);
    assert.deepEqual(r.leftBehind, ['test']);
  });

  it('refuses bad input with a clear error and changes nothing', async () => {
    const o = await original();
    const seq = () => engine.eventLog.lastSeq;
    const files = tree(ws.dir);
    const n = seq();
    await assert.rejects(engine.forkTask({ checkpointId: 'c_nope' }), /Unknown checkpoint 'c_nope'/);
    await assert.rejects(localApi(engine).forkTask({ checkpointId: '../etc' }), /Invalid task fork: checkpointId: is not a checkpoint id/);
    await assert.rejects(localApi(engine).forkTask({ checkpointId: o.checkpointId, goal: '' }), /goal: must not be empty/);
    await assert.rejects(engine.forkTask({ checkpointId: o.checkpointId, plan: [{ id: 'x', title: 'X', dependsOn: ['nope'] }] }), /depends on unknown step 'nope'/);
    await assert.rejects(localApi(engine).forkTask({ checkpointId: o.checkpointId, extra: 1 } as never), /Unrecognized key/);
    assert.equal(seq(), n, 'nothing recorded');
    assert.deepEqual(tree(ws.dir), files, 'nothing written');

    // A checkpoint of a deleted task.
    const other = await engine.startTask({ goal: 'doomed' });
    await engine.abandonTask({ taskId: other.taskId });
    await engine.deleteTask({ taskId: other.taskId });
    const m = seq();
    await assert.rejects(engine.forkTask({ checkpointId: other.baseCheckpointId }), new RegExp(`belonged to task ${other.taskId}, which was deleted`));
    assert.equal(seq(), m);
    assert.deepEqual(tree(ws.dir), files);
  });

  it('refuses a damaged checkpoint (objects lost, marked by verify --repair) and one whose manifest is gone (unmarked), changing nothing', async () => {
    const o = await original();
    await engine.close();
    // Lose every object: the checkpoints' manifests and contents.
    fs.rmSync(path.join(ws.dir, '.waypoint', 'objects'), { recursive: true, force: true });
    engine = await openEngine(ws.dir);
    const files = tree(ws.dir);
    const n = engine.eventLog.lastSeq;
    await assert.rejects(engine.forkTask({ checkpointId: o.checkpointId }), (e: Error) => /corrupt|missing|lost|not found|ENOENT/i.test(e.message));
    assert.equal(engine.eventLog.lastSeq, n, 'an unmarked damaged checkpoint: nothing recorded');
    assert.deepEqual(tree(ws.dir), files);
    await engine.verify({ repair: true });
    const m = engine.eventLog.lastSeq;
    await assert.rejects(engine.forkTask({ checkpointId: o.checkpointId }), new RegExp(`Checkpoint ${o.checkpointId} is damaged`));
    assert.equal(engine.eventLog.lastSeq, m);
    assert.deepEqual(tree(ws.dir), files);
  });

  it('is idempotent by key: a repeat returns the same fork and writes nothing more', async () => {
    const o = await original();
    const a = await engine.forkTask({ checkpointId: o.checkpointId, idempotencyKey: 'fork-1' });
    const n = engine.eventLog.lastSeq;
    const b = await engine.forkTask({ checkpointId: o.checkpointId, idempotencyKey: 'fork-1' });
    assert.equal(b.taskId, a.taskId);
    assert.equal(engine.eventLog.lastSeq, n);
    assert.equal(engine.tasks().length, 2);
  });

  it('a fork stopped after its plan was durable (a crash before any file changed) is finished on the next open, base included', async () => {
    const o = await original();
    const snaps = engine.workspaceSnapshots!;
    // Freeze the fork at the instant a crash would hit: the task, the before state and the plan are durable, no file written.
    let frozen!: () => void;
    let release!: () => void;
    const atApply = new Promise<void>((resolve) => (frozen = resolve));
    const realApply = snaps.apply.bind(snaps);
    snaps.apply = (() => {
      frozen();
      return new Promise((_resolve, reject) => (release = () => reject(new Error('test: the frozen fork is let go'))));
    }) as typeof snaps.apply;
    const stuck = engine.forkTask({ checkpointId: o.checkpointId, idempotencyKey: 'crashy' }).catch((e: Error) => e);
    await atApply;
    // What the disk holds at that instant, as a fresh process would find it (the lock's owner gone).
    const copy = tmpDir('wp-fork-crash-');
    try {
      fs.cpSync(ws.dir, copy.dir, { recursive: true });
      for (const n of fs.readdirSync(path.join(copy.dir, '.waypoint'))) if (/lock/.test(n)) fs.rmSync(path.join(copy.dir, '.waypoint', n), { force: true });
      assert.deepEqual(tree(copy.dir), o.after, 'no file changed before the crash');
      const again = await openEngine(copy.dir);
      try {
        assert.equal(again.recoveryNotes.length, 1, 'the interrupted restore was finished on open');
        assert.deepEqual(tree(copy.dir), o.atRead);
        const fork = again.tasks().find((t) => t.forkedFrom)!;
        assert.ok(fork.baseCheckpointId, 'the fork got its base');
        assert.equal(again.queries.checkpoint(fork.baseCheckpointId)!.parentId, o.checkpointId);
        const repeat = await again.forkTask({ checkpointId: o.checkpointId, idempotencyKey: 'crashy' });
        assert.equal(repeat.taskId, fork.id, 'the repeated call finds the fork it made, not a second one');
        assert.equal(again.tasks().length, 2);
        await again.undoRollback({ taskId: fork.id });
        assert.deepEqual(tree(copy.dir), o.after);
      } finally {
        await again.close();
      }
    } finally {
      copy.cleanup();
      // Let this engine's frozen fork go (it records the stop as a failed restore), so it closes.
      release();
      snaps.apply = realApply;
      assert.match(String(await stuck), /stopped part-way \(test: the frozen fork is let go\)/);
    }
  });

  it('forkInheritance: null when the events hold no record of the checkpoint', () => {
    assert.equal(forkInheritance([], 'c_x'), null);
  });
});

describe('cli: waypoint fork', function () {
  this.timeout(60_000);

  it('forks end to end with --json, prints a readable summary, refuses an unknown checkpoint with exit 1, and a missing --checkpoint with exit 2', async () => {
    const t = tmpDir('wp-fork-cli-');
    try {
      write(t.dir, 'a.txt', 'one\n');
      let taskId: string;
      let cp: string;
      const e = await openEngine(t.dir);
      try {
        taskId = (await e.startTask({ goal: 'change a', plan: [{ id: 's1', title: 'first' }, { id: 's2', title: 'second', dependsOn: ['s1'] }] })).taskId;
        await e.startStep({ taskId, stepId: 's1' });
        write(t.dir, 'a.txt', 'two\n');
        cp = (await e.completeStep({ taskId, stepId: 's1' })).checkpointId;
        await e.startStep({ taskId, stepId: 's2' });
        write(t.dir, 'a.txt', 'three\n');
        await e.completeStep({ taskId, stepId: 's2' });
      } finally {
        await e.close();
      }
      const preview = await cli(['fork', '--checkpoint', cp, '--preview', '--workspace', t.dir]);
      assert.equal(preview.code, 0, preview.stderr);
      assert.match(preview.stdout, /would change 1 file:\n {2}modify {2}a\.txt/);
      assert.equal(fs.readFileSync(path.join(t.dir, 'a.txt'), 'utf8'), 'three\n');

      const r = await cli(['fork', '--checkpoint', cp, '--goal', 'try again', '--yes', '--json', '--workspace', t.dir]);
      assert.equal(r.code, 0, r.stderr);
      const doc = JSON.parse(r.stdout) as { taskId: string; forkedFrom: { taskId: string; checkpointId: string; stepId: string }; inherited: string[]; plan: string[] };
      assert.deepEqual(doc.forkedFrom, { taskId, checkpointId: cp, stepId: 's1' });
      assert.deepEqual(doc.inherited, ['s1']);
      assert.deepEqual(doc.plan, ['s2']);
      assert.equal(fs.readFileSync(path.join(t.dir, 'a.txt'), 'utf8'), 'two\n');

      const show = await cli(['show', '--task', doc.taskId, '--workspace', t.dir]);
      assert.match(show.stdout, new RegExp(`forked from task ${taskId} at checkpoint ${cp} \\(step s1\\)`));

      const human = await cli(['fork', '--checkpoint', cp, '--yes', '--workspace', t.dir]);
      assert.equal(human.code, 0, human.stderr);
      assert.match(human.stdout, /^Started task t_\S+, forked from task/);
      assert.match(human.stdout, /Undo the workspace change with: waypoint rollback --task t_\S+ --undo/);

      const bad = await cli(['fork', '--checkpoint', 'c_missing', '--json', '--workspace', t.dir]);
      assert.equal(bad.code, 1);
      assert.match(bad.stdout + bad.stderr, /Unknown checkpoint 'c_missing'/);
      const usage = await cli(['fork', '--workspace', t.dir]);
      assert.equal(usage.code, 2);
      assert.match(usage.stderr, /Missing --checkpoint/);
    } finally {
      t.cleanup();
    }
  });
});
