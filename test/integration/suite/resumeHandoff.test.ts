import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as vscode from 'vscode';
import { activated, eventually, report, type WaypointApi } from './extension';

/**
 * Resume's hand-off as it is offered in code-server (issue 18): no "Open in Chat"
 * where there is no chat to open, and with an agent CLI on PATH a terminal that
 * really runs it with the resume prompt as its first argument, in the workspace.
 */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('resume hand-off: only what works here', function () {
  this.timeout(90_000);
  let api: WaypointApi;
  let root: string;

  before(async () => {
    api = await activated();
    root = vscode.workspace.workspaceFolders![0].uri.fsPath;
    fs.mkdirSync(path.join(root, 'src'), { recursive: true });
    fs.writeFileSync(path.join(root, 'src/handoff.ts'), 'export const h = 1;\n');
  });

  async function interruptedTask(agent: string) {
    const engine = await api.engine();
    const { taskId } = await engine.startTask({ goal: 'Hand me over', agent, plan: [{ id: 'a', title: 'A' }, { id: 'b', title: 'B', dependsOn: ['a'] }], leaseTtlMs: 3_600_000 });
    await engine.startStep({ taskId, stepId: 'a' });
    await engine.completeStep({ taskId, stepId: 'a' });
    // No drift since the last checkpoint, so the flow goes straight to the delivery choice.
    await engine.checkpoint({ taskId, label: 'settled' });
    await engine.interruptTask({ taskId, reason: 'test: the agent went away' });
    return { engine, taskId };
  }

  /** Starts Resume Task and waits until its picker has been offered (the probe holds a new list). */
  async function resumeUntilOffered(taskId: string): Promise<{ run: Thenable<unknown>; offered: readonly string[] }> {
    const before = api.resumeOffered();
    const run = vscode.commands.executeCommand('waypoint.resumeTask', taskId);
    const offered = await eventually(() => (api.resumeOffered() !== before ? api.resumeOffered() : undefined), 'the delivery choice');
    report(`offered: ${offered.join(' | ')}`);
    return { run, offered };
  }

  it('offers no chat in code-server (its chat command is registered, but no model answers there), and Escape changes nothing', async () => {
    const hasChatCommand = (await vscode.commands.getCommands(true)).includes('workbench.action.chat.open');
    const models = await vscode.lm.selectChatModels().then((m) => m.length, () => 0);
    report(`chat command registered: ${hasChatCommand}; chat models: ${models}`);
    const { engine, taskId } = await interruptedTask('demo-agent');
    // This task's events: the window's workspace history may record the folder meanwhile (no task runs), which is not the resume's doing.
    const events = (await engine.events({ taskId })).length;
    const { run, offered } = await resumeUntilOffered(taskId);
    assert.ok(!offered.includes('Open in Chat'), `no chat offered: ${offered.join(', ')}`);
    assert.ok(offered.includes('Copy to Clipboard'));
    await sleep(500); // the picker is up
    await vscode.commands.executeCommand('workbench.action.closeQuickOpen');
    assert.equal(await run, undefined);
    assert.equal(engine.queries.task(taskId).state, 'interrupted');
    assert.equal((await engine.events({ taskId })).length, events, 'no event appended to the task');
    await engine.abandonTask({ taskId });
  });

  it('with `claude` on PATH: choosing it starts a terminal running it with the resume prompt, in the workspace', async () => {
    // Outside the workspace, so neither the script nor its record is drift.
    const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'wp-fake-claude-'));
    const record = path.join(bin, 'argv');
    fs.writeFileSync(
      path.join(bin, 'claude'),
      `#!/bin/sh\n# Records what it was started with (one NUL-terminated argument each) and where.\nfor a in "$@"; do printf '%s\\0' "$a"; done > '${record}.tmp'\npwd > '${record}.cwd'\nmv '${record}.tmp' '${record}'\n`,
      { mode: 0o755 },
    );
    const savedPath = process.env.PATH;
    process.env.PATH = `${bin}${path.delimiter}${savedPath ?? ''}`;
    const { engine, taskId } = await interruptedTask('claude-code');
    try {
      const { run, offered } = await resumeUntilOffered(taskId);
      assert.equal(offered[0], 'Start Claude Code in a Terminal', `the task's own agent is offered first: ${offered.join(', ')}`);
      assert.ok(!offered.includes('Open in Chat'));
      // Enter on the picker's first item (the terminal), as a person would.
      let settled = false;
      void Promise.resolve(run).then(() => (settled = true), () => (settled = true));
      for (let i = 0; i < 30 && !settled; i++) {
        await sleep(300);
        await vscode.commands.executeCommand('workbench.action.acceptSelectedQuickOpenItem');
      }
      const ctx = (await run) as { markdown: string; task: { attempt: number } } | undefined;
      assert.ok(ctx, 'the hand-off was confirmed');
      assert.equal(engine.queries.task(taskId).state, 'running', 'resumed once the terminal was chosen');
      assert.equal(engine.queries.task(taskId).attempt, 2);
      const argv = await eventually(() => (fs.existsSync(record) ? fs.readFileSync(record, 'utf8').split('\0').slice(0, -1) : undefined), 'the fake claude to run');
      assert.deepEqual(argv, [ctx.markdown], 'claude got the resume prompt as its one argument');
      assert.match(argv[0]!, /# Resume task: Hand me over/);
      assert.equal(fs.realpathSync(fs.readFileSync(`${record}.cwd`, 'utf8').trim()), fs.realpathSync(root), 'in the workspace folder');
      const term = vscode.window.terminals.find((t) => t.name.startsWith('Claude Code: '));
      assert.ok(term, `a terminal named for the agent: ${vscode.window.terminals.map((t) => t.name).join(', ')}`);
      term.dispose();
    } finally {
      process.env.PATH = savedPath;
      await engine.abandonTask({ taskId }).catch(() => undefined);
      fs.rmSync(bin, { recursive: true, force: true });
    }
  });
});
