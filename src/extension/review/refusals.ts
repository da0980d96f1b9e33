import * as vscode from 'vscode';
import { errorMessage, isWaypointError } from '../../core/model/errors';
import { CommitRefusedError, git } from '../../core/review/gitCli';

const COMMIT_AGAIN = 'Commit Again';

/**
 * Whether a failed commit is told by a notification (git's refusal, with its way out; or a
 * surprise, with the log) rather than in the page alone (a refusal with nothing to offer:
 * stale decisions, a task that cannot finish yet).
 */
export function wayOutOffered(e: unknown): boolean {
  return e instanceof CommitRefusedError || !isWaypointError(e);
}

/**
 * Shows why a review commit did not happen as a notification with the way out,
 * not only as text in the page. Nothing was changed, so every way out ends with
 * "Commit Again", which applies the very same decisions. A refusal (git's, or a
 * decision on stale content) is a warning; anything else is an error with the log.
 */
export async function offerWayOut(e: unknown, log: vscode.LogOutputChannel, again: () => Promise<unknown>): Promise<void> {
  const text = `Waypoint: nothing was committed or changed. ${errorMessage(e)}`;
  if (!(e instanceof CommitRefusedError)) {
    if (isWaypointError(e)) return void (await vscode.window.showWarningMessage(text));
    const a = await vscode.window.showErrorMessage(text, 'Show Log');
    if (a) log.show();
    return;
  }
  const root = e.repoRoot;
  const actions: string[] =
    e.problem === 'identity'
      ? ['Set Identity…', 'Open Terminal']
      : e.problem === 'in_progress' || e.problem === 'unmerged'
        ? ['Open Source Control', COMMIT_AGAIN]
        : e.problem === 'commit_failed'
          ? [COMMIT_AGAIN, 'Show Log']
          : [COMMIT_AGAIN];
  const a = await vscode.window.showWarningMessage(text, ...actions);
  if (a === COMMIT_AGAIN) await again();
  else if (a === 'Show Log') log.show();
  else if (a === 'Open Source Control') await vscode.commands.executeCommand('workbench.view.scm');
  else if (a === 'Open Terminal') {
    // A terminal in the repository with the command typed, not run: the person fills in their name.
    const t = vscode.window.createTerminal({ name: 'Git identity', cwd: root ?? undefined });
    t.show();
    t.sendText('git config user.name "Your Name" && git config user.email you@example.com', false);
    const b = await vscode.window.showInformationMessage('Waypoint: after setting your git identity in the terminal, commit the review again (your decisions are kept).', COMMIT_AGAIN);
    if (b) await again();
  } else if (a === 'Set Identity…' && root) {
    if (await setIdentity(root, log)) await again();
  }
}

/** Asks for user.name and user.email (works offline) and sets them for this repository only. */
async function setIdentity(root: string, log: vscode.LogOutputChannel): Promise<boolean> {
  const current = async (key: string) => (await git(root, ['config', '--get', key])).stdout.trim();
  const name = await vscode.window.showInputBox({
    title: 'Git identity for this repository (1/2)',
    prompt: 'Your name, as commits record it (git config user.name)',
    value: await current('user.name'),
    ignoreFocusOut: true,
    validateInput: (v) => (v.trim() ? undefined : 'A name is needed.'),
  });
  if (name === undefined) return false;
  const email = await vscode.window.showInputBox({
    title: 'Git identity for this repository (2/2)',
    prompt: 'Your email, as commits record it (git config user.email)',
    value: await current('user.email'),
    ignoreFocusOut: true,
    validateInput: (v) => (/^[^\s@<>]+@[^\s@<>]+$/.test(v.trim()) ? undefined : 'An email address like you@example.com.'),
  });
  if (email === undefined) return false;
  for (const [key, value] of [['user.name', name.trim()], ['user.email', email.trim()]] as const) {
    const r = await git(root, ['config', key, value]);
    if (r.code !== 0) {
      void vscode.window.showErrorMessage(`Waypoint: git config ${key} failed: ${r.stderr.trim()}`);
      return false;
    }
  }
  log.info(`[review] set this repository's git identity (user.name, user.email) at the person's request`);
  return true;
}
