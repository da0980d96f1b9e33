/**
 * The pure half of the review's syntax colouring (no DOM, no highlight.js): which
 * language a file name means, and highlight.js's HTML output turned back into plain
 * tokens per line, so the page draws them with `textContent` (never `innerHTML`)
 * and a change's lines can be coloured from one run over its whole side.
 */

/** One run of text and the highlight.js scope classes it sits in (null: plain text). */
export interface Token {
  text: string;
  cls: string | null;
}

/** What the lazily loaded highlighter script offers the page (see highlight.ts). */
export interface Highlighter {
  /** The highlight.js language for a file path, or null when none fits (plain text). */
  language(path: string): string | null;
  /** `text`'s lines as tokens (one array per line of `text`). */
  lines(language: string, text: string): Token[][];
}

/** Extensions whose language highlight.js knows under another name (its own aliases cover the rest). */
const BY_EXTENSION: Record<string, string> = {
  mjs: 'javascript',
  cjs: 'javascript',
  mts: 'typescript',
  cts: 'typescript',
  jsonc: 'json',
  json5: 'json',
  htm: 'xml',
  vue: 'xml',
  svelte: 'xml',
  toml: 'ini',
  cfg: 'ini',
  conf: 'ini',
  properties: 'ini',
  h: 'c',
  mdx: 'markdown',
  zsh: 'bash',
  ps1: 'plaintext',
};

/** Whole file names that say their language. */
const BY_NAME: Record<string, string> = {
  makefile: 'makefile',
  gnumakefile: 'makefile',
  '.bashrc': 'bash',
  '.zshrc': 'bash',
  '.profile': 'bash',
  '.gitignore': 'plaintext',
  '.editorconfig': 'ini',
  '.npmrc': 'ini',
};

/**
 * The language of a workspace path, if `known` (highlight.js's `getLanguage`, which
 * resolves its aliases: ts, py, rs, yml, …) has it. Plain text gets none.
 */
export function languageFor(path: string, known: (name: string) => boolean): string | null {
  const base = path.slice(path.lastIndexOf('/') + 1).toLowerCase();
  const dot = base.lastIndexOf('.');
  const ext = dot > 0 ? base.slice(dot + 1) : '';
  const name = BY_NAME[base] ?? (ext ? (BY_EXTENSION[ext] ?? ext) : null);
  if (!name || name === 'plaintext' || name === 'text' || name === 'txt') return null;
  return known(name) ? name : null;
}

const ENTITIES: Record<string, string> = { '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"', '&#x27;': "'", '&#39;': "'" };
/** A class attribute we pass on: highlight.js scope names only (letters, digits, `_`, `-`, spaces). */
const SAFE_CLASS = /^[A-Za-z0-9_\- ]{1,200}$/;

/**
 * highlight.js's HTML (text escaped, `<span class="…">` and `</span>` only) as
 * tokens per line. Anything else that looks like markup is kept as text, so a
 * surprise in the input can only ever show up as characters, never as elements.
 */
export function htmlToLines(html: string): Token[][] {
  const lines: Token[][] = [[]];
  const stack: (string | null)[] = [];
  const push = (text: string) => {
    const cls = stack.length ? stack[stack.length - 1]! : null;
    const parts = text.split('\n');
    parts.forEach((part, k) => {
      if (k > 0) lines.push([]);
      if (!part) return;
      const line = lines[lines.length - 1]!;
      const last = line[line.length - 1];
      if (last && last.cls === cls) last.text += part;
      else line.push({ text: part, cls });
    });
  };
  const re = /<span class="([^"]*)">|<\/span>|&(?:amp|lt|gt|quot|#x27|#39);|[^<&]+|[<&]/g;
  for (const m of html.matchAll(re)) {
    const s = m[0];
    if (m[1] !== undefined) stack.push(SAFE_CLASS.test(m[1]) ? m[1] : null);
    else if (s === '</span>') stack.pop();
    else push(ENTITIES[s] ?? s);
  }
  return lines;
}
