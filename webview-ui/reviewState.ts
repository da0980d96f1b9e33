/**
 * What the review page knows and the person decided, apart from how it is drawn: the
 * listing as it arrives, each file's decision, the commit message, the host's busy and
 * result. Every change goes through a method here (the page never assigns a field), so
 * what a decision or a host message does to the state is in one place, and is tested in
 * plain Node (test/unit/webview.reviewState.test.ts). No DOM here.
 */
import { inPageOrder, type CommittedMsg, type FileDecisionMsg, type HostMessage, type HunkMsg, type PageState, type ReviewFileMsg } from '../src/extension/review/protocol';

/** approve, leave out (kept, not committed), discard (removed from the working tree), undecided. */
export type D = 'a' | 'l' | 'r' | 'u';
export interface FileState {
  included: boolean;
  /** Whole-file decision; 'm' = mixed (per-hunk decisions differ). */
  whole: D | 'm';
  hunks: D[] | null;
  fingerprint: string | null;
}
export type Init = Extract<HostMessage, { type: 'init' }>;
export type Loaded = { hunks: HunkMsg[] } | { summary: string };

export const LABEL: Record<D | 'm', string> = { a: 'approved', l: 'left out', r: 'discarded', u: 'undecided', m: 'partly approved' };

export function plural(n: number, one: string): string {
  return `${n} ${one}${n === 1 ? '' : 's'}`;
}

/** What the commit will do, per meaning: the person sees the discards before committing. */
export function outcome(list: readonly FileDecisionMsg[]): { commit: string[]; left: string[]; discard: string[] } {
  const o = { commit: [] as string[], left: [] as string[], discard: [] as string[] };
  for (const d of list) {
    if (d.action === 'approve') o.commit.push(d.path);
    else if (d.action === 'leave') o.left.push(d.path);
    else if (d.action === 'reject') o.discard.push(d.path);
    else {
      if (d.approved.length) o.commit.push(d.path);
      if (d.left?.length) o.left.push(d.path);
      if (d.approved.length + (d.left?.length ?? 0) < d.hunkCount) o.discard.push(d.path);
    }
  }
  return o;
}

export class ReviewState {
  private _init: Init | undefined;
  /** The listed files by path. */
  private readonly byPath = new Map<string, ReviewFileMsg>();
  /** The listed files in display order (the task's files, then drift). */
  private _order: ReviewFileMsg[] = [];
  /**
   * How many files the listing holds: `init` brings the first of them (a screenful and
   * more), one `listed` message the rest. Until they are all here nothing can be
   * committed, and saved decisions for files not yet here are kept.
   */
  private _listedTotal = 0;
  private readonly files = new Map<string, FileState>();
  private readonly loaded = new Map<string, Loaded>();
  private readonly expanded = new Set<string>();
  private _message = '';
  private _busy = false;
  private _result: { ok: boolean; text: string } | null = null;
  /** Set once a commit is made: the page shows it (hash, message, Undo) instead of the decisions. */
  private _committed: CommittedMsg | null = null;
  /** Whether committing also completes the task; defaults to whether its plan is done. */
  private _finish: boolean | null = null;

  /** The state the webview kept across a reload or a hidden tab, if any. */
  constructor(saved?: PageState) {
    for (const [p, s] of Object.entries(saved?.decisions ?? {})) this.files.set(p, { ...s });
    for (const p of saved?.expanded ?? []) this.expanded.add(p);
    this._message = saved?.message ?? '';
  }

  get init(): Init | undefined {
    return this._init;
  }
  get order(): readonly ReviewFileMsg[] {
    return this._order;
  }
  get listedTotal(): number {
    return this._listedTotal;
  }
  get message(): string {
    return this._message;
  }
  get busy(): boolean {
    return this._busy;
  }
  get result(): { ok: boolean; text: string } | null {
    return this._result;
  }
  get committed(): CommittedMsg | null {
    return this._committed;
  }

  file(path: string): ReviewFileMsg | undefined {
    return this.byPath.get(path);
  }
  loadedOf(path: string): Loaded | undefined {
    return this.loaded.get(path);
  }
  isExpanded(path: string): boolean {
    return this.expanded.has(path);
  }
  listingComplete(): boolean {
    return this._order.length >= this._listedTotal;
  }

  /** What the webview keeps (window reload, hidden tab); nothing before the first listing. */
  pageState(): PageState | undefined {
    if (!this._init) return undefined;
    return { taskId: this._init.task.id, message: this._message, expanded: [...this.expanded], decisions: Object.fromEntries(this.files) };
  }

  stateOf(f: ReviewFileMsg): FileState {
    let s = this.files.get(f.path);
    if (!s) this.files.set(f.path, (s = { included: !f.drift, whole: 'u', hunks: null, fingerprint: null }));
    return s;
  }

  // -------------------------------------------------------------------------
  // The person's updates. Each returns what to announce.

  decideFile(f: ReviewFileMsg, d: D): { changed: boolean; text: string } {
    if (d === 'r' && !f.revertible) return { changed: false, text: `${f.path} cannot be discarded: its base content is not held.` };
    const s = this.stateOf(f);
    s.included = true;
    s.whole = d;
    if (s.hunks) s.hunks = s.hunks.map(() => d);
    return { changed: true, text: `${f.path} ${LABEL[d]}` };
  }

  decideHunk(f: ReviewFileMsg, i: number, d: D): string | null {
    const s = this.stateOf(f);
    if (!s.hunks || i < 0 || i >= s.hunks.length) return null;
    s.included = true;
    s.hunks[i] = d;
    recomputeWhole(s);
    return `Change ${i + 1} of ${s.hunks.length} in ${f.path} ${LABEL[d]}; the file is ${s.whole === 'm' ? 'partly approved' : LABEL[s.whole]}`;
  }

  /** Every included file decided the same way (a discard only where the file can be discarded), or every decision reset. */
  setAll(d: D | 'reset'): string {
    for (const f of this._order) {
      const s = this.stateOf(f);
      if (d === 'reset') {
        s.included = !f.drift;
        s.whole = 'u';
        if (s.hunks) s.hunks = s.hunks.map(() => 'u');
      } else if (s.included && (d !== 'r' || f.revertible)) {
        s.whole = d;
        if (s.hunks) s.hunks = s.hunks.map(() => d);
      }
    }
    return d === 'reset' ? 'Every decision reset' : `Every included file ${LABEL[d]}`;
  }

  include(f: ReviewFileMsg, on: boolean): void {
    this.stateOf(f).included = on;
  }

  /** Expands or collapses a file: true when its hunks must be asked for. */
  toggle(f: ReviewFileMsg): boolean {
    if (this.expanded.delete(f.path)) return false;
    this.expanded.add(f.path);
    return !this.loaded.has(f.path);
  }

  setMessage(text: string): void {
    this._message = text;
  }

  setFinish(on: boolean): void {
    this._finish = on;
  }

  /** Back from the committed view to the decisions (the host lists the remaining changes). */
  leaveCommitted(): void {
    this._committed = null;
  }

  // -------------------------------------------------------------------------
  // The host's messages.

  /** A new listing: the files known so far; returns the paths whose hunks to ask for (expanded before a reload). */
  begin(m: Init): string[] {
    this._init = m;
    this._committed = m.committed;
    if (!m.committed) this._result = null;
    this._listedTotal = m.counts.task + m.counts.drift;
    this.byPath.clear();
    this.loaded.clear();
    const { fresh, request } = this.admit(m.files);
    this._order = inPageOrder(fresh);
    this.settleListing();
    return request;
  }

  /** The rest of the listing: the files new to it, and the paths whose hunks to ask for. */
  listed(list: readonly ReviewFileMsg[]): { fresh: ReviewFileMsg[]; request: string[] } {
    if (!this._init || this.listingComplete()) return { fresh: [], request: [] };
    const got = this.admit(list.slice(0, this._listedTotal - this._order.length));
    this._order = inPageOrder([...this._order, ...got.fresh]);
    this.settleListing();
    return got;
  }

  /** New facts about listed files (their line counts): the paths that changed. */
  updateFiles(list: readonly ReviewFileMsg[]): string[] {
    const out: string[] = [];
    for (const f of list) {
      const old = this.byPath.get(f.path);
      if (!old) continue;
      Object.assign(old, f);
      out.push(f.path);
    }
    return out;
  }

  /** A file's hunks (or why none are shown) arrived; false when the file is not listed. */
  content(m: { type: 'hunks'; path: string; fingerprint: string; hunks: HunkMsg[] } | { type: 'summary'; path: string; fingerprint: string; reason: string }): boolean {
    const f = this.byPath.get(m.path);
    if (!f) return false;
    const s = this.stateOf(f);
    if (s.fingerprint !== m.fingerprint) {
      // New content: per-hunk decisions made on other content no longer apply.
      if (s.whole === 'm') s.whole = 'u';
      s.hunks = null;
    }
    s.fingerprint = m.fingerprint;
    if (m.type === 'hunks') {
      this.loaded.set(m.path, { hunks: m.hunks });
      if (!s.hunks || s.hunks.length !== m.hunks.length) s.hunks = m.hunks.map(() => (s.whole === 'm' ? 'u' : s.whole));
    } else this.loaded.set(m.path, { summary: m.reason });
    return true;
  }

  setBusy(busy: boolean): void {
    this._busy = busy;
  }

  setResult(result: { ok: boolean; text: string } | null): void {
    this._result = result;
  }

  /** A commit was made: the page shows it; returns the words of the result. */
  committedNow(c: CommittedMsg): string {
    this._committed = c;
    this._result = { ok: true, text: c.sha ? `Committed ${c.sha.slice(0, 10)}.` : 'Applied.' };
    return this._result.text;
  }

  // -------------------------------------------------------------------------
  // What the state means for the commit.

  /** Decisions to send, or the reason the commit cannot happen yet. */
  decisions(): { ok: true; list: FileDecisionMsg[] } | { ok: false; why: string } {
    if (!this.listingComplete()) return { ok: false, why: `Listing the files (${this._order.length} of ${this._listedTotal})…` };
    const list: FileDecisionMsg[] = [];
    let undecided = 0;
    for (const f of this._order) {
      const s = this.stateOf(f);
      if (!s.included) continue;
      if (s.whole === 'u' || (s.hunks && s.hunks.includes('u'))) {
        undecided++;
        continue;
      }
      const fp = s.fingerprint ? { fingerprint: s.fingerprint } : {};
      if (s.whole === 'a') list.push({ path: f.path, action: 'approve', ...fp });
      else if (s.whole === 'l') list.push({ path: f.path, action: 'leave', ...fp });
      else if (s.whole === 'r') list.push({ path: f.path, action: 'reject', ...fp });
      else if (s.hunks && s.fingerprint) {
        const pick = (d: D) => s.hunks!.flatMap((x, i) => (x === d ? [i] : []));
        list.push({ path: f.path, action: 'hunks', approved: pick('a'), left: pick('l'), hunkCount: s.hunks.length, fingerprint: s.fingerprint });
      }
    }
    if (undecided) return { ok: false, why: `${plural(undecided, 'file')} still ${undecided === 1 ? 'has' : 'have'} undecided changes: approve each change, leave it out, or discard it.` };
    return { ok: true, list };
  }

  finishTask(): boolean {
    return this.finishable() && (this._finish ?? this._init?.planDone ?? true);
  }

  /** A task not driven (interrupted, suspended, failed) is resumed before it can be finished; a commit that keeps it open needs nothing. */
  finishable(): boolean {
    return !this._init || !['interrupted', 'suspended', 'failed'].includes(this._init.task.state);
  }

  /** Steps that keep the task from finishing (as the host checks them): begun and not ended, or not begun. */
  openSteps(): Init['steps'] {
    return this._init ? this._init.steps.filter((st) => st.status === 'in_progress' || st.status === 'pending') : [];
  }

  /** Files of the listing just arrived: known by path; the expanded ones' hunks are to be asked for. */
  private admit(list: readonly ReviewFileMsg[]): { fresh: ReviewFileMsg[]; request: string[] } {
    const fresh = list.filter((f) => !this.byPath.has(f.path));
    for (const f of fresh) this.byPath.set(f.path, f);
    return { fresh, request: fresh.filter((f) => this.expanded.has(f.path)).map((f) => f.path) };
  }

  /** Once the whole listing is here: saved state for files no longer in it goes. */
  private settleListing(): void {
    if (!this.listingComplete()) return;
    for (const p of [...this.files.keys()]) if (!this.byPath.has(p)) this.files.delete(p);
    for (const p of [...this.expanded]) if (!this.byPath.has(p)) this.expanded.delete(p);
  }
}

function recomputeWhole(s: FileState): void {
  if (!s.hunks || s.hunks.length === 0) return;
  const first = s.hunks[0]!;
  s.whole = s.hunks.every((x) => x === first) ? first : 'm';
}
