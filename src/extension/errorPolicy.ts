import * as vscode from 'vscode';
import { errorMessage, isWaypointError } from '../core/model/errors';

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
export function reportFailure(log: vscode.LogOutputChannel, area: string, what: string, e: unknown): void {
  const msg = errorMessage(e);
  log.error(`[${area}] ${what} failed: ${msg}`);
  if (isRefusal(e)) {
    void vscode.window.showWarningMessage(`Waypoint: ${msg}`);
  } else {
    void vscode.window.showErrorMessage(`Waypoint: ${msg}`, 'Show Log').then((a) => a && log.show(true));
  }
}
