// Records a replay-conformance fixture (test/fixtures/replay/, see its README):
// drives a representative task history through the real engine of the checkout this
// file sits in, and saves the store's database and journal with the events and the
// projections that version produced.
//
//   node --import tsx scripts/replay/record-fixture.ts OUT_DIR LABEL
//
// For an older version, check it out beside this one (git worktree add /tmp/wp-old
// COMMIT), copy node_modules and this file into it, and run it there. It uses only
// engine calls that every released version has.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { Engine } from '../../src/core/engine/engine';
import { EventData, SCHEMA_VERSION } from '../../src/core/model/schema';
import { DB_VERSION } from '../../src/core/store/migrations';
import { dumpProjections } from '../../src/core/store/projections';
import { embeddedStore } from '../../test/support/embedded';

async function main(): Promise<void> {
  const [outArg, label] = process.argv.slice(2);
  if (!outArg || !label) throw new Error('usage: record-fixture.ts OUT_DIR LABEL');
  const out = path.resolve(outArg);
  const ws = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'wp-record-')));
  const write = (rel: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(ws, rel)), { recursive: true });
    fs.writeFileSync(path.join(ws, rel), text);
  };
  write('src/greet.ts', 'export const greet = (n: string) => `hi ${n}`;\n');
  write('README.md', '# sample\n');
  // A fixed clock: timestamps (and so lease expiries) are part of the projections.
  let now = Date.UTC(2026, 10, 30, 9, 0, 0);
  const clock = () => now;
  const tick = (ms = 1_000) => (now += ms);
  const engine = await Engine.open({ workspace: ws, owner: { id: 'recorder' }, store: { clock, exportThresholdBytes: 1 << 30 } });
  try {
    // Task 1: the whole life: plan, steps with a failure and a retry, side effects
    // (done, failed, in doubt), a manual checkpoint, a rollback and its undo, an
    // interruption by an expired lease, a resume, a skipped step, review, completion.
    const plan = [
      { id: 'read', title: 'Read the code' },
      { id: 'edit', title: 'Change greet', dependsOn: ['read'] },
      { id: 'test', title: 'Run the tests', dependsOn: ['edit'] },
      { id: 'docs', title: 'Document it', dependsOn: ['read'] },
    ];
    const t1 = await engine.startTask({ goal: 'Make greet polite', title: 'Polite greet', plan, agent: 'recorder-agent', idempotencyKey: 'job-1', leaseTtlMs: 60_000 });
    const id = t1.taskId;
    tick();
    await engine.startStep({ taskId: id, stepId: 'read', inputs: { files: ['src/greet.ts'] } });
    tick();
    await engine.completeStep({ taskId: id, stepId: 'read', outputs: { lines: 1 }, summary: 'one function' });
    tick();
    await engine.startStep({ taskId: id, stepId: 'edit' });
    write('src/greet.ts', 'export const greet = (n: string) => `hello ${n}`;\n');
    tick();
    await engine.failStep({ taskId: id, stepId: 'edit', error: 'type error in greet.ts', recoverable: true });
    tick(5_000);
    await engine.startStep({ taskId: id, stepId: 'edit' });
    write('src/greet.ts', 'export const greet = (n: string) => `Hello, ${n}!`;\n');
    tick();
    const edited = await engine.completeStep({ taskId: id, stepId: 'edit', outputs: { changed: ['src/greet.ts'] }, summary: 'polite greeting' });
    // The first generation on disk: later events are replayed from the journal.
    await embeddedStore(engine).exportNow();
    tick();
    await engine.startStep({ taskId: id, stepId: 'test' });
    await engine.beginSideEffect({ taskId: id, key: 'npm-test:1', kind: 'shell', description: 'npm test', args: { cmd: 'npm test' } });
    tick();
    await engine.endSideEffect({ taskId: id, key: 'npm-test:1', ok: true, result: { exitCode: 0 } });
    await engine.beginSideEffect({ taskId: id, key: 'publish:docs', kind: 'http', description: 'POST the docs preview' });
    tick();
    await engine.endSideEffect({ taskId: id, key: 'publish:docs', ok: false, error: 'HTTP 503' });
    await engine.beginSideEffect({ taskId: id, key: 'deploy:staging', kind: 'shell', description: 'deploy to staging' });
    write('scratch.txt', 'a file the rollback removes\n');
    tick();
    await engine.checkpoint({ taskId: id, label: 'before the risky part' });
    tick();
    await engine.rollback({ taskId: id, checkpointId: edited.checkpointId, reason: 'scratch file was a mistake' });
    tick();
    await engine.undoRollback({ taskId: id });
    // A second generation: the first becomes waypoint.db.prev (and, from database v3 on,
    // the events before it stay only in the journal's segments).
    await embeddedStore(engine).exportNow();
    // The agent goes away: its lease expires and the sweep interrupts the task mid-step.
    tick(120_000);
    await engine.sweep();
    tick();
    await engine.resumeTask({ taskId: id, owner: { id: 'recorder-2' }, leaseTtlMs: 60_000 });
    tick();
    await engine.startStep({ taskId: id, stepId: 'test', owner: { id: 'recorder-2' } });
    tick();
    await engine.completeStep({ taskId: id, stepId: 'test', outputs: { passed: 12 }, owner: { id: 'recorder-2' } });
    await engine.skipStep({ taskId: id, stepId: 'docs', reason: 'no docs for this', owner: { id: 'recorder-2' } });
    tick();
    await engine.requestReview({ taskId: id, summary: 'greet is polite', owner: { id: 'recorder-2' } });
    tick();
    await engine.completeTask({ taskId: id, summary: 'approved', commit: '0123456789abcdef0123456789abcdef01234567' });
    // From database v6 on: the person undoes the review commit, so the task waits for
    // review again (task.reopened), and a second review completes it with a new commit.
    const reopenTask = (engine as unknown as { reopenTask?: (a: unknown) => Promise<unknown> }).reopenTask;
    if ('task.reopened' in EventData && reopenTask) {
      tick();
      await reopenTask.call(engine, { taskId: id, commit: '0123456789abcdef0123456789abcdef01234567' });
      tick();
      await engine.completeTask({ taskId: id, summary: 'approved again', commit: 'fedcba9876543210fedcba9876543210fedcba98' });
    }
    // A third: the segment only the first generation needed moves to archive/ (database v3 on).
    await embeddedStore(engine).exportNow();
    // Task 2: an unrecoverable failure. Task 3: abandoned. Task 4: suspended. Task 5: deleted.
    const t2 = await engine.startTask({ goal: 'Migrate the database', plan: [{ id: 'm', title: 'Migrate' }] });
    await engine.startStep({ taskId: t2.taskId, stepId: 'm' });
    tick();
    await engine.failStep({ taskId: t2.taskId, stepId: 'm', error: 'schema drift', recoverable: false });
    const t3 = await engine.startTask({ goal: 'Try something' });
    await engine.extendPlan({ taskId: t3.taskId, plan: [{ id: 'x', title: 'Extra step' }] });
    tick();
    await engine.abandonTask({ taskId: t3.taskId, reason: 'not needed' });
    const t4 = await engine.startTask({ goal: 'Long job' });
    await engine.heartbeat({ taskId: t4.taskId });
    tick();
    await engine.suspendTask({ taskId: t4.taskId, reason: 'lunch' });
    const t5 = await engine.startTask({ goal: 'Throwaway' });
    await engine.abandonTask({ taskId: t5.taskId });
    await engine.deleteTask({ taskId: t5.taskId });
    // From database v4 on: content a checkpoint needs is lost from the store and gone
    // from the workspace, and `verify --repair` marks that checkpoint damaged.
    if ('checkpoint.damaged' in EventData && engine.workspaceSnapshots) {
      const t6 = await engine.startTask({ goal: 'Keep notes' });
      write('notes.txt', 'notes only this checkpoint holds\n');
      tick();
      await engine.checkpoint({ taskId: t6.taskId, label: 'with notes' });
      fs.rmSync(path.join(ws, 'notes.txt'));
      await engine.workspaceSnapshots.blobs.deleteMany([createHash('sha256').update('notes only this checkpoint holds\n').digest('hex')]);
      tick();
      await (engine.verify as (a?: unknown) => Promise<unknown>)({ repair: true });
    }
    // From database v5 on: the retry policy is enforced. A step fails on every attempt
    // its plan item allows, the task waits for a person, who grants one more.
    if ('step.attempts_granted' in EventData) {
      const t7 = await engine.startTask({ goal: 'Fetch the rates', plan: [{ id: 'fetch', title: 'Fetch', maxAttempts: 2 } as { id: string; title: string }] });
      for (let i = 0; i < 2; i++) {
        await engine.startStep({ taskId: t7.taskId, stepId: 'fetch' });
        tick();
        await engine.failStep({ taskId: t7.taskId, stepId: 'fetch', error: 'HTTP 503', recoverable: true });
        tick(10_000);
      }
      await (engine as unknown as { grantAttempts(a: unknown): Promise<unknown> }).grantAttempts({ taskId: t7.taskId, stepId: 'fetch', reason: 'the API is back' });
      tick();
      await engine.startStep({ taskId: t7.taskId, stepId: 'fetch' });
    }

    // From database v5 on: a fork of task 1 from the checkpoint at the end of its first
    // step (the workspace restored, the fork's own rollback recorded, its base taken).
    const forkTask = (engine as unknown as { forkTask?: (a: unknown) => Promise<unknown> }).forkTask;
    if (forkTask && engine.workspaceSnapshots) {
      const readEnd = engine.queries.checkpoints(id).find((c) => c.kind === 'step_end' && c.stepId === 'read');
      if (!readEnd) throw new Error('no step_end checkpoint of read to fork from');
      tick();
      await forkTask.call(engine, { checkpointId: readEnd.id, goal: 'Make greet polite, another way', idempotencyKey: 'fork-1' });
    }

    // From database v7 on: a hook-recorded agent's task with tool-call checkpoints around a
    // shell command, a todo-derived plan step and its turn's conversation digest.
    if ('turn.recorded' in EventData) {
      const t8 = await engine.startTask({ goal: 'Regenerate the docs', agent: 'claude-code', plan: [{ id: 'todo-0123456789ab', title: 'Regenerate the docs' }] });
      tick();
      await engine.startStep({ taskId: t8.taskId, stepId: 'todo-0123456789ab' });
      await engine.checkpoint({ taskId: t8.taskId, kind: 'tool_start' as 'manual', label: 'before Bash: make docs' });
      await engine.beginSideEffect({ taskId: t8.taskId, key: 'shell:toolu_01Docs', kind: 'shell', description: 'make docs' });
      tick();
      await engine.endSideEffect({ taskId: t8.taskId, key: 'shell:toolu_01Docs', ok: true, result: { exitCode: 0 } });
      await engine.checkpoint({ taskId: t8.taskId, kind: 'tool_end' as 'manual', label: 'after Bash: make docs' });
      tick();
      await (engine as unknown as { recordTurn(a: unknown): Promise<unknown> }).recordTurn({
        taskId: t8.taskId,
        turn: 1,
        sessionId: 'session-1',
        stepId: 'todo-0123456789ab',
        prompt: 'Regenerate the docs',
        lastMessage: 'The docs are regenerated.',
        tools: { edit: 0, shell: 1, todo: 1, other: 0 },
        compactions: 0,
        startedAt: 0,
      });
    }

    // From database v8 on: terminal commands under a running task (a person's, with the
    // files it changed, and an agent's terminal's that fails), and workspace history
    // recorded while no task runs, over two days, the older one pruned.
    const withCommands = engine as unknown as {
      beginCommand?: (a: unknown) => Promise<unknown>;
      endCommand?: (a: unknown) => Promise<unknown>;
      history?: { record(a: unknown): Promise<unknown>; prune(a: unknown): Promise<unknown> };
    };
    if (withCommands.beginCommand && withCommands.endCommand && withCommands.history && engine.workspaceSnapshots) {
      const t8 = await engine.startTask({ goal: 'Generate the docs', title: 'Docs', plan: [{ id: 'gen', title: 'Generate' }], idempotencyKey: 'job-8', leaseTtlMs: 60_000 });
      await engine.startStep({ taskId: t8.taskId, stepId: 'gen' });
      tick();
      await withCommands.beginCommand.call(engine, { taskId: t8.taskId, commandId: 'term-1', commandLine: 'npm run docs', cwd: ws, terminal: 'bash' });
      write('docs/index.md', '# docs\n');
      write('README.md', '# sample, documented\n');
      tick();
      await withCommands.endCommand.call(engine, { taskId: t8.taskId, commandId: 'term-1', exitCode: 0, dirty: [path.join(ws, 'docs/index.md'), path.join(ws, 'README.md')] });
      tick();
      await withCommands.beginCommand.call(engine, { taskId: t8.taskId, commandId: 'term-2', commandLine: 'npm test', terminal: 'Copilot', agent: 'copilot' });
      tick();
      await withCommands.endCommand.call(engine, { taskId: t8.taskId, commandId: 'term-2', exitCode: 1 });
      await engine.completeStep({ taskId: t8.taskId, stepId: 'gen' });
      await engine.requestReview({ taskId: t8.taskId });
      tick(60_000);
      write('notes.txt', 'unreported\n');
      await withCommands.history.record({ dirty: [path.join(ws, 'notes.txt')], idempotencyKey: 'history-1' });
      tick(86_400_000);
      write('notes.txt', 'unreported, next day\n');
      await withCommands.history.record({ dirty: [path.join(ws, 'notes.txt')], idempotencyKey: 'history-2' });
      await withCommands.history.prune({ maxAgeDays: 0.5 });
    }

    const verify = await engine.verify();
    if (!verify.ok) throw new Error(`this version's own projections differ from a rebuild: ${JSON.stringify(verify.differences)}`);
    const events = (await engine.events());
    const projections = dumpProjections(embeddedStore(engine).db);
    // Leave the store as a crash after the last acknowledged event would: a database
    // generation plus a journal tail it lacks, so replay runs on open.
    await embeddedStore(engine).simulateCrash();
    fs.rmSync(out, { recursive: true, force: true });
    fs.mkdirSync(path.join(out, 'store'), { recursive: true });
    const storeDir = path.join(ws, '.waypoint');
    for (const n of fs.readdirSync(storeDir)) if (/^waypoint\.db(\.prev)?$|^journal-\d+\.wal$/.test(n)) fs.copyFileSync(path.join(storeDir, n), path.join(out, 'store', n));
    if (fs.existsSync(path.join(storeDir, 'archive'))) fs.cpSync(path.join(storeDir, 'archive'), path.join(out, 'store', 'archive'), { recursive: true });
    let commit = 'unknown';
    try {
      commit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: __dirname, encoding: 'utf8' }).trim();
    } catch {
      // not a git checkout
    }
    fs.writeFileSync(
      path.join(out, 'meta.json'),
      JSON.stringify({ label, dbVersion: DB_VERSION, eventVersion: SCHEMA_VERSION, commit, recordedWith: 'scripts/replay/record-fixture.ts', events: events.length }, null, 2) + '\n',
    );
    fs.writeFileSync(path.join(out, 'events.json'), JSON.stringify(events, null, 1) + '\n');
    fs.writeFileSync(path.join(out, 'projections.json'), JSON.stringify(projections, null, 1) + '\n');
    process.stdout.write(`recorded ${events.length} events (db v${DB_VERSION}, events v${SCHEMA_VERSION}, ${commit.slice(0, 7)}) into ${out}\n`);
  } finally {
    if (!embeddedStore(engine).isClosed) await engine.close();
    fs.rmSync(ws, { recursive: true, force: true });
  }
}

main().catch((e) => {
  process.stderr.write(`${(e as Error).stack}\n`);
  process.exit(1);
});
