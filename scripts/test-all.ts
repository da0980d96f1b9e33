// `npm test`: the whole suite in the order that fails fastest, with what does not need
// the VS Code harness running while the harness installs in the background (the install
// is mostly download and native compile; the unit tests mostly fsync and child
// processes), which takes minutes off a fresh machine's run. Exit code = the first
// failure's.
//
// What runs side by side, and why it may:
// - typecheck and lint: both only read the sources.
// - the unit tests (mocha --parallel, test/unit/.mocharc.parallel.cjs) and the real-agent
//   suite: both run the dev build of dist/, made once here first, so neither rebuilds it
//   under the other (WAYPOINT_TEST_CLI_BUILT); every test works in its own temp dirs.
// The VSIX, integration and UI suites each rebuild dist/ (production or dev) and so run
// one after another, after the harness is in. Each step's time is printed, so a CI log
// shows where the minutes went (docs/test-times.md).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from './harness/versions';

const t0 = Date.now();
const since = (t: number) => `${Math.round((Date.now() - t) / 1000)} s`;
const outDir = path.join(repoRoot, 'test-output');
const running = new Set<ChildProcess>();

interface Job {
  name: string;
  /** Where its output went when it did not share the terminal. */
  log?: string;
  done: Promise<number>;
}

/** `npm run <script>`, to the terminal or (side by side with another) to a log file printed when it ends. */
function start(name: string, script: string, opts: { log?: boolean; env?: NodeJS.ProcessEnv } = {}): Job {
  const log = opts.log ? path.join(outDir, `${script.replace(/[^a-z0-9]+/gi, '-')}.log`) : undefined;
  const out = log ? fs.openSync(log, 'w') : 'inherit';
  const child = spawn('npm', ['run', '--silent', script], { cwd: repoRoot, stdio: ['ignore', out, out], env: { ...process.env, ...opts.env } });
  running.add(child);
  const t = Date.now();
  const done = new Promise<number>((resolve) =>
    child.on('exit', (code, signal) => {
      running.delete(child);
      if (typeof out === 'number') fs.closeSync(out);
      process.stdout.write(`\n--- ${name}: ${code === 0 ? 'passed' : `FAILED (exit ${code ?? signal})`} in ${since(t)}\n`);
      resolve(code ?? 1);
    }),
  );
  return { name, log, done };
}

/** Waits for jobs started together; prints the logged ones' output; stops everything at the first failure. */
async function all(...jobs: Job[]): Promise<void> {
  const codes = await Promise.all(jobs.map((j) => j.done));
  for (const j of jobs) {
    if (j.log) process.stdout.write(`\n=== ${j.name} (output)\n${fs.readFileSync(j.log, 'utf8')}`);
  }
  const bad = jobs.findIndex((_, i) => codes[i] !== 0);
  if (bad >= 0) fail(`${jobs[bad].name} failed (exit ${codes[bad]})`, codes[bad]);
}

function fail(message: string, code: number): never {
  for (const c of running) c.kill();
  process.stdout.write(`\n${message}\n`);
  process.exit(code);
}

async function step(name: string, script: string, env?: NodeJS.ProcessEnv): Promise<void> {
  process.stdout.write(`\n=== ${name}\n`);
  await all(start(name, script, { env }));
}

async function main(): Promise<void> {
  fs.mkdirSync(outDir, { recursive: true });
  const install = start('harness install', 'test:harness-install', { log: true });
  process.stdout.write(`(installing the VS Code harness in the background; log: ${path.relative(repoRoot, install.log!)})\n`);

  process.stdout.write('\n=== typecheck and lint (layering), side by side\n');
  await all(start('typecheck', 'typecheck', { log: true }), start('lint (layering)', 'lint', { log: true }));

  await step('build (dist/, shared by the unit and real-agent suites)', 'build');
  const built = { WAYPOINT_TEST_CLI_BUILT: '1' };
  process.stdout.write('\n=== unit tests, with the real agents (scripted model) beside them\n');
  // The real agent binaries (pinned, installed once into .agents-cache/) need no VS Code: about a minute, mostly waiting on the agent.
  const agents = start('real agents (scripted model)', 'test:agents', { log: true, env: built });
  await all(start('unit tests', 'test:unit', { env: built }), agents);

  const code = await install.done;
  process.stdout.write(`\n=== harness install (done ${since(t0)} after start)\n${fs.readFileSync(install.log!, 'utf8').split('\n').slice(-5).join('\n')}\n`);
  if (code !== 0) fail(`harness install failed (exit ${code}); see ${install.log}`, code);
  await step('integration tests (real VS Code)', 'test:integration');
  await step('VSIX contents', 'test:package');
  await step('UI tests (browser)', 'test:e2e');
  process.stdout.write(`\nall suites passed in ${since(t0)}\n`);
}

main().catch((e) => {
  console.error(e);
  fail('npm test stopped on an error', 1);
});
