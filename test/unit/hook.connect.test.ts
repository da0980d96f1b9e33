import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { applyConnect, planConnect, type AgentKind } from '../../src/mcp/connect';
import { tmpDir } from '../support/tmp';

/** `waypoint connect <agent>` for the agents whose hooks the recorder reads (Claude Code's is in mcp.connect.test.ts). */
describe('connect: each agent’s hook configuration', () => {
  let ws: ReturnType<typeof tmpDir>;
  beforeEach(() => (ws = tmpDir('wp-hook-connect-')));
  afterEach(() => ws.cleanup());
  const launch = () => ({ cli: path.join(ws.dir, 'dist', 'cli.js'), workspace: ws.dir });
  const json = (rel: string) => JSON.parse(fs.readFileSync(path.join(ws.dir, rel), 'utf8'));

  const cases: [AgentKind, string, (j: any) => string[]][] = [
    ['vscode', '.github/hooks/waypoint.json', (j) => [j.hooks.PreToolUse[0].command, j.hooks.PreToolUse[0].bash]],
    ['gemini-cli', '.gemini/settings.json', (j) => j.hooks.BeforeTool.flatMap((g: any) => g.hooks.map((h: any) => h.command))],
    ['codex', '.codex/hooks.json', (j) => j.hooks.PreToolUse.flatMap((g: any) => g.hooks.map((h: any) => h.command))],
    ['cursor', '.cursor/hooks.json', (j) => j.hooks.beforeShellExecution.map((h: any) => h.command)],
    ['qwen-code', '.qwen/settings.json', (j) => j.hooks.PreToolUse.flatMap((g: any) => g.hooks.map((h: any) => h.command))],
  ];
  for (const [agent, rel, commands] of cases) {
    it(`${agent}: writes ${rel} with portable commands, keeps other hooks, and a second run changes nothing`, () => {
      fs.mkdirSync(path.dirname(path.join(ws.dir, rel)), { recursive: true });
      const theirs = agent === 'cursor' ? { version: 1, hooks: { beforeShellExecution: [{ command: './audit.sh' }] } } : agent === 'vscode' ? null : { hooks: { [agent === 'codex' || agent === 'qwen-code' ? 'PreToolUse' : 'BeforeTool']: [{ matcher: '.*', hooks: [{ type: 'command', command: './audit.sh' }] }] } };
      if (theirs) fs.writeFileSync(path.join(ws.dir, rel), JSON.stringify(theirs));
      applyConnect(planConnect(agent, launch()));
      const cmds = commands(json(rel));
      assert.ok(cmds.some((c) => c.includes(`exec node "$d/.waypoint/bin/waypoint.cjs" hook ${agent} --workspace "$d"`)), `Waypoint's hook is there: ${cmds.join(' | ')}`);
      assert.ok(cmds.every((c) => !c.includes(ws.dir)), 'no machine path in a file meant to be shared');
      if (theirs) assert.ok(cmds.includes('./audit.sh'), 'the project’s own hook is kept');
      const again = planConnect(agent, launch());
      assert.deepEqual(again.files.filter((f) => f.changed).map((f) => f.file), [], 'connecting twice changes nothing');
    });
  }

  it('vscode and copilot-cli share one file: VS Code runs `command`, Copilot CLI `bash`', () => {
    applyConnect(planConnect('copilot-cli', launch()));
    const e = json('.github/hooks/waypoint.json').hooks.PreToolUse[0];
    assert.match(e.command, / hook vscode --workspace /);
    assert.match(e.bash, / hook copilot-cli --workspace /);
  });

  it('cline: executable hook scripts that find the project themselves; a hook Waypoint did not write is never replaced', () => {
    applyConnect(planConnect('cline', launch()));
    const file = path.join(ws.dir, '.clinerules', 'hooks', 'PreToolUse');
    assert.ok((fs.statSync(file).mode & 0o111) !== 0, 'executable');
    assert.match(fs.readFileSync(file, 'utf8'), /exec node "\$dir\/\.waypoint\/bin\/waypoint\.cjs" hook cline/);
    fs.writeFileSync(file, '#!/bin/sh\necho mine\n');
    assert.throws(() => planConnect('cline', launch()), /Waypoint did not write/);
    assert.equal(fs.readFileSync(file, 'utf8'), '#!/bin/sh\necho mine\n');
  });

  it('a file that is not JSON is reported and left as it was', () => {
    fs.mkdirSync(path.join(ws.dir, '.gemini'));
    fs.writeFileSync(path.join(ws.dir, '.gemini', 'settings.json'), '{oops');
    assert.throws(() => planConnect('gemini-cli', launch()), /not valid JSON/);
    assert.equal(fs.readFileSync(path.join(ws.dir, '.gemini', 'settings.json'), 'utf8'), '{oops');
  });
});
