import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildCli, cli } from '../support/mcp';
import { openEngine, tmpDir } from '../support/tmp';
import { realPayloads } from '../support/realFixtures';
import { GEMINI_TOOLS, geminiAdapter } from '../../src/hooks/adapters/gemini';
import { GEMINI_HOOK_EVENTS, mergeGeminiSettings } from '../../src/mcp/connectHooks';

/**
 * The hook payloads the real Gemini CLI sent (test/fixtures/hooks-real/gemini-cli, recorded
 * by `WAYPOINT_RECORD_FIXTURES=1 npm run test:agents`) replayed through
 * `waypoint hook gemini-cli`, with the files each tool call changed written between its
 * before and after hooks — and a person's file written during the `replace` call. What the
 * real binary does that its documentation did not say: no call ids, `tool_response` mostly a
 * JSON string, a SessionEnd (`reason: "exit"`) after every `-p` run, and a PreCompress
 * `trigger: "auto"` before every model request, compressing or not.
 */
type Json = Record<string, any>;
const PERSON = 'the person wrote this while the agent edited\n';

describe('hook recorder: the real Gemini CLI’s payloads (write_todos, replace, run_shell_command, --resume)', function () {
  this.timeout(300_000);
  before(() => buildCli());
  let ws: ReturnType<typeof tmpDir>;
  beforeEach(() => {
    ws = tmpDir('wp-gemini-real-');
    fs.writeFileSync(path.join(ws.dir, 'a.txt'), 'hello\n');
    fs.writeFileSync(path.join(ws.dir, 'b.txt'), 'bee\n');
  });
  afterEach(() => ws.cleanup());

  const vars = () => ({ WORKSPACE: ws.dir, HOME: path.join(ws.dir, '..', 'home'), ROOT: path.join(ws.dir, '..') });
  const w = (f: string, s: string) => fs.writeFileSync(path.join(ws.dir, f), s);

  function replay(list: Json[], events: readonly string[]): void {
    let shell = 0;
    const tools = new RegExp(`^(?:${[...GEMINI_TOOLS.edit, ...GEMINI_TOOLS.shell, ...GEMINI_TOOLS.todo].join('|')})$`);
    for (const p of list) {
      if (p.hook_event_name === 'AfterTool' && p.tool_name === 'replace') {
        w('a.txt', 'hello world\n');
        w('person.txt', PERSON); // the person, in another editor, while the edit runs
      }
      if (p.hook_event_name === 'AfterTool' && p.tool_name === 'run_shell_command' && ++shell === 1) {
        fs.appendFileSync(path.join(ws.dir, 'b.txt'), 'more\n');
        w('made.txt', 'made\n');
      } else if (p.hook_event_name === 'AfterTool' && p.tool_name === 'run_shell_command') w('again.txt', 'again\n');
      if (!events.includes(p.hook_event_name) || (p.tool_name && !tools.test(p.tool_name))) continue;
      const r = cli(['hook', 'gemini-cli', '--workspace', ws.dir], { input: JSON.stringify(p) });
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout.trim(), '{}', 'Gemini CLI parses the answer as JSON');
      assert.doesNotMatch(r.stderr, /not recorded/, `${p.hook_event_name}: ${r.stderr}`);
    }
  }

  async function check(): Promise<void> {
    const engine = await openEngine(ws.dir);
    let taskId: string;
    let baseId: string;
    try {
      const tasks = engine.tasks();
      assert.equal(tasks.length, 1, 'one task, the resumed session included');
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
      const turns = engine.queries.turns(taskId);
      assert.equal(turns.length, 2, 'two turns: the first run’s and the resumed one’s');
      assert.deepEqual(
        turns.map((t) => t.compactions),
        [0, 0],
        'a PreCompress before each request is no compaction',
      );
      assert.deepEqual(
        d.sideEffects.filter((e) => e.kind === 'shell').map((e) => [e.description, e.status]),
        [
          ['echo more >> b.txt && echo made > made.txt', 'done'],
          ['echo again > again.txt', 'done'],
        ],
      );
      assert.equal(tasks[0].state, 'waiting_review', 'a session that ends after its turn leaves the task for review');
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
  }

  it('records one task: the two write_todos items as steps with their progress, the edit and both commands with their files, two turns', async () => {
    const list = realPayloads('gemini-cli', vars());
    assert.ok(list.some((p) => p.hook_event_name === 'SessionStart' && p.source === 'resume'), 'the recording holds the resumed session');
    assert.ok(list.some((p) => p.hook_event_name === 'PreCompress' && p.trigger === 'auto'), 'the recording holds the PreCompress Gemini sends per request');
    replay(list, GEMINI_HOOK_EVENTS);
    await check();
  });

  it('an older connect’s PreCompress hook, still delivering, counts no compaction either', async () => {
    replay(realPayloads('gemini-cli', vars()), [...GEMINI_HOOK_EVENTS, 'PreCompress']);
    await check();
  });

  it('a manual /compress is still a compaction', () => {
    assert.equal(geminiAdapter({ session_id: 's', hook_event_name: 'PreCompress', trigger: 'manual' }).event.type, 'compaction');
    assert.equal(geminiAdapter({ session_id: 's', hook_event_name: 'PreCompress', trigger: 'auto' }).event.type, 'ignored');
  });

  it('waypoint connect gemini-cli registers every event the recorder uses, and takes its own PreCompress entry out of an older config', () => {
    const used = new Set(realPayloads('gemini-cli', vars()).filter((p) => geminiAdapter(p).event.type !== 'ignored').map((p) => String(p.hook_event_name)));
    assert.deepEqual([...used].filter((e) => !(GEMINI_HOOK_EVENTS as readonly string[]).includes(e)), [], 'events the recorder would use but connect does not register');
    const other = { type: 'command', command: 'echo mine' };
    const older = { hooks: { PreCompress: [{ hooks: [{ type: 'command', name: 'waypoint', command: 'node .waypoint/bin/waypoint.cjs hook gemini-cli' }] }, { hooks: [other] }] } };
    fs.mkdirSync(path.join(ws.dir, '.gemini'));
    fs.writeFileSync(path.join(ws.dir, '.gemini', 'settings.json'), JSON.stringify(older));
    const hooks = JSON.parse(mergeGeminiSettings(ws.dir).content).hooks as Record<string, unknown>;
    assert.deepEqual(hooks.PreCompress, [{ hooks: [other] }], 'the person’s own PreCompress hook is kept, Waypoint’s is gone');
    assert.ok(Array.isArray(hooks.BeforeTool));
  });
});
