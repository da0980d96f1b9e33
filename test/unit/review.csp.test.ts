import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import Module from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';

/**
 * The review webview's page shell (src/extension/review/html.ts) under a strict
 * Content-Security-Policy: `default-src 'none'`, scripts only by nonce (no
 * 'unsafe-inline', no 'unsafe-eval', no host), everything else only from the
 * webview's own resource origin, and no inline handler in the markup. The page's own
 * bundle (script and stylesheet) is written into the document under the page's nonce,
 * unless its text could end its element early.
 *
 * html.ts needs three things from the `vscode` module — `Uri.joinPath` (and `fsPath`), a webview's
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
  get fsPath(): string {
    return this.path;
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
    // A fresh copy bound to this file's `vscode` (another test may have loaded html.ts with its own).
    delete require.cache[require.resolve('../../src/extension/review/html')];
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
  /** The page generated for an extension whose bundle is `js` and `css` (in a temp folder, removed after). */
  const withBundle = (js: string, css: string, check: (html: string) => void) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wp-csp-'));
    try {
      const web = path.join(dir, 'dist', 'webview');
      fs.mkdirSync(web, { recursive: true });
      fs.writeFileSync(path.join(web, 'main.js'), js);
      fs.writeFileSync(path.join(web, 'main.css'), css);
      check(reviewHtml(webview as never, Uri.file(dir) as never, 'Review'));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  };
  const ext = Uri.file('/home/u/.vscode/extensions/waypoint-dev.waypoint-0.1.0');
  const page = (title = 'Review: t_1') => reviewHtml(webview as never, ext as never, title);

  it("is default-src 'none' with nonce'd scripts only (a bundle that cannot be read is fetched): no unsafe-inline, no unsafe-eval, no host", () => {
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
      // The page's own stylesheet may come inline, under the page's nonce.
      const own = name === 'style-src' ? values.filter((v) => !/^'nonce-[A-Za-z0-9+/=]+'$/.test(v)) : values;
      assert.deepEqual(own, CSP_SOURCES, `${name} allows only the webview's resources`);
    }
    const all = [...csp.values()].flat();
    assert.ok(!all.some((v) => v === '*' || /^(https?|wss?|data|blob):?$/.test(v) || (/^https?:\/\//.test(v) && !CSP_SOURCES.includes(v))), `no remote or scheme-wide source: ${all.join(' ')}`);
    assert.ok(!csp.has('connect-src') || csp.get('connect-src')!.every((v) => v === "'none'"), 'the page cannot fetch anywhere');
    // Only our stylesheet is linked, from the webview's resource origin.
    for (const [, href] of page().matchAll(/<link\b[^>]*href="([^"]*)"/gi)) assert.ok(href.startsWith(`${RESOURCE_ORIGIN}/`), href);
  });

  it('writes the bundle’s script and stylesheet into the page under its nonce (no fetch before the page can show), naming the bundle for what it loads later', () => {
    withBundle('(()=>{const a=1<2;console.log(a)})();\n//# sourceMappingURL=main.js.map\n', 'body{color:red}\n/*# sourceMappingURL=main.css.map */', (html) => {
      const nonce = /'nonce-([A-Za-z0-9+/=]+)'/.exec(directives(html).get('script-src')![0])![1];
      const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/gi)];
      assert.equal(scripts.length, 1);
      const [, attrs, body] = scripts[0];
      assert.match(attrs, new RegExp(`nonce="${nonce.replace(/[+/=]/g, (c) => `\\${c}`)}"`));
      assert.doesNotMatch(attrs, /\ssrc=/, `written into the page, not fetched: ${attrs}`);
      assert.match(attrs, /data-bundle="https:\/\/file\+\.vscode-resource\.vscode-cdn\.net\/[^"]*\/dist\/webview\/main\.js"/);
      assert.equal(body.trim(), '(()=>{const a=1<2;console.log(a)})();', 'the bundle, without its source map comment');
      const styles = [...html.matchAll(/<style\b([^>]*)>([\s\S]*?)<\/style>/gi)];
      assert.equal(styles.length, 1);
      assert.equal(styles[0][1].trim(), `nonce="${nonce}"`);
      assert.equal(styles[0][2].trim(), 'body{color:red}');
      assert.ok(directives(html).get('style-src')!.includes(`'nonce-${nonce}'`));
      assert.doesNotMatch(html, /<link\b/i, 'nothing left to fetch');
    });
  });

  it('fetches a bundle whose text could end its element early (`</`, `<!--`) instead of writing it into the page', () => {
    withBundle('const s = "</script><script>alert(1)</script>";\n', 'body::after{content:"<!--"}', (html) => {
      const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/gi)];
      assert.equal(scripts.length, 1);
      assert.match(scripts[0][1], /\ssrc="https:\/\/file\+\.vscode-resource\.vscode-cdn\.net\/[^"]*\/dist\/webview\/main\.js"/);
      assert.equal(scripts[0][2], '');
      assert.doesNotMatch(html, /alert|<style/);
      assert.match(html, /<link rel="stylesheet" href="https:\/\/file\+\.vscode-resource\.vscode-cdn\.net\/[^"]*\/dist\/webview\/main\.css">/);
    });
  });

  it('writes a rebuilt bundle into the next page, not the one read before', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wp-csp-'));
    try {
      const web = path.join(dir, 'dist', 'webview');
      fs.mkdirSync(web, { recursive: true });
      fs.writeFileSync(path.join(web, 'main.css'), 'body{}');
      fs.writeFileSync(path.join(web, 'main.js'), 'console.log("first build");');
      assert.match(reviewHtml(webview as never, Uri.file(dir) as never, 'Review'), /first build/);
      fs.writeFileSync(path.join(web, 'main.js'), 'console.log("second build, longer");');
      const html = reviewHtml(webview as never, Uri.file(dir) as never, 'Review');
      assert.match(html, /second build, longer/);
      assert.doesNotMatch(html, /first build/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
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
