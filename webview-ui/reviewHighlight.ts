/**
 * Syntax colouring of the review's hunks, never in the way of first content: the
 * highlighter's script (highlight.ts, a bundle of its own) is loaded once the page
 * is idle after drawing, and a hunk is coloured only when it nears the viewport, a
 * few milliseconds of work at a time. Each side of a change (old: context + removed,
 * new: context + added) is coloured in one run, so a line inside a block comment or
 * a multi-line string is coloured as the editor would. Results are kept, so a row
 * redrawn after a decision is coloured at once. Bounded: a side longer than
 * MAX_SIDE_CHARS, or with a line longer than MAX_LINE_CHARS (minified or
 * binary-ish text), stays plain.
 */
import type { Highlighter, Token } from './highlightLines';

const MAX_SIDE_CHARS = 100_000;
const MAX_LINE_CHARS = 2_000;
/** Work per slice before yielding to input and painting. */
const SLICE_MS = 8;
const MAX_CACHED = 5_000;

/** A drawn change's code cells: `data-s` is its side ('o' old, 'n' new), `data-i` the line's index in that side. */
export interface HunkLines {
  /** Old side: context before, removed, context after. */
  old: readonly string[];
  /** New side: context before, added, context after. */
  new: readonly string[];
}

interface Job {
  el: HTMLElement;
  key: string;
  path: string;
  lines: HunkLines;
}

type Coloured = { o: Token[][] | null; n: Token[][] | null } | 'plain';

const cache = new Map<string, Coloured>();
const jobs = new WeakMap<HTMLElement, Job>();
const queue: Job[] = [];
let state: 'idle' | 'loading' | 'ready' | 'failed' = 'idle';
let scheduled = false;

// The page's own script tag: the nonce the CSP asks of scripts, and where its bundle lives (the
// highlighter's is beside it). The page's script is written into its document, so the tag names
// its bundle's address in `data-bundle` rather than loading from `src`.
const self = document.currentScript as HTMLScriptElement | null;
const bundleUrl = self?.src || self?.dataset.bundle || '';

const observer = new IntersectionObserver(
  (entries) => {
    for (const e of entries) {
      if (!e.isIntersecting) continue;
      const el = e.target as HTMLElement;
      observer.unobserve(el);
      const job = jobs.get(el);
      if (job) queue.push(job);
    }
    schedule();
  },
  { rootMargin: '400px 0px' },
);

/** Loads the highlighter's script when the page is next idle (call after first content). */
export function preloadHighlighter(): void {
  if (state !== 'idle' || !bundleUrl) return;
  const idle = (window as { requestIdleCallback?: (cb: () => void, o?: { timeout: number }) => void }).requestIdleCallback;
  const go = () => load();
  if (idle) idle(go, { timeout: 2_000 });
  else setTimeout(go, 200);
}

function load(): void {
  if (state !== 'idle' || !bundleUrl) return;
  state = 'loading';
  window.addEventListener('waypoint-highlighter', () => {
    state = 'ready';
    schedule();
  }, { once: true });
  const script = document.createElement('script');
  script.nonce = self?.nonce ?? '';
  script.src = bundleUrl.replace(/[^/]*$/, 'highlight.js');
  script.onerror = () => {
    // Plain text it is: the review works the same without colours.
    state = 'failed';
    console.warn('[review] the syntax highlighter did not load; hunks stay plain');
  };
  document.head.append(script);
}

/**
 * Colours a drawn change (`el` holds its `.code[data-s][data-i]` cells) when it
 * comes near the viewport. `key` names its content (path, fingerprint, index).
 */
export function highlightHunk(el: HTMLElement, key: string, path: string, lines: HunkLines): void {
  const done = cache.get(key);
  if (done) return apply(el, done);
  if (state === 'failed') return;
  jobs.set(el, { el, key, path, lines });
  observer.observe(el);
}

function schedule(): void {
  if (scheduled || !queue.length) return;
  if (state === 'idle') load();
  if (state !== 'ready') return;
  scheduled = true;
  setTimeout(run, 0);
}

function run(): void {
  scheduled = false;
  const hl = window.waypointHighlighter;
  if (!hl) return;
  const t0 = performance.now();
  while (queue.length && performance.now() - t0 < SLICE_MS) {
    const job = queue.shift()!;
    if (!job.el.isConnected) continue;
    const c = cache.get(job.key) ?? colour(hl, job);
    remember(job.key, c);
    apply(job.el, c);
  }
  schedule();
}

function colour(hl: Highlighter, job: Job): Coloured {
  const language = hl.language(job.path);
  if (!language) return 'plain';
  const side = (lines: readonly string[]): Token[][] | null => {
    if (!lines.length || lines.some((l) => l.length > MAX_LINE_CHARS)) return null;
    const text = lines.join('\n');
    if (text.length > MAX_SIDE_CHARS) return null;
    try {
      const out = hl.lines(language, text);
      return out.length === lines.length ? out : null;
    } catch {
      return null;
    }
  };
  return { o: side(job.lines.old), n: side(job.lines.new) };
}

function remember(key: string, c: Coloured): void {
  if (cache.size >= MAX_CACHED) cache.delete(cache.keys().next().value!);
  cache.set(key, c);
}

/** Replaces each cell's text with coloured runs of the same text (checked: a cell whose text differs stays as it is). */
function apply(el: HTMLElement, c: Coloured): void {
  if (c === 'plain') return;
  for (const cell of Array.from(el.querySelectorAll<HTMLElement>('.code[data-s]'))) {
    const tokens = (cell.dataset.s === 'o' ? c.o : c.n)?.[Number(cell.dataset.i)];
    if (!tokens || tokens.map((t) => t.text).join('') !== cell.textContent) continue;
    const frag = document.createDocumentFragment();
    for (const t of tokens) {
      if (!t.cls) {
        frag.append(t.text);
        continue;
      }
      const span = document.createElement('span');
      span.className = t.cls;
      span.textContent = t.text;
      frag.append(span);
    }
    cell.replaceChildren(frag);
  }
  el.classList.add('coloured');
}
