import * as readline from 'node:readline';
import { WaypointError } from '../core/model/errors';
import { displayText } from '../core/model/displayText';
import type { Ctx } from './command';

/**
 * One rule for every command that changes the workspace's files (rollback, its undo,
 * fork): it shows what it would change first, and applies only with `--yes` — or, when
 * a person is at a terminal (stdin and stdout both a TTY, no --json), on their "y".
 * Anywhere else (a script, an agent) it refuses with the preview, changing nothing.
 */
export async function confirmChange(c: Ctx, preview: string): Promise<void> {
  if (c.values.yes === true) return;
  if (!c.json && process.stdin.isTTY && process.stdout.isTTY) {
    process.stdout.write(`${displayText(preview, { multiline: true })}\n`);
    if (await askYes('Apply it? [y/N] ')) return;
    throw new WaypointError('invalid_input', 'Nothing changed (not confirmed).');
  }
  throw new WaypointError('invalid_input', `${preview}\nNothing changed. Run again with --yes to apply it (or --preview to only look).`);
}

function askYes(question: string): Promise<boolean> {
  const rl = readline.createInterface({ input: process.stdin, output: process.stdout });
  return new Promise((resolve) => {
    let answered = false;
    rl.question(question, (a) => {
      answered = true;
      rl.close();
      resolve(/^y(es)?$/i.test(a.trim()));
    });
    rl.on('close', () => {
      if (!answered) resolve(false);
    });
  });
}
