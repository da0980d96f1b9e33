import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildCli, cli, eventCount } from '../support/mcp';
import { openEngine, tmpDir } from '../support/tmp';
import { HOOK_AGENTS, isHookAgent } from '../../src/mcp/hookRoutes';

/**
 * The acceptance session of issue 17, through the shipped CLI (`waypoint hook <agent>`),
 * for every agent whose documented payloads are in test/fixtures/hooks/<agent>/session.json:
 * a prompt, a todo list of three (where the agent has one), an edit of a.txt, a shell
 * command that changes b.txt and creates gen.txt, the person editing mine.txt meanwhile,
 * the end of the turn and of the session, then the session resumed with a new prompt.
 */
type Json = Record<string, any>;
interface Fixture {
  agent: string;
  docs: string[];
  session: { payload: Json; then?: string; before?: string }[];
  expect: { plan: string[]; lastMessage?: string };
}

const ROOT = path.join(__dirname, '..', 'fixtures', 'hooks');
const AGENTS = fs.readdirSync(ROOT).filter((d) => fs.existsSync(path.join(ROOT, d, 'session.json')));

function load(agent: string, vars: Record<string, string>): Fixture {
  let text = fs.readFileSync(path.join(ROOT, agent, 'session.json'), 'utf8');
  for (const [k, v] of Object.entries(vars)) text = text.replaceAll(`\${${k}}`, v.replace(/\\/g, '\\\\'));
  return JSON.parse(text) as Fixture;
}

const PERSON = 'mine, as the person left it\n';

function act(ws: string, what: string | undefined): void {
  switch (what) {
    case undefined:
      return;
    case 'agent-edits-a':
      fs.writeFileSync(path.join(ws, 'a.txt'), 'hi\n');
      return;
    case 'person-edits-mine':
      fs.writeFileSync(path.join(ws, 'mine.txt'), PERSON);
      return;
    case 'agent-runs-sed':
      fs.writeFileSync(path.join(ws, 'b.txt'), 'new\n');
      fs.writeFileSync(path.join(ws, 'gen.txt'), 'new\n');
      return;
    default:
      throw new Error(`unknown fixture action ${what}`);
  }
}

function hook(agent: string, ws: string, payload: unknown): { stdout: string; stderr: string } {
  const r = cli(['hook', agent, '--workspace', ws], { input: typeof payload === 'string' ? payload : JSON.stringify(payload) });
  assert.equal(r.status, 0, `a hook always exits 0 (non-zero blocks or warns the agent): ${r.stderr}`);
  assert.ok(isHookAgent(agent));
  // Claude Code and Codex add stdout to the conversation; Cursor, Gemini CLI and Cline parse it as their answer.
  assert.equal(r.stdout.trim(), HOOK_AGENTS[agent].stdout, 'stdout holds only the agent’s neutral answer');
  return { stdout: r.stdout, stderr: r.stderr };
}

describe('hook recorder: the same session through every agent adapter (waypoint hook <agent>)', function () {
  this.timeout(300_000);
  before(() => buildCli());

  for (const agent of AGENTS) {
    describe(agent, () => {
      let ws: ReturnType<typeof tmpDir>;
      beforeEach(() => {
        ws = tmpDir(`wp-hooks-${agent}-`);
        fs.writeFileSync(path.join(ws.dir, 'a.txt'), 'hello\n');
        fs.writeFileSync(path.join(ws.dir, 'b.txt'), 'old\n');
        fs.writeFileSync(path.join(ws.dir, 'mine.txt'), 'mine\n');
      });
      afterEach(() => ws.cleanup());

      it('records one task with the agent’s plan, resumes it, and rolls back only the agent’s changes (shell ones included)', async () => {
        const transcript = path.join(ws.dir, '..', `${path.basename(ws.dir)}-transcript.jsonl`);
        const f = load(agent, { WORKSPACE: ws.dir, TRANSCRIPT: transcript });
        assert.ok(f.docs.length > 0, 'every fixture names the documentation its payloads come from');
        if (f.expect.lastMessage) {
          fs.writeFileSync(transcript, [JSON.stringify({ type: 'user', message: { role: 'user', content: 'go' } }), JSON.stringify({ type: 'assistant', message: { role: 'assistant', content: [{ type: 'text', text: f.expect.lastMessage }] } })].join('\n') + '\n');
        }
        for (const step of f.session) {
          act(ws.dir, step.before);
          const out = hook(agent, ws.dir, step.payload);
          assert.doesNotMatch(out.stderr, /not recorded/, `every documented payload is recorded: ${out.stderr}`);
          act(ws.dir, step.then);
        }
        fs.rmSync(transcript, { force: true });

        const engine = await openEngine(ws.dir);
        let taskId: string;
        let baseId: string;
        try {
          const tasks = engine.tasks();
          assert.equal(tasks.length, 1, 'one task for the whole session, resumed included');
          const d = engine.taskDetail(tasks[0].id);
          taskId = d.task.id;
          baseId = d.task.baseCheckpointId!;
          assert.equal(d.task.agent, agent);
          assert.equal(d.task.state, 'running', 'the resumed session continues the task');
          if (f.session.some((x) => /SessionEnd|sessionEnd|TaskCancel/.test(String(x.payload.hook_event_name ?? x.payload.hookEventName ?? x.payload.hookName))))
            assert.ok(d.task.attempt >= 2, 'the ended session was resumed: the same task, a new attempt');
          assert.deepEqual(
            d.steps.filter((s) => s.id.startsWith('todo-')).map((s) => s.title),
            f.expect.plan,
            'the plan is the agent’s own todo list',
          );
          const shell = d.sideEffects.filter((e) => e.kind === 'shell');
          assert.equal(shell.length, 1, 'the shell call is recorded once');
          assert.equal(shell[0].status, 'done');
          assert.ok(d.checkpoints.some((c) => c.kind === 'tool_end'), 'tool calls are bracketed by checkpoints');
          const turns = engine.queries.turns(taskId);
          assert.ok(turns.length >= 1, 'the first turn has its digest');
          assert.match(turns[0].prompt, /\S/);
          assert.ok(turns[0].tools.shell >= 1, 'the digest counts the shell call');
          if (f.expect.lastMessage) assert.equal(turns[0].lastMessage, f.expect.lastMessage);
          const ctx = await engine.resumeContext(taskId);
          assert.equal(ctx.conversation.recent[0].prompt, turns[0].prompt, 'the resume context gives the conversation back');
          assert.match(ctx.markdown, /## Conversation/);
          // The review classifies with the same rule: the shell command's files are the agent's, not drift.
          const owners = await engine.changesByOwner(taskId, baseId);
          assert.deepEqual([...owners.agent].sort(), ['a.txt', 'b.txt', 'gen.txt']);
          assert.deepEqual([...owners.person].sort(), ['mine.txt']);
        } finally {
          await engine.close();
        }

        const r = cli(['rollback', '--task', taskId, '--to', baseId, '--agent-only', '--yes', '--workspace', ws.dir]);
        assert.equal(r.status, 0, r.stderr + r.stdout);
        assert.equal(fs.readFileSync(path.join(ws.dir, 'a.txt'), 'utf8'), 'hello\n', 'the agent’s edit is rolled back');
        assert.equal(fs.readFileSync(path.join(ws.dir, 'b.txt'), 'utf8'), 'old\n', 'the file its shell command changed is rolled back');
        assert.equal(fs.existsSync(path.join(ws.dir, 'gen.txt')), false, 'the file its shell command created is removed');
        assert.equal(fs.readFileSync(path.join(ws.dir, 'mine.txt'), 'utf8'), PERSON, 'the person’s edit is kept');
      });

      it('records nothing twice when the whole session is delivered again', () => {
        const f = load(agent, { WORKSPACE: ws.dir, TRANSCRIPT: path.join(ws.dir, 'none.jsonl') });
        const once = f.session.slice(0, 4);
        for (const s of once) hook(agent, ws.dir, s.payload);
        const n = eventCount(ws.dir);
        // Agents without call ids pair hooks by content, so only those with ids can recognise a repeated tool hook.
        const repeatable = once.filter((s) => !/Tool|tool|Shell|FileEdit/.test(JSON.stringify(s.payload.hook_event_name ?? s.payload.hookEventName ?? s.payload.hookName ?? '')) || JSON.stringify(s.payload).includes('tool_use_id'));
        for (const s of repeatable) hook(agent, ws.dir, s.payload);
        assert.equal(eventCount(ws.dir), n, 'a repeated hook appends nothing');
      });

      it('refuses a malformed payload on stderr, exits 0 and records nothing', () => {
        for (const bad of ['{not json', JSON.stringify({ hook_event_name: 'PreToolUse' }), JSON.stringify([1, 2])]) {
          const out = hook(agent, ws.dir, bad);
          assert.match(out.stderr, /not recorded/);
        }
        assert.equal(fs.existsSync(path.join(ws.dir, '.waypoint', 'waypoint.db')) ? eventCount(ws.dir) : 0, 0);
      });
    });
  }
});
