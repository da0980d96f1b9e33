// A scripted coding agent working on the sample project through the Waypoint CLI:
// a task with a 4-step plan, steps that really edit files, one real side effect
// (running the project's tests) recorded with write-ahead intent, and a last step
// left in progress when the agent "goes away", so its lease lapses and the task is
// interrupted — the state a person opens the demo to see.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { waypointCli } from './cli';

/**
 * Short on purpose: the agent stops mid-step and the demo waits past it. Not 2 s:
 * each CLI call renews the lease, but one call can take over a second on a busy
 * 2-core machine, and a lapse between two of the agent's own calls spoils the demo.
 */
const LEASE_TTL_S = 5;

const plan = [
  { id: 'read', title: 'Read slugify and its tests' },
  { id: 'max-length', title: 'Add a maxLength option to slugify', dependsOn: ['read'] },
  { id: 'tests', title: 'Cover maxLength with tests', dependsOn: ['max-length'] },
  { id: 'docs', title: 'Document maxLength in the README', dependsOn: ['max-length'] },
];

export interface DemoResult {
  taskId: string;
  state: string;
}

function edit(file: string, from: string, to: string): void {
  const text = fs.readFileSync(file, 'utf8');
  if (!text.includes(from)) throw new Error(`demo agent: ${file} does not contain the text it edits`);
  fs.writeFileSync(file, text.replace(from, () => to)); // a function: no $-patterns in `to`
}

/** `leaseTtlS`: longer for a test on a loaded machine, where one CLI call can take seconds. */
export async function runDemoAgent(workspace: string, log: (line: string) => void, opts: { leaseTtlS?: number } = {}): Promise<DemoResult> {
  const ttl = opts.leaseTtlS ?? LEASE_TTL_S;
  const cli = waypointCli(workspace);
  const planFile = path.join(workspace, '..', 'demo-plan.json');
  fs.writeFileSync(planFile, JSON.stringify(plan, null, 2));

  cli('init');
  const { taskId } = cli<{ taskId: string }>('task', 'start',
    '--goal', 'Add a maxLength option to slugify, with tests and docs',
    '--plan', planFile, '--agent', 'demo-agent', '--key', 'demo-task', '--lease-ttl', String(ttl));
  log(`task ${taskId} started with a ${plan.length}-step plan`);

  const step = (id: string, work: () => Record<string, unknown>, summary: string) => {
    cli('step', 'start', '--task', taskId, '--step', id);
    const outputs = work();
    cli('step', 'complete', '--task', taskId, '--step', id, '--outputs', JSON.stringify(outputs), '--summary', summary);
    log(`step ${id} completed`);
  };

  step('read', () => ({ files: ['src/slugify.js', 'test/slugify.test.js'] }), 'slugify joins words; no length limit yet');

  step('max-length', () => {
    const file = path.join(workspace, 'src', 'slugify.js');
    edit(file, ' * @param {{ separator?: string }} [options]', ' * @param {{ separator?: string, maxLength?: number }} [options]');
    edit(file, `  return transliterate(String(title))`, `  const slug = transliterate(String(title))`);
    edit(file, `    .replace(new RegExp(\`^\${escape(separator)}+|\${escape(separator)}+$\`, 'g'), '');\n}`,
      `    .replace(new RegExp(\`^\${escape(separator)}+|\${escape(separator)}+$\`, 'g'), '');
  if (options.maxLength === undefined || slug.length <= options.maxLength) return slug;
  // Cut at the last whole word that fits, so a slug never ends mid-word.
  const cut = slug.slice(0, options.maxLength + 1);
  const end = cut.lastIndexOf(separator);
  return end > 0 ? cut.slice(0, end) : slug.slice(0, options.maxLength);
}`);
    return { changed: ['src/slugify.js'] };
  }, 'maxLength cuts at a word boundary');

  // The agent starts the tests step, writes a test, runs the suite (a side effect,
  // recorded before and after), and then stops without completing the step.
  cli('step', 'start', '--task', taskId, '--step', 'tests');
  fs.appendFileSync(path.join(workspace, 'test', 'slugify.test.js'), `
test('slugify cuts long slugs at a word boundary', () => {
  assert.equal(slugify('The quick brown fox jumps', { maxLength: 15 }), 'the-quick-brown');
});
`);
  const effectKey = 'run-tests-1';
  const begin = cli<{ decision: string }>('effect', 'begin', '--task', taskId, '--key', effectKey,
    '--kind', 'shell', '--description', 'node --test test/', '--step', 'tests');
  if (begin.decision !== 'proceed') throw new Error(`demo agent: effect decision was ${begin.decision}, expected proceed`);
  const tests = spawnSync(process.execPath, ['--test', 'test/'], { cwd: workspace, encoding: 'utf8' });
  const passed = /^# pass (\d+)/m.exec(tests.stdout)?.[1];
  if (tests.status === 0) {
    cli('effect', 'end', '--task', taskId, '--key', effectKey, '--ok', '--result', JSON.stringify({ exitCode: 0, passed: Number(passed) }));
  } else {
    cli('effect', 'end', '--task', taskId, '--key', effectKey, '--error', `node --test exited ${tests.status}`);
  }
  log(`side effect "node --test test/" recorded (${tests.status === 0 ? `${passed} passed` : 'failed'})`);

  // The agent goes away mid-step: wait past its lease. Whoever owns the store then (a
  // background owner the first call started, or this process's next call) notices the
  // lapse: an owner sweeps every few seconds, so look until it has.
  log(`agent stops mid-step; waiting ${ttl + 1} s for its lease to lapse`);
  await new Promise((r) => setTimeout(r, (ttl + 1) * 1000));
  let state = 'missing';
  for (const until = Date.now() + 15_000; ; ) {
    const tasks = cli<{ id: string; state: string }[]>('tasks');
    state = tasks.find((t) => t.id === taskId)?.state ?? 'missing';
    if (state !== 'running' || Date.now() > until) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  log(`task ${taskId} is now ${state}`);
  return { taskId, state };
}
