import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { Dialog } from 'playwright-core';
import { current } from '../hooks';
import { initRepo } from '../reviewFixture';
import { cli, openWorkbench, screenshotPath } from '../session';
import { runCommand } from '../workbench';

/**
 * The review panel shows hostile file names and content as text, never as HTML.
 * An agent's task creates files whose names and content are markup (an <img> with
 * onerror, an <svg> with onload, a closing </script> and a new <script>, <b>), and
 * its goal, step summary and side effect carry markup too. In the real VS Code, in
 * the real webview: every string appears literally, no element from the payloads
 * exists in the page, no payload ran (no dialog, no marker attribute), and the live
 * page's Content-Security-Policy is the strict one.
 */

// Each payload, if it ever ran, would both alert and leave a marker on the page's <html>.
const run = (n: number) => `document.documentElement.setAttribute('data-pwned','${n}');alert(${n})`;
const IMG_NAME = `<img src=x onerror=${run(1)}>.txt`;
const SVG_NAME = `"><svg onload=${run(2)}>.md`;
const SCRIPT_LINE = `</script><script>${run(3)}</script>`;
const BOLD_LINE = '<b>bold</b>';
const IFRAME_LINE = `'"><iframe src="javascript:${run(4)}"></iframe>`;
const GOAL = `Tidy <script>${run(5)}</script> the <b>docs</b>`;
const SUMMARY = `added <img src=x onerror=${run(6)}> files`;
const EFFECT = `POST <svg/onload=${run(7)}> to the wiki`;

function hostileFixture(folder: string): string {
  fs.writeFileSync(path.join(folder, 'README.md'), '# project\n');
  initRepo(folder);
  const { taskId } = cli(folder, 'task', 'start', '--goal', GOAL, '--agent', 'e2e-agent') as { taskId: string };
  cli(folder, 'step', 'start', '--task', taskId, '--title', 'write the hostile files');
  fs.writeFileSync(path.join(folder, IMG_NAME), `${SCRIPT_LINE}\n${BOLD_LINE}\n`);
  fs.writeFileSync(path.join(folder, SVG_NAME), `${BOLD_LINE}\n${IFRAME_LINE}\n`);
  cli(folder, 'effect', 'begin', '--task', taskId, '--key', 'wiki:1', '--kind', 'http', '--description', EFFECT);
  cli(folder, 'effect', 'end', '--task', taskId, '--key', 'wiki:1', '--ok');
  cli(folder, 'step', 'complete', '--task', taskId, '--step', 's1', '--summary', SUMMARY);
  cli(folder, 'task', 'complete', '--task', taskId, '--summary', 'ready for review');
  return taskId;
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('review panel with hostile names and content', () => {
  it('shows markup in file names, file content, goal and summaries as literal text; nothing runs', async function () {
    this.timeout(240_000);
    const page = (current.page = await openWorkbench('review-xss', { prepare: (f) => void hostileFixture(f) }));
    const dialogs: string[] = [];
    page.on('dialog', (d: Dialog) => {
      dialogs.push(`${d.type()}: ${d.message()}`);
      void d.dismiss().catch(() => undefined);
    });
    await page.locator('.statusbar', { hasText: 'Review:' }).waitFor({ timeout: 60_000 });
    await runCommand(page, 'Waypoint: Review Changes Before Commit', 60_000, { opensQuickPick: true });
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Tidy' }).first().click();
    const view = page.frameLocator('iframe.webview').frameLocator('iframe');

    // File names: each row's path is exactly the hostile name, as text.
    const imgRow = view.getByRole('button', { name: new RegExp(`^${escapeRe(IMG_NAME)}, `) });
    const svgRow = view.getByRole('button', { name: new RegExp(`^${escapeRe(SVG_NAME)}, `) });
    await imgRow.waitFor({ timeout: 60_000 });
    await svgRow.waitFor({ timeout: 10_000 });
    const paths = await view.locator('.file .path').allTextContents();
    assert.ok(paths.includes(IMG_NAME), `paths shown: ${JSON.stringify(paths)}`);
    assert.ok(paths.includes(SVG_NAME), `paths shown: ${JSON.stringify(paths)}`);

    // Goal, step summary and side effect description: literal text too.
    const body = view.locator('body');
    await view.locator('details.history summary').click();
    const text = await body.innerText();
    for (const s of [GOAL, SUMMARY, EFFECT]) assert.ok(text.includes(s), `not shown literally: ${s}`);

    // File content: expand both files and read their diff lines.
    await imgRow.click();
    await svgRow.click();
    await view.locator('.lines').nth(1).waitFor({ timeout: 30_000 });
    // The Markdown file's hunk is syntax-coloured (the .txt one has no language): its tokens are text too.
    await view.locator('.lines.coloured').first().waitFor({ timeout: 30_000 });
    assert.ok((await view.locator('.lines.coloured .code span[class^="hljs-"]').count()) > 0, 'coloured tokens drawn');
    const lines = await view.locator('.lines .add .code').allTextContents();
    for (const s of [SCRIPT_LINE, BOLD_LINE, IFRAME_LINE]) assert.ok(lines.includes(s), `content line not shown literally: ${s}\n${lines.join('\n')}`);
    await page.screenshot({ path: screenshotPath('review panel hostile names and content') });

    // Nothing from the payloads became an element, and nothing ran.
    const dom = await body.evaluate(() => ({
      // The page's own icons are the only SVG: one stroked path each, hidden from assistive tech.
      injected: Array.from(document.querySelectorAll('img, svg, iframe, b, object, embed'))
        .filter((e) => !(e.tagName.toLowerCase() === 'svg' && /^icon icon-[a-z-]+$/.test(e.getAttribute('class') ?? '') && e.getAttribute('aria-hidden') === 'true' && e.children.length === 1 && e.children[0]!.tagName.toLowerCase() === 'path'))
        .map((e) => e.outerHTML.slice(0, 120)),
      scripts: Array.from(document.querySelectorAll('script')).map((s) => ({ src: s.getAttribute('src') ?? '', bundle: s.dataset.bundle ?? '', text: (s.textContent ?? '').trim(), nonce: s.nonce !== '' })),
      handlers: Array.from(document.querySelectorAll('*')).flatMap((e) => Array.from(e.attributes).filter((a) => /^on/i.test(a.name)).map((a) => `${e.tagName}[${a.name}]`)),
      pwned: document.documentElement.getAttribute('data-pwned'),
      csp: document.querySelector('meta[http-equiv="Content-Security-Policy"]')?.getAttribute('content') ?? '',
    }));
    assert.deepEqual(dom.injected, [], 'no element from the payloads');
    assert.deepEqual(dom.handlers, [], 'no inline event handler attribute anywhere');
    // VS Code puts one inline script of its own into every webview (it defines acquireVsCodeApi);
    // besides that, only the page's own nonce'd bundle (written into the document, naming its
    // file in data-bundle) and the highlighter it fetched after first content.
    const [host, ours] = [dom.scripts.filter((x) => !x.src && !x.bundle && /^globalThis\.acquireVsCodeApi = /.test(x.text)), dom.scripts.filter((x) => x.src || x.bundle)];
    assert.equal(host.length + ours.length, dom.scripts.length, `an unexpected script: ${JSON.stringify(dom.scripts.map((x) => ({ ...x, text: x.text.slice(0, 80) })))}`);
    assert.deepEqual(ours.map((x) => (x.src || x.bundle).replace(/^.*\/dist\/webview\//, '')).sort(), ['highlight.js', 'main.js']);
    for (const x of ours) {
      assert.ok(x.nonce, `${x.src || x.bundle} is nonced`);
      if (x.src) {
        assert.equal(x.text, '');
        assert.match(x.src, /\/dist\/webview\/highlight\.js$/);
      } else {
        assert.match(x.bundle, /\/dist\/webview\/main\.js$/);
        assert.ok(x.text.length > 10_000, 'the page bundle itself, written in');
      }
    }
    assert.equal(dom.pwned, null, 'no payload ran');
    // The live page's policy: nothing but our nonce'd script may run.
    assert.match(dom.csp, /default-src 'none'/);
    assert.match(dom.csp, /script-src 'nonce-[^']+'(;|$)/);
    assert.doesNotMatch(dom.csp, /unsafe-inline|unsafe-eval/);
    // Other sources: only the webview's own resources ('self' and VS Code's resource origin).
    const sources = dom.csp.split(';').flatMap((d) => d.trim().split(/\s+/).slice(1));
    const foreign = sources.filter((v) => !/^'(none|self|nonce-[^']+)'$/.test(v) && !/^https:\/\/\*\.vscode-cdn\.net$/.test(v));
    assert.deepEqual(foreign, [], `no remote source in ${dom.csp}`);
    // Give a late onerror/onload (image fetch, frame load) time to fire, then check again.
    await page.waitForTimeout(1_500);
    assert.deepEqual(dialogs, [], 'no dialog was opened');
    assert.equal(await body.evaluate(() => document.documentElement.getAttribute('data-pwned')), null);
  });
});
