import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import { embedJson } from './protocol';

/** Where the page's bundle lives; also the panel's only local resource root. */
export function webviewRoot(extensionUri: vscode.Uri): vscode.Uri {
  return vscode.Uri.joinPath(extensionUri, 'dist', 'webview');
}

export function webviewOptions(extensionUri: vscode.Uri): vscode.WebviewPanelOptions & vscode.WebviewOptions {
  return { enableScripts: true, retainContextWhenHidden: false, enableFindWidget: true, localResourceRoots: [webviewRoot(extensionUri)] };
}

/** A panel's tab title: what it shows, then the task's title cut to fit a tab. */
export function panelTitle(what: string, taskTitle: string): string {
  return `${what}: ${taskTitle.length > 40 ? `${taskTitle.slice(0, 39)}…` : taskTitle}`;
}

/**
 * A new page panel with its final options and title from the start. Changing a
 * webview's options or title after creation costs the window a round of work while
 * the webview is being set up (the review's first frame came ~50 ms later when its
 * options and title were set after `createWebviewPanel`; see docs/benchmarks-history.md), and the
 * panel options (find widget) only count at creation.
 */
export function createPagePanel(viewType: string, title: string, extensionUri: vscode.Uri): vscode.WebviewPanel {
  return vscode.window.createWebviewPanel(viewType, title, vscode.ViewColumn.Active, webviewOptions(extensionUri));
}

/**
 * Gives a restored panel (a window reload) the options a new one is created with,
 * leaving a panel that has them alone: setting them again is not free.
 */
export function ensureWebviewOptions(webview: vscode.Webview, extensionUri: vscode.Uri): void {
  const want = webviewOptions(extensionUri);
  const have = webview.options;
  const roots = (r: readonly vscode.Uri[] | undefined) => (r ?? []).map((u) => u.toString()).join('\n');
  if (have.enableScripts === want.enableScripts && roots(have.localResourceRoots) === roots(want.localResourceRoots)) return;
  webview.options = want;
}

/**
 * A Waypoint webview page shell (the review panel's and the task timeline's). Strict CSP:
 * nothing runs or styles the page but our own nonce'd script and stylesheet; no inline
 * style attribute, no eval. The page renders everything with DOM APIs. `first`, when
 * given, is the page's first model, carried in a JSON data block (never executed; `<`
 * escaped so no text in it can close the block) and parsed by the page with the same
 * schema as any message: the page draws it without waiting for a round trip to the
 * extension host.
 *
 * The bundle's script and stylesheet are written into the document (read once per
 * window): VS Code shows a webview's frame only at its document's `load`, which waits
 * for every fetch, and each fetch goes through the webview's service worker to the
 * extension's files (the review's script began 106–134 ms after its navigation with
 * fetched assets, 55–105 ms written in; see docs/benchmarks-history.md).
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
    `style-src 'nonce-${nonce}' ${webview.cspSource}`,
    `font-src ${webview.cspSource}`,
    `img-src ${webview.cspSource}`,
  ].join('; ');
  const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  const first = page.first ? `<script type="application/json" id="${page.first.id}">${embedJson(page.first.value)}</script>\n` : '';
  const css = inlineAsset(root, `${page.bundle}.css`);
  const js = inlineAsset(root, `${page.bundle}.js`);
  const styleTag = css !== undefined ? `<style nonce="${nonce}">${css}</style>` : `<link rel="stylesheet" href="${style.toString()}">`;
  // `data-bundle`: where the bundle lives, for the scripts it loads later beside it (the highlighter).
  const scriptTag =
    js !== undefined ? `<script nonce="${nonce}" data-bundle="${esc(script.toString())}">${js}</script>` : `<script nonce="${nonce}" src="${script.toString()}"></script>`;
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
${styleTag}
<title>${esc(page.title)}</title>
</head>
<body>
<main id="app" aria-busy="true"><p>${esc(page.loading)}</p></main>
${first}${scriptTag}
</body>
</html>`;
}

const assets = new Map<string, { stamp: string; text: string | null }>();

/**
 * A page's bundled stylesheet or script text, for writing into its document; read again
 * only when the file changed (one stat per page: a rebuilt bundle, as `npm run watch`
 * writes, is the one the next page gets). `undefined` (fetch it as usual) when it cannot
 * be read or holds text that could end its element early (`</`, `<!--`).
 */
function inlineAsset(root: vscode.Uri, name: string): string | undefined {
  const file = vscode.Uri.joinPath(root, name).fsPath;
  let stamp: string;
  try {
    const st = fs.statSync(file);
    stamp = `${st.mtimeMs}:${st.size}:${st.ino}`;
  } catch {
    return undefined;
  }
  const known = assets.get(file);
  if (known?.stamp === stamp) return known.text ?? undefined;
  let text: string | null;
  try {
    // The source map comment goes: the page has no URL of its own to resolve it against.
    text = fs.readFileSync(file, 'utf8').replace(/\n?\/([/*])# sourceMappingURL=\S*\s*(\*\/)?\s*$/, '\n');
    if (/<\/|<!--/.test(text)) text = null;
  } catch {
    text = null;
  }
  assets.set(file, { stamp, text });
  return text ?? undefined;
}

/** The review panel's page (the panel posts its first listing as soon as it is made; see panel.ts). */
export function reviewHtml(webview: vscode.Webview, extensionUri: vscode.Uri, title: string): string {
  return pageShell(webview, extensionUri, { bundle: 'main', title, loading: 'Loading the review…' });
}
