import * as path from 'node:path';
import type * as HookFastPath from './hookFastPath';
import type * as TasksAllFast from './tasksAllFast';
import type * as CheckpointFast from './checkpointFastPath';

/**
 * The `waypoint` executable (dist/cli.js). Every command but a relayed hook loads the
 * full CLI (dist/waypoint-cli.js); a hook whose store has a serving owner is answered
 * by the small fast path, because agents wait for hooks around every tool call;
 * `checkpoint` to a serving owner by its own (checkpointFastPath.ts), because an owner
 * that watches the tree answers in milliseconds; and `tasks --all` on a team store by
 * its own (tasksAllFast.ts): a listing should cost a query, not the full CLI's load. Each fast path is required only by its own command
 * (the bundler keeps a required module's code uninitialised until then): a hook does
 * not load `pg`, a listing does not load the hook's HTTP client.
 */
type FullCli = { runAsCli(argv: string[], o?: { hookInput?: string }): void };

function full(argv: string[], hookInput?: string): void {
  // A runtime path, so the bundler leaves the full CLI in its own file.
  const cli = require(path.join(__dirname, 'waypoint-cli.js')) as FullCli;
  cli.runAsCli(argv, hookInput === undefined ? {} : { hookInput });
}

const argv = process.argv.slice(2);
if (argv[0] === 'hook') {
  const { fastHook } = require('./hookFastPath') as typeof HookFastPath;
  fastHook(argv).then(
    (r) => {
      if (r.handled) process.exit(0);
      else full(argv, r.hookInput);
    },
    () => full(argv),
  );
} else if (argv[0] === 'tasks') {
  const { fastTasksAll } = require('./tasksAllFast') as typeof TasksAllFast;
  fastTasksAll(argv).then(
    (r) => {
      // Exit once the listing reached the OS (a pipe is written asynchronously).
      if (r.handled) process.stdout.write(r.output, () => process.exit(0));
      else full(argv);
    },
    () => full(argv),
  );
} else if (argv[0] === 'checkpoint') {
  const { fastCheckpoint } = require('./checkpointFastPath') as typeof CheckpointFast;
  fastCheckpoint(argv).then(
    (r) => {
      if (!r.handled) return full(r.argv);
      if (r.stderr) process.stderr.write(r.stderr);
      process.stdout.write(r.stdout, () => process.exit(0));
    },
    () => full(argv),
  );
} else full(argv);
