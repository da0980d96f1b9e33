// What every integration suite needs: the extension under test, activated.
import * as vscode from 'vscode';
import pkg from '../../../package.json';

export const extensionId = `${pkg.publisher}.${pkg.name}`;

/** The API `activate()` returns (kept structural so tests do not import the extension's code). */
export interface WaypointApi {
  readonly activationMs: number;
}

export function waypoint(): vscode.Extension<WaypointApi> {
  const ext = vscode.extensions.getExtension<WaypointApi>(extensionId);
  if (!ext) throw new Error(`extension ${extensionId} is not loaded in this host`);
  return ext;
}

export async function activated(): Promise<WaypointApi> {
  return waypoint().activate();
}

/** package.json as the editor loaded it (not the file on disk the tests were built from). */
export function manifest(): typeof pkg {
  return waypoint().packageJSON as typeof pkg;
}

/** A line in the test output (the launcher streams only prefixed host lines; see runner.ts). */
export function report(message: string): void {
  console.log(`${process.env.WAYPOINT_HOST_LOG_PREFIX ?? ''}${message}`);
}
