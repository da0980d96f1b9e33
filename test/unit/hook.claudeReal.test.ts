import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildCli, cli } from '../support/mcp';
import { openEngine, tmpDir } from '../support/tmp';
import { realPayloads } from '../support/realFixtures';
import { HOOK_EVENTS, HOOK_MATCHER } from '../../src/mcp/connect';

/**
 * The hook payloads the real Claude Code (test/fixtures/hooks-real/claude-code, recorded by
 * `WAYPOINT_RECORD_FIXTURES=1 npm run test:agents`) replayed through `waypoint hook
 * claude-code`, with the files each tool call changed written between its before and after
 * hooks — and a person's file written during the Edit call. Its plan is Claude Code's Tasks
 * (TaskCreate/TaskUpdate, TaskCreated/TaskCompleted), not a TodoWrite list.
 */
type Json = Record<string, any>;
const PERSON = 'the person wrote this while the agent edited\n';

describe('hook recorder: the real Claude Code’s payloads (Tasks plan, subagent, continued session)', function () {
  this.timeout(300_000);
  before(() => buildCli());
  let ws: ReturnType<typeof tmpDir>;
  beforeEach(() => {
    ws = tmpDir('wp-claude-real-');
    fs.writeFileSync(path.join(ws.dir, 'a.txt'), 'hello\n');
    fs.writeFileSync(path.join(ws.dir, 'b.txt'), 'bee\n');
  });
  afterEach(() => ws.cleanup());

  function replay(list: Json[], during: (p: Json, bashSeen: number) => void): void {
    let bash = 0;
    const tools = new RegExp(`^(?:${HOOK_MATCHER})$`);
    for (const p of list) {
      if (p.hook_event_name === 'PostToolUse') during(p, p.tool_name === 'Bash' ? ++bash : bash);
      // What `waypoint connect claude-code` registers is all Claude Code sends Waypoint.
      if (!(HOOK_EVENTS as readonly string[]).includes(p.hook_event_name) || (p.tool_name && !tools.test(p.tool_name))) continue;
      const r = cli(['hook', 'claude-code', '--workspace', ws.dir], { input: JSON.stringify(p) });
      assert.equal(r.status, 0, r.stderr);
      assert.doesNotMatch(r.stderr, /not recorded/, `${p.hook_event_name}: ${r.stderr}`);
    }
  }

  const w = (f: string, s: string) => fs.writeFileSync(path.join(ws.dir, f), s);
  const agentWork = (p: Json, bash: number) => {
    if (p.tool_name === 'Edit') {
      w('a.txt', 'hello world\n');
      w('person.txt', PERSON); // the person, in another editor, while the Edit call runs
    }
    if (p.tool_name === 'Bash' && bash === 1) {
      fs.appendFileSync(path.join(ws.dir, 'b.txt'), 'more\n');
      w('made.txt', 'made\n');
    }
    if (p.tool_name === 'Bash' && bash === 2) w('again.txt', 'again\n');
    if (p.tool_name === 'Write') w('note.txt', 'from the subagent\n');
  };

  it('makes the two Tasks items two plan steps with their progress', async () => {
    const list = realPayloads('claude-code', { WORKSPACE: ws.dir, HOME: path.join(ws.dir, '..', 'home'), ROOT: path.join(ws.dir, '..') });
    const upTo = list.findIndex((p) => p.hook_event_name === 'PostToolUse' && p.tool_name === 'Bash');
    replay(list.slice(0, upTo), agentWork);
    const engine = await openEngine(ws.dir);
    try {
      const [task] = engine.tasks();
      const steps = engine.taskDetail(task.id).steps.filter((s) => s.id.startsWith('todo-'));
      assert.deepEqual(
        steps.map((s) => [s.title, s.status]),
        [
          ['Edit the greeting', 'completed'],
          ['Generate the files', 'in_progress'],
        ],
        'mid-session: the first item done, the second under way',
      );
    } finally {
      await engine.close();
    }
  });

  it('gives a person’s file written during the agent’s Edit call to the person; agent-only rollback keeps it', async () => {
    replay(realPayloads('claude-code', { WORKSPACE: ws.dir, HOME: path.join(ws.dir, '..', 'home'), ROOT: path.join(ws.dir, '..') }), agentWork);
    const engine = await openEngine(ws.dir);
    let taskId: string;
    let baseId: string;
    try {
      const tasks = engine.tasks();
      assert.equal(tasks.length, 1, 'one task, the continued session included');
      taskId = tasks[0].id;
      baseId = tasks[0].baseCheckpointId!;
      const d = engine.taskDetail(taskId);
      assert.deepEqual(
        d.steps.filter((s) => s.id.startsWith('todo-')).map((s) => [s.title, s.status]),
        [
          ['Edit the greeting', 'completed'],
          ['Generate the files', 'completed'],
        ],
      );
      assert.equal(engine.queries.turns(taskId).length, 2, 'two turns: the first session’s and the continued one’s');
      const owners = await engine.changesByOwner(taskId, baseId);
      assert.deepEqual([...owners.agent].sort(), ['a.txt', 'again.txt', 'b.txt', 'made.txt', 'note.txt']);
      assert.deepEqual([...owners.person].sort(), ['person.txt']);
    } finally {
      await engine.close();
    }
    const r = cli(['rollback', '--task', taskId, '--to', baseId, '--agent-only', '--yes', '--workspace', ws.dir]);
    assert.equal(r.status, 0, r.stderr + r.stdout);
    assert.equal(fs.readFileSync(path.join(ws.dir, 'a.txt'), 'utf8'), 'hello\n');
    assert.equal(fs.readFileSync(path.join(ws.dir, 'b.txt'), 'utf8'), 'bee\n');
    for (const f of ['made.txt', 'note.txt', 'again.txt']) assert.equal(fs.existsSync(path.join(ws.dir, f)), false, f);
    assert.equal(fs.readFileSync(path.join(ws.dir, 'person.txt'), 'utf8'), PERSON);
    assert.equal(fs.existsSync(path.join(ws.dir, '.waypoint', 'hooks.log')), false, 'nothing in the hook log');
  });
});

describe('hook recorder: an edit tool owns only the files it names', function () {
  this.timeout(120_000);
  before(() => buildCli());

  it('a person’s edit to another file during the agent’s Edit call is the person’s; one to a file a Bash call ran over is the agent’s', async () => {
    const ws = tmpDir('wp-named-files-');
    try {
      for (const f of ['a.txt', 'other.txt', 'c.txt']) fs.writeFileSync(path.join(ws.dir, f), `${f}\n`);
      const base = { session_id: 's-named', transcript_path: path.join(ws.dir, 'none.jsonl'), cwd: ws.dir };
      const edit = { tool_name: 'Edit', tool_input: { file_path: path.join(ws.dir, 'a.txt'), old_string: 'a', new_string: 'A' }, tool_use_id: 'toolu_edit' };
      const bash = { tool_name: 'Bash', tool_input: { command: 'sleep 1' }, tool_use_id: 'toolu_bash' };
      const send = (p: Json) => assert.equal(cli(['hook', 'claude-code', '--workspace', ws.dir], { input: JSON.stringify({ ...base, ...p }) }).status, 0);
      send({ hook_event_name: 'UserPromptSubmit', prompt: 'edit a' });
      send({ hook_event_name: 'PreToolUse', ...edit });
      fs.writeFileSync(path.join(ws.dir, 'a.txt'), 'A.txt\n'); // the Edit call's own change
      fs.writeFileSync(path.join(ws.dir, 'other.txt'), 'the person’s\n'); // a person, meanwhile
      send({ hook_event_name: 'PostToolUse', ...edit, tool_response: { filePath: path.join(ws.dir, 'a.txt') } });
      send({ hook_event_name: 'PreToolUse', ...bash });
      fs.writeFileSync(path.join(ws.dir, 'c.txt'), 'changed while the command ran\n');
      send({ hook_event_name: 'PostToolUse', ...bash, tool_response: { stdout: '', stderr: '', interrupted: false } });
      const engine = await openEngine(ws.dir);
      try {
        const [task] = engine.tasks();
        const owners = await engine.changesByOwner(task.id, task.baseCheckpointId!);
        assert.deepEqual([...owners.agent].sort(), ['a.txt', 'c.txt'], 'the Edit’s named file, and what changed during the shell call');
        assert.deepEqual([...owners.person].sort(), ['other.txt']);
      } finally {
        await engine.close();
      }
    } finally {
      ws.cleanup();
    }
  });
});

describe('hook recorder: the real Claude Code’s StopFailure (the model API answered an error)', function () {
  this.timeout(120_000);
  before(() => buildCli());

  it('ends the turn and interrupts the task with the API’s error as the cause', async () => {
    const ws = tmpDir('wp-stop-failure-');
    try {
      const text = fs.readFileSync(path.join(__dirname, '..', 'fixtures', 'hooks-real', 'claude-code', 'stop-failure.jsonl'), 'utf8').replaceAll('${WORKSPACE}', ws.dir).replaceAll('${HOME}', path.join(ws.dir, '..', 'home'));
      const list = text.split('\n').filter(Boolean);
      assert.ok(list.some((l) => l.includes('"StopFailure"')), 'the recorded payloads hold a StopFailure');
      for (const p of list) {
        const r = cli(['hook', 'claude-code', '--workspace', ws.dir], { input: p });
        assert.equal(r.status, 0, r.stderr);
        assert.doesNotMatch(r.stderr, /not recorded/);
      }
      const engine = await openEngine(ws.dir);
      try {
        const [task] = engine.tasks();
        assert.equal(task.state, 'interrupted');
        assert.match(JSON.stringify(task.interruption), /API Error: 400 scripted failure/);
        assert.equal(engine.queries.turns(task.id).length, 1, 'the failed turn is recorded');
      } finally {
        await engine.close();
      }
    } finally {
      ws.cleanup();
    }
  });
});
