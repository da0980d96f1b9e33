import * as assert from 'node:assert/strict';
import Module from 'node:module';

/**
 * The review webview's page shell (src/extension/review/html.ts) under a strict
 * Content-Security-Policy: `default-src 'none'`, scripts only by nonce (no
 * 'unsafe-inline', no 'unsafe-eval', no host), everything else only from the
 * webview's own resource origin, and no inline script or handler in the markup.
 *
 * html.ts needs three things from the `vscode` module — `Uri.joinPath`, a webview's
 * `asWebviewUri` and `cspSource` — so this test supplies those (with the values VS
 * Code really uses) and checks the real generated HTML. The same policy is read back
 * from the live webview in the browser UI test (test/e2e/scenarios/review-xss.e2e.ts).
 */
/** What code-server 4.139 gives as `webview.cspSource` (read from the live page in the UI test). */
const CSP_SOURCES = ["'self'", 'https://*.vscode-cdn.net'];
const RESOURCE_ORIGIN = 'https://file+.vscode-resource.vscode-cdn.net';

class Uri {
  constructor(
    readonly scheme: string,
    readonly authority: string,
    readonly path: string,
  ) {}
  static file(p: string): Uri {
    return new Uri('file', '', p);
  }
  static joinPath(base: Uri, ...parts: string[]): Uri {
    return new Uri(base.scheme, base.authority, [base.path.replace(/\/$/, ''), ...parts].join('/'));
  }
  toString(): string {
    return `${this.scheme}://${this.authority}${this.path}`;
  }
}
const webview = { cspSource: CSP_SOURCES.join(' '), asWebviewUri: (u: Uri) => new Uri('https', new URL(RESOURCE_ORIGIN).host, u.path) };

type Loader = (request: string, parent: unknown, isMain: boolean) => unknown;
const M = Module as unknown as { _load: Loader };

function loadHtml(): typeof import('../../src/extension/review/html') {
  const original = M._load;
  M._load = (request, parent, isMain) => (request === 'vscode' ? { Uri } : original(request, parent, isMain));
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require('../../src/extension/review/html');
  } finally {
    M._load = original;
  }
}

function directives(html: string): Map<string, string[]> {
  const metas = [...html.matchAll(/<meta\s+http-equiv="Content-Security-Policy"\s+content="([^"]*)"/gi)];
  assert.equal(metas.length, 1, 'exactly one CSP meta tag');
  const map = new Map<string, string[]>();
  for (const part of metas[0][1].split(';')) {
    const [name, ...values] = part.trim().split(/\s+/);
    if (name) map.set(name.toLowerCase(), values);
  }
  return map;
}

describe('review webview: Content-Security-Policy of the generated page', () => {
  const { reviewHtml } = loadHtml();
  const ext = Uri.file('/home/u/.vscode/extensions/waypoint-dev.waypoint-0.1.0');
  const page = (title = 'Review: t_1') => reviewHtml(webview as never, ext as never, title);

  it("is default-src 'none' with nonce'd scripts only: no unsafe-inline, no unsafe-eval, no host", () => {
    const html = page();
    const csp = directives(html);
    assert.deepEqual(csp.get('default-src'), ["'none'"]);
    const script = csp.get('script-src') ?? [];
    assert.equal(script.length, 1, `script-src is one nonce: ${script.join(' ')}`);
    const nonce = /^'nonce-([A-Za-z0-9+/=]+)'$/.exec(script[0])?.[1];
    assert.ok(nonce, `script-src is a nonce: ${script[0]}`);
    assert.ok(Buffer.from(nonce, 'base64').length >= 16, 'the nonce has at least 128 bits');
    assert.ok(!/unsafe-(inline|eval|hashes)|wasm-unsafe-eval|strict-dynamic/.test([...csp.values()].flat().join(' ')), 'no unsafe-* keyword anywhere');
    // Every <script> carries that nonce and loads our bundle; none has a body.
    const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/gi)];
    assert.ok(scripts.length >= 1);
    for (const [, attrs, body] of scripts) {
      assert.match(attrs, new RegExp(`nonce="${nonce.replace(/[+/=]/g, (c) => `\\${c}`)}"`));
      assert.match(attrs, /src="https:\/\/file\+\.vscode-resource\.vscode-cdn\.net\/[^"]*\/dist\/webview\/main\.js"/);
      assert.equal(body.trim(), '', 'no inline script');
    }
    assert.doesNotMatch(html, /\son[a-z]+\s*=/i, 'no inline event handler attributes');
  });

  it('allows styles, fonts and images from the webview’s own resources only: no remote source', () => {
    const csp = directives(page());
    for (const [name, values] of csp) {
      if (name === 'default-src' || name === 'script-src') continue;
      assert.deepEqual(values, CSP_SOURCES, `${name} allows only the webview's resources`);
    }
    const all = [...csp.values()].flat();
    assert.ok(!all.some((v) => v === '*' || /^(https?|wss?|data|blob):?$/.test(v) || (/^https?:\/\//.test(v) && !CSP_SOURCES.includes(v))), `no remote or scheme-wide source: ${all.join(' ')}`);
    assert.ok(!csp.has('connect-src') || csp.get('connect-src')!.every((v) => v === "'none'"), 'the page cannot fetch anywhere');
    // Only our stylesheet is linked, from the webview's resource origin.
    for (const [, href] of page().matchAll(/<link\b[^>]*href="([^"]*)"/gi)) assert.ok(href.startsWith(`${RESOURCE_ORIGIN}/`), href);
  });

  it('a fresh nonce per page, and a hostile title stays text', () => {
    const nonceOf = (h: string) => directives(h).get('script-src')![0];
    assert.notEqual(nonceOf(page()), nonceOf(page()));
    const html = page('</title><script>alert(1)</script><img src=x onerror=alert(2)>');
    assert.equal([...html.matchAll(/<script\b/gi)].length, 1, 'no script injected through the title');
    assert.doesNotMatch(html, /<img\b/i);
    assert.match(html, /<title>&#60;\/title&#62;&#60;script&#62;alert\(1\)&#60;\/script&#62;/);
  });
});
