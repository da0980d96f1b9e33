import * as vscode from 'vscode';
import { Disposable } from './disposable';
import type { EngineHost } from './engineHost';
import { metricsMarkdown } from './metricsMarkdown';

/**
 * `Show Task Events`: a task's event log as a read-only JSON document. Served by a
 * TextDocumentContentProvider, so VS Code shows it read-only and refreshes it when
 * the task records new events.
 */
export const EVENTS_SCHEME = 'waypoint-events';

export function eventsUri(taskId: string): vscode.Uri {
  return vscode.Uri.from({ scheme: EVENTS_SCHEME, path: `/${taskId}.events.json` });
}

/** `Show Storage Usage`: bytes per task and in total, as a read-only Markdown document. */
export function storageUri(): vscode.Uri {
  return vscode.Uri.from({ scheme: EVENTS_SCHEME, path: '/Waypoint storage.md' });
}

/** `Show Metrics`: tasks, retries, interruptions, durations… as a read-only Markdown document shown in the preview. */
export function metricsUri(): vscode.Uri {
  return vscode.Uri.from({ scheme: EVENTS_SCHEME, path: '/Waypoint metrics.md' });
}

/** Metrics read every event; a burst of changes (a heartbeat, a step) refreshes them once. */
const METRICS_REFRESH_MS = 1500;

export class EventsDocumentProvider extends Disposable implements vscode.TextDocumentContentProvider {
  private readonly _onDidChange = this.register(new vscode.EventEmitter<vscode.Uri>());
  readonly onDidChange = this._onDidChange.event;
  private metricsTimer: NodeJS.Timeout | undefined;

  constructor(private readonly host: EngineHost) {
    super();
    this.register(vscode.workspace.registerTextDocumentContentProvider(EVENTS_SCHEME, this));
    this.register(
      host.onDidChange((e) => {
        const open = vscode.workspace.textDocuments.filter((d) => d.uri.scheme === EVENTS_SCHEME);
        for (const d of open) {
          if (d.uri.path === metricsUri().path) {
            this.metricsTimer ??= setTimeout(() => {
              this.metricsTimer = undefined;
              this._onDidChange.fire(d.uri);
            }, METRICS_REFRESH_MS);
            continue;
          }
          const id = taskIdOf(d.uri);
          if (!e || e.taskIds.includes(id)) this._onDidChange.fire(d.uri);
        }
      }),
    );
    this.register({ dispose: () => clearTimeout(this.metricsTimer) });
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const engine = await this.host.api();
    if (uri.path === metricsUri().path) return metricsMarkdown(await engine.stats());
    if (uri.path === storageUri().path) {
      const r = await engine.storage();
      const mb = (n: number) => `${(n / 1e6).toFixed(2)} MB`;
      return [
        '# Waypoint storage',
        '',
        `Blob store on disk: **${mb(r.totalBytes)}** · file content referenced by checkpoints: ${mb(r.referencedBytes)} in ${r.blobs} blobs (each stored once).`,
        '',
        '| task | checkpoints | unique | shared |',
        '| --- | ---: | ---: | ---: |',
        ...r.tasks.map((t) => `| ${(t.title ?? t.taskId).replace(/\|/g, '\\|')} | ${t.checkpoints} | ${mb(t.uniqueBytes)} | ${mb(t.sharedBytes)} |`),
        '',
        '“Unique” is what deleting the task (then Waypoint: Prune) would free.',
        '',
      ].join('\n');
    }
    const events = await engine.events({ taskId: taskIdOf(uri) });
    return JSON.stringify(events, null, 2) + '\n';
  }
}

function taskIdOf(uri: vscode.Uri): string {
  return uri.path.replace(/^\//, '').replace(/\.events\.json$/, '');
}
