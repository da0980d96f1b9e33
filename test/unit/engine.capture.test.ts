import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Engine } from '../../src/core/engine/engine';
import { historyDay, historyTaskId } from '../../src/core/engine/history';
import { localApi } from '../../src/core/engine/api';
import { FakeClock, openEngine, tmpDir } from '../support/tmp';

/**
 * Capture without an agent's help (issue 17, items 2 and 6), engine side: terminal
 * commands bracketed by checkpoints and owned by whoever ran them, and the always-on
 * workspace history with its retention.
 */
describe('terminal commands and workspace history', () => {
  let ws: { dir: string; cleanup: () => void };
  let engine: Engine;
  let clock: FakeClock;
  const write = (rel: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(ws.dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(ws.dir, rel), text);
  };
  const read = (rel: string) => fs.readFileSync(path.join(ws.dir, rel), 'utf8');
  const abs = (rel: string) => path.join(ws.dir, rel);

  beforeEach(async () => {
    ws = tmpDir();
    clock = new FakeClock(new Date(2026, 11, 1, 10, 0, 0).getTime());
    write('a.txt', 'a0\n');
    write('b.txt', 'b0\n');
    write('mine.txt', 'm0\n');
    engine = await openEngine(ws.dir, { clock });
  });
  afterEach(async () => {
    await engine.close();
    ws.cleanup();
  });

  it('records a command with its exit code and the files it changed, created and deleted', async () => {
    const { taskId } = await engine.startTask({ goal: 'g', plan: [{ id: 's1', title: 'step' }] });
    clock.advance(1000);
    const begun = await engine.beginCommand({ taskId, commandId: 'cmd-1', commandLine: "sed -i s/b0/b1/ b.txt && touch gen.txt && rm a.txt", cwd: ws.dir, terminal: 'bash' });
    assert.equal(begun.owner, 'terminal');
    assert.ok(begun.checkpointId);
    write('b.txt', 'b1\n');
    write('gen.txt', 'generated\n');
    fs.rmSync(abs('a.txt'));
    clock.advance(1000);
    const end = await engine.endCommand({ taskId, commandId: 'cmd-1', exitCode: 3, dirty: [abs('b.txt'), abs('gen.txt'), abs('a.txt')] });
    assert.deepEqual({ changed: end.changed, created: end.created, deleted: end.deleted, total: end.filesTotal, exit: end.exitCode }, { changed: ['b.txt'], created: ['gen.txt'], deleted: ['a.txt'], total: 3, exit: 3 });
    const [cmd] = engine.queries.commands(taskId);
    assert.equal(cmd.exitCode, 3);
    assert.equal(cmd.commandLine, "sed -i s/b0/b1/ b.txt && touch gen.txt && rm a.txt");
    assert.equal(cmd.afterCheckpointId, end.checkpointId);
    const kinds = engine.queries.checkpoints(taskId).map((c) => c.kind);
    assert.deepEqual(kinds, ['task_base', 'command_start', 'command_end']);
    // A second end, an unknown command and a duplicate start are refused and change nothing.
    await assert.rejects(engine.endCommand({ taskId, commandId: 'cmd-1', exitCode: 0, idempotencyKey: 'again' }), /already ended/);
    await assert.rejects(engine.endCommand({ taskId, commandId: 'nope', exitCode: 0 }), /no command 'nope'/);
    await assert.rejects(engine.beginCommand({ taskId, commandId: 'cmd-1', commandLine: 'x', terminal: 'bash', idempotencyKey: 'dup' }), /already has a command/);
    // The id's shape is the schema's, checked at the door every caller passes.
    await assert.rejects(localApi(engine).beginCommand({ taskId, commandId: 'has space', commandLine: 'x', terminal: 'bash' }), /printable ASCII/);
    assert.equal(engine.queries.commands(taskId).length, 1);
  });

  it("a person's terminal command inside a step is the person's; an agent's terminal is the agent's (agent-only rollback and drift)", async () => {
    const { taskId, baseCheckpointId } = await engine.startTask({ goal: 'g', plan: [{ id: 's1', title: 'step' }] });
    await engine.startStep({ taskId, stepId: 's1' });
    clock.advance(1000);
    // The agent's own terminal (e.g. Copilot's run_in_terminal) changes a.txt.
    await engine.beginCommand({ taskId, commandId: 'agent-1', commandLine: 'echo a1 > a.txt', terminal: 'Copilot', agent: 'copilot' });
    write('a.txt', 'a1\n');
    clock.advance(1000);
    await engine.endCommand({ taskId, commandId: 'agent-1', exitCode: 0, dirty: [abs('a.txt')] });
    // The person types a command in their terminal while the step is still open.
    clock.advance(1000);
    await engine.beginCommand({ taskId, commandId: 'me-1', commandLine: 'echo m1 > mine.txt', terminal: 'bash' });
    write('mine.txt', 'm1\n');
    clock.advance(1000);
    await engine.endCommand({ taskId, commandId: 'me-1', exitCode: 0, dirty: [abs('mine.txt')] });
    await engine.completeStep({ taskId, stepId: 's1' });

    const owners = await engine.changesByOwner(taskId, baseCheckpointId);
    assert.deepEqual([...owners.agent].sort(), ['a.txt']);
    assert.deepEqual([...owners.person].sort(), ['mine.txt']);
    const r = await engine.rollback({ taskId, checkpointId: baseCheckpointId, mode: 'agent-only' });
    assert.deepEqual(r.changes.map((c) => c.path), ['a.txt']);
    assert.equal(read('a.txt'), 'a0\n');
    assert.equal(read('mine.txt'), 'm1\n');
  });

  it('refuses a command under a task that is not running', async () => {
    const { taskId } = await engine.startTask({ goal: 'g' });
    await engine.abandonTask({ taskId });
    await assert.rejects(engine.beginCommand({ taskId, commandId: 'c', commandLine: 'ls', terminal: 'bash' }), /only under a running task/);
  });

  it('records file changes with no task running into a daily history record that lists, counts and alerts never see, and rolls back', async () => {
    const { taskId } = await engine.startTask({ goal: 'earlier task' });
    await engine.requestReview({ taskId });
    clock.advance(60_000);
    write('a.txt', 'a-unreported\n');
    const r1 = await engine.history.record({ dirty: [abs('a.txt')] });
    const day = historyTaskId(historyDay(clock.now()));
    assert.equal(r1.taskId, day);
    assert.equal(r1.newDay, true);
    assert.equal(r1.filesChanged, 1);
    clock.advance(60_000);
    write('b.txt', 'b-unreported\n');
    const r2 = await engine.history.record({ dirty: [abs('b.txt')] });
    assert.equal(r2.taskId, day);
    assert.equal(r2.newDay, false);
    // Nothing changed: nothing recorded.
    const r3 = await engine.history.record({ dirty: [] });
    assert.equal(r3.checkpointId, null);

    assert.deepEqual(engine.tasks().map((t) => t.id), [taskId], 'history is not a task in lists');
    // Its lease runs out, but the sweep never interrupts it (no alert, no attention).
    clock.advance(3 * 86_400_000);
    assert.deepEqual(await engine.sweep(), []);
    assert.equal(engine.task(day).state, 'running');
    clock.advance(-3 * 86_400_000);
    assert.equal((await engine.stats()).totals.tasks, 1);
    const api = localApi(engine);
    const fp = await api.history();
    assert.equal(fp.days.length, 1);
    assert.equal(fp.days[0].checkpoints, 3, 'base, two bursts');
    assert.ok(fp.bytes > 0);

    // The base is the workspace as last recorded, before the first burst: rolling back to it undoes both.
    const base = engine.queries.checkpoints(day)[0];
    assert.equal(base.kind, 'task_base');
    const rb = await engine.rollback({ taskId: day, checkpointId: base.id });
    assert.deepEqual(rb.changes.map((c) => c.path).sort(), ['a.txt', 'b.txt']);
    assert.equal(read('a.txt'), 'a0\n');
    assert.equal(read('b.txt'), 'b0\n');
    await engine.undoRollback({ taskId: day });
    assert.equal(read('a.txt'), 'a-unreported\n');
  });

  it('prunes whole days of history by age and by bytes, never today, and frees their blobs', async () => {
    await engine.startTask({ goal: 'base' });
    const days: string[] = [];
    for (let i = 0; i < 3; i++) {
      write(`day${i}.bin`, `${'x'.repeat(20_000)}${i}`);
      const r = await engine.history.record({ dirty: [abs(`day${i}.bin`)] });
      days.push(r.taskId);
      clock.advance(86_400_000);
    }
    write('today.txt', 'now');
    const today = (await engine.history.record({ dirty: [abs('today.txt')] })).taskId;
    assert.equal(new Set([...days, today]).size, 4);
    const byAge = await engine.history.prune({ maxAgeDays: 2.5 });
    assert.deepEqual(byAge.dropped.map((d) => d.taskId), [days[0]]);
    assert.equal(engine.queries.findTask(days[0]), null);
    const byBytes = await engine.history.prune({ maxBytes: 0 });
    assert.deepEqual(byBytes.dropped.map((d) => d.taskId), [days[1], days[2]]);
    assert.deepEqual(engine.history.footprint().days.map((d) => d.taskId), [today]);
    await assert.rejects(localApi(engine).pruneHistory({ maxBytes: -1 }), /must not be negative/);
    const v = await engine.verify();
    assert.equal(v.ok, true);
  });
});
