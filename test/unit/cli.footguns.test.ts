import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { buildCli, CLI } from '../support/mcp';
import { tmpDir } from '../support/tmp';
import { Plan } from '../../src/core/model/schema';

/**
 * The command line's footguns, each answered as a person expects: a typo is refused
 * with the nearest valid word, a command that changes files shows them first and needs
 * --yes, what a message claims is true, usage errors exit 2. The shipped CLI
 * (dist/cli.js) against real temporary workspaces; stdin is not a terminal here, so
 * nothing asks y/N.
 */

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

const PLAN = [
  { id: 'read', title: 'Read the code' },
  { id: 'change', title: 'Change it', dependsOn: ['read'] },
];

describe('cli: footguns', function () {
  // Each test spawns the CLI up to 16 times; on a machine at load 25 one spawn took ~10 s.
  this.timeout(600_000);
  before(() => buildCli());
  let root: ReturnType<typeof tmpDir>;
  let ws: string;
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.WAYPOINT_STORE;
  delete env.WAYPOINT_LOG;

  function run(args: string[], extraEnv: NodeJS.ProcessEnv = {}): Run {
    const r = spawnSync(process.execPath, [CLI, ...args, '--workspace', ws], { cwd: root.dir, encoding: 'utf8', timeout: 60_000, env: { ...env, ...extraEnv } });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  }
  function ok(args: string[]): Run {
    const r = run(args);
    assert.equal(r.status, 0, `${args.join(' ')}: ${r.stderr}`);
    return r;
  }
  function json<T>(args: string[]): T {
    return JSON.parse(ok([...args, '--json']).stdout) as T;
  }
  function start(): string {
    fs.writeFileSync(path.join(root.dir, 'plan.json'), JSON.stringify(PLAN));
    return json<{ taskId: string }>(['task', 'start', '--goal', 'g', '--plan', path.join(root.dir, 'plan.json')]).taskId;
  }
  const stepIds = (taskId: string) => json<{ steps: { id: string }[] }>(['show', '--task', taskId]).steps.map((s) => s.id);
  const read = (f: string) => fs.readFileSync(path.join(ws, f), 'utf8');

  beforeEach(() => {
    root = tmpDir('wp-cli-footguns-');
    ws = path.join(root.dir, 'ws');
    fs.mkdirSync(ws);
    fs.writeFileSync(path.join(ws, 'a.txt'), 'one\n');
  });
  afterEach(() => root.cleanup());

  it('a mistyped --step is refused with the plan’s ids and the nearest one, creating nothing; --ad-hoc creates it', () => {
    const t = start();
    const r = run(['step', 'start', '--task', t, '--step', 'raed']);
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /no step 'raed'; did you mean 'read'\?/);
    assert.match(r.stderr, /read \(pending\), change \(pending\)/);
    assert.match(r.stderr, /--ad-hoc/);
    assert.deepEqual(stepIds(t), ['read', 'change'], 'no ad hoc step was created');
    ok(['step', 'start', '--task', t, '--step', 'raed', '--ad-hoc']);
    assert.deepEqual(stepIds(t).sort(), ['change', 'raed', 'read']);
    ok(['step', 'start', '--task', t, '--step', 'read']);
  });

  it('step fail without --recoverable says the task failed and how to keep it retryable; its help says so too', () => {
    const t = start();
    ok(['step', 'start', '--task', t, '--step', 'read']);
    const r = ok(['step', 'fail', '--task', t, '--step', 'read', '--error', 'boom']);
    assert.match(r.stdout, /the task failed/);
    assert.match(r.stdout, /--recoverable to keep it retryable/);
    assert.match(ok(['step', 'fail', '--help']).stdout, /Without --recoverable the task fails/);
  });

  it('rollback --undo and fork show what they would change and need --yes, like rollback --to; nothing changes without it', () => {
    const t = start();
    const base = json<{ task: { baseCheckpointId: string } }>(['show', '--task', t]).task.baseCheckpointId;
    ok(['step', 'start', '--task', t, '--step', 'read']);
    fs.writeFileSync(path.join(ws, 'a.txt'), 'two\n');
    ok(['step', 'complete', '--task', t, '--step', 'read']);

    const to = run(['rollback', '--task', t, '--to', base]);
    assert.equal(to.status, 1);
    assert.match(to.stderr, /would change 1 file[\s\S]*a\.txt[\s\S]*--yes/);
    assert.equal(read('a.txt'), 'two\n');
    ok(['rollback', '--task', t, '--to', base, '--yes']);
    assert.equal(read('a.txt'), 'one\n');

    const undo = run(['rollback', '--task', t, '--undo']);
    assert.equal(undo.status, 1, 'the undo is not applied without --yes');
    assert.match(undo.stderr, /Undoing the last rollback[\s\S]*a\.txt[\s\S]*--yes/);
    assert.equal(read('a.txt'), 'one\n', 'files unchanged');
    assert.match(ok(['rollback', '--task', t, '--undo', '--preview']).stdout, /modify\s+a\.txt/);
    assert.equal(read('a.txt'), 'one\n');

    fs.writeFileSync(path.join(ws, 'a.txt'), 'three\n');
    const tasksBefore = json<unknown[]>(['tasks']).length;
    const fork = run(['fork', '--checkpoint', base]);
    assert.equal(fork.status, 1, 'a fork is not applied without --yes');
    assert.match(fork.stderr, /Forking from[\s\S]*a\.txt[\s\S]*--yes/);
    assert.equal(read('a.txt'), 'three\n');
    assert.equal(json<unknown[]>(['tasks']).length, tasksBefore, 'no task was created');
    const forked = json<{ taskId: string }>(['fork', '--checkpoint', base, '--yes']);
    assert.notEqual(forked.taskId, t);
    assert.equal(read('a.txt'), 'one\n');
    assert.equal(json<unknown[]>(['tasks']).length, tasksBefore + 1);
  });

  it('at a terminal, rollback --undo asks y/N: "n" changes nothing, "y" applies it', function () {
    if (spawnSync('script', ['--version']).status !== 0) this.skip();
    const t = start();
    const base = json<{ task: { baseCheckpointId: string } }>(['show', '--task', t]).task.baseCheckpointId;
    fs.writeFileSync(path.join(ws, 'a.txt'), 'two\n');
    ok(['rollback', '--task', t, '--to', base, '--yes']);
    // `script` gives the CLI a pseudo-terminal for stdin and stdout; the answer is typed once the question can be asked.
    const atTerminal = (answer: string) =>
      spawnSync('sh', ['-c', `(sleep 3; printf '${answer}\\n') | script -qec "$0 $1 rollback --task $2 --undo --workspace $3" /dev/null`, process.execPath, CLI, t, ws], { encoding: 'utf8', timeout: 60_000, env });
    const no = atTerminal('n');
    assert.match(no.stdout, /Undoing the last rollback[\s\S]*Apply it\? \[y\/N\]/);
    assert.match(no.stdout, /Nothing changed/);
    assert.equal(read('a.txt'), 'one\n');
    const yes = atTerminal('y');
    assert.match(yes.stdout, /Undid the last rollback/, yes.stdout);
    assert.equal(read('a.txt'), 'two\n');
  });

  it('the undo tells a way back that works, and does not claim a second --undo undoes it', () => {
    const t = start();
    const base = json<{ task: { baseCheckpointId: string } }>(['show', '--task', t]).task.baseCheckpointId;
    fs.writeFileSync(path.join(ws, 'a.txt'), 'two\n');
    ok(['rollback', '--task', t, '--to', base, '--yes']);
    assert.equal(read('a.txt'), 'one\n');
    const undo = ok(['rollback', '--task', t, '--undo', '--yes']);
    assert.equal(read('a.txt'), 'two\n');
    assert.doesNotMatch(undo.stdout, /itself undoable/);
    const back = /waypoint (rollback --task \S+ --to (\S+))/.exec(undo.stdout);
    assert.ok(back, undo.stdout);
    ok(['rollback', '--task', t, '--to', back[2], '--yes']);
    assert.equal(read('a.txt'), 'one\n', 'the way back the undo printed returns to the rolled-back files');
  });

  it('task resume on a failed task says it was failed, not running', () => {
    const t = start();
    ok(['step', 'start', '--task', t, '--step', 'read']);
    ok(['step', 'fail', '--task', t, '--step', 'read', '--error', 'boom']);
    const r = ok(['task', 'resume', '--task', t]);
    assert.match(r.stdout, /resuming a task that was failed/);
    assert.doesNotMatch(r.stdout, /was running/);
  });

  it('diff --task works in a local workspace: from the task’s base to the workspace now (--path narrows it)', () => {
    const t = start();
    fs.writeFileSync(path.join(ws, 'a.txt'), 'two\n');
    fs.writeFileSync(path.join(ws, 'b.txt'), 'new\n');
    const r = ok(['diff', '--task', t]);
    assert.match(r.stdout, /modified\s+a\.txt/);
    assert.match(r.stdout, /added\s+b\.txt/);
    const only = json<{ changes: { path: string }[] }>(['diff', '--task', t, '--path', 'b.txt']);
    assert.deepEqual(only.changes.map((c) => c.path), ['b.txt']);
    const patch = run(['diff', '--task', t, '--patch']);
    assert.equal(patch.status, 2);
    assert.doesNotMatch(patch.stderr, /--task reads a task from the team store/);
  });

  it('connect without an agent lists the agents (exit 2)', () => {
    const r = run(['connect']);
    assert.equal(r.status, 2);
    assert.doesNotMatch(r.stderr, /Unknown command 'connect'\./);
    for (const a of ['claude-code', 'cursor', 'codex', 'gemini-cli', 'cline', 'copilot-cli', 'vscode', 'qwen-code', 'opencode']) assert.ok(r.stderr.includes(a), `${a} in ${r.stderr}`);
    assert.match(run(['connect', 'claude']).stderr, /did you mean 'waypoint connect claude-code'/);
  });

  it('an unknown option says so in a sentence, with the nearest option (exit 2)', () => {
    const r = run(['tasks', '--stat', 'running']);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /unknown option --stat; did you mean --state\?/);
    assert.doesNotMatch(r.stderr, /positional argument/);
  });

  it('tasks --state with an unknown state is a usage error (exit 2) listing the states', () => {
    ok(['init']);
    const r = run(['tasks', '--state', 'runing']);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /did you mean running\?/);
    assert.match(r.stderr, /pending, planning, running/);
  });

  it('checkpoint --dirty with a path outside the workspace is refused (exit 2) and records nothing', () => {
    const t = start();
    const before = json<{ checkpoints: unknown[] }>(['checkpoints', '--task', t]).checkpoints.length;
    for (const p of ['../../etc/passwd', path.join(root.dir, 'plan.json'), '..']) {
      const r = run(['checkpoint', '--task', t, '--dirty', `a.txt,${p}`]);
      assert.equal(r.status, 2, `${p}: ${r.stderr}`);
      assert.match(r.stderr, /outside the workspace/);
    }
    assert.equal(json<{ checkpoints: unknown[] }>(['checkpoints', '--task', t]).checkpoints.length, before);
    ok(['checkpoint', '--task', t, '--dirty', path.join(ws, 'a.txt')]);
  });

  it('the engine’s own log lines stay off an ordinary command’s stderr; --verbose and WAYPOINT_LOG show them', function () {
    ok(['task', 'start', '--goal', 'short lease', '--lease-ttl', '1']);
    spawnSync('sleep', ['1.5']);
    const quiet = ok(['tasks']);
    assert.match(quiet.stdout, /interrupted/, 'the lease ran out');
    assert.equal(quiet.stderr, '', 'no engine log line on stderr');
    // The lease expiry is recorded once; a new one shows with --verbose.
    ok(['task', 'start', '--goal', 'short lease 2', '--lease-ttl', '1']);
    spawnSync('sleep', ['1.5']);
    assert.match(run(['tasks', '--verbose']).stderr, /interrupted: lease/);
    assert.match(run(['tasks'], { WAYPOINT_LOG: 'info' }).stderr, /\[store\] opened/);
    assert.equal(run(['tasks'], { WAYPOINT_LOG: 'loud' }).status, 2);
  });

  it('timeline --task: attempts with durations and outcomes, checkpoints, side effects, in time order; --json the same', () => {
    const t = start();
    ok(['step', 'start', '--task', t, '--step', 'read']);
    ok(['step', 'fail', '--task', t, '--step', 'read', '--error', 'flaky', '--recoverable']);
    ok(['step', 'start', '--task', t, '--step', 'read', '--wait']);
    ok(['effect', 'begin', '--task', t, '--key', 'pub', '--kind', 'shell', '--description', 'npm publish', '--step', 'read']);
    ok(['effect', 'end', '--task', t, '--key', 'pub', '--ok']);
    ok(['step', 'complete', '--task', t, '--step', 'read']);
    const text = ok(['timeline', '--task', t]).stdout;
    assert.match(text, /step read attempt 1\s+failed after [\d.]+ (ms|s)\s+Read the code\s+— flaky \(recoverable\)/);
    assert.match(text, /step read attempt 2\s+completed after/);
    // One definition of files changed: the base holds the workspace's files, it changed none of them.
    assert.match(text, /checkpoint c_\S+ task_base, holds \d+ files?\n/);
    assert.doesNotMatch(text, /task_base, \d+ files? changed/);
    assert.match(text, /side effect pub \(shell\) done after .*npm publish/);
    const j = json<{ entries: { at: number; kind: string; status?: string; attempt?: number }[] }>(['timeline', '--task', t]);
    const ats = j.entries.map((e) => e.at);
    assert.deepEqual(ats, [...ats].sort((a, b) => a - b), 'in time order');
    assert.deepEqual(j.entries.filter((e) => e.kind === 'attempt').map((e) => `${e.attempt}:${e.status}`), ['1:failed', '2:completed']);
    assert.ok(j.entries.some((e) => e.kind === 'side_effect' && e.status === 'done'));
    assert.equal(run(['timeline', '--task', 't_nope']).status, 1);
  });

  it('task start --help documents the plan file, and its example is a plan task start takes', () => {
    const help = ok(['task', 'start', '--help']).stdout;
    assert.match(help, /dependsOn/);
    assert.match(help, /maxAttempts/);
    const ex = help.slice(help.indexOf('Example:'));
    const plan = JSON.parse(ex.slice(ex.indexOf('['), ex.lastIndexOf(']') + 1)) as unknown;
    assert.ok(Plan.safeParse(plan).success);
    fs.writeFileSync(path.join(root.dir, 'example.json'), JSON.stringify(plan));
    const t = json<{ taskId: string }>(['task', 'start', '--goal', 'g', '--plan', path.join(root.dir, 'example.json')]).taskId;
    assert.equal(stepIds(t).length, (plan as unknown[]).length);
    assert.match(ok(['--help']).stdout, /Plan file \(--plan FILE\)/);
  });

  it('a workspace with a team identity, run without the store, says its tasks may be in the team store', () => {
    ok(['init']);
    const plain = ok(['tasks']);
    assert.doesNotMatch(plain.stdout, /team store/, 'no hint where no team store was used');
    fs.writeFileSync(path.join(ws, '.waypoint', 'workspace-id.json'), JSON.stringify({ id: 'ws-0123456789', createdAt: Date.now() }));
    assert.match(ok(['tasks']).stdout, /records into a team store; .*pass --store .* or set WAYPOINT_STORE/);
    const show = run(['show', '--task', 't_elsewhere']);
    assert.equal(show.status, 1);
    assert.match(show.stderr, /Unknown task 't_elsewhere'.*records into a team store/);
  });
});
