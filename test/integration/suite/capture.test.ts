import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import * as vscode from 'vscode';
import { activated, eventually, type WaypointApi } from './extension';

/**
 * Capture without an agent's help (issue 17, items 2 and 6) in a real VS Code: a
 * command typed in a terminal with shell integration (bash, VS Code's own injection)
 * shows under the running task with its exit code and the files it changed, and is
 * the person's; with no task running an edit goes into Workspace history and rolls back.
 */
describe('capture: terminal commands and workspace history', function () {
  this.timeout(90_000);
  let api: WaypointApi;
  let root: string;
  const file = (rel: string) => path.join(root, rel);

  before(async () => {
    api = await activated();
    root = vscode.workspace.workspaceFolders![0].uri.fsPath;
  });

  /** Nothing else may be running: the watcher gives file activity to the newest running task. */
  async function stopRunningTasks(): Promise<void> {
    const engine = await api.engine();
    for (const t of engine.tasks({ states: ['running', 'waiting_tool'] })) await engine.abandonTask({ taskId: t.id });
  }

  /** A running task with a running step, and a bash terminal with VS Code's shell integration in it. */
  async function taskWithTerminal(goal: string): Promise<{ taskId: string; terminal: vscode.Terminal; run: (line: string, atEnd?: () => void) => Promise<number | undefined> }> {
    await stopRunningTasks();
    const engine = await api.engine();
    // Let the watcher report the fixture's writes and record them before the task (no task runs yet: into history).
    // A path still unrecorded when a command starts and written by it at once can land in its before state.
    await new Promise((r) => setTimeout(r, 1500));
    await api.flushAutoCheckpoint();
    const { taskId } = await engine.startTask({ goal, plan: [{ id: 'build', title: 'Build it' }], leaseTtlMs: 3_600_000 });
    await engine.startStep({ taskId, stepId: 'build' });
    const terminal = vscode.window.createTerminal({ name: 'capture-bash', shellPath: '/bin/bash', cwd: root, env: { PS1: '$ ' } });
    const shell = await eventually(() => terminal.shellIntegration, 'shell integration in the bash terminal (VS Code injects it into bash)', 30_000).catch(async (e: unknown) => {
      terminal.dispose();
      await engine.abandonTask({ taskId }).catch(() => undefined);
      throw e;
    });
    const run = (line: string, atEnd?: () => void) =>
      new Promise<number | undefined>((resolve) => {
        const d = vscode.window.onDidEndTerminalShellExecution((e) => {
          if (e.terminal !== terminal) return;
          d.dispose();
          atEnd?.();
          resolve(e.exitCode);
        });
        shell.executeCommand(line);
      });
    return { taskId, terminal, run };
  }

  it('a terminal command shows under the running task with its exit code and the files it changed, created and deleted', async () => {
    const engine = await api.engine();
    fs.writeFileSync(file('cmd-edit.txt'), 'v1\n');
    fs.writeFileSync(file('cmd-gone.txt'), 'bye\n');
    const { taskId, terminal, run } = await taskWithTerminal('Terminal capture');
    try {
      assert.equal(await run(`printf 'made\\n' > cmd-made.txt; printf 'v2\\n' > cmd-edit.txt; rm -f cmd-gone.txt; sh -c 'exit 3'`), 3, 'the shell reports the exit code');
      await api.commandsSettled();
      const cmd = await eventually(() => engine.queries.commands(taskId).find((c) => c.endedAt !== null), 'the command recorded with its end');
      assert.equal(cmd.exitCode, 3);
      assert.equal(cmd.owner, 'terminal', 'a terminal the person uses is theirs');
      assert.equal(cmd.stepId, 'build');
      assert.deepEqual({ changed: cmd.changed, created: cmd.created, deleted: cmd.deleted }, { changed: ['cmd-edit.txt'], created: ['cmd-made.txt'], deleted: ['cmd-gone.txt'] });

      const rows = await eventually(async () => {
        const r = await api.treeRows(`step:${taskId}:build`);
        return r.some((x) => x.id.startsWith('command:')) ? r : undefined;
      }, 'the command under its step');
      const row = rows.find((x) => x.id.startsWith('command:'))!;
      assert.match(row.label, /^printf 'made/);
      assert.equal(row.description, 'exit 3 → 3 files changed');
      assert.equal(row.contextValue, 'command:terminal');
      const files = await api.treeRows(row.id);
      assert.deepEqual(files.map((f) => [f.label, f.description]), [['cmd-edit.txt', 'changed'], ['cmd-gone.txt', 'deleted'], ['cmd-made.txt', 'created']]);

      // The person's command is kept by an agent-only rollback: nothing of it is the agent's.
      const task = engine.task(taskId);
      const owners = await engine.changesByOwner(taskId, task.baseCheckpointId!);
      for (const p of ['cmd-edit.txt', 'cmd-made.txt', 'cmd-gone.txt']) {
        assert.ok(owners.person.has(p) && !owners.agent.has(p), `${p} is the person's`);
      }
    } finally {
      terminal.dispose();
      await engine.abandonTask({ taskId }).catch(() => undefined);
    }
  });

  it('a command still gets its files when the watcher reports them seconds after its end (its process stalled)', async () => {
    const engine = await api.engine();
    fs.mkdirSync(file('late'));
    fs.writeFileSync(file('late/edit.txt'), 'v1\n');
    const { taskId, terminal, run } = await taskWithTerminal('Terminal capture, watcher behind');
    // The command first writes 8,000 files into the store's folder, whose events Waypoint
    // ignores but which the watcher hands on first, a few hundred at a time, so the
    // command's own two writes are still on their way when the shell reports its end.
    // Then, as on a loaded machine, the process that watches and relays stalls for 2 s
    // (code-server's server, this extension host's parent): the events come after that,
    // well past any fixed wait. This host and its store keep running meanwhile.
    const flood = path.join(root, '.waypoint', 'flood');
    fs.mkdirSync(flood);
    const server = process.ppid;
    const stall = () => {
      process.kill(server, 'SIGSTOP');
      // Resumed by a process of its own as well, should this host fail before its timer runs.
      spawn('sh', ['-c', `sleep 3; kill -CONT ${server}`], { detached: true, stdio: 'ignore' }).unref();
      setTimeout(() => process.kill(server, 'SIGCONT'), 2000);
    };
    try {
      assert.equal(await run(`seq -f .waypoint/flood/f%g 1 8000 | xargs touch && printf 'late\\n' > late/made.txt && printf 'v2\\n' > late/edit.txt`, stall), 0);
      await api.commandsSettled();
      const cmd = await eventually(() => engine.queries.commands(taskId).find((c) => c.endedAt !== null), 'the command recorded with its end');
      assert.deepEqual({ changed: cmd.changed, created: cmd.created, deleted: cmd.deleted }, { changed: ['late/edit.txt'], created: ['late/made.txt'], deleted: [] });
    } finally {
      process.kill(server, 'SIGCONT');
      terminal.dispose();
      await engine.abandonTask({ taskId }).catch(() => undefined);
      fs.rmSync(flood, { recursive: true, force: true });
    }
  });

  it('with no task running, an edit shows up in Workspace history and can be rolled back', async () => {
    await stopRunningTasks();
    const engine = await api.engine();
    // Whatever earlier suites left unrecorded goes in first, so the edit below is a checkpoint of its own.
    await api.flushAutoCheckpoint();
    fs.writeFileSync(file('history-note.txt'), 'before\n');
    /** The newest history checkpoint, once it holds history-note.txt as `text`. */
    const recorded = (text: string) =>
      eventually(async () => {
        await api.flushAutoCheckpoint();
        const day = engine.history.footprint().days[0];
        if (!day) return undefined;
        const cps = engine.queries.checkpoints(day.taskId);
        const last = cps[cps.length - 1];
        const bytes = last ? await engine.workspaceSnapshots!.fileAt(last, 'history-note.txt') : null;
        return bytes?.toString('utf8') === text ? { day, cps, last } : undefined;
      }, `a history checkpoint holding ${JSON.stringify(text)}`);
    const first = await recorded('before\n');
    fs.writeFileSync(file('history-note.txt'), 'changed by an agent that reports nothing\n');
    const second = await recorded('changed by an agent that reports nothing\n');
    const day = second.day;
    const after = second.cps;
    assert.notEqual(first.last.id, second.last.id);
    const target = first.last;
    assert.ok(engine.tasks().every((t) => t.kind === 'task'), 'history is not listed as a task');

    const root = await eventually(async () => (await api.treeRows()).find((r) => r.id === 'history'), 'the Workspace history row');
    assert.equal(root.label, 'Workspace history');
    assert.match(root.description, /^\d+ days? · \d+ checkpoints? · [\d.]+ (B|KB|MB)$/, 'the footprint');
    const days = await api.treeRows('history');
    assert.ok(days.some((d) => d.id === `history:${day.taskId}` && /^Today/.test(d.label)), 'today’s row');
    const cps = await api.treeRows(`history:${day.taskId}`);
    assert.equal(cps.length, after.length, 'each checkpoint of the day');
    assert.match(cps[0].contextValue, /^checkpoint:auto:restorable:history$/, 'restorable, not forkable');

    await vscode.commands.executeCommand('waypoint.rollback', { taskId: day.taskId, checkpointId: target.id, paths: ['history-note.txt'], confirmed: true });
    assert.equal(fs.readFileSync(file('history-note.txt'), 'utf8'), 'before\n');
  });
});
