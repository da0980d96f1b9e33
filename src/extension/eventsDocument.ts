import * as vscode from 'vscode';
import { Disposable } from './disposable';
import type { EngineHost } from './engineHost';

/**
 * `Show Task Events`: a task's event log as a read-only JSON document. Served by a
 * TextDocumentContentProvider, so VS Code shows it read-only and refreshes it when
 * the task records new events.
 */
export const EVENTS_SCHEME = 'waypoint-events';

export function eventsUri(taskId: string): vscode.Uri {
  return vscode.Uri.from({ scheme: EVENTS_SCHEME, path: `/${taskId}.events.json` });
}

export class EventsDocumentProvider extends Disposable implements vscode.TextDocumentContentProvider {
  private readonly _onDidChange = this.register(new vscode.EventEmitter<vscode.Uri>());
  readonly onDidChange = this._onDidChange.event;

  constructor(private readonly host: EngineHost) {
    super();
    this.register(vscode.workspace.registerTextDocumentContentProvider(EVENTS_SCHEME, this));
    this.register(
      host.onDidChange((e) => {
        const open = vscode.workspace.textDocuments.filter((d) => d.uri.scheme === EVENTS_SCHEME);
        for (const d of open) {
          const id = taskIdOf(d.uri);
          if (!e || e.taskIds.includes(id)) this._onDidChange.fire(d.uri);
        }
      }),
    );
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const engine = await this.host.get();
    const events = engine.events({ taskId: taskIdOf(uri) });
    return JSON.stringify(events, null, 2) + '\n';
  }
}

function taskIdOf(uri: vscode.Uri): string {
  return uri.path.replace(/^\//, '').replace(/\.events\.json$/, '');
}
