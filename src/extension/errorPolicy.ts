import * as vscode from 'vscode';
import { errorMessage, isWaypointError } from '../core/model/errors';
import { displayText } from '../core/model/displayText';
import { withoutIds } from './labelText';

/**
 * The one error policy of the extension's surfaces. A refusal — a WaypointError with
 * a user-facing code (illegal transition, not found, a conflict…) — is the engine
 * saying "not now, and here is why": a warning. Anything else (an I/O failure, a
 * corrupt store, a bug) is an error, with Show Log because the log has the detail.
 */
export function isRefusal(e: unknown): boolean {
  return isWaypointError(e) && e.code !== 'io' && e.code !== 'corrupt';
}

/** Logs the failure (`[area] what failed: …`) and tells the person per the policy above. */
export function reportFailure(log: vscode.LogOutputChannel, area: string, what: string, e: unknown, names?: ReadonlyMap<string, string>): void {
  // A refusal may quote recorded text (a hold's reason, a title): shown escaped. The log keeps
  // the ids (to look things up); the toast names tasks, steps and checkpoints by title.
  const logged = displayText(errorMessage(e));
  log.error(`[${area}] ${what} failed: ${logged}`);
  const msg = displayText(withoutIds(errorMessage(e), names));
  if (isWaypointError(e) && e.code === 'store_unavailable') {
    // The team store went away mid-operation and its log gave up retrying: it refuses writes
    // until reopened. Retry reopens it (nothing acknowledged is lost: it is all in the store).
    void vscode.window.showErrorMessage(`Waypoint: ${msg}`, 'Retry', 'Show Log').then((a) => {
      if (a === 'Retry') void vscode.commands.executeCommand('waypoint.reconnectTeamStore');
      else if (a) log.show(true);
    });
  } else if (isRefusal(e)) {
    void vscode.window.showWarningMessage(`Waypoint: ${msg}`);
  } else {
    void vscode.window.showErrorMessage(`Waypoint: ${msg}`, 'Show Log').then((a) => a && log.show(true));
  }
}
