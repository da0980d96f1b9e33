import * as assert from 'node:assert/strict';
import hljs from 'highlight.js/lib/common';
import { htmlToLines, languageFor, type Token } from '../../webview-ui/highlightLines';

/** The page's highlighter (webview-ui/highlight.ts) over the same highlight.js build. */
const known = (name: string) => hljs.getLanguage(name) !== undefined;
const colour = (language: string, text: string) => htmlToLines(hljs.highlight(text, { language, ignoreIllegals: true }).value);
const text = (line: Token[]) => line.map((t) => t.text).join('');

describe('review: syntax colouring of hunks', () => {
  it('picks the language from the file name, through highlight.js aliases and our own', () => {
    assert.equal(languageFor('src/a.ts', known), 'ts');
    assert.equal(languageFor('src/a.mts', known), 'typescript');
    assert.equal(languageFor('x/y/Z.PY', known), 'py');
    assert.equal(languageFor('lib/mod.rs', known), 'rs');
    assert.equal(languageFor('conf/app.toml', known), 'ini');
    assert.equal(languageFor('Makefile', known), 'makefile');
    assert.equal(languageFor('pkg/a.json', known), 'json');
    assert.equal(languageFor('index.html', known), 'html');
    // Plain text, unknown extensions and no extension at all: left plain.
    assert.equal(languageFor('notes.txt', known), null);
    assert.equal(languageFor('data.qqq', known), null);
    assert.equal(languageFor('LICENSE', known), null);
    assert.equal(languageFor('.env', known), null);
  });

  it('gives one token line per source line, with the same text, and scopes on the tokens', () => {
    const src = ['/* a block', '   comment */', 'const s = `multi', 'line ${x}`;', '', 'function f(n: number) { return n + 1; }'];
    const lines = colour('typescript', src.join('\n'));
    assert.equal(lines.length, src.length);
    assert.deepEqual(lines.map(text), src);
    // The comment's second line is still a comment: one run over the side keeps the context.
    assert.equal(lines[1]![0]!.cls, 'hljs-comment');
    assert.ok(lines[2]!.some((t) => t.cls === 'hljs-keyword' && t.text === 'const'));
    assert.ok(lines[3]!.some((t) => t.cls === 'hljs-string'), 'the template string continues on its second line');
    assert.ok(lines[5]!.some((t) => t.cls?.includes('hljs-title') && t.text === 'f'));
    assert.deepEqual(lines[4], []);
  });

  it('keeps hostile content as text: markup, entities and script end tags come back as characters', () => {
    const src = ['const a = "</script><img src=x onerror=alert(1)>";', '// &amp; &lt;b&gt; <!-- -->', 'x < y && y > z'];
    const lines = colour('javascript', src.join('\n'));
    assert.deepEqual(lines.map(text), src);
    for (const t of lines.flat()) assert.ok(t.cls === null || /^[A-Za-z0-9_\- ]+$/.test(t.cls), `class ${t.cls}`);
  });

  it('reads only highlight.js spans as markup; anything else is text, and odd classes are dropped', () => {
    const lines = htmlToLines('<span class="hljs-string">&quot;a&#x27;</span><b>x</b> &copy; <span class="x&quot; onclick=&quot;y">z</span><span class="a\nb">q</span>');
    assert.deepEqual(lines.map(text), ['"a\'<b>x</b> &copy; zq']);
    assert.equal(lines[0]![0]!.cls, 'hljs-string');
    assert.ok(lines[0]!.filter((t) => t.text.includes('z') || t.text === 'q').every((t) => t.cls === null));
  });

  it('stays bounded on a long binary-ish line', () => {
    const junk = Array.from({ length: 10_000 }, (_, i) => String.fromCharCode(1 + ((i * 7919) % 126))).join('');
    const t0 = performance.now();
    const lines = colour('javascript', junk);
    assert.equal(lines.length, junk.split('\n').length);
    assert.equal(lines.map(text).join('\n'), junk);
    assert.ok(performance.now() - t0 < 2_000);
  });
});
