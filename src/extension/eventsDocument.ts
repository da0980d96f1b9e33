import * as vscode from 'vscode';
import { Disposable } from './disposable';
import type { EngineHost } from './engineHost';
import { metricsMarkdown } from './metricsMarkdown';
import { eventsMarkdown } from './labelText';

/**
 * `Show Task Events`: a task's event log as a read-only Markdown document in words (local
 * times, grouped by step), with a "Show Raw JSON" link to the same log as JSON. Served by a
 * TextDocumentContentProvider, so VS Code shows them read-only and refreshes them when
 * the task records new events.
 */
export const EVENTS_SCHEME = 'waypoint-events';

/** The readable log (Markdown). */
export function eventsUri(taskId: string): vscode.Uri {
  return vscode.Uri.from({ scheme: EVENTS_SCHEME, path: `/${taskId}.events.md` });
}

/** The raw log, every event as recorded (JSON, epoch-millisecond times), for tools and bug reports. */
export function rawEventsUri(taskId: string): vscode.Uri {
  return vscode.Uri.from({ scheme: EVENTS_SCHEME, path: `/${taskId}.events.json` });
}

/** The words of the link in the readable log; a document link provider makes them open the raw log. */
export const RAW_LINK_TEXT = 'Show Raw JSON';

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
    // A plain link in the text editor (Ctrl/Cmd+click): the readable log leads to its raw JSON.
    this.register(
      vscode.languages.registerDocumentLinkProvider(
        { scheme: EVENTS_SCHEME },
        {
          provideDocumentLinks: (doc) => {
            if (!doc.uri.path.endsWith('.events.md')) return [];
            const line = doc.getText().split('\n').findIndex((l) => l.includes(RAW_LINK_TEXT));
            if (line < 0) return [];
            const col = doc.lineAt(line).text.indexOf(RAW_LINK_TEXT);
            const link = new vscode.DocumentLink(new vscode.Range(line, col, line, col + RAW_LINK_TEXT.length), rawEventsUri(taskIdOf(doc.uri)));
            link.tooltip = 'Open every event of this task as recorded (JSON)';
            return [link];
          },
        },
      ),
    );
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
    const taskId = taskIdOf(uri);
    const events = await engine.events({ taskId });
    if (uri.path.endsWith('.events.json')) return JSON.stringify(events, null, 2) + '\n';
    const d = await engine.taskDetail(taskId);
    return eventsMarkdown({ ...d, events, rawLink: `${RAW_LINK_TEXT} (Ctrl/Cmd+click) — every event as recorded, with epoch-millisecond times.` });
  }
}

function taskIdOf(uri: vscode.Uri): string {
  return uri.path.replace(/^\//, '').replace(/\.events\.(json|md)$/, '');
}
