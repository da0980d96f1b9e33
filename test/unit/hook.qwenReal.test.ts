import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildCli, cli } from '../support/mcp';
import { openEngine, tmpDir } from '../support/tmp';
import { realPayloads } from '../support/realFixtures';
import { QWEN_TOOLS, qwenCodeAdapter } from '../../src/hooks/adapters/qwenCode';
import { QWEN_HOOK_EVENTS, mergeQwenSettings } from '../../src/mcp/connectHooks';

/**
 * The hook payloads the real Qwen Code 0.24.4 sent (test/fixtures/hooks-real/qwen-code,
 * recorded by `WAYPOINT_RECORD_FIXTURES=1 npm run test:agents`) replayed through
 * `waypoint hook qwen-code`, with the files each tool call changed written between its
 * before and after hooks — and a person's file written during the `edit` call. What the
 * real binary does that Claude Code does not: a UserPromptSubmit with an empty prompt (same
 * prompt_id) before every follow-up model request of a turn, its own tool names, the todo
 * list as todo_write's `{id, content, status}` items, a shell exit code only in the text.
 */
type Json = Record<string, any>;
const PERSON = 'the person wrote this while the agent edited\n';

describe('hook recorder: the real Qwen Code’s payloads (todo_write, read_file + edit, run_shell_command, --resume)', function () {
  this.timeout(300_000);
  before(() => buildCli());
  let ws: ReturnType<typeof tmpDir>;
  beforeEach(() => {
    ws = tmpDir('wp-qwen-real-');
    fs.writeFileSync(path.join(ws.dir, 'a.txt'), 'hello\n');
    fs.writeFileSync(path.join(ws.dir, 'b.txt'), 'bee\n');
  });
  afterEach(() => ws.cleanup());

  const vars = () => ({ WORKSPACE: ws.dir, HOME: path.join(ws.dir, '..', 'home'), ROOT: path.join(ws.dir, '..') });
  const w = (f: string, s: string) => fs.writeFileSync(path.join(ws.dir, f), s);

  function replay(list: Json[]): void {
    let shell = 0;
    // What connect registers: its events, and on the tool events only the tools its matcher names.
    const tools = new RegExp(`^(?:${[...QWEN_TOOLS.edit, ...QWEN_TOOLS.shell, ...QWEN_TOOLS.todo].join('|')})$`);
    for (const p of list) {
      if (p.hook_event_name === 'PostToolUse' && p.tool_name === 'edit') {
        w('a.txt', 'hello world\n');
        w('person.txt', PERSON); // the person, in another editor, while the edit runs
      }
      if (p.hook_event_name === 'PostToolUse' && p.tool_name === 'run_shell_command' && ++shell === 1) {
        fs.appendFileSync(path.join(ws.dir, 'b.txt'), 'more\n');
        w('made.txt', 'made\n');
      } else if (p.hook_event_name === 'PostToolUse' && p.tool_name === 'run_shell_command') w('again.txt', 'again\n');
      if (!(QWEN_HOOK_EVENTS as readonly string[]).includes(p.hook_event_name) || (p.tool_name && !tools.test(p.tool_name))) continue;
      const r = cli(['hook', 'qwen-code', '--workspace', ws.dir], { input: JSON.stringify(p) });
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout, '', 'Qwen Code adds a UserPromptSubmit hook’s stdout to the conversation: nothing printed');
      assert.doesNotMatch(r.stderr, /not recorded/, `${p.hook_event_name}: ${r.stderr}`);
    }
  }

  it('records one task: the todo_write items as steps with their progress, the edit and both commands with their files, two turns', async () => {
    const list = realPayloads('qwen-code', vars());
    assert.ok(list.filter((p) => p.hook_event_name === 'UserPromptSubmit' && p.prompt === '').length >= 6, 'the recording holds the empty follow-up prompts');
    assert.ok(list.some((p) => p.hook_event_name === 'SessionStart' && p.source === 'resume'), 'the recording holds the resumed session');
    replay(list);
    const engine = await openEngine(ws.dir);
    let taskId: string;
    let baseId: string;
    try {
      const tasks = engine.tasks();
      assert.equal(tasks.length, 1, 'one task, the resumed session included');
      assert.equal(tasks[0].agent, 'qwen-code');
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
      assert.equal(engine.queries.turns(taskId).length, 2, 'two turns: the empty follow-up prompts start none');
      assert.deepEqual(
        d.sideEffects.filter((e) => e.kind === 'shell').map((e) => [e.description, e.status]),
        [
          ['echo more >> b.txt && echo made > made.txt', 'done'],
          ['echo again > again.txt', 'done'],
        ],
      );
      assert.equal(tasks[0].state, 'waiting_review', 'a run that ends after its turn leaves the task for review');
      const owners = await engine.changesByOwner(taskId, baseId);
      assert.deepEqual([...owners.agent].sort(), ['a.txt', 'again.txt', 'b.txt', 'made.txt']);
      assert.deepEqual([...owners.person].sort(), ['person.txt']);
    } finally {
      await engine.close();
    }
    const r = cli(['rollback', '--task', taskId, '--to', baseId, '--agent-only', '--yes', '--workspace', ws.dir]);
    assert.equal(r.status, 0, r.stderr + r.stdout);
    assert.equal(fs.readFileSync(path.join(ws.dir, 'a.txt'), 'utf8'), 'hello\n');
    assert.equal(fs.readFileSync(path.join(ws.dir, 'b.txt'), 'utf8'), 'bee\n');
    for (const f of ['made.txt', 'again.txt']) assert.equal(fs.existsSync(path.join(ws.dir, f)), false, f);
    assert.equal(fs.readFileSync(path.join(ws.dir, 'person.txt'), 'utf8'), PERSON);
    assert.equal(fs.existsSync(path.join(ws.dir, '.waypoint', 'hooks.log')), false, 'nothing in the hook log');
  });

  it('the adapter: a prompt only with words, todo_write as the whole list, the shell exit code from the text, a failed call', () => {
    const list = realPayloads('qwen-code', vars());
    const prompts = list.filter((p) => p.hook_event_name === 'UserPromptSubmit').map((p) => qwenCodeAdapter(p).event);
    assert.deepEqual(
      prompts.filter((e) => e.type === 'prompt').map((e) => (e as { prompt: string }).prompt),
      ['Update the greeting and generate the files', 'One more file, please'],
    );
    assert.ok(prompts.filter((e) => e.type === 'ignored').length >= 6);
    const todo = qwenCodeAdapter(list.find((p) => p.hook_event_name === 'PreToolUse' && p.tool_name === 'todo_write')!).event as Json;
    assert.equal(todo.call.kind, 'todo');
    assert.deepEqual(todo.call.todos, [
      { content: 'Edit the greeting', status: 'in_progress' },
      { content: 'Generate the files', status: 'pending' },
    ]);
    const edit = qwenCodeAdapter(list.find((p) => p.hook_event_name === 'PreToolUse' && p.tool_name === 'edit')!).event as Json;
    assert.deepEqual([edit.call.kind, edit.call.files, edit.call.id], ['edit', [path.join(ws.dir, 'a.txt')], list.find((p) => p.tool_name === 'edit')!.tool_use_id]);
    const shell = qwenCodeAdapter(list.find((p) => p.hook_event_name === 'PostToolUse' && p.tool_name === 'run_shell_command')!).event as Json;
    assert.deepEqual([shell.type, shell.call.kind, shell.ok, shell.exitCode], ['tool_after', 'shell', true, 0]);
    const failing = qwenCodeAdapter({ session_id: 's', hook_event_name: 'PostToolUse', tool_name: 'run_shell_command', tool_use_id: 't', tool_input: { command: 'false' }, tool_response: { llmContent: 'Command: false\nOutput: (empty)\nExit Code: 1\nSignal: (none)', returnDisplay: '' } }).event as Json;
    assert.equal(failing.exitCode, 1);
    // As 0.24.4 reports an edit of a file it has not read (seen from the real binary).
    const refused = qwenCodeAdapter({ session_id: 's', hook_event_name: 'PostToolUseFailure', tool_name: 'edit', tool_use_id: 't', tool_input: { file_path: '/w/a.txt' }, error: 'File /w/a.txt has not been read in this session.', is_interrupt: false }).event as Json;
    assert.deepEqual([refused.type, refused.ok, refused.error], ['tool_after', false, 'File /w/a.txt has not been read in this session.']);
    assert.equal(qwenCodeAdapter({ session_id: 's', hook_event_name: 'StopFailure', error: 'rate_limit', last_assistant_message: 'API Error: 429' }).event.type, 'turn_failed');
  });

  it('waypoint connect qwen-code registers every event the recorder uses, merged into the project’s own settings', () => {
    const used = new Set(realPayloads('qwen-code', vars()).filter((p) => qwenCodeAdapter(p).event.type !== 'ignored').map((p) => String(p.hook_event_name)));
    assert.deepEqual([...used].filter((e) => !(QWEN_HOOK_EVENTS as readonly string[]).includes(e)), [], 'events the recorder would use but connect does not register');
    const mine = { type: 'command', command: 'echo mine' };
    const older = { model: { name: 'qwen3-coder-plus' }, tools: { todoWrite: { enabled: true } }, hooks: { Stop: [{ hooks: [mine] }, { hooks: [{ type: 'command', command: 'node .waypoint/bin/waypoint.cjs hook qwen-code' }] }] } };
    fs.mkdirSync(path.join(ws.dir, '.qwen'));
    fs.writeFileSync(path.join(ws.dir, '.qwen', 'settings.json'), JSON.stringify(older));
    const after = JSON.parse(mergeQwenSettings(ws.dir).content) as Json;
    assert.deepEqual(after.model, older.model, 'the project’s other settings are kept');
    assert.deepEqual(after.tools, older.tools);
    assert.equal(after.hooks.Stop.length, 2, 'the person’s Stop hook and one of Waypoint’s: the older one replaced');
    assert.deepEqual(after.hooks.Stop[0], { hooks: [mine] });
    assert.match(after.hooks.Stop[1].hooks[0].command, /QWEN_PROJECT_DIR.* hook qwen-code --workspace/);
    assert.equal(after.hooks.Stop[1].hooks[0].timeout, 30, 'seconds (Qwen Code warns about a legacy milliseconds value)');
    assert.equal(after.hooks.PreToolUse[0].matcher, 'edit|write_file|notebook_edit|run_shell_command|todo_write');
    fs.writeFileSync(path.join(ws.dir, '.qwen', 'settings.json'), mergeQwenSettings(ws.dir).content);
    assert.equal(mergeQwenSettings(ws.dir).changed, false, 'a second connect changes nothing');
  });
});
