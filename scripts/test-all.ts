// `npm test`: the whole suite in the order that fails fastest, with the VS Code
// harness installing in the background while the plain-Node tests run (the install
// is mostly download and native compile; the unit tests mostly fsync and child
// processes), which takes minutes off a fresh machine's run. Exit code = the first
// failure's.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from './harness/versions';

function run(cmd: string, args: string[], opts: { log?: string } = {}): { child: ChildProcess; done: Promise<number> } {
  const out = opts.log ? fs.openSync(opts.log, 'w') : 'inherit';
  const child = spawn(cmd, args, { cwd: repoRoot, stdio: ['ignore', out, out], env: process.env });
  const done = new Promise<number>((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
  return { child, done };
}

async function step(name: string, script: string): Promise<void> {
  process.stdout.write(`\n=== ${name}\n`);
  const code = await run('npm', ['run', '--silent', script]).done;
  if (code !== 0) {
    process.stdout.write(`\n${name} failed (exit ${code})\n`);
    process.exit(code);
  }
}

async function main(): Promise<void> {
  fs.mkdirSync(path.join(repoRoot, 'test-output'), { recursive: true });
  const installLog = path.join(repoRoot, 'test-output', 'harness-install.log');
  const t0 = Date.now();
  const install = run('npm', ['run', '--silent', 'test:harness-install'], { log: installLog });
  process.stdout.write(`(installing the VS Code harness in the background; log: ${path.relative(repoRoot, installLog)})\n`);
  try {
    await step('typecheck', 'typecheck');
    await step('lint (layering)', 'lint');
    await step('unit tests', 'test:unit');
    // The real agent binaries (pinned, installed once into .agents-cache/) against a scripted model: about a minute.
    await step('real agents (scripted model)', 'test:agents');
  } catch (e) {
    install.child.kill();
    throw e;
  }
  const code = await install.done;
  process.stdout.write(`\n=== harness install (${Math.round((Date.now() - t0) / 1000)} s since start)\n${fs.readFileSync(installLog, 'utf8').split('\n').slice(-5).join('\n')}\n`);
  if (code !== 0) {
    process.stdout.write(`harness install failed (exit ${code}); see ${installLog}\n`);
    process.exit(code);
  }
  await step('integration tests (real VS Code)', 'test:integration');
  await step('VSIX contents', 'test:package');
  await step('UI tests (browser)', 'test:e2e');
  process.stdout.write(`\nall suites passed in ${Math.round((Date.now() - t0) / 1000)} s\n`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
