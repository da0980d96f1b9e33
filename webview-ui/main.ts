/**
 * The review panel page. Everything is built with DOM APIs and `textContent`, never
 * `innerHTML` with data, so file names and file content are inert text. Messages are
 * parsed with the shared zod schemas. Large reviews stay responsive: the file list
 * arrives before any line count (counts fill in as the host streams them), rows are
 * drawn a chunk at a time as they near the viewport, and a file's hunks are asked
 * for (and drawn) only when it is expanded.
 */
import './zodJitless';
import { HostMessage, PageState, parseInbound, type CommittedMsg, type PageMessage, type ReviewFileMsg } from '../src/extension/review/protocol';
import { LABEL, outcome, plural, ReviewState, type D, type Init } from './reviewState';
import { icon, type IconName } from './icons';
import { lazyList, type LazyList } from './lazyList';
import { highlightHunk, preloadHighlighter } from './reviewHighlight';
import { displayText } from '../src/extension/webview/displayText';

/** When this script began to run, after the page's navigation began: the rest of `pageMs` is drawing. */
const scriptMs = performance.now();
declare function acquireVsCodeApi(): { postMessage(m: unknown): void; getState(): unknown; setState(s: unknown): void };
const vscode = acquireVsCodeApi();


const restored = PageState.safeParse(vscode.getState());
/** The listing and the person's decisions: changed only through its methods. */
const state = new ReviewState(restored.success ? restored.data : undefined);

/** What only the drawn page needs to remember between events. */
const view = {
  /** Messages that arrived after `init` and before its first frame: handled, in order, after it. */
  held: null as unknown[] | null,
  /** The item focus moved to after a decision, so `n` there does not skip it. */
  advancedTo: null as HTMLElement | null,
  /** Where keyboard focus goes once a file's hunks arrive (after `n`/`p` expanded it). */
  pendingFocus: null as { path: string; hunk: 'first' | 'last' } | null,
};
const lists: LazyList[] = [];
/** Which lazy list draws a file's row, and where in it. */
const places = new Map<string, { lazy: LazyList; index: number }>();

function send(m: PageMessage): void {
  vscode.postMessage(m);
}

/** Webview state survives a window reload (the serializer gives the panel back) and hiding the tab. */
function save(): void {
  const kept = state.pageState();
  if (kept) vscode.setState(kept);
}

function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  // Text is recorded text (titles, file names, errors): escaped, so a bidi override cannot reorder what it reads (see displayText).
  for (const c of children) el.append(typeof c === 'string' ? document.createTextNode(displayText(c, { multiline: true })) : c);
  return el;
}

function button(label: string, aria: string, onClick: () => void, cls = ''): HTMLButtonElement {
  const b = h('button', { type: 'button', 'aria-label': aria, class: cls }, label);
  b.addEventListener('click', (e) => {
    e.stopPropagation();
    onClick();
  });
  return b;
}

function dur(ms: number | null): string {
  if (ms === null) return '';
  if (ms < 1000) return `${ms} ms`;
  const s = Math.round(ms / 1000);
  return s < 120 ? `${s} s` : s < 7200 ? `${Math.round(s / 60)} min` : `${(s / 3600).toFixed(1)} h`;
}

// ---------------------------------------------------------------------------
// Decisions.

const ICON: Record<D | 'm', IconName> = { a: 'check', l: 'circle-slash', r: 'discard', u: 'circle', m: 'diff' };

/** A decision as a badge: icon and word, so it never rests on colour alone. */
function badge(d: D | 'm' | 'x'): HTMLElement {
  if (d === 'x') return h('span', { class: 'badge d-x' }, icon('eye-closed'), 'excluded');
  return h('span', { class: `badge d-${d}` }, icon(ICON[d]), LABEL[d]);
}

/** A decision button that says whether it is the current decision (for screen readers, and drawn as pressed). */
function pressed(b: HTMLButtonElement, on: boolean): HTMLButtonElement {
  b.setAttribute('aria-pressed', String(on));
  return b;
}

/** An icon button: the icon is decorative, the accessible name says the action. */
function iconButton(name: IconName, text: string | null, aria: string, onClick: () => void, cls = 'secondary'): HTMLButtonElement {
  const b = button('', aria, onClick, `${cls} icon-button`);
  b.title = aria;
  b.append(icon(name));
  if (text) b.append(h('span', {}, text));
  return b;
}

function decideFile(f: ReviewFileMsg, d: D): void {
  const r = state.decideFile(f, d);
  if (r.changed) changed(f.path);
  announce(r.text);
}

function decideHunk(f: ReviewFileMsg, i: number, d: D): void {
  const text = state.decideHunk(f, i, d);
  if (text === null) return;
  changed(f.path);
  announce(text);
}

function setAll(d: D | 'reset'): void {
  const text = state.setAll(d);
  save();
  for (const row of Array.from(document.querySelectorAll<HTMLElement>('[data-file]'))) redrawRow(row.dataset.file!);
  renderFooter();
  announce(text);
}

function changed(path: string): void {
  save();
  redrawRow(path);
  renderFooter();
}

function commit(): void {
  const init = state.init;
  if (!init || state.busy) return;
  const now = state.decisions();
  if (!now.ok) return announce(now.why);
  const text = (document.getElementById('message') as HTMLTextAreaElement | null)?.value.trim() || state.message.trim() || init.message;
  send({ type: 'apply', message: text, decisions: now.list, finish: state.finishTask() });
}

// ---------------------------------------------------------------------------
// Rendering.

const app = document.getElementById('app')!;
const live = h('div', { role: 'status', 'aria-live': 'polite', class: 'sr-only' });
document.body.append(live);
function announce(text: string): void {
  live.textContent = text;
}

const KEYS: [string, string][] = [
  ['j / k', 'next / previous file or change'],
  ['n / p', 'next / previous change'],
  ['a', 'approve (commit it)'],
  ['l', 'leave out of this commit (keep it in the working tree)'],
  ['d', 'discard (remove it from the working tree)'],
  ['u', 'undecided'],
  ['Shift + A / L / D', 'the same for the whole file'],
  ['Enter / Space', 'expand or collapse a file'],
  ['o', 'open the file in the diff editor'],
  ['c', 'commit message (Ctrl+Enter commits)'],
];

function keyHelp(): HTMLElement {
  const list = h('dl', { class: 'keys', id: 'keys' });
  for (const [k, what] of KEYS) list.append(h('dt', {}, h('kbd', {}, k)), h('dd', {}, what));
  return h('details', { class: 'key-help' }, h('summary', {}, icon('keyboard'), 'Keyboard'), list);
}

function header(): HTMLElement {
  const { task } = state.init!;
  const meta = [`${task.state.replace(/_/g, ' ')}`, `agent ${task.agent ?? 'unknown'}`, dur(task.durationMs)].filter(Boolean).join(' · ');
  const head = h('header', {}, h('h1', {}, task.title));
  if (task.goal.trim() && task.goal.trim() !== task.title.trim()) head.append(h('p', { class: 'goal' }, task.goal));
  head.append(h('p', { class: 'meta goal' }, meta));
  return head;
}

function render(): void {
  app.replaceChildren();
  lists.length = 0;
  sectionLists.clear();
  places.clear();
  app.setAttribute('aria-busy', 'false');
  if (!state.init) return;
  if (state.committed) return renderCommitted(state.committed);
  app.append(
    header(),
    h(
      'div',
      { class: 'toolbar', role: 'toolbar', 'aria-label': 'Review actions' },
      iconButton('check-all', 'Approve all', 'Approve every included file', () => setAll('a')),
      iconButton('circle-slash', 'Leave all out', 'Leave every included file out of this commit', () => setAll('l')),
      iconButton('clear-all', 'Reset', 'Reset every decision', () => setAll('reset')),
      h('span', { class: 'spacer' }),
      iconButton('history', 'Roll Back…', 'Roll the task back to a checkpoint', () => send({ type: 'rollback' })),
      iconButton('debug-continue', 'Resume…', 'Resume the task', () => send({ type: 'resume' })),
      iconButton('refresh', null, 'Reload the changes from the workspace', () => send({ type: 'refresh' })),
    ),
    keyHelp(),
    timeline(),
  );
  const { task, drift } = state.init.counts;
  if (!task && !drift) app.append(h('p', { class: 'empty' }, icon('pass'), 'No changes since the task started: nothing to review.'));
  // A section per kind the listing holds (its count from `init`, though the rest of its files may still be on their way).
  if (task) fileSection(`Files changed by the task (${task})`, 'task');
  if (drift) fileSection(`Your own edits during the task (${drift}) — excluded unless you include them`, 'drift');
  app.append(h('div', { id: 'footer' }));
  renderFooter();
}

/** After a commit: what it holds, what was left and discarded, and the way back. */
function renderCommitted(c: CommittedMsg): void {
  const box = h('section', { class: 'committed', 'aria-labelledby': 'committed-title' });
  const title = c.sha ? `Committed ${c.sha.slice(0, 10)}` : 'Applied without a commit';
  box.append(h('h2', { id: 'committed-title' }, icon(c.sha ? 'git-commit' : 'info'), title));
  if (c.sha) box.append(h('p', { class: 'subject' }, c.subject));
  if (c.reason) box.append(h('p', { class: 'dim' }, c.reason));
  const group = (label: string, name: IconName, paths: string[]) => {
    if (!paths.length) return;
    const ul = h('ul', { class: 'paths', 'aria-label': label });
    for (const p of paths.slice(0, 200)) ul.append(h('li', {}, p));
    if (paths.length > 200) ul.append(h('li', { class: 'dim' }, `… and ${paths.length - 200} more`));
    box.append(h('h3', {}, icon(name), `${label} (${paths.length})`), ul);
  };
  group('Committed', 'check', c.committed);
  group('Left out, still in the working tree', 'circle-slash', c.left);
  group('Discarded from the working tree', 'discard', c.discarded);
  box.append(h('p', { class: 'dim' }, c.finished ? 'The task is completed.' : 'The task stays open: its plan is not done, or you chose to keep it open.'));
  const row = h('div', { class: 'commit-row' });
  if (!c.finished) row.append(button('Review the remaining changes', 'Review the changes not in this commit', () => { state.leaveCommitted(); send({ type: 'refresh' }); }));
  if (c.canUndo) {
    row.append(iconButton('discard', 'Undo Commit', `Undo commit ${c.sha?.slice(0, 10) ?? ''}: its changes become uncommitted again${c.discarded.length ? ' and the discarded changes come back' : ''}`, () => send({ type: 'undoCommit' })));
  } else if (c.sha) row.append(h('span', { class: 'dim' }, 'Undo is offered while HEAD is still this commit, from the panel that made it.'));
  box.append(row);
  // An error (an Undo that failed) still shows; the success is the box itself.
  app.append(header(), box, h('div', { id: 'result', role: 'alert', class: state.result ? (state.result.ok ? 'ok' : 'error') : '' }, state.result && !state.result.ok ? state.result.text : ''));
}

function timeline(): HTMLElement {
  const { steps, effects } = state.init!;
  const list = h('ol', { class: 'timeline', 'aria-label': 'Steps' });
  for (const s of steps) {
    const li = h('li', { class: `step ${s.status}` }, h('span', { class: 'badge' }, s.status.replace(/_/g, ' ')), ` ${s.title}`, s.durationMs !== null ? h('span', { class: 'dim' }, ` · ${dur(s.durationMs)}`) : '');
    if (s.summary) li.append(h('div', { class: 'dim' }, s.summary));
    if (s.error) li.append(h('div', { class: 'error' }, `Error: ${s.error}`));
    list.append(li);
  }
  const fx = h('ul', { class: 'effects', 'aria-label': 'Side effects' });
  for (const e of effects) {
    fx.append(h('li', { class: e.inDoubt ? 'in-doubt' : '' }, h('span', { class: 'badge' }, e.inDoubt ? 'in doubt' : e.status), ` ${e.kind}: ${e.description}`));
  }
  const d = h('details', { class: 'history' }, h('summary', {}, `Timeline: ${plural(steps.length, 'step')}, ${plural(effects.length, 'side effect')}${effects.some((e) => e.inDoubt) ? ' — some in doubt' : ''}`), list);
  if (effects.length) d.append(fx);
  if (effects.some((e) => e.inDoubt)) d.open = true;
  return d;
}

/**
 * The first frame draws only the rows that fit below where the list starts (the rest
 * follow as soon as that frame is up, the sentinel being well within the lazy list's
 * margin): its style, layout and paint grow with every row drawn, and on the first open
 * in a window they were most of the page's share of the wait. A row is at least
 * ROW_MIN_PX tall (a long path wraps), so this many always fill the screen.
 */
const ROW_MIN_PX = 24;
/** When the page's height is unknown (a hidden frame reports 0): a tall window's screenful. */
const FIRST_ROWS_UNKNOWN = 40;

/** Rows a list starting at `top` needs to fill the rest of the window, plus one partly shown. */
function rowsBelow(top: number): number {
  const height = window.innerHeight;
  if (!(height > 0)) return FIRST_ROWS_UNKNOWN;
  return Math.max(1, Math.ceil((height - Math.max(0, top)) / ROW_MIN_PX) + 1);
}

/** The drawn sections' lazy lists, by kind (where files arriving later go). */
const sectionLists = new Map<'task' | 'drift', LazyList>();

function fileSection(title: string, kind: 'task' | 'drift'): HTMLElement {
  const ul = h('ul', { class: 'files', role: 'list' });
  const sec = h('section', { 'aria-label': title }, h('h2', {}, title), ul);
  // In the page before its rows, so where the list starts is known (a layout of what is above it, needed for the frame anyway).
  app.append(sec);
  const list = state.order.filter((f) => f.drift === (kind === 'drift'));
  const lazy = lazyList(ul, list, fileRow, 100, rowsBelow(ul.getBoundingClientRect().top));
  lists.push(lazy);
  sectionLists.set(kind, lazy);
  list.forEach((f, index) => places.set(f.path, { lazy, index }));
  return sec;
}

function countsText(f: ReviewFileMsg): { short: string; spoken: string } {
  if (f.oversized) return { short: 'large', spoken: 'large file' };
  if (!f.lines) return { short: '…', spoken: 'counting lines' };
  if (f.lines.binary) return { short: 'binary', spoken: 'binary file' };
  return { short: `+${f.lines.added} −${f.lines.removed}`, spoken: `${f.lines.added} added, ${f.lines.removed} removed lines` };
}

function fileHead(f: ReviewFileMsg): HTMLElement {
  const s = state.stateOf(f);
  const open = state.isExpanded(f.path);
  const counts = countsText(f);
  const head = h('div', {
    class: `file-head d-${s.whole}`,
    tabindex: '0',
    role: 'button',
    'data-nav': 'file',
    'aria-expanded': String(open),
    'aria-describedby': 'keys',
    'aria-keyshortcuts': 'A L D U Shift+A Shift+L Shift+D Enter Space O',
    'aria-label': `${f.path}, ${f.status}, ${counts.spoken}, ${s.included ? (s.whole === 'm' ? 'partly approved' : LABEL[s.whole]) : 'excluded'}`,
  });
  head.append(
    h('span', { class: 'twisty', 'aria-hidden': 'true' }, icon(open ? 'chevron-down' : 'chevron-right')),
    h('span', { class: `status st-${f.status}`, title: f.status.replace(/_/g, ' ') }, f.status[0]!.toUpperCase()),
    h('span', { class: 'path' }, f.path),
    h('span', { class: 'counts' }, counts.short),
    badge(s.included ? s.whole : 'x'),
    pressed(iconButton('check', null, `Approve ${f.path}`, () => decideFile(f, 'a'), 'secondary d-a'), s.whole === 'a'),
    pressed(iconButton('circle-slash', null, `Leave ${f.path} out of this commit`, () => decideFile(f, 'l'), 'secondary d-l'), s.whole === 'l'),
    pressed(iconButton('discard', null, `Discard ${f.path} from the working tree`, () => decideFile(f, 'r'), 'secondary d-r'), s.whole === 'r'),
    iconButton('diff', null, `Open ${f.path} in the diff editor`, () => send({ type: 'openDiff', path: f.path })),
  );
  if (f.drift) {
    const inc = h('input', { type: 'checkbox', 'aria-label': `Include ${f.path} in this review` });
    inc.checked = s.included;
    inc.addEventListener('click', (e) => e.stopPropagation());
    inc.addEventListener('change', () => {
      s.included = inc.checked;
      changed(f.path);
    });
    head.append(h('label', { class: 'include' }, inc, ' include'));
  }
  head.addEventListener('click', () => toggle(f));
  return head;
}

function fileRow(f: ReviewFileMsg): HTMLElement {
  const li = h('li', { class: `file ${state.stateOf(f).included ? '' : 'excluded'}`, 'data-file': f.path });
  li.append(fileHead(f));
  if (state.isExpanded(f.path)) li.append(fileBody(f));
  return li;
}

/** The drawn row of a file, if its chunk is drawn. */
function rowOf(path: string): HTMLElement | null {
  return document.querySelector<HTMLElement>(`[data-file="${CSS.escape(path)}"]`);
}

/** Where focus is inside a row, so a redraw can put it back on the same item. */
function focusKey(row: HTMLElement): string | null {
  const a = document.activeElement as HTMLElement | null;
  if (!a || !row.contains(a)) return null;
  const nav = a.closest<HTMLElement>('[data-nav]');
  if (!nav) return a.getAttribute('aria-label') ? `label:${a.getAttribute('aria-label')}` : 'nav:file';
  return nav.dataset.nav === 'hunk' ? `hunk:${nav.dataset.index}` : 'nav:file';
}

function restoreFocus(row: HTMLElement, key: string | null): void {
  if (!key) return;
  const el = key.startsWith('label:')
    ? row.querySelector<HTMLElement>(`[aria-label="${CSS.escape(key.slice(6))}"]`)
    : key.startsWith('hunk:')
      ? row.querySelector<HTMLElement>(`[data-nav="hunk"][data-index="${key.slice(5)}"]`)
      : row.querySelector<HTMLElement>('[data-nav="file"]');
  el?.focus();
}

function redrawRow(path: string): void {
  const row = rowOf(path);
  const f = state.file(path);
  if (!row || !f) return;
  const key = focusKey(row);
  const fresh = fileRow(f);
  row.replaceWith(fresh);
  restoreFocus(fresh, key);
}

/** New line counts change only the row's head (an expanded body stays as it is). */
function redrawHead(path: string): void {
  const row = rowOf(path);
  const f = state.file(path);
  const old = row?.querySelector<HTMLElement>(':scope > .file-head');
  if (!row || !f || !old) return;
  const key = focusKey(row);
  old.replaceWith(fileHead(f));
  restoreFocus(row, key);
}

function toggle(f: ReviewFileMsg): void {
  if (state.toggle(f)) send({ type: 'requestHunks', path: f.path });
  save();
  changed(f.path);
  rowOf(f.path)?.querySelector<HTMLElement>('.file-head')?.focus();
}

/** Changed lines drawn per file before a "show more" button: a huge file stays cheap to expand. */
const HUNK_LINES_DRAWN = 3_000;
const shownHunks = new Map<string, number>();

function fileBody(f: ReviewFileMsg): HTMLElement {
  const body = h('div', { class: 'file-body' });
  const l = state.loadedOf(f.path);
  if (!l) return body.appendChild(h('p', { class: 'dim' }, 'Loading…')).parentElement!;
  if ('summary' in l) return body.appendChild(h('p', { class: 'dim' }, l.summary)).parentElement!;
  const s = state.stateOf(f);
  const limit = shownHunks.get(f.path) ?? HUNK_LINES_DRAWN;
  let lines = 0;
  for (let i = 0; i < l.hunks.length; i++) {
    const hk = l.hunks[i]!;
    if (i > 0 && lines + hk.removed.length + hk.added.length > limit) {
      const rest = l.hunks.length - i;
      body.append(
        button(`Show ${rest} more change(s)`, `Show ${rest} more changes in ${f.path}`, () => {
          shownHunks.set(f.path, limit * 4);
          redrawRow(f.path);
        }, 'secondary'),
      );
      break;
    }
    lines += hk.removed.length + hk.added.length;
    const d = s.hunks?.[i] ?? 'u';
    // First line numbers of the change itself (a pure insertion's "start" is the line before it).
    const o0 = hk.oldLines ? hk.oldStart : hk.oldStart + 1;
    const n0 = hk.newLines ? hk.newStart : hk.newStart + 1;
    const span = (start: number, n: number) => (n === 0 ? 'none' : n === 1 ? `${start}` : `${start}–${start + n - 1}`);
    const where = hk.newLines ? `line${hk.newLines === 1 ? '' : 's'} ${span(n0, hk.newLines)}` : `removed at line ${n0}`;
    const el = h('div', {
      class: `hunk d-${d}`,
      tabindex: '0',
      role: 'group',
      'data-nav': 'hunk',
      'data-index': String(i),
      'aria-describedby': 'keys',
      'aria-keyshortcuts': 'A L D U Shift+A Shift+L Shift+D',
      'aria-label': `Change ${i + 1} of ${l.hunks.length} in ${f.path}, old lines ${span(o0, hk.oldLines)}, new lines ${span(n0, hk.newLines)}, ${LABEL[d]}`,
    });
    const bar = h('div', { class: 'hunk-head' }, h('span', { class: 'where' }, `Change ${i + 1} of ${l.hunks.length} · ${where}`), badge(d));
    if (f.hunkable) {
      bar.append(
        pressed(iconButton('check', 'Approve', `Approve change ${i + 1} in ${f.path}`, () => decideHunk(f, i, 'a'), 'secondary d-a'), d === 'a'),
        pressed(iconButton('circle-slash', 'Leave out', `Leave change ${i + 1} in ${f.path} out of this commit`, () => decideHunk(f, i, 'l'), 'secondary d-l'), d === 'l'),
        pressed(iconButton('discard', 'Discard', `Discard change ${i + 1} in ${f.path}`, () => decideHunk(f, i, 'r'), 'secondary d-r'), d === 'r'),
      );
    }
    const pre = h('div', { class: 'lines', role: 'table', 'aria-label': `Lines of change ${i + 1}` });
    // Each code cell says which side's line it is (see reviewHighlight.ts), so the side is coloured in one run.
    const line = (cls: string, mark: string, oldNo: number | null, newNo: number | null, text: string, side: 'o' | 'n', at: number) =>
      pre.append(
        h('div', { class: `ln ${cls}`, role: 'row' }, h('span', { class: 'no', 'aria-hidden': 'true' }, oldNo === null ? '' : String(oldNo)), h('span', { class: 'no', 'aria-hidden': 'true' }, newNo === null ? '' : String(newNo)), h('span', { class: 'mark', 'aria-hidden': 'true' }, mark), h('span', { class: 'code', role: 'cell', 'data-s': side, 'data-i': String(at) }, text)),
      );
    // Context already drawn under the previous change is not drawn twice.
    const prev = i > 0 ? l.hunks[i - 1]! : null;
    const prevShownTo = prev ? (prev.oldLines ? prev.oldStart : prev.oldStart + 1) + prev.oldLines + prev.after.length - 1 : 0;
    const nb = hk.before.length;
    hk.before.forEach((t, k) => {
      const o = o0 - nb + k;
      if (o > prevShownTo) line('ctx', ' ', o, n0 - nb + k, t, 'n', k);
    });
    hk.removed.forEach((t, k) => line('del', '−', o0 + k, null, t, 'o', nb + k));
    hk.added.forEach((t, k) => line('add', '+', null, n0 + k, t, 'n', nb + k));
    hk.after.forEach((t, k) => line('ctx', ' ', o0 + hk.oldLines + k, n0 + hk.newLines + k, t, 'n', nb + hk.added.length + k));
    highlightHunk(pre, `${f.path}\u0000${s.fingerprint ?? ''}\u0000${i}`, f.path, { old: [...hk.before, ...hk.removed, ...hk.after], new: [...hk.before, ...hk.added, ...hk.after] });
    el.append(bar, pre);
    body.append(el);
  }
  return body;
}

function renderFooter(): void {
  const footer = document.getElementById('footer');
  if (!footer || !state.init) return;
  const focused = document.activeElement?.id === 'message';
  const ta = h('textarea', { id: 'message', rows: '8', 'aria-label': 'Commit message', 'aria-keyshortcuts': 'Control+Enter', spellcheck: 'false' });
  ta.value = state.message || state.init.message;
  ta.addEventListener('input', () => {
    state.setMessage(ta.value);
    save();
  });
  ta.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      commit();
    }
  });
  const d = state.decisions();
  const o = d.ok ? outcome(d.list) : null;
  const label = !state.init.git ? 'Apply decisions' : o && o.discard.length ? `Commit ${plural(o.commit.length, 'file')}, discard ${o.discard.length}` : `Commit ${o ? plural(o.commit.length, 'file') : ''}`.trim();
  const commitButton = button(label, state.init.git ? `Commit the approved changes${o?.discard.length ? ' and discard the discarded ones from the working tree' : ''}` : 'Apply the decisions (no git repository: nothing is committed)', commit, 'primary');
  const open = state.finishTask() ? state.openSteps() : [];
  commitButton.disabled = state.busy || !d.ok || (o !== null && o.commit.length === 0 && o.discard.length === 0) || open.length > 0;
  const fin = h('input', { type: 'checkbox', id: 'finish' });
  fin.checked = state.finishTask();
  fin.disabled = !state.finishable();
  fin.addEventListener('change', () => {
    state.setFinish(fin.checked);
    renderFooter();
  });
  const notDone = state.init.steps.filter((st) => st.status !== 'completed' && st.status !== 'skipped').length;
  const why = !state.finishable()
    ? ` (the task is ${state.init.task.state}: resume it to finish it; committing keeps it open and leaves its steps as they are)`
    : state.init.planDone
      ? ' (its plan is done)'
      : ` (${plural(notDone, 'step')} of its plan not done: unchecked keeps the task open and its steps as they are)`;
  const finishRow = h('div', { class: 'finish' }, h('label', {}, fin, ' Finish the task with this commit'), h('span', { class: 'dim' }, why));
  if (open.length) finishRow.append(openStepsList(open));
  const summary = h('div', { id: 'decided', role: 'status', class: 'summary' });
  if (!d.ok) summary.append(h('p', { class: 'dim' }, d.why));
  else {
    const group = (name: IconName, text: string, paths: string[], cls: string) => {
      if (!paths.length) return;
      const ul = h('ul', { class: 'paths' });
      for (const p of paths.slice(0, 50)) ul.append(h('li', {}, p));
      if (paths.length > 50) ul.append(h('li', { class: 'dim' }, `… and ${paths.length - 50} more`));
      summary.append(h('p', { class: cls }, icon(name), text), ul);
    };
    summary.append(h('p', { class: 'dim' }, `${plural(d.list.length, 'file')} decided.`));
    group('check', `To commit: ${plural(o!.commit.length, 'file')}`, o!.commit, 'will-commit');
    group('circle-slash', `Left out, kept in the working tree: ${plural(o!.left.length, 'file')}`, o!.left, 'will-leave');
    group('warning', `Discarded from the working tree: ${plural(o!.discard.length, 'file')} — Undo after the commit brings them back`, o!.discard, 'will-discard');
  }
  footer.replaceChildren(
    h('h2', {}, 'Commit'),
    ta,
    summary,
    finishRow,
    h('div', { class: 'commit-row' }, commitButton, state.busy ? h('span', { class: 'dim' }, 'Committing…') : ''),
    h('div', { id: 'result', role: 'alert', class: state.result ? (state.result.ok ? 'ok' : 'error') : '' }, state.result?.text ?? ''),
  );
  if (focused) ta.focus();
}

/**
 * Finishing the task needs its open steps settled: each is listed with the answers the
 * step's state allows (in progress: complete or fail; not begun: skip), right here.
 */
function openStepsList(open: Init['steps']): HTMLElement {
  const ul = h('ul', { class: 'open-steps', 'aria-label': 'Open steps' });
  for (const st of open) {
    const li = h('li', { 'data-step': st.id }, h('span', {}, st.title), h('span', { class: 'dim' }, ` — ${st.status.replace('_', ' ')} `));
    const act = (action: 'complete' | 'skip' | 'fail', name: IconName, label: string) =>
      iconButton(name, label, `${label} step ${st.title}`, () => {
        announce(`${label} step ${st.title}…`);
        send({ type: 'step', action, stepId: st.id });
      });
    if (st.status === 'in_progress') li.append(act('complete', 'pass', 'Complete'), act('fail', 'circle-slash', 'Fail'));
    else li.append(act('skip', 'debug-continue', 'Skip'));
    ul.append(li);
  }
  return h(
    'div',
    { class: 'open-steps-box', role: 'group', 'aria-label': 'Steps to settle before finishing' },
    h('p', {}, icon('warning'), ` To finish the task, settle ${open.length === 1 ? 'its open step' : `its ${open.length} open steps`} first, or untick “Finish the task” to commit and keep it open:`),
    ul,
  );
}

// ---------------------------------------------------------------------------
// Keyboard. Every decision the mouse can make, the keys make too; the focused item
// (a file's head or one change) carries an aria-label that says what it is and how
// it is decided, and each decision is announced through the live region.

function navItems(): HTMLElement[] {
  return Array.from(document.querySelectorAll<HTMLElement>('[data-nav]'));
}

function fileOf(el: HTMLElement): ReviewFileMsg | undefined {
  const p = el.closest<HTMLElement>('[data-file]')?.dataset.file;
  return p === undefined ? undefined : state.file(p);
}

/** Makes sure a file's row is drawn (keyboard navigation can run ahead of scrolling). */
function drawThrough(path: string): void {
  const p = places.get(path);
  p?.lazy.drawThrough(p.index);
}

/** Draws the next chunk of rows when navigation runs past the drawn ones. */
function drawMore(): boolean {
  const lazy = lists.find((l) => !l.complete());
  if (!lazy) return false;
  lazy.drawThrough(lazy.element.querySelectorAll('[data-file]').length + 99);
  return true;
}

function moveItem(from: HTMLElement, delta: number): void {
  let items = navItems();
  const i = items.indexOf(from);
  if (i < 0) return void items[0]?.focus();
  if (i + delta >= items.length && drawMore()) items = navItems();
  items[Math.min(items.length - 1, Math.max(0, i + delta))]?.focus();
}

function focusHunk(path: string, which: 'first' | 'last'): boolean {
  const hunks = rowOf(path)?.querySelectorAll<HTMLElement>('[data-nav="hunk"]');
  const el = hunks?.length ? hunks[which === 'first' ? 0 : hunks.length - 1] : undefined;
  el?.focus();
  return !!el;
}

/** `n` / `p`: the next or previous change, expanding the next file (its hunks are fetched) when needed. */
function moveChange(from: HTMLElement | null, dir: 1 | -1): void {
  const f = from ? fileOf(from) : undefined;
  const onHunk = from?.dataset.nav === 'hunk';
  if (f && onHunk) {
    const next = rowOf(f.path)?.querySelector<HTMLElement>(`[data-nav="hunk"][data-index="${Number(from!.dataset.index) + dir}"]`);
    if (next) return void next.focus();
  }
  // From a file's head, its own changes come next; from its last change, the next file's.
  const start = !f ? (dir === 1 ? 0 : state.order.length - 1) : !onHunk && dir === 1 ? state.order.indexOf(f) : state.order.indexOf(f) + dir;
  for (let k = start; k >= 0 && k < state.order.length; k += dir) {
    const g = state.order[k]!;
    const l = state.loadedOf(g.path);
    // Binary, large and mode-only changes have no hunks to step through.
    if (!g.hunkable || (l && ('summary' in l || l.hunks.length === 0))) continue;
    drawThrough(g.path);
    if (l) {
      if (!state.isExpanded(g.path)) toggle(g);
      focusHunk(g.path, dir === 1 ? 'first' : 'last');
      return;
    }
    // Not fetched yet: expand it (which asks the host) and focus the change when it arrives.
    view.pendingFocus = { path: g.path, hunk: dir === 1 ? 'first' : 'last' };
    if (!state.isExpanded(g.path)) toggle(g);
    else rowOf(g.path)?.querySelector<HTMLElement>('[data-nav="file"]')?.focus();
    return;
  }
  announce(dir === 1 ? 'No further changes' : 'No earlier changes');
}

document.addEventListener('keydown', (e) => {
  const t = e.target as HTMLElement;
  if (t.tagName === 'TEXTAREA' || t.tagName === 'INPUT' || e.ctrlKey || e.metaKey || e.altKey) return;
  const item = t.closest<HTMLElement>('[data-nav]');
  const onItem = item !== null && t === item;
  if (e.key !== 'n' && view.advancedTo && !'aldu'.includes(e.key) && !'ALD'.includes(e.key)) view.advancedTo = null;
  switch (e.key) {
    case 'j':
      if (onItem) moveItem(item, 1);
      else navItems()[0]?.focus();
      break;
    case 'k':
      if (onItem) moveItem(item, -1);
      else navItems()[0]?.focus();
      break;
    case 'n':
      // Focus already moved on by a decision: `n` reads where it is instead of skipping it.
      if (onItem && item === view.advancedTo) {
        view.advancedTo = null;
        announce(`${item.getAttribute('aria-label') ?? ''} (already here after your decision)`);
        break;
      }
      moveChange(onItem ? item : null, 1);
      break;
    case 'p':
      moveChange(onItem ? item : null, -1);
      break;
    case 'a':
    case 'l':
    case 'd':
    case 'u': {
      if (!onItem) return;
      const f = fileOf(item);
      if (!f) return;
      const d = KEY_DECISION[e.key]!;
      const next = navItems()[navItems().indexOf(item) + 1];
      const nextKey = next ? { path: fileOf(next)?.path, nav: next.dataset.nav, index: next.dataset.index } : null;
      if (item.dataset.nav === 'hunk') decideHunk(f, Number(item.dataset.index), d);
      else decideFile(f, d);
      // The row was redrawn: move on to the item that followed the decided one.
      if (nextKey?.path) {
        const row = rowOf(nextKey.path);
        const to = nextKey.nav === 'hunk' ? row?.querySelector<HTMLElement>(`[data-nav="hunk"][data-index="${nextKey.index}"]`) : row?.querySelector<HTMLElement>('[data-nav="file"]');
        if (to) advanceTo(to);
      }
      break;
    }
    case 'A':
    case 'L':
    case 'D': {
      if (!onItem) return;
      const f = fileOf(item);
      if (!f) return;
      decideFile(f, KEY_DECISION[e.key.toLowerCase()]!);
      const head = rowOf(f.path)?.querySelector<HTMLElement>('[data-nav="file"]');
      if (head) moveToNextFile(head);
      break;
    }
    case 'o': {
      const f = onItem ? fileOf(item) : undefined;
      if (f) send({ type: 'openDiff', path: f.path });
      break;
    }
    case 'c':
      document.getElementById('message')?.focus();
      announce('Commit message. Ctrl+Enter commits.');
      break;
    case 'Enter':
    case ' ': {
      if (!onItem || item.dataset.nav !== 'file') return;
      const f = fileOf(item);
      if (f) toggle(f);
      break;
    }
    default:
      return;
  }
  e.preventDefault();
});

const KEY_DECISION: Record<string, D> = { a: 'a', l: 'l', d: 'r', u: 'u' };

/** Moves focus on after a decision and says so, after the decision's own announcement. */
function advanceTo(el: HTMLElement): void {
  el.focus();
  view.advancedTo = el;
  const said = live.textContent ?? '';
  announce(`${said}. Moved to ${el.getAttribute('aria-label') ?? 'the next item'}`);
}

function moveToNextFile(head: HTMLElement): void {
  let items = navItems().filter((x) => x.dataset.nav === 'file');
  let i = items.indexOf(head);
  if (i + 1 >= items.length && drawMore()) items = navItems().filter((x) => x.dataset.nav === 'file');
  i = items.indexOf(head);
  const next = items[i + 1];
  if (next) advanceTo(next);
  else head.focus();
}

// ---------------------------------------------------------------------------
// Messages from the host.

/**
 * Tells the host the review is on screen: the panel's "first content". VS Code keeps a
 * webview's frame hidden until its document's `load`, so that is the frame after both
 * the drawing and the load.
 */
function reportShown(): void {
  const n = state.listedTotal;
  const afterLoad = (f: () => void) => (document.readyState === 'complete' ? f() : window.addEventListener('load', f, { once: true }));
  afterLoad(() =>
    requestAnimationFrame(() =>
      setTimeout(() => {
        const nav = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming | undefined;
        send({ type: 'shown', files: n, at: Date.now(), pageMs: performance.now(), scriptMs, ...drawTimes, loadMs: Math.max(0, nav?.loadEventStart ?? 0) });
        // Colours only after first content: the highlighter's script loads when the page is idle.
        preloadHighlighter();
        release();
      }, 0),
    ),
  );
}

window.addEventListener('message', (ev: MessageEvent) => (view.held ? view.held.push(ev.data) : receive(ev.data)));

/** Handles the messages view.held while a listing's first frame was drawn, in the state.order they came (a later `init` holds the rest again). */
function release(): void {
  const queue = view.held ?? [];
  view.held = null;
  while (queue.length) {
    const next = queue.shift();
    if (view.held) (view.held as unknown[]).push(next);
    else receive(next);
  }
}

/** Asks for the hunks of files the person had expanded before a reload, as their rows arrive. */
function requestHunks(paths: readonly string[]): void {
  for (const path of paths) send({ type: 'requestHunks', path });
}

/** When the last listing arrived and was drawn (on the `performance.now()` clock), for `shown`. */
const drawTimes = { receivedMs: 0, drawnMs: 0 };

function receive(data: unknown): void {
  const received = performance.now();
  const m = parseInbound(HostMessage, data, 'host', (line) => console.warn(line));
  if (!m) return;
  switch (m.type) {
    case 'init': {
      drawTimes.receivedMs = received;
      requestHunks(state.begin(m));
      save();
      render();
      drawTimes.drawnMs = performance.now();
      // The rest of the listing (and anything after it) waits for this frame.
      view.held = [];
      reportShown();
      break;
    }
    case 'listed': {
      const { fresh, request } = state.listed(m.files);
      if (!fresh.length) return;
      requestHunks(request);
      save();
      if (state.committed) break;
      const more = { task: fresh.filter((f) => !f.drift), drift: fresh.filter((f) => f.drift) };
      for (const kind of ['task', 'drift'] as const) {
        const lazy = sectionLists.get(kind);
        if (!lazy || !more[kind].length) continue;
        const at = lazy.extend(more[kind]);
        more[kind].forEach((f, i) => places.set(f.path, { lazy, index: at + i }));
      }
      renderFooter();
      break;
    }
    case 'files': {
      for (const path of state.updateFiles(m.files)) redrawHead(path);
      break;
    }
    case 'hunks':
    case 'summary': {
      if (!state.content(m)) return;
      changed(m.path);
      if (view.pendingFocus?.path === m.path) {
        const which = view.pendingFocus.hunk;
        view.pendingFocus = null;
        if (!focusHunk(m.path, which)) rowOf(m.path)?.querySelector<HTMLElement>('[data-nav="file"]')?.focus();
      }
      break;
    }
    case 'busy':
      state.setBusy(m.busy);
      app.setAttribute('aria-busy', String(m.busy));
      renderFooter();
      break;
    case 'committed':
      const text = state.committedNow(m.committed);
      render();
      announce(`${text} ${m.committed.finished ? 'The task is completed.' : 'The task stays open.'}`);
      document.getElementById('committed-title')?.setAttribute('tabindex', '-1');
      document.getElementById('committed-title')?.focus();
      break;
    case 'applied':
    case 'error':
      state.setResult({ ok: m.type === 'applied' && m.ok, text: m.text });
      announce(m.text);
      // No review drawn yet (its listing failed): the error replaces "Loading…", with a way to try again.
      if (!state.init) {
        app.setAttribute('aria-busy', 'false');
        app.replaceChildren(h('p', { class: 'error', role: 'alert' }, icon('warning'), m.text), iconButton('refresh', 'Try Again', 'List the changes again', () => send({ type: 'refresh' })));
      } else renderFooter();
      break;
  }
}

// The first listing may already be on its way (the host posts it as soon as it is made, and VS
// Code delivers it once this document has loaded); `ready` brings it again if that was lost.
send({ type: 'ready' });
