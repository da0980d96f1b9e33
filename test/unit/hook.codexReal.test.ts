import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildCli, cli } from '../support/mcp';
import { openEngine, tmpDir } from '../support/tmp';
import { realPayloads } from '../support/realFixtures';
import { CODEX_TOOLS, codexAdapter } from '../../src/hooks/adapters/codex';
import { CODEX_HOOK_EVENTS, mergeCodexHooks } from '../../src/mcp/connectHooks';

/**
 * The hook payloads the real Codex sent (test/fixtures/hooks-real/codex, recorded by
 * `WAYPOINT_RECORD_FIXTURES=1 npm run test:agents`) replayed through `waypoint hook codex`,
 * with the files each tool call changed written between its before and after hooks — and
 * a person's file written during the apply_patch call. What the real binary does that its
 * documentation did not say: exec_command reaches hooks as `Bash` with `{command}`,
 * apply_patch as `{command: <patch>}`, tool_response is a string, and every `codex exec`
 * ends with a SessionEnd (reason "other").
 */
type Json = Record<string, any>;
const PERSON = 'the person wrote this while the agent edited\n';

describe('hook recorder: the real Codex’s payloads (update_plan, apply_patch, exec_command, exec resume)', function () {
  this.timeout(300_000);
  before(() => buildCli());
  let ws: ReturnType<typeof tmpDir>;
  beforeEach(() => {
    ws = tmpDir('wp-codex-real-');
    fs.writeFileSync(path.join(ws.dir, 'a.txt'), 'hello\n');
    fs.writeFileSync(path.join(ws.dir, 'b.txt'), 'bee\n');
  });
  afterEach(() => ws.cleanup());

  const vars = () => ({ WORKSPACE: ws.dir, HOME: path.join(ws.dir, '..', 'home'), CODEX_HOME: path.join(ws.dir, '..', 'codex-home'), ROOT: path.join(ws.dir, '..') });
  const w = (f: string, s: string) => fs.writeFileSync(path.join(ws.dir, f), s);

  function replay(list: Json[]): void {
    let bash = 0;
    const tools = new RegExp(`^(?:${[...CODEX_TOOLS.edit, ...CODEX_TOOLS.shell, ...CODEX_TOOLS.todo].join('|')})$`);
    for (const p of list) {
      if (p.hook_event_name === 'PostToolUse' && p.tool_name === 'apply_patch') {
        w('a.txt', 'hello world\n');
        w('person.txt', PERSON); // the person, in another editor, while the patch is applied
      }
      if (p.hook_event_name === 'PostToolUse' && p.tool_name === 'Bash' && ++bash === 1) {
        fs.appendFileSync(path.join(ws.dir, 'b.txt'), 'more\n');
        w('made.txt', 'made\n');
      } else if (p.hook_event_name === 'PostToolUse' && p.tool_name === 'Bash') w('again.txt', 'again\n');
      // What `waypoint connect codex` registers is all Codex sends Waypoint.
      if (!(CODEX_HOOK_EVENTS as readonly string[]).includes(p.hook_event_name) || (p.tool_name && !tools.test(p.tool_name))) continue;
      const r = cli(['hook', 'codex', '--workspace', ws.dir], { input: JSON.stringify(p) });
      assert.equal(r.status, 0, r.stderr);
      assert.doesNotMatch(r.stderr, /not recorded/, `${p.hook_event_name}: ${r.stderr}`);
    }
  }

  it('records one task: the plan’s two items as steps with their progress, the patch and both commands with their files, two turns', async () => {
    const list = realPayloads('codex', vars());
    assert.ok(list.some((p) => p.hook_event_name === 'SessionStart' && p.source === 'resume'), 'the recording holds the resumed session');
    replay(list);
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
      assert.equal(engine.queries.turns(taskId).length, 2, 'two turns: the first exec’s and the resumed one’s');
      assert.deepEqual(
        d.sideEffects.filter((e) => e.kind === 'shell').map((e) => [e.description, e.status]),
        [
          ['echo more >> b.txt && echo made > made.txt', 'done'],
          ['echo again > again.txt', 'done'],
        ],
      );
      assert.equal(tasks[0].state, 'waiting_review', 'a session that ends after its turn leaves the task for review, not interrupted');
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

  it('waypoint connect codex registers every event the real Codex sends that the recorder uses, within Codex’s limits', () => {
    const used = new Set(realPayloads('codex', vars()).filter((p) => codexAdapter(p).event.type !== 'ignored').map((p) => String(p.hook_event_name)));
    assert.deepEqual([...used].filter((e) => !(CODEX_HOOK_EVENTS as readonly string[]).includes(e)), [], 'events the recorder would use but connect does not register');
    const hooks = JSON.parse(mergeCodexHooks(ws.dir).content).hooks as Record<string, { hooks: { timeout: number }[] }[]>;
    // Codex cuts a SessionEnd hook at 3 s and prints a warning on every run when asked for more.
    assert.ok(hooks.SessionEnd[0].hooks[0].timeout <= 3, JSON.stringify(hooks.SessionEnd));
  });
});
