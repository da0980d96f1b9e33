/**
 * The review panel page. Everything is built with DOM APIs and `textContent`, never
 * `innerHTML` with data, so file names and file content are inert text. Messages are
 * parsed with the shared zod schemas. Files render lazily: a file's hunks are asked
 * for (and drawn) only when it is expanded, so 1,000-file reviews stay responsive.
 */
import { HostMessage, PageState, parseInbound, type FileDecisionMsg, type HunkMsg, type PageMessage, type ReviewFileMsg } from '../src/extension/review/protocol';

declare function acquireVsCodeApi(): { postMessage(m: unknown): void; getState(): unknown; setState(s: unknown): void };
const vscode = acquireVsCodeApi();

type D = 'a' | 'r' | 'u';
interface FileState {
  included: boolean;
  /** Whole-file decision; 'm' = mixed (per-hunk decisions differ). */
  whole: D | 'm';
  hunks: D[] | null;
  fingerprint: string | null;
}
type Init = Extract<HostMessage, { type: 'init' }>;

let init: Init | undefined;
const files = new Map<string, FileState>();
const loaded = new Map<string, { hunks: HunkMsg[] } | { summary: string }>();
const expanded = new Set<string>();
let message = '';
let busy = false;
let result: { ok: boolean; text: string } | null = null;

const restored = PageState.safeParse(vscode.getState());
if (restored.success) {
  for (const [p, s] of Object.entries(restored.data.decisions ?? {})) files.set(p, { ...s });
  for (const p of restored.data.expanded ?? []) expanded.add(p);
  message = restored.data.message ?? '';
}

function send(m: PageMessage): void {
  vscode.postMessage(m);
}

function save(): void {
  if (!init) return;
  vscode.setState({ taskId: init.task.id, message, expanded: [...expanded], decisions: Object.fromEntries(files) } satisfies PageState);
}

function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  for (const c of children) el.append(typeof c === 'string' ? document.createTextNode(c) : c);
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

function stateOf(f: ReviewFileMsg): FileState {
  let s = files.get(f.path);
  if (!s) files.set(f.path, (s = { included: !f.drift, whole: 'u', hunks: null, fingerprint: null }));
  return s;
}

function recomputeWhole(s: FileState): void {
  if (!s.hunks || s.hunks.length === 0) return;
  const first = s.hunks[0]!;
  s.whole = s.hunks.every((x) => x === first) ? first : 'm';
}

function decideFile(f: ReviewFileMsg, d: D): void {
  const s = stateOf(f);
  if (d === 'r' && !f.revertible) return announce(`${f.path} cannot be rejected: its base content is not held.`);
  s.included = true;
  s.whole = d;
  if (s.hunks) s.hunks = s.hunks.map(() => d);
  changed(f.path);
}

function decideHunk(f: ReviewFileMsg, i: number, d: D): void {
  const s = stateOf(f);
  if (!s.hunks) return;
  s.included = true;
  s.hunks[i] = d;
  recomputeWhole(s);
  changed(f.path);
}

function setAll(d: D | 'reset'): void {
  for (const f of init?.files ?? []) {
    const s = stateOf(f);
    if (d === 'reset') {
      s.included = !f.drift;
      s.whole = 'u';
      if (s.hunks) s.hunks = s.hunks.map(() => 'u');
    } else if (s.included && (d !== 'r' || f.revertible)) {
      s.whole = d;
      if (s.hunks) s.hunks = s.hunks.map(() => d);
    }
  }
  render();
}

function changed(path: string): void {
  save();
  const row = document.querySelector<HTMLElement>(`[data-file="${CSS.escape(path)}"]`);
  const f = init?.files.find((x) => x.path === path);
  if (row && f) row.replaceWith(fileRow(f));
  renderFooter();
}

/** Decisions to send, or the reason the commit cannot happen yet. */
function decisions(): { ok: true; list: FileDecisionMsg[] } | { ok: false; why: string } {
  const list: FileDecisionMsg[] = [];
  let undecided = 0;
  for (const f of init?.files ?? []) {
    const s = stateOf(f);
    if (!s.included) continue;
    if (s.whole === 'u' || (s.hunks && s.hunks.includes('u'))) {
      undecided++;
      continue;
    }
    const fp = s.fingerprint ?? undefined;
    if (s.whole === 'a') list.push({ path: f.path, action: 'approve', ...(fp ? { fingerprint: fp } : {}) });
    else if (s.whole === 'r') list.push({ path: f.path, action: 'reject', ...(fp ? { fingerprint: fp } : {}) });
    else if (s.hunks && s.fingerprint) {
      const approved = s.hunks.flatMap((x, i) => (x === 'a' ? [i] : []));
      list.push({ path: f.path, action: 'hunks', approved, hunkCount: s.hunks.length, fingerprint: s.fingerprint });
    }
  }
  if (undecided) return { ok: false, why: `${undecided} file(s) still have undecided changes: approve or reject them, or exclude the file.` };
  return { ok: true, list };
}

// ---------------------------------------------------------------------------
// Rendering.

const app = document.getElementById('app')!;
const live = h('div', { role: 'status', 'aria-live': 'polite', class: 'sr-only' });
document.body.append(live);
function announce(text: string): void {
  live.textContent = text;
}

const LABEL: Record<D | 'm', string> = { a: 'approved', r: 'rejected', u: 'undecided', m: 'partly approved' };

function render(): void {
  app.replaceChildren();
  app.setAttribute('aria-busy', 'false');
  if (!init) return;
  const { task } = init;
  app.append(
    h('header', {}, h('h1', {}, task.title), h('p', { class: 'goal' }, task.goal), h('p', { class: 'meta' }, `State: ${task.state.replace(/_/g, ' ')} · Agent: ${task.agent ?? 'unknown'} · Duration: ${dur(task.durationMs)}${task.commit ? ` · Commit ${task.commit.slice(0, 10)}` : ''}`)),
    h(
      'div',
      { class: 'toolbar', role: 'toolbar', 'aria-label': 'Review actions' },
      button('Approve all', 'Approve every included file', () => setAll('a')),
      button('Reject all', 'Reject every included file', () => setAll('r')),
      button('Reset', 'Reset every decision', () => setAll('reset')),
      button('Roll Back…', 'Roll the task back to a checkpoint', () => send({ type: 'rollback' }), 'secondary'),
      button('Resume…', 'Resume the task', () => send({ type: 'resume' }), 'secondary'),
      button('Refresh', 'Reload the changes from the workspace', () => send({ type: 'refresh' }), 'secondary'),
    ),
    h('p', { class: 'keys' }, 'Keys: j / n next, k / p previous, a approve, r reject, Enter or Space expand a file, o open in diff editor.'),
    timeline(),
  );
  const taskFiles = init.files.filter((f) => !f.drift);
  const drift = init.files.filter((f) => f.drift);
  app.append(fileSection(`Files changed by the task (${taskFiles.length})`, taskFiles));
  if (drift.length) app.append(fileSection(`Your own edits during the task (${drift.length}) — excluded unless you include them`, drift));
  app.append(h('div', { id: 'footer' }));
  renderFooter();
}

function timeline(): HTMLElement {
  const { steps, effects } = init!;
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
  const d = h('details', { class: 'history' }, h('summary', {}, `Timeline: ${steps.length} step(s), ${effects.length} side effect(s)${effects.some((e) => e.inDoubt) ? ' — some in doubt' : ''}`), list);
  if (effects.length) d.append(fx);
  if (effects.some((e) => e.inDoubt)) d.open = true;
  return d;
}

function fileSection(title: string, list: ReviewFileMsg[]): HTMLElement {
  const sec = h('section', { 'aria-label': title }, h('h2', {}, title));
  const ul = h('ul', { class: 'files', role: 'list' });
  for (const f of list) ul.append(fileRow(f));
  sec.append(ul);
  return sec;
}

function fileRow(f: ReviewFileMsg): HTMLElement {
  const s = stateOf(f);
  const li = h('li', { class: `file ${s.included ? '' : 'excluded'}`, 'data-file': f.path });
  const open = expanded.has(f.path);
  const head = h('div', {
    class: `file-head d-${s.whole}`,
    tabindex: '0',
    role: 'button',
    'data-nav': 'file',
    'aria-expanded': String(open),
    'aria-label': `${f.path}, ${f.status}, ${f.added} added, ${f.removed} removed lines, ${s.included ? LABEL[s.whole] : 'excluded'}`,
  });
  head.append(
    h('span', { class: 'twisty', 'aria-hidden': 'true' }, open ? '▾' : '▸'),
    h('span', { class: `status st-${f.status}` }, f.status[0]!.toUpperCase()),
    h('span', { class: 'path' }, f.path),
    h('span', { class: 'counts' }, f.binary ? 'binary' : f.oversized ? 'large' : `+${f.added} −${f.removed}`),
    h('span', { class: 'decision' }, s.included ? LABEL[s.whole] : 'excluded'),
    button('✓', `Approve ${f.path}`, () => decideFile(f, 'a')),
    button('✗', `Reject ${f.path}`, () => decideFile(f, 'r')),
    button('Diff', `Open ${f.path} in the diff editor`, () => send({ type: 'openDiff', path: f.path }), 'secondary'),
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
  li.append(head);
  if (open) li.append(fileBody(f));
  return li;
}

function toggle(f: ReviewFileMsg): void {
  if (expanded.has(f.path)) expanded.delete(f.path);
  else {
    expanded.add(f.path);
    if (!loaded.has(f.path)) send({ type: 'requestHunks', path: f.path });
  }
  save();
  changed(f.path);
  document.querySelector<HTMLElement>(`[data-file="${CSS.escape(f.path)}"] .file-head`)?.focus();
}

function fileBody(f: ReviewFileMsg): HTMLElement {
  const body = h('div', { class: 'file-body' });
  const l = loaded.get(f.path);
  if (!l) return body.appendChild(h('p', { class: 'dim' }, 'Loading…')).parentElement!;
  if ('summary' in l) return body.appendChild(h('p', { class: 'dim' }, l.summary)).parentElement!;
  const s = stateOf(f);
  l.hunks.forEach((hk, i) => {
    const d = s.hunks?.[i] ?? 'u';
    const el = h('div', {
      class: `hunk d-${d}`,
      tabindex: '0',
      role: 'group',
      'data-nav': 'hunk',
      'data-index': String(i),
      'aria-label': `Change ${i + 1} of ${l.hunks.length} in ${f.path}, old lines ${hk.oldStart}–${hk.oldStart + Math.max(0, hk.oldLines - 1)}, new lines ${hk.newStart}–${hk.newStart + Math.max(0, hk.newLines - 1)}, ${LABEL[d]}`,
    });
    const bar = h('div', { class: 'hunk-head' }, h('span', {}, `@@ −${hk.oldStart},${hk.oldLines} +${hk.newStart},${hk.newLines} @@`), h('span', { class: 'decision' }, LABEL[d]));
    if (f.hunkable) bar.append(button('✓ Approve', `Approve change ${i + 1} in ${f.path}`, () => decideHunk(f, i, 'a')), button('✗ Reject', `Reject change ${i + 1} in ${f.path}`, () => decideHunk(f, i, 'r')));
    const pre = h('pre', { class: 'lines' });
    const line = (cls: string, mark: string, text: string) => pre.append(h('span', { class: cls }, `${mark} ${text}\n`));
    for (const t of hk.before) line('ctx', ' ', t);
    for (const t of hk.removed) line('del', '−', t);
    for (const t of hk.added) line('add', '+', t);
    for (const t of hk.after) line('ctx', ' ', t);
    el.append(bar, pre);
    body.append(el);
  });
  return body;
}

function renderFooter(): void {
  const footer = document.getElementById('footer');
  if (!footer || !init) return;
  const ta = h('textarea', { id: 'message', rows: '8', 'aria-label': 'Commit message', spellcheck: 'false' });
  ta.value = message || init.message;
  ta.addEventListener('input', () => {
    message = ta.value;
    save();
  });
  const d = decisions();
  const commit = button(init.git ? 'Commit approved changes' : 'Apply decisions (no git repository)', 'Commit the approved changes and revert the rejected ones', () => {
    const now = decisions();
    if (!now.ok) return announce(now.why);
    send({ type: 'apply', message: ta.value.trim() || init!.message, decisions: now.list });
  });
  commit.disabled = busy || !d.ok;
  footer.replaceChildren(
    h('h2', {}, 'Commit'),
    ta,
    h('div', { class: 'commit-row' }, commit, h('span', { class: 'dim', role: 'status' }, d.ok ? `${d.list.length} file(s) decided. A checkpoint is taken first, so this can be undone.` : d.why)),
    h('div', { id: 'result', role: 'alert', class: result ? (result.ok ? 'ok' : 'error') : '' }, result?.text ?? ''),
  );
}

// ---------------------------------------------------------------------------
// Keyboard: j/n next, k/p previous, a approve, r reject, o diff.

function navItems(): HTMLElement[] {
  return Array.from(document.querySelectorAll<HTMLElement>('[data-nav]'));
}

document.addEventListener('keydown', (e) => {
  const t = e.target as HTMLElement;
  if (t.tagName === 'TEXTAREA' || t.tagName === 'INPUT' || e.ctrlKey || e.metaKey || e.altKey) return;
  const items = navItems();
  const i = items.indexOf(t);
  const fileOf = (el: HTMLElement) => init?.files.find((f) => f.path === el.closest<HTMLElement>('[data-file]')?.dataset.file);
  const move = (delta: number) => items[Math.min(items.length - 1, Math.max(0, i + delta))]?.focus();
  switch (e.key) {
    case 'j':
    case 'n':
      move(i < 0 ? 0 : 1);
      break;
    case 'k':
    case 'p':
      move(i < 0 ? 0 : -1);
      break;
    case 'a':
    case 'r': {
      if (i < 0) return;
      const f = fileOf(t);
      if (!f) return;
      const d: D = e.key === 'a' ? 'a' : 'r';
      if (t.dataset.nav === 'hunk' && f.hunkable) decideHunk(f, Number(t.dataset.index), d);
      else decideFile(f, d);
      // Re-rendering replaced the row: refocus the same item and move on.
      const again = navItems();
      again[Math.min(again.length - 1, i + 1)]?.focus();
      break;
    }
    case 'o': {
      const f = i >= 0 ? fileOf(t) : undefined;
      if (f) send({ type: 'openDiff', path: f.path });
      break;
    }
    case 'Enter':
    case ' ': {
      if (t.dataset.nav !== 'file') return;
      const f = fileOf(t);
      if (f) toggle(f);
      break;
    }
    default:
      return;
  }
  e.preventDefault();
});

// ---------------------------------------------------------------------------
// Messages from the host.

window.addEventListener('message', (ev: MessageEvent) => {
  const m = parseInbound(HostMessage, ev.data, 'host', (line) => console.warn(line));
  if (!m) return;
  switch (m.type) {
    case 'init': {
      init = m;
      const paths = new Set(m.files.map((f) => f.path));
      for (const p of [...files.keys()]) if (!paths.has(p)) files.delete(p);
      loaded.clear();
      for (const p of expanded) if (paths.has(p)) send({ type: 'requestHunks', path: p });
      save();
      render();
      break;
    }
    case 'hunks':
    case 'summary': {
      const f = init?.files.find((x) => x.path === m.path);
      if (!f) return;
      const s = stateOf(f);
      if (s.fingerprint !== m.fingerprint) {
        // New content: per-hunk decisions made on other content no longer apply.
        if (s.whole === 'm') s.whole = 'u';
        s.hunks = null;
      }
      s.fingerprint = m.fingerprint;
      if (m.type === 'hunks') {
        loaded.set(m.path, { hunks: m.hunks });
        if (!s.hunks || s.hunks.length !== m.hunks.length) s.hunks = m.hunks.map(() => (s.whole === 'm' ? 'u' : s.whole));
      } else loaded.set(m.path, { summary: m.reason });
      save();
      changed(m.path);
      break;
    }
    case 'busy':
      busy = m.busy;
      app.setAttribute('aria-busy', String(m.busy));
      renderFooter();
      break;
    case 'applied':
    case 'error':
      result = { ok: m.type === 'applied' && m.ok, text: m.text };
      announce(m.text);
      renderFooter();
      break;
  }
});

send({ type: 'ready' });
