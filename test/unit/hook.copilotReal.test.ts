import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildCli, cli } from '../support/mcp';
import { openEngine, tmpDir } from '../support/tmp';
import { realPayloads } from '../support/realFixtures';
import { copilotCliAdapter } from '../../src/hooks/adapters/vscode';
import { GITHUB_HOOK_EVENTS } from '../../src/mcp/connectHooks';

/**
 * The hook payloads the real Copilot CLI sent (test/fixtures/hooks-real/copilot-cli, recorded
 * by `WAYPOINT_RECORD_FIXTURES=1 npm run test:agents`) replayed through
 * `waypoint hook copilot-cli`, with the files each tool call changed written between its
 * before and after hooks — and a person's file written during the patch. What the real
 * binary does that its documentation did not say: tools reach PascalCase hooks under Claude
 * Code's names (`Bash`; a freeform apply_patch as `Edit` with the raw patch as its input),
 * and the plan is SQL on the session's `todos` table through its `sql` tool.
 */
type Json = Record<string, any>;
const PERSON = 'the person wrote this while the agent edited\n';

describe('hook recorder: the real Copilot CLI’s payloads (sql todos, Edit patch, Bash, --resume)', function () {
  this.timeout(300_000);
  before(() => buildCli());
  let ws: ReturnType<typeof tmpDir>;
  beforeEach(() => {
    ws = tmpDir('wp-copilot-real-');
    fs.writeFileSync(path.join(ws.dir, 'a.txt'), 'hello\n');
    fs.writeFileSync(path.join(ws.dir, 'b.txt'), 'bee\n');
  });
  afterEach(() => ws.cleanup());

  const vars = () => ({ WORKSPACE: ws.dir, HOME: path.join(ws.dir, '..', 'home'), ROOT: path.join(ws.dir, '..') });
  const w = (f: string, s: string) => fs.writeFileSync(path.join(ws.dir, f), s);

  function replay(list: Json[], events: readonly string[]): void {
    let shell = 0;
    for (const p of list) {
      if (p.hook_event_name === 'PostToolUse' && p.tool_name === 'Edit') {
        w('a.txt', 'hello world\n');
        w('person.txt', PERSON); // the person, in another editor, while the patch is applied
      }
      if (p.hook_event_name === 'PostToolUse' && p.tool_name === 'Bash' && ++shell === 1) {
        fs.appendFileSync(path.join(ws.dir, 'b.txt'), 'more\n');
        w('made.txt', 'made\n');
      } else if (p.hook_event_name === 'PostToolUse' && p.tool_name === 'Bash') w('again.txt', 'again\n');
      // What `waypoint connect copilot-cli` registers is all Copilot CLI sends Waypoint.
      if (!events.includes(p.hook_event_name)) continue;
      const r = cli(['hook', 'copilot-cli', '--workspace', ws.dir], { input: JSON.stringify(p) });
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout, '', 'a PreToolUse answer could deny the call');
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

  it('records one task: the two todos as steps with their progress, the patch and both commands with their files, two turns', async () => {
    const list = realPayloads('copilot-cli', vars());
    assert.ok(list.some((p) => p.hook_event_name === 'SessionStart' && p.source === 'resume'), 'the recording holds the resumed session');
    assert.ok(list.some((p) => p.tool_name === 'sql'), 'the recording holds the sql plan');
    replay(list, GITHUB_HOOK_EVENTS);
    await check();
  });

  it('waypoint connect copilot-cli registers every event the recorder uses', () => {
    const used = new Set(
      realPayloads('copilot-cli', vars())
        .filter((p) => p.hook_event_name && copilotCliAdapter(p).event.type !== 'ignored')
        .map((p) => String(p.hook_event_name)),
    );
    assert.deepEqual([...used].filter((e) => !(GITHUB_HOOK_EVENTS as readonly string[]).includes(e)), []);
  });
});
