/**
 * The Task Timeline page. Built with DOM APIs and `textContent` only (never
 * `innerHTML` with data), so titles, errors and commands are inert text; messages
 * are parsed with the shared zod schemas. The whole page is built in one pass into
 * a fragment; long lists draw a chunk at a time as they near the viewport, so a task
 * of thousands of events paints quickly. Bars, marks and the graph are SVG
 * (attributes, not inline style, so the strict CSP holds).
 */
import { applyPatch } from '../src/extension/timeline/patch';
import { parseInbound } from '../src/extension/webview/parseInbound';
import { PIECE, validateModelInPieces } from '../src/extension/timeline/validateInPieces';
import {
  COLLECTIONS,
  FIRST_TIMELINE_ID,
  TimelineHostMessage,
  TimelinePageState,
  type CheckpointAction,
  type StepAction,
  type TimelineAttempt,
  type TimelineCheckpoint,
  type TimelineEffect,
  type TimelineModel,
  type TimelinePageMessage,
  type TimelineStep,
} from '../src/extension/timeline/protocol';
import { lazyList, type LazyList } from './lazyList';
import { displayText } from '../src/extension/webview/displayText';

declare function acquireVsCodeApi(): { postMessage(m: unknown): void; getState(): unknown; setState(s: unknown): void };
const vscode = acquireVsCodeApi();
const SVG = 'http://www.w3.org/2000/svg';
/** The time axis's track is drawn in a fixed coordinate space, stretched to the row's width. */
const TRACK_W = 1000;
/** Rows drawn per chunk of a long list: more than a tall window shows, few enough to paint at once. */
const CHUNK = 60;

/** What the page remembers between messages and redraws: one object, changed only by the handlers below. */
const page = {
  model: undefined as TimelineModel | undefined,
  /** The focused row's key, kept across redraws and reloads. */
  focusKey: undefined as string | undefined,
  notice: null as { text: string; error: boolean } | null,
  /** The checkpoint whose action menu is open. */
  menuFor: null as string | null,
  /** Where the graph's scroll box was, so a live redraw does not throw the person back to its start. */
  graphScroll: { left: 0, top: 0 },
  /** The graph's scroll box of the last render (to put its scroll position back). */
  graphBox: undefined as HTMLElement | undefined,
};
const expanded = new Set<string>();
const lists: LazyList[] = [];
const app = document.getElementById('app')!;

const restored = TimelinePageState.safeParse(vscode.getState());
if (restored.success) page.focusKey = restored.data.focus;

function send(m: TimelinePageMessage): void {
  vscode.postMessage(m);
}

function save(): void {
  if (page.model) vscode.setState({ taskId: page.model.task.id, focus: page.focusKey?.slice(0, 400) } satisfies TimelinePageState);
}

function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  // Text is recorded text (titles, file names, errors): escaped, so a bidi override cannot reorder what it reads (see displayText).
  for (const c of children) el.append(typeof c === 'string' ? document.createTextNode(displayText(c, { multiline: true })) : c);
  return el;
}

function s<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number> = {}): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

/**
 * An SVG element's tooltip. Thousands of bars and marks would each need a `<title>`
 * child; the text waits in an attribute instead and becomes a `<title>` when the
 * pointer first reaches the element (see the listener below), so the first paint
 * builds a quarter fewer elements.
 */
function tip(el: SVGElement, text: string): void {
  el.setAttribute('data-tip', displayText(text, { multiline: true }));
}

document.addEventListener('mouseover', (e) => {
  const el = (e.target as Element).closest?.('[data-tip]');
  if (!el || el.querySelector(':scope > title')) return;
  const t = document.createElementNS(SVG, 'title');
  t.textContent = el.getAttribute('data-tip');
  el.append(t);
});

function dur(ms: number | null): string {
  if (ms === null) return '';
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  const sec = Math.round(ms / 1000);
  return sec < 120 ? `${sec} s` : sec < 7200 ? `${Math.round(sec / 60)} min` : `${(sec / 3600).toFixed(1)} h`;
}

// One formatter each, made once: toLocaleTimeString() builds a new one per call, which
// for thousands of bars and marks was the page's largest cost after layout.
const TIME = new Intl.DateTimeFormat(undefined, { timeStyle: 'medium' });
const DATE_TIME = new Intl.DateTimeFormat(undefined, { dateStyle: 'short', timeStyle: 'medium' });
const clock = (ms: number) => TIME.format(ms);
const human = (x: string) => x.replace(/_/g, ' ');

function button(label: string, aria: string, onClick: () => void, cls = 'secondary'): HTMLButtonElement {
  const b = h('button', { type: 'button', 'aria-label': aria, class: cls }, label);
  b.addEventListener('click', (e) => {
    e.stopPropagation();
    onClick();
  });
  return b;
}

/** A small inline icon drawn in SVG (the page has no icon font under its CSP): a swatch of the outcome's colour. */
function swatch(cls: string, shape: 'bar' | 'mark' | 'dot' = 'bar'): SVGSVGElement {
  const svg = s('svg', { width: 14, height: 10, viewBox: '0 0 14 10', class: 'swatch', 'aria-hidden': 'true' });
  svg.append(shape === 'mark' ? s('rect', { x: 6, y: 0, width: 2, height: 10, class: cls }) : shape === 'dot' ? s('circle', { cx: 7, cy: 5, r: 4, class: cls }) : s('rect', { x: 0, y: 2, width: 14, height: 6, rx: 1, class: cls }));
  return svg;
}

// ---------------------------------------------------------------------------
// Drawing.

function render(): void {
  if (!page.model) return;
  const m = page.model;
  lists.length = 0;
  // A live update redraws the page: an open checkpoint menu, and the item in it that had focus, come back as they were.
  const reopen = page.menuFor;
  const items = Array.from(document.querySelectorAll<HTMLElement>('.menu [role="menuitem"]'));
  const focusedItem = items.indexOf(document.activeElement as HTMLElement);
  const frag = document.createDocumentFragment();
  page.graphBox = undefined;
  frag.append(header(m), graph(m), axis(m), checkpointSection(m), effectSection(m));
  app.replaceChildren(frag);
  // Written only when the box had been scrolled: a fresh page does no scroll write (and no layout) at all.
  const box = page.graphBox as HTMLElement | undefined; // set by graph() above
  if (box && (page.graphScroll.left || page.graphScroll.top)) {
    box.scrollLeft = page.graphScroll.left;
    box.scrollTop = page.graphScroll.top;
  }
  app.setAttribute('aria-busy', String(!!m.pending));
  page.menuFor = null;
  restoreFocus();
  if (reopen) openMenu(reopen, focusedItem >= 0 ? focusedItem : null);
}

function header(m: TimelineModel): HTMLElement {
  const t = m.task;
  // Ids are for a tooltip (and Copy Id), not the page: a person reads the title.
  const el = h('header', {}, h('h1', { title: `Task id ${t.id} · correlation id ${t.correlationId}` }, t.title));
  const meta = h('p', { class: 'meta' });
  meta.append(h('span', { class: `badge st-${t.state}` }, human(t.state)), ` ${t.agent ? `${t.agent} · ` : ''}task attempt ${t.attempt} · ${m.events} events · started ${DATE_TIME.format(t.createdAt)} · ${dur(m.range.end - m.range.start)}`);
  el.append(meta);
  if (t.interruption) el.append(h('p', { class: 'warn', role: 'note' }, t.interruption));
  const omitted = Object.entries(m.omitted).filter(([, n]) => n > 0);
  if (omitted.length) el.append(h('p', { class: 'dim' }, `Too long to show whole: left out ${omitted.map(([k, n]) => `${n} ${k}`).join(', ')} (the oldest). Show Events lists everything.`));
  const pending = m.pending && Object.entries(m.pending).filter(([, n]) => n > 0);
  if (pending?.length) el.append(h('p', { class: 'dim', role: 'status' }, `Showing the first screen; loading ${pending.map(([k, n]) => `${n} more ${k}`).join(', ')}…`));
  el.append(
    h(
      'div',
      { class: 'toolbar' },
      button('Refresh', 'Refresh the timeline', () => send({ type: 'refresh' })),
      button('Show events', 'Show every event of the task', () => send({ type: 'showEvents' })),
    ),
  );
  el.append(h('p', { class: 'keys' }, 'Keys: ↑ ↓ move through rows, Home/End jump, Enter acts (a step shows its attempts, a checkpoint offers compare, roll back and fork), Esc closes a menu.'));
  const status = h('p', { id: 'notice', role: 'status', 'aria-live': 'polite', class: page.notice?.error ? 'error' : 'dim' }, page.notice?.text ?? '');
  el.append(status);
  return el;
}

const NODE_W = 150;
const NODE_H = 28;
const GAP_X = 50;
const GAP_Y = 12;

/** Extra graph area drawn around the visible part, so a short scroll shows drawn nodes before the next redraw. */
const GRAPH_MARGIN = 400;
/** Runs `fn` after the next frame is painted (a frame, then a task). */
const afterPaint = (fn: () => void) => requestAnimationFrame(() => setTimeout(fn, 0));

/**
 * The `dependsOn` DAG in layers, left to right, edges from a dependency to the step
 * that needs it. Only the part inside the scroll box (and a margin) is drawn: a plan
 * of 2,000 steps is a few dozen nodes on screen, and scrolling draws the rest.
 */
function graph(m: TimelineModel): HTMLElement {
  const sec = h('section', { 'aria-labelledby': 'graph-h' }, h('h2', { id: 'graph-h' }, 'Dependency graph'));
  if (!m.steps.length) {
    sec.append(h('p', { class: 'dim' }, 'No steps yet. The graph fills in as the agent plans or starts steps.'));
    return sec;
  }
  let layers = 0;
  let rowsN = 0;
  for (const st of m.steps) {
    layers = Math.max(layers, st.layer + 1);
    rowsN = Math.max(rowsN, st.row + 1);
  }
  const w = layers * (NODE_W + GAP_X) - GAP_X + 8;
  const hh = rowsN * (NODE_H + GAP_Y) - GAP_Y + 8;
  const svg = s('svg', { width: w, height: hh, viewBox: `0 0 ${w} ${hh}`, class: 'graph', role: 'img', 'aria-label': `Dependency graph: ${m.steps.length} steps in ${layers} layers. The time axis below lists each step.` });
  const pos = new Map(m.steps.map((x) => [x.id, { x: 4 + x.layer * (NODE_W + GAP_X), y: 4 + x.row * (NODE_H + GAP_Y) }]));
  const edges = s('g', { class: 'edges' });
  const nodes = s('g', { class: 'nodes' });
  svg.append(edges, nodes);
  const box = h('div', { class: 'scroll' }, svg);
  /** The drawn area, in graph coordinates; redrawn only when the view leaves it. */
  let drawn = { x0: 0, y0: 0, x1: -1, y1: -1 };
  const draw = (left: number, top: number, width: number, height: number, margin = GRAPH_MARGIN) => {
    if (left >= drawn.x0 && top >= drawn.y0 && left + width <= drawn.x1 && top + height <= drawn.y1) return;
    const v = { x0: left - margin, y0: top - margin, x1: left + width + margin, y1: top + height + margin };
    drawn = v;
    const inView = (ax: number, ay: number, bx: number, by: number) => bx >= v.x0 && ax <= v.x1 && by >= v.y0 && ay <= v.y1;
    // The visible edges in one path and their arrowheads in another: two elements to lay out and paint, not two per edge.
    const lines: string[] = [];
    const heads: string[] = [];
    const frag = document.createDocumentFragment();
    for (const st of m.steps) {
      const to = pos.get(st.id)!;
      for (const d of st.dependsOn) {
        const from = pos.get(d);
        if (!from) continue;
        const x1 = from.x + NODE_W;
        const y1 = from.y + NODE_H / 2;
        const x2 = to.x;
        const y2 = to.y + NODE_H / 2;
        if (!inView(Math.min(x1, x2), Math.min(y1, y2), Math.max(x1, x2), Math.max(y1, y2))) continue;
        const mx = (x1 + x2) / 2;
        lines.push(`M${x1},${y1}C${mx},${y1} ${mx},${y2} ${x2 - 4},${y2}`);
        heads.push(`M${x2 - 6},${y2 - 3}L${x2},${y2}L${x2 - 6},${y2 + 3}z`);
      }
      if (!inView(to.x, to.y, to.x + NODE_W, to.y + NODE_H)) continue;
      const g = s('g', { class: `node st-${st.status}`, 'data-step': st.id, transform: `translate(${to.x},${to.y})` });
      g.append(s('rect', { width: NODE_W, height: NODE_H, rx: 4 }));
      const label = s('text', { x: 8, y: NODE_H / 2 + 4 });
      label.textContent = displayText(st.title.length > 20 ? `${st.title.slice(0, 19)}…` : st.title);
      g.append(label);
      tip(g, `${st.title} — ${human(st.status)}${st.dependsOn.length ? ` — after ${st.dependsOn.join(', ')}` : ''}`);
      frag.append(g);
    }
    edges.replaceChildren(...(lines.length ? [s('path', { d: lines.join(''), class: 'edge' }), s('path', { d: heads.join(''), class: 'arrow' })] : []));
    nodes.replaceChildren(frag);
  };
  // Before the box is laid out its size is unknown: the window's width and the box's CSS height bound it (no layout read).
  // The first frame draws only that; the margin around it is drawn once the frame is out.
  draw(page.graphScroll.left, page.graphScroll.top, window.innerWidth, GRAPH_BOX_H, 0);
  afterPaint(() => {
    if (!box.isConnected) return;
    drawn = { x0: 0, y0: 0, x1: -1, y1: -1 }; // what is drawn has no margin yet: draw again with one
    draw(box.scrollLeft, box.scrollTop, box.clientWidth, box.clientHeight);
  });
  let queued = false;
  box.addEventListener(
    'scroll',
    () => {
      if (queued) return;
      queued = true;
      // One read and one redraw per frame, however many scroll events came.
      requestAnimationFrame(() => {
        queued = false;
        page.graphScroll = { left: box.scrollLeft, top: box.scrollTop };
        draw(box.scrollLeft, box.scrollTop, box.clientWidth, box.clientHeight);
      });
    },
    { passive: true },
  );
  // Clicking a node goes to its row on the time axis, where the keyboard can take over.
  svg.addEventListener('click', (e) => {
    const id = (e.target as Element).closest('[data-step]')?.getAttribute('data-step');
    if (id) focusRow(`step:${id}`);
  });
  page.graphBox = box;
  sec.append(box);
  return sec;
}

/** The graph box's height in CSS (timeline.css `.scroll { max-height }`). */
const GRAPH_BOX_H = 360;

const x = (m: TimelineModel, t: number) => ((t - m.range.start) / (m.range.end - m.range.start)) * TRACK_W;

function track(label: string): SVGSVGElement {
  return s('svg', { class: 'track', viewBox: `0 0 ${TRACK_W} 10`, preserveAspectRatio: 'none', role: 'img', 'aria-label': label });
}

function attemptsOf(m: TimelineModel): Map<string, TimelineAttempt[]> {
  const by = new Map<string, TimelineAttempt[]>();
  for (const a of m.attempts) {
    const l = by.get(a.stepId);
    if (l) l.push(a);
    else by.set(a.stepId, [a]);
  }
  return by;
}

function legend(): HTMLElement {
  const el = h('p', { class: 'legend dim', 'aria-hidden': 'true' });
  for (const [cls, text] of [['o-completed', 'completed'], ['o-failed', 'failed'], ['o-running', 'running'], ['o-interrupted', 'interrupted'], ['o-skipped', 'skipped / abandoned']] as const) el.append(swatch(cls), ` ${text}  `);
  el.append(swatch('cp', 'mark'), ' checkpoint  ', swatch('mk', 'mark'), ' task event');
  return el;
}

/** Steps on a time axis: one row per step, one bar per attempt, then the checkpoints and the task's own moments. */
function axis(m: TimelineModel): HTMLElement {
  const sec = h('section', { 'aria-labelledby': 'axis-h' }, h('h2', { id: 'axis-h' }, 'Time axis'), legend());
  sec.append(h('div', { class: 'ruler', 'aria-hidden': 'true' }, h('span', {}, clock(m.range.start)), h('span', {}, clock((m.range.start + m.range.end) / 2)), h('span', {}, clock(m.range.end))));
  const byStep = attemptsOf(m);
  const ul = h('ul', { class: 'rows', role: 'list', 'aria-label': 'Steps and their attempts' });
  // The checkpoints' and the task's lanes first: they are the places to act from.
  const cpLane = track(`${m.checkpoints.length} checkpoints`);
  for (const c of m.checkpoints) {
    const r = s('rect', { x: Math.min(TRACK_W - 3, x(m, c.at)), y: 0, width: 3, height: 10, class: `cp${c.restorable ? '' : ' dead'}`, 'data-cp': c.id });
    tip(r, `${c.title} — ${clock(c.at)}`);
    cpLane.append(r);
  }
  cpLane.addEventListener('click', (e) => {
    const id = (e.target as Element).getAttribute('data-cp');
    if (id) {
      focusRow(`cp:${id}`);
      openMenu(id);
    }
  });
  ul.append(lane('lane:checkpoints', 'Checkpoints', `${m.checkpoints.length}`, cpLane));
  const mkLane = track(`${m.marks.length} task events`);
  for (const k of m.marks) {
    const r = s('rect', { x: Math.min(TRACK_W - 3, x(m, k.at)), y: 0, width: 3, height: 10, class: 'mk' });
    tip(r, `${clock(k.at)} ${k.text}`);
    mkLane.append(r);
  }
  ul.append(lane('lane:task', 'Task', m.marks.map((k) => k.text).slice(-1)[0] ?? '', mkLane));
  sec.append(ul);
  if (!m.steps.length) {
    sec.append(h('p', { class: 'dim' }, 'No step has started yet.'));
    return sec;
  }
  const steps = h('ul', { class: 'rows', role: 'list', 'aria-label': 'Steps' });
  lists.push(lazyList(steps, m.steps, (st) => stepRow(m, st, byStep.get(st.id) ?? []), CHUNK));
  sec.append(steps);
  return sec;
}

function lane(key: string, label: string, detail: string, svg: SVGSVGElement): HTMLLIElement {
  const li = h('li', { class: 'row lane', 'data-key': key, tabindex: '-1', 'aria-label': `${label}: ${detail}` });
  li.append(h('div', { class: 'label' }, h('span', { class: 'title' }, label), h('span', { class: 'dim' }, detail)), svg);
  return li;
}

function stepRow(m: TimelineModel, st: TimelineStep, attempts: TimelineAttempt[]): HTMLLIElement {
  const total = attempts.reduce((n, a) => n + ((a.end ?? m.range.end) - a.start), 0);
  const who = [...new Set(attempts.map((a) => a.by).filter((b): b is string => !!b))];
  const summary = `${attempts.length} attempt${attempts.length === 1 ? '' : 's'}${attempts.length ? ` · ${dur(total)}` : ''}${who.length ? ` · by ${who.join(', ')}` : ''}`;
  const key = `step:${st.id}`;
  const open = expanded.has(st.id);
  const li = h('li', { class: `row step st-${st.status}`, 'data-key': key, tabindex: '-1', 'aria-expanded': String(open), 'aria-label': `Step ${st.title}, ${human(st.status)}, ${summary}` });
  const t = track(`${attempts.length} attempts of ${st.title}`);
  for (const a of attempts) {
    const x0 = x(m, a.start);
    const x1 = x(m, a.end ?? m.range.end);
    const r = s('rect', { x: Math.min(x0, TRACK_W - 2), y: 1, width: Math.max(2, x1 - x0), height: 8, rx: 1, class: `o-${a.outcome}` });
    tip(r, attemptText(a, m));
    t.append(r);
  }
  li.append(
    h(
      'div',
      { class: 'label' },
      h('span', { class: 'title' }, st.title, st.adhoc ? h('span', { class: 'dim' }, ' (ad hoc)') : ''),
      h('span', { class: `status st-${st.status}` }, human(st.status)),
      h('span', { class: 'dim' }, summary),
    ),
    t,
  );
  if (open) li.append(attemptList(m, st, attempts));
  li.addEventListener('click', (e) => {
    if ((e.target as Element).closest('.attempts')) return;
    toggle(st.id);
  });
  return li;
}

function attemptText(a: TimelineAttempt, m: TimelineModel): string {
  const end = a.end === null ? 'still running' : `${dur(a.end - a.start)}`;
  return `Attempt ${a.n}${a.taskAttempt > 1 ? ` (task attempt ${a.taskAttempt})` : ''}: ${human(a.outcome)}${a.failureClass ? ` (${human(a.failureClass)})` : ''}, ${clock(a.start)}, ${end}${a.by ? `, by ${a.by}` : ''}${a.error ? ` — ${a.error}` : ''}${a.end === null ? ` (axis ends ${clock(m.range.end)})` : ''}`;
}

function attemptList(m: TimelineModel, st: TimelineStep, attempts: TimelineAttempt[]): HTMLElement {
  const ol = h('ol', { class: 'attempts', 'aria-label': `Attempts of ${st.title}` });
  if (!attempts.length) ol.append(h('li', { class: 'dim' }, 'Not started yet.'));
  for (const a of attempts) ol.append(h('li', { class: `o-text-${a.outcome}` }, swatch(`o-${a.outcome}`), ` ${attemptText(a, m)}`));
  if (st.error) ol.append(h('li', { class: 'error' }, `Last error: ${st.error}`));
  const actions = stepActions(m, st);
  if (actions.length) {
    const row = h('li', { class: 'step-actions', role: 'group', 'aria-label': `Actions for step ${st.title}` });
    for (const a of actions) {
      row.append(
        button(STEP_ACTION_LABEL[a], `${STEP_ACTION_LABEL[a]} ${st.title}`, () => {
          say(`${STEP_ACTION_LABEL[a]}: ${st.title}…`, false);
          send({ type: 'step', action: a, stepId: st.id });
        }),
      );
    }
    ol.append(row);
  }
  return ol;
}

// The same words as the Tasks view's menus (package.json), so the README names one action one way.
const STEP_ACTION_LABEL: Record<StepAction, string> = { complete: 'Complete Step', skip: 'Skip Step', fail: 'Fail Step', retry: 'Retry Step' };

/** What a person may do to a step by hand (the Tasks view offers the same), while its task is not final. */
function stepActions(m: TimelineModel, st: TimelineStep): StepAction[] {
  if (m.task.state === 'completed' || m.task.state === 'abandoned') return [];
  switch (st.status) {
    case 'in_progress':
      return ['complete', 'fail'];
    case 'pending':
      return ['skip'];
    case 'failed':
      return ['retry', 'skip'];
    case 'skipped':
    case 'abandoned':
      return ['retry'];
    default:
      return [];
  }
}

function toggle(stepId: string): void {
  if (expanded.has(stepId)) expanded.delete(stepId);
  else expanded.add(stepId);
  page.focusKey = `step:${stepId}`;
  render();
}

function checkpointSection(m: TimelineModel): HTMLElement {
  const sec = h('section', { 'aria-labelledby': 'cp-h' }, h('h2', { id: 'cp-h' }, `Checkpoints (${m.checkpoints.length + (m.pending?.checkpoints ?? 0)})`));
  if (!m.checkpoints.length) {
    sec.append(h('p', { class: 'dim' }, 'No checkpoint yet. Waypoint takes one when the task starts, around each step and before side effects.'));
    return sec;
  }
  const ul = h('ul', { class: 'rows list', role: 'list', 'aria-label': 'Checkpoints' });
  lists.push(lazyList(ul, [...m.checkpoints].reverse(), checkpointRow, CHUNK));
  sec.append(ul);
  return sec;
}

function checkpointRow(c: TimelineCheckpoint): HTMLLIElement {
  const name = c.title;
  const li = h('li', {
    class: `row cp-row${c.restorable ? '' : ' dead'}`,
    'data-key': `cp:${c.id}`,
    'data-cp': c.id,
    tabindex: '-1',
    'aria-haspopup': 'menu',
    'aria-label': `Checkpoint ${name}, ${clock(c.at)}, ${c.changes}${c.restorable ? '' : ', no intact snapshot'}`,
  });
  li.append(swatch(c.restorable ? 'cp' : 'cp dead', 'mark'), h('span', { class: 'title' }, name), h('span', { class: 'dim' }, `${human(c.kind)} · ${clock(c.at)} · ${c.changes}${c.restorable ? '' : ' · no intact snapshot'}`));
  li.addEventListener('click', () => openMenu(c.id));
  return li;
}

const ACTIONS: { action: CheckpointAction; label: string }[] = [
  // The commands' own titles (the checkpoint's menu in the Tasks view says the same).
  { action: 'compare', label: 'Compare with Workspace' },
  { action: 'rollback', label: 'Roll Back to Checkpoint' },
  { action: 'fork', label: 'Fork Task from Checkpoint' },
];

/** The checkpoint's actions, as a menu under its row: arrows move, Enter runs, Esc closes. */
function openMenu(checkpointId: string, focusItem: number | null = 0): void {
  closeMenu();
  const c = page.model?.checkpoints.find((x) => x.id === checkpointId);
  const row = rowByKey(`cp:${checkpointId}`);
  if (!c || !row) return;
  if (!c.restorable) {
    say('That checkpoint has no intact snapshot: nothing to compare with, roll back to or fork from.', true);
    return;
  }
  const menu = h('div', { class: 'menu', role: 'menu', 'aria-label': `Actions for checkpoint ${c.title}` });
  for (const a of ACTIONS) {
    const item = h('button', { type: 'button', role: 'menuitem', tabindex: '-1', class: 'secondary', 'data-action': a.action }, a.label);
    item.addEventListener('click', (e) => {
      e.stopPropagation();
      closeMenu();
      row.focus();
      say(`${a.label}…`, false);
      send({ type: 'checkpoint', action: a.action, checkpointId });
    });
    menu.append(item);
  }
  menu.addEventListener('keydown', (e) => {
    const items = Array.from(menu.querySelectorAll<HTMLElement>('[role="menuitem"]'));
    const i = items.indexOf(document.activeElement as HTMLElement);
    if (e.key === 'ArrowDown' || e.key === 'ArrowRight') items[(i + 1) % items.length]!.focus();
    else if (e.key === 'ArrowUp' || e.key === 'ArrowLeft') items[(i - 1 + items.length) % items.length]!.focus();
    else if (e.key === 'Escape') {
      closeMenu();
      row.focus();
    } else if (e.key === 'Tab') closeMenu();
    else return;
    e.preventDefault();
    e.stopPropagation();
  });
  row.after(h('li', { class: 'menu-row' }, menu));
  row.setAttribute('aria-expanded', 'true');
  page.menuFor = checkpointId;
  if (focusItem !== null) menu.querySelectorAll<HTMLElement>('[role="menuitem"]')[Math.min(focusItem, ACTIONS.length - 1)]!.focus();
}

function closeMenu(): void {
  page.menuFor = null;
  for (const m of Array.from(document.querySelectorAll('.menu-row'))) m.remove();
  for (const r of Array.from(document.querySelectorAll('.cp-row[aria-expanded]'))) r.removeAttribute('aria-expanded');
}

function effectSection(m: TimelineModel): HTMLElement {
  const sec = h('section', { 'aria-labelledby': 'fx-h' }, h('h2', { id: 'fx-h' }, `Side effects and shell commands (${m.effects.length + (m.pending?.effects ?? 0)})`));
  if (!m.effects.length) {
    sec.append(h('p', { class: 'dim' }, 'No side effect recorded. Agents record shell commands, HTTP calls and other external actions here, before they run.'));
    return sec;
  }
  const titles = new Map(m.steps.map((x) => [x.id, x.title]));
  const ul = h('ul', { class: 'rows list', role: 'list', 'aria-label': 'Side effects' });
  lists.push(lazyList(ul, m.effects, (e) => effectRow(e, titles), CHUNK));
  sec.append(ul);
  return sec;
}

const EFFECT_STATE: Record<TimelineEffect['status'], string> = { intent: 'intent (running or in doubt)', done: 'done', failed: 'failed', in_doubt: 'in doubt' };

function effectRow(e: TimelineEffect, titles: Map<string, string>): HTMLLIElement {
  const step = e.stepId ? titles.get(e.stepId) ?? e.stepId : null;
  const li = h('li', { class: `row fx fx-${e.status}`, 'data-key': `fx:${e.key}`, tabindex: '-1', 'aria-label': `${e.shell ? 'Shell command' : `Side effect ${e.kind}`} ${e.description}, ${EFFECT_STATE[e.status]}` });
  li.append(
    swatch(`fx-${e.status}`, 'dot'),
    h('span', { class: `badge fx-badge-${e.status}` }, EFFECT_STATE[e.status]),
    h('span', { class: 'kind' }, e.shell ? 'shell' : e.kind),
    h(e.shell ? 'code' : 'span', { class: 'title' }, e.description),
    h('span', { class: 'dim' }, `${clock(e.at)}${e.endedAt ? ` · ${dur(e.endedAt - e.at)}` : ''}${step ? ` · ${step}` : ''}${e.attempts > 1 ? ` · ${e.attempts} attempts` : ''}${e.resolvedBy === 'person' ? ' · marked by a person' : ''} · key ${e.key}`),
  );
  if (e.error) li.append(h('span', { class: 'error' }, e.error));
  return li;
}

// ---------------------------------------------------------------------------
// Keyboard: one roving focus over every row, in page order.

function rows(): HTMLElement[] {
  return Array.from(app.querySelectorAll<HTMLElement>('.row'));
}

function rowByKey(key: string): HTMLElement | undefined {
  return rows().find((r) => r.dataset.key === key);
}

function focusRow(key: string): void {
  let r = rowByKey(key);
  // Not drawn yet (further down a long list): draw the lists out, then find it.
  if (!r) {
    for (const l of lists) l.drawThrough(Number.MAX_SAFE_INTEGER);
    r = rowByKey(key);
  }
  if (!r) return;
  r.focus();
  r.scrollIntoView({ block: 'nearest' });
}

function restoreFocus(): void {
  const r = (page.focusKey && rowByKey(page.focusKey)) || undefined;
  const first = rows()[0];
  for (const x of rows()) x.tabIndex = -1;
  (r ?? first)?.setAttribute('tabindex', '0');
  if (r && document.hasFocus()) r.focus({ preventScroll: true });
}

app.addEventListener('focusin', (e) => {
  const r = (e.target as HTMLElement).closest<HTMLElement>('.row');
  if (!r || r.dataset.key === page.focusKey) return;
  for (const x of Array.from(app.querySelectorAll<HTMLElement>('.row[tabindex="0"]'))) x.tabIndex = -1;
  r.tabIndex = 0;
  page.focusKey = r.dataset.key;
  save();
});

app.addEventListener('keydown', (e) => {
  const r = (e.target as HTMLElement).closest<HTMLElement>('.row');
  if (!r || e.target !== r) return;
  let all = rows();
  let i = all.indexOf(r);
  const go = (j: number) => {
    if (j >= all.length) {
      // The end of what is drawn: draw the next chunk of whichever list it ends.
      for (const l of lists) if (!l.complete() && l.element.contains(all.at(-1)!)) l.drawThrough(l.element.querySelectorAll('.row').length + CHUNK);
      all = rows();
      i = all.indexOf(r);
    }
    const t = all[Math.max(0, Math.min(all.length - 1, j))];
    t?.focus();
    t?.scrollIntoView({ block: 'nearest' });
  };
  switch (e.key) {
    case 'ArrowDown':
      go(i + 1);
      break;
    case 'ArrowUp':
      go(i - 1);
      break;
    case 'Home':
      go(0);
      break;
    case 'End':
      for (const l of lists) l.drawThrough(Number.MAX_SAFE_INTEGER);
      all = rows();
      go(all.length - 1);
      break;
    case 'Enter':
    case ' ':
      if (r.dataset.cp) openMenu(r.dataset.cp);
      else if (r.dataset.key?.startsWith('step:')) toggle(r.dataset.key.slice(5));
      else return;
      break;
    default:
      return;
  }
  e.preventDefault();
});

function say(text: string, error: boolean): void {
  page.notice = { text, error };
  const el = document.getElementById('notice');
  if (el) {
    el.textContent = displayText(text, { multiline: true });
    el.className = error ? 'error' : 'dim';
  }
}

// ---------------------------------------------------------------------------
// Messages from the host.

/** Tells the host the timeline is on screen (after the frame that draws it): the page's "first content", or the whole model once it is in. */
function reportShown(): void {
  const m = page.model!;
  afterPaint(() => send({ type: 'shown', steps: m.steps.length, attempts: m.attempts.length, at: Date.now(), pageMs: performance.now(), whole: !m.pending }));
}

/** A model with more entries than this is validated a piece at a time (see validateInPieces.ts). */
const VALIDATE_WHOLE_MAX = 2 * PIECE;
const yieldToPage = () => new Promise<void>((resolve) => setTimeout(resolve, 0));
const entries = (raw: unknown) => {
  const m = (raw as { model?: Record<string, unknown> } | null)?.model;
  return m && typeof m === 'object' ? COLLECTIONS.reduce((n, c) => n + (Array.isArray(m[c]) ? (m[c] as unknown[]).length : 0), 0) : 0;
};

/** Messages are handled one after another: a patch waits for the whole model it applies to. */
const inbox = { queue: Promise.resolve() };
window.addEventListener('message', (ev: MessageEvent) => {
  const data: unknown = ev.data;
  inbox.queue = inbox.queue.then(() => receive(data)).catch((e) => console.warn(`[timeline] ${e instanceof Error ? e.message : String(e)}`));
});

async function receive(data: unknown): Promise<void> {
  const type = (data as { type?: unknown } | null)?.type;
  if (type === 'init' && entries(data) > VALIDATE_WHOLE_MAX) {
    // A large whole model: checked in pieces so the first screen, already drawn, stays responsive.
    const extra = Object.keys(data as object).filter((k) => k !== 'type' && k !== 'model');
    if (extra.length) return console.warn(`[timeline] ignored a malformed message from the host: ${extra[0]}: unrecognized key`);
    const r = await validateModelInPieces((data as { model: unknown }).model, yieldToPage);
    if (!r.success) return console.warn(`[timeline] ignored a malformed message from the host: ${r.problem.slice(0, 300)}`);
    return show(r.data);
  }
  const msg = parseInbound(TimelineHostMessage, data, 'host', (line) => console.warn(line), 'timeline');
  if (!msg) return;
  switch (msg.type) {
    case 'init':
      return show(msg.model);
    case 'patch':
      if (!page.model || page.model.pending) return send({ type: 'refresh' });
      return show(applyPatch(page.model, msg.patch));
    case 'error':
      say(msg.text, true);
      return;
  }
}

function show(next: TimelineModel): void {
  page.model = next;
  for (const id of [...expanded]) if (!page.model.steps.some((x) => x.id === id)) expanded.delete(id);
  save();
  render();
  reportShown();
}

/** The first screen comes inside the document (see html.ts, firstScreen.ts): small, checked whole and drawn at once. */
function firstModel(): void {
  const block = document.getElementById(FIRST_TIMELINE_ID);
  if (!block?.textContent) return;
  let raw: unknown;
  try {
    raw = JSON.parse(block.textContent);
  } catch {
    console.warn('[timeline] ignored an unreadable first model');
  }
  block.remove();
  const msg = parseInbound(TimelineHostMessage, { type: 'init', model: raw }, 'host', (line) => console.warn(line), 'timeline');
  if (msg?.type === 'init') show(msg.model);
}

send({ type: 'ready' });
firstModel();
