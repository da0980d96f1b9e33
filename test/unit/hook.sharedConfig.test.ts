import * as assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { HOOK_AGENTS, type HookAgent } from '../../src/hooks/agents';
import { buildCli, cli } from '../support/mcp';
import { loadOpencodePlugin } from '../support/opencodePlugin';
import { tmpDir } from '../support/tmp';

/**
 * The hook configs `waypoint connect` writes for committing, as a teammate gets them: a
 * fresh `git clone` (no `.waypoint/`, so no launcher), the agent working in a subfolder.
 * Each hook must exit 0 with the agent's neutral answer and no stack trace, record nothing
 * while Waypoint is not set up there, and record once the teammate's own Waypoint is.
 */
type Json = Record<string, any>;
const FIX = path.join(__dirname, '..', 'fixtures', 'hooks');

// The committed file and the prompt event (from the agent's fixture) each agent's hook gets.
const CASES: { agent: HookAgent; file: string; commands: (j: Json) => string[]; fixture: string }[] = [
  { agent: 'codex', file: '.codex/hooks.json', commands: (j) => j.hooks.UserPromptSubmit.flatMap((g: Json) => g.hooks.map((h: Json) => h.command)), fixture: 'codex' },
  { agent: 'gemini-cli', file: '.gemini/settings.json', commands: (j) => j.hooks.BeforeAgent.flatMap((g: Json) => g.hooks.map((h: Json) => h.command)), fixture: 'gemini-cli' },
  { agent: 'cursor', file: '.cursor/hooks.json', commands: (j) => j.hooks.beforeSubmitPrompt.map((h: Json) => h.command), fixture: 'cursor' },
  { agent: 'vscode', file: '.github/hooks/waypoint.json', commands: (j) => [j.hooks.UserPromptSubmit[0].command], fixture: 'vscode' },
  { agent: 'copilot-cli', file: '.github/hooks/waypoint.json', commands: (j) => [j.hooks.UserPromptSubmit[0].bash], fixture: 'copilot-cli' },
  { agent: 'qwen-code', file: '.qwen/settings.json', commands: (j) => j.hooks.UserPromptSubmit.flatMap((g: Json) => g.hooks.map((h: Json) => h.command)), fixture: 'qwen-code' },
];

function promptPayload(fixture: string, ws: string): string {
  if (fixture === 'qwen-code') {
    // The real binary's first UserPromptSubmit (the recorded session), with its words.
    const real = fs.readFileSync(path.join(FIX, '..', 'hooks-real', 'qwen-code', 'session.jsonl'), 'utf8').replaceAll('${WORKSPACE}', ws).split('\n');
    return real.find((l) => l.includes('"hook_event_name":"UserPromptSubmit"') && !l.includes('"prompt":""'))!;
  }
  const text = fs.readFileSync(path.join(FIX, fixture, 'session.json'), 'utf8').replaceAll('${WORKSPACE}', ws);
  const f = JSON.parse(text) as { session: { payload: Json }[] };
  const name = (p: Json) => String(p.hook_event_name ?? p.hookEventName ?? p.hookName);
  return JSON.stringify(f.session.find((s) => /^(UserPromptSubmit|BeforeAgent|beforeSubmitPrompt)$/.test(name(s.payload)))!.payload);
}

/** The real opencode's first chat.message (the recorded session): the input and output its plugin hook gets. */
function opencodePrompt(ws: string): [Json, Json] {
  const real = fs.readFileSync(path.join(FIX, '..', 'hooks-real', 'opencode', 'session.jsonl'), 'utf8').replaceAll('${WORKSPACE}', ws).split('\n');
  const p = JSON.parse(real.find((l) => l.includes('"hook":"chat.message"'))!) as Json;
  return [p.input, p.output];
}

function run(command: string, cwd: string, input: string) {
  // The agents run a hook's command through the shell, in the agent's working directory.
  return spawnSync('/bin/sh', ['-c', command], { cwd, input, encoding: 'utf8', timeout: 60_000, env: { PATH: process.env.PATH, HOME: process.env.HOME } });
}

describe('shared hook configs: a teammate’s fresh clone, from a subfolder', function () {
  this.timeout(600_000);
  before(() => buildCli());
  let root: ReturnType<typeof tmpDir>;
  let clone: string;
  before(() => {
    root = tmpDir('wp-shared-');
    const origin = path.join(root.dir, 'origin');
    fs.mkdirSync(origin);
    const git = (cwd: string, ...a: string[]) => execFileSync('git', ['-c', 'user.email=t@example.invalid', '-c', 'user.name=t', ...a], { cwd, stdio: 'pipe' });
    git(origin, 'init', '-q');
    fs.writeFileSync(path.join(origin, 'a.txt'), 'hello\n');
    for (const agent of ['codex', 'gemini-cli', 'cursor', 'vscode', 'cline', 'qwen-code', 'opencode']) assert.equal(cli(['connect', agent, '--yes', '--workspace', origin]).status, 0);
    git(origin, 'add', '-A');
    git(origin, 'commit', '-qm', 'agent configs');
    assert.ok(!execFileSync('git', ['ls-files'], { cwd: origin, encoding: 'utf8' }).includes('.waypoint/'), 'the launcher is never committed');
    clone = path.join(root.dir, 'clone');
    git(root.dir, 'clone', '-q', origin, clone);
    fs.mkdirSync(path.join(clone, 'src', 'deep'), { recursive: true });
  });
  after(() => root.cleanup());

  const checkQuiet = (r: ReturnType<typeof run>, agent: HookAgent) => {
    assert.equal(r.status, 0, `${agent}: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, /MODULE_NOT_FOUND|Error|\n\s+at /, `${agent}: no stack trace`);
    assert.equal(r.stdout.trim(), HOOK_AGENTS[agent].stdout, `${agent}: only the neutral answer on stdout`);
  };

  it('without Waypoint set up: every hook exits 0, answers neutrally, records nothing', async () => {
    assert.ok(!fs.existsSync(path.join(clone, '.waypoint')));
    const sub = path.join(clone, 'src', 'deep');
    for (const c of CASES) {
      const cmds = c.commands(JSON.parse(fs.readFileSync(path.join(clone, c.file), 'utf8')) as Json);
      assert.equal(cmds.length, 1);
      checkQuiet(run(cmds[0], sub, promptPayload(c.fixture, clone)), c.agent);
    }
    const cline = spawnSync(path.join(clone, '.clinerules', 'hooks', 'UserPromptSubmit'), [], { cwd: sub, input: promptPayload('cline', clone), encoding: 'utf8' });
    checkQuiet(cline, 'cline');
    // opencode's plugin, loaded as opencode loads it, opencode working in the subfolder.
    await (await loadOpencodePlugin(clone, sub))['chat.message'](...opencodePrompt(clone));
    assert.ok(!fs.existsSync(path.join(clone, '.waypoint')), 'nothing recorded, no store made');
  });

  it('once the teammate connects: the same committed commands, from the subfolder, record in the clone', async () => {
    for (const agent of ['codex', 'gemini-cli', 'cursor', 'vscode', 'cline', 'qwen-code', 'opencode']) assert.equal(cli(['connect', agent, '--yes', '--workspace', clone]).status, 0);
    assert.equal(execFileSync('git', ['status', '--porcelain'], { cwd: clone, encoding: 'utf8' }), '', 'connecting changed no committed file');
    const sub = path.join(clone, 'src', 'deep');
    for (const c of CASES) {
      const cmds = c.commands(JSON.parse(fs.readFileSync(path.join(clone, c.file), 'utf8')) as Json);
      checkQuiet(run(cmds[0], sub, promptPayload(c.fixture, clone)), c.agent);
    }
    const cline = spawnSync(path.join(clone, '.clinerules', 'hooks', 'UserPromptSubmit'), [], { cwd: sub, input: promptPayload('cline', clone), encoding: 'utf8' });
    checkQuiet(cline, 'cline');
    await (await loadOpencodePlugin(clone, sub))['chat.message'](...opencodePrompt(clone));
    const tasks = JSON.parse(cli(['tasks', '--workspace', clone, '--json']).stdout) as Json[];
    assert.deepEqual(tasks.map((t) => t.agent).sort(), ['cline', 'codex', 'copilot-cli', 'cursor', 'gemini-cli', 'opencode', 'qwen-code', 'vscode']);
    assert.ok(!fs.existsSync(path.join(clone, '.waypoint', 'hooks.log')), 'nothing in the hook log');
  });
});
