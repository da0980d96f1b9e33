import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';
import { embedJson } from '../review/protocol';
import { webviewRoot } from '../review/html';
import { FIRST_TIMELINE_ID, type TimelineModel } from './protocol';

/**
 * The timeline page shell, under the review panel's rules: a strict CSP (our own
 * nonce'd script and stylesheet only; no inline style, no eval), and the first model
 * carried in an inert JSON data block (`<` escaped) that the page parses with the
 * same schema as any message, so it draws without a round trip to the host.
 */
export function timelineHtml(webview: vscode.Webview, extensionUri: vscode.Uri, title: string, first?: TimelineModel): string {
  const nonce = randomBytes(16).toString('base64');
  const root = webviewRoot(extensionUri);
  const script = webview.asWebviewUri(vscode.Uri.joinPath(root, 'timeline.js'));
  const style = webview.asWebviewUri(vscode.Uri.joinPath(root, 'timeline.css'));
  const csp = ["default-src 'none'", `script-src 'nonce-${nonce}'`, `style-src ${webview.cspSource}`, `font-src ${webview.cspSource}`, `img-src ${webview.cspSource}`].join('; ');
  const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style.toString()}">
<title>${esc(title)}</title>
</head>
<body>
<main id="app" aria-busy="true"><p>Loading the timeline…</p></main>
${first ? `<script type="application/json" id="${FIRST_TIMELINE_ID}">${embedJson(first)}</script>\n` : ''}<script nonce="${nonce}" src="${script.toString()}"></script>
</body>
</html>`;
}
