// What every integration suite needs: the extension under test, activated.
import * as vscode from 'vscode';
import pkg from '../../../package.json';

export const extensionId = `${pkg.publisher}.${pkg.name}`;

/** The API `activate()` returns (kept structural so tests do not import the extension's code). */
export interface WaypointApi {
  readonly activationMs: number;
  readonly activationCpuMs: number;
  engine(): Promise<import('../../../src/core/engine/engine').Engine>;
  statusText(): string;
  flushAutoCheckpoint(): Promise<void>;
  commandsSettled(): Promise<void>;
  treeRows(parentId?: string): Promise<{ id: string; label: string; description: string; contextValue: string }[]>;
  onDidRefreshTree: vscode.Event<void>;
  mcpServerDefinitions(): vscode.McpServerDefinition[];
  mcpEndpoint(): Promise<{ url: string; token: string } | undefined>;
  openReview(taskId: string): Promise<{ files: number; at: number; pageMs: number; page: { scriptMs: number; receivedMs: number; drawnMs: number; loadMs: number }; listingMs: number; pageSetAt: number; readyAt: number; postedAt: number }>;
  openTimeline(taskId: string): Promise<{ steps: number; attempts: number; at: number; pageMs: number; whole: boolean }>;
  nextRollbackPreview(): Promise<{ files: number; at: number }>;
  timelineState(taskId: string): { shown: { steps: number; attempts: number; at: number; pageMs: number; whole: boolean } | undefined; model: import('../../../src/extension/timeline/protocol').TimelineModel | undefined } | undefined;
  busy(): boolean;
  registeredCommands(): readonly string[];
  resumeOffered(): readonly string[];
}

/** Polls until `fn` returns a truthy value (the watcher and the views are asynchronous). */
export async function eventually<T>(fn: () => Promise<T> | T, what: string, timeoutMs = 15_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v as NonNullable<T>;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
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
