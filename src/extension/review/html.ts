import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';
import { embedJson, FIRST_LISTING_ID, type HostMessage } from './protocol';

/** Where the page's bundle lives; also the panel's only local resource root. */
export function webviewRoot(extensionUri: vscode.Uri): vscode.Uri {
  return vscode.Uri.joinPath(extensionUri, 'dist', 'webview');
}

export function webviewOptions(extensionUri: vscode.Uri): vscode.WebviewPanelOptions & vscode.WebviewOptions {
  return { enableScripts: true, retainContextWhenHidden: false, enableFindWidget: true, localResourceRoots: [webviewRoot(extensionUri)] };
}

/**
 * A Waypoint webview page shell (the review panel's and the task timeline's). Strict CSP:
 * nothing loads but our own nonce'd script and our own stylesheet; no inline style, no
 * eval. The page renders everything with DOM APIs. `first`, when given, is the page's
 * first model, carried in a JSON data block (never executed; `<` escaped so no text in
 * it can close the block) and parsed by the page with the same schema as any message:
 * the page draws it without waiting for a round trip to the extension host.
 */
export function pageShell(
  webview: vscode.Webview,
  extensionUri: vscode.Uri,
  page: { bundle: string; title: string; loading: string; first?: { id: string; value: unknown } },
): string {
  const nonce = randomBytes(16).toString('base64');
  const root = webviewRoot(extensionUri);
  const script = webview.asWebviewUri(vscode.Uri.joinPath(root, `${page.bundle}.js`));
  const style = webview.asWebviewUri(vscode.Uri.joinPath(root, `${page.bundle}.css`));
  const csp = [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src ${webview.cspSource}`,
    `font-src ${webview.cspSource}`,
    `img-src ${webview.cspSource}`,
  ].join('; ');
  const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  const first = page.first ? `<script type="application/json" id="${page.first.id}">${embedJson(page.first.value)}</script>\n` : '';
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style.toString()}">
<title>${esc(page.title)}</title>
</head>
<body>
<main id="app" aria-busy="true"><p>${esc(page.loading)}</p></main>
${first}<script nonce="${nonce}" src="${script.toString()}"></script>
</body>
</html>`;
}

/** The review panel's page; `first`, when given, is the review's first `init` (else it is posted after `ready`). */
export function reviewHtml(webview: vscode.Webview, extensionUri: vscode.Uri, title: string, first?: Extract<HostMessage, { type: 'init' }>): string {
  return pageShell(webview, extensionUri, { bundle: 'main', title, loading: 'Loading the review…', first: first && { id: FIRST_LISTING_ID, value: first } });
}
