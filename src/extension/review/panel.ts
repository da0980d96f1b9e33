import * as vscode from 'vscode';
import { errorMessage } from '../../core/model/errors';
import type { ApplyReviewResult } from '../../core/review/applyReview';
import { commitMessage } from '../../core/review/commitMessage';
import { git, isGitWorkTree } from '../../core/review/gitCli';
import type { ReviewData } from '../../core/review/reviewModel';
import { checkpointUri, EMPTY_SIDE } from '../checkpointFs';
import { keyUri } from '../windowFolders';
import type { EngineHost } from '../engineHost';
import { TaskPanel } from '../webview/taskPanel';
import { refreshScm } from './gitCommitter';
import { panelTitle, reviewHtml } from './html';
import { clipLine, HostMessage, inPageOrder, listingMessages, MAX_FILE_BATCH, PageMessage, parseInbound, type CommittedMsg, type FileDecisionMsg } from './protocol';
import { offerWayOut, wayOutOffered } from './refusals';
import type { WorkspaceOperations } from '../workspaceOperations';

export const REVIEW_VIEW_TYPE = 'waypoint.review';
const MAX_HUNK_LINES_SENT = 100_000;
/** Files counted per `files` update: small enough that the first rows fill in quickly. */
const COUNT_BATCH = 100;
/** Counting starts when the page reports its first frame, or after this long without one. */
const COUNT_WAIT_MS = 2_000;
/** A listing begun longer ago than this when the page first says `ready` is listed again. */
const FIRST_FRESH_MS = 10_000;

export interface ReviewDeps {
  host: EngineHost;
  log: vscode.LogOutputChannel;
  extensionUri: vscode.Uri;
  /** The one serialized runner (progress, `waypoint.busy`) for what changes the workspace. */
  operations: WorkspaceOperations;
}

/**
 * The host side of one task's review panel. It parses every message from the page
 * and applies decisions through `applyReview`. A large review stays quick to open:
 * the page is written at once and the first listing (manifests only, one scan) is
 * made while it loads, then posted when the page says `ready` (nothing is posted
 * before that); line counts follow in batches once the page has drawn the list, and
 * a file's hunks are computed only when the page asks for them.
 */
export class ReviewPanel extends TaskPanel {
  private ready = false;
  private data: ReviewData | undefined;
  /** The listing begun with the page, for its first `ready` (if that comes soon). */
  private first: { at: number; listing: Promise<{ data: ReviewData; msg: HostInit }>; posted: Promise<boolean> } | undefined;
  /** Bumped by every listing sent, so a stream of counts for an older listing stops. */
  private generation = 0;
  private refreshTimer: NodeJS.Timeout | undefined;
  /** Starts the waiting stream of line counts (when the page reports it drew the list). */
  private countsWaiting: (() => void) | undefined;
  private busy = false;
  /** Where the first open's time went (host listing, when the page was written), for `shown`. */
  private readonly timing = { listingMs: 0, pageSetAt: 0, readyAt: 0, postedAt: 0 };
  /** What this panel's last apply made, and how to undo it (shown instead of the decisions). */
  private last: { committed: CommittedMsg; preApplyCheckpointId: string } | undefined;
  private readonly _onDidShowContent = this.register(new vscode.EventEmitter<ShownContent>());
  /** Fires each time the page reports it has drawn the review: its first content, then refreshes. */
  readonly onDidShowContent = this._onDidShowContent.event;

  constructor(
    taskId: string,
    panel: vscode.WebviewPanel,
    private readonly deps: ReviewDeps,
  ) {
    super(taskId, panel, deps);
    this.register({ dispose: () => clearTimeout(this.refreshTimer) });
    this.load();
  }

  /**
   * Writes the page at once, then lists the review and posts the listing as soon as it
   * is made: the webview's set-up and the page's script (hundreds of ms, more in a
   * fresh window) overlap the listing (milliseconds warm, a second or more for a cold
   * scan), and VS Code holds the message until the page has loaded, so the page draws
   * it on load instead of after a `ready` round trip. `ready` posts it again only if
   * that post was not delivered (a panel hidden before its page loaded).
   */
  private load(): void {
    this.panel.webview.html = reviewHtml(this.panel.webview, this.deps.extensionUri, 'Waypoint review');
    const t0 = Date.now();
    this.timing.pageSetAt = t0;
    const listing = (async () => {
      // The scan is mostly synchronous work: let the page's document go out to the window first.
      await new Promise((r) => setTimeout(r, 0));
      const r = await this.listing();
      this.timing.listingMs = Date.now() - t0;
      return r;
    })();
    // A failure is reported to the page on its `ready` (and logged now).
    listing.catch((e) => this.deps.log.warn(`[review] listing ${this.taskId} failed: ${errorMessage(e)}`));
    const posted = listing.then(
      async (r) => {
        if (this.isDisposed) return false;
        const ok = await this.postListing(r.msg);
        this.timing.postedAt ||= Date.now();
        return ok;
      },
      () => false,
    );
    this.first = { at: t0, listing, posted: posted.catch(() => false) };
  }

  protected taskChanged(): void {
    this.scheduleRefresh();
  }

  private post(msg: HostMessage): void {
    if (!this.ready || this.isDisposed) return;
    void this.panel.webview.postMessage(msg);
  }

  /** Posts a listing (its messages in order); whether VS Code took every one. */
  private async postListing(msg: HostInit): Promise<boolean> {
    const sent = listingMessages(msg).map((m) => this.panel.webview.postMessage(m));
    return (await Promise.all(sent)).every(Boolean);
  }

  protected async receive(raw: unknown): Promise<void> {
    const msg = parseInbound(PageMessage, raw, 'page', (line) => this.deps.log.warn(line));
    if (!msg) return;
    try {
      switch (msg.type) {
        case 'ready':
          this.ready = true;
          this.timing.readyAt ||= Date.now();
          return await this.onReady();
        case 'shown':
          this.countsWaiting?.();
          this._onDidShowContent.fire({
            files: msg.files,
            at: msg.at,
            pageMs: msg.pageMs,
            page: { scriptMs: msg.scriptMs, receivedMs: msg.receivedMs, drawnMs: msg.drawnMs, loadMs: msg.loadMs },
            ...this.timing,
          });
          return;
        case 'refresh':
          // "Review the remaining changes" after a commit that kept the task open.
          if (this.last && !this.last.committed.finished) this.last = undefined;
          return await this.sendInit();
        case 'requestHunks':
          return await this.sendHunks(msg.path);
        case 'openDiff':
          return await this.openDiff(msg.path);
        case 'apply':
          await this.apply(msg.message, msg.decisions, msg.finish);
          return;
        case 'undoCommit':
          await this.undoCommit();
          return;
        case 'rollback':
          await vscode.commands.executeCommand('waypoint.rollback', this.taskId);
          return;
        case 'resume':
          await vscode.commands.executeCommand('waypoint.resumeTask', this.taskId);
          return;
        case 'step':
          // Only this task's steps (the task is this panel's; an unknown step is refused by the command,
          // which reports its own outcome); the store's change lists the review again with the step's new state.
          await vscode.commands.executeCommand(`waypoint.${msg.action}Step`, { taskId: this.taskId, stepId: msg.stepId });
          return;
      }
    } catch (e) {
      this.deps.log.error(`[review] ${msg.type} failed: ${errorMessage(e)}`);
      if (msg.type !== 'apply') this.post({ type: 'error', text: errorMessage(e).slice(0, 4_000) });
    }
  }

  /**
   * The page loaded: post the listing begun with it, then count its lines. Any
   * later `ready` (a hidden tab shown again reloads the page), or one long after
   * the listing began, gets a fresh listing instead.
   */
  private async onReady(): Promise<void> {
    const first = this.first;
    this.first = undefined;
    if (!first || Date.now() - first.at > FIRST_FRESH_MS) return this.sendInit();
    const { data, msg } = await first.listing;
    const posted = await first.posted;
    if (this.isDisposed) return;
    const gen = ++this.generation;
    this.data = data;
    // Posted as soon as it was made (VS Code delivers it when the page has loaded), unless that failed.
    if (!posted) void this.postListing(msg);
    this.timing.postedAt ||= Date.now();
    this.streamCounts(data, gen);
  }

  private scheduleRefresh(): void {
    if (!this.ready || this.busy) return;
    clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => void this.sendInit().catch((e) => this.deps.log.warn(`[review] refresh failed: ${errorMessage(e)}`)), 750);
  }

  /** The store's home folder on disk, where git runs (the owner's, whether this window owns the store or relays to it). */
  private workspace(): string {
    const folder = this.deps.host.workspaceFolder;
    if (!folder) throw new Error('Open a folder first.');
    return folder.uri.fsPath;
  }

  /**
   * The review from manifests (one scan) and whether the workspace is a git repository,
   * as the page's `init`. Through the engine API, so a window that relays to another
   * owner (`waypoint mcp` opened the store first) reviews as the owning one does.
   */
  private async listing(): Promise<{ data: ReviewData; msg: HostInit }> {
    const api = await this.deps.host.api();
    const [{ data, steps, effects }, git] = await Promise.all([api.reviewListing({ taskId: this.taskId }), isGitWorkTree(this.workspace())]);
    const { task } = data;
    const title = panelTitle('Review', task.title);
    if (this.panel.title !== title) this.panel.title = title;
    const clip = (s: string | null | undefined, n: number) => (s == null ? null : s.length > n ? `${s.slice(0, n - 1)}…` : s);
    // In the page's order (the task's files, then the person's own edits), so the first ones sent are its first screenful.
    const listed = inPageOrder(data.files).slice(0, 20_000);
    const msg: HostInit = {
      type: 'init',
      task: {
        id: task.id,
        title: clip(task.title, 1_000)!,
        goal: clip(task.goal, 10_000)!,
        state: task.state,
        agent: clip(task.agent, 200),
        createdAt: task.createdAt,
        durationMs: Math.max(0, task.updatedAt - task.createdAt),
        commit: task.commit,
      },
      steps: steps.slice(0, 1_000).map((s) => ({
        id: s.id,
        title: clip(s.title, 500)!,
        status: s.status,
        durationMs: s.startedAt !== null && s.endedAt !== null ? s.endedAt - s.startedAt : null,
        summary: clip(s.summary, 2_000),
        error: clip(s.error?.message, 2_000),
      })),
      effects: effects.slice(0, 10_000).map((e) => ({
        key: e.key,
        kind: clip(e.kind, 100)!,
        description: clip(e.description, 2_000)!,
        status: e.status,
        inDoubt: e.status === 'in_doubt' || e.status === 'intent',
      })),
      files: listed,
      counts: { task: listed.filter((f) => !f.drift).length, drift: listed.filter((f) => f.drift).length },
      message: commitMessage(task, listed.filter((f) => !f.drift)).slice(0, 20_000),
      git,
      planDone: steps.every((st) => st.status === 'completed' || st.status === 'skipped'),
      committed: await this.committedState(this.workspace(), task),
    };
    return { data, msg };
  }

  private async sendInit(): Promise<void> {
    const { data, msg } = await this.listing();
    const gen = ++this.generation;
    this.data = data;
    if (this.ready && !this.isDisposed) void this.postListing(msg);
    this.streamCounts(data, gen);
  }

  /**
   * Line counts for the listed files, in the page's order (the task's files, then
   * drift), a batch at a time, begun once the page has drawn the list (counting reads
   * every file: it would slow the first frame on both sides) or after a short wait.
   */
  private streamCounts(data: ReviewData, gen: number): void {
    const stale = () => gen !== this.generation || this.isDisposed;
    const order = inPageOrder(data.files).slice(0, 20_000);
    const run = async () => {
      const api = await this.deps.host.api();
      for (let i = 0; i < order.length && !stale(); i += COUNT_BATCH) {
        const batch = order.slice(i, i + COUNT_BATCH).filter((f) => !f.lines && !f.oversized);
        if (!batch.length) continue;
        const counted = await api.reviewLineCounts({ taskId: this.taskId, paths: batch.map((f) => f.path) });
        // The listing kept here learns its counts too (a later hunk request or refresh reads them).
        const byPath = new Map(counted.map((f) => [f.path, f]));
        for (const f of batch) Object.assign(f, byPath.get(f.path) ?? {});
        if (counted.length && !stale()) this.post({ type: 'files', files: counted.slice(0, MAX_FILE_BATCH) });
      }
    };
    const start = () => {
      clearTimeout(timer);
      if (this.countsWaiting === start) this.countsWaiting = undefined;
      if (!stale()) void run().catch((e) => this.deps.log.warn(`[review] counting lines failed: ${errorMessage(e)}`));
    };
    const timer = setTimeout(start, COUNT_WAIT_MS);
    this.countsWaiting = start;
  }

  private async sendHunks(key: string): Promise<void> {
    const data = this.data ?? (await this.listing()).data;
    // Only files of this review: the page cannot make the host read anything else (the owner checks again).
    if (!data.files.some((f) => f.path === key)) return;
    const r = await (await this.deps.host.api()).reviewHunks({ taskId: this.taskId, path: key });
    if (r.kind === 'summary') return this.post({ type: 'summary', path: key, fingerprint: r.fingerprint, reason: r.reason });
    const lines = r.hunks.reduce((n, h) => n + h.removed.length + h.added.length, 0);
    if (lines > MAX_HUNK_LINES_SENT || r.hunks.length > 20_000) {
      return this.post({ type: 'summary', path: key, fingerprint: r.fingerprint, reason: `${lines} changed lines: too many to render. Open it in the diff editor.` });
    }
    this.post({
      type: 'hunks',
      path: key,
      fingerprint: r.fingerprint,
      hunks: r.hunks.map((h) => ({ ...h, removed: h.removed.map(clipLine), added: h.added.map(clipLine), before: h.before.map(clipLine), after: h.after.map(clipLine) })),
    });
  }

  private async openDiff(key: string): Promise<void> {
    const data = this.data;
    const file = data?.files.find((f) => f.path === key);
    if (!data || !file) return;
    const folder = this.deps.host.workspaceFolder;
    if (!folder) return;
    const left = checkpointUri(file.status === 'added' ? EMPTY_SIDE : data.base.id, key);
    const right = file.status === 'deleted' ? checkpointUri(EMPTY_SIDE, key) : (keyUri(key) ?? vscode.Uri.joinPath(folder.uri, ...key.split('/')));
    await vscode.commands.executeCommand('vscode.diff', left, right, `${key} (task base ↔ workspace)`, { preview: true });
  }

  /**
   * The committed view's data: this panel's last apply, with Undo offered only while
   * HEAD is still its commit; or, for a task completed with a commit before this
   * panel opened, that commit (no Undo: the pre-apply checkpoint is not known here).
   */
  private async committedState(workspace: string, task: ReviewData['task']): Promise<CommittedMsg | null> {
    const last = this.last;
    if (last) {
      const sha = last.committed.sha;
      const head = sha ? (await git(workspace, ['rev-parse', '-q', '--verify', 'HEAD'])).stdout.trim() : '';
      return { ...last.committed, canUndo: !!sha && head === sha };
    }
    if (task.state !== 'completed' || !task.commit) return null;
    const subject = await git(workspace, ['log', '-1', '--format=%s', task.commit]);
    return { sha: task.commit, subject: subject.code === 0 ? subject.stdout.trim().slice(0, 500) : '', reason: null, committed: [], discarded: [], left: [], finished: true, canUndo: false };
  }

  /**
   * Applies the page's decisions, whole or not at all (see applyReview): a commit
   * of exactly the approved changes, discards after it, the task completed when
   * `finish`. A refusal changes nothing and comes back as a notification with the
   * way out and a "Commit Again" that reuses these very decisions.
   */
  /**
   * The proposed message lists the task's files; the person may approve fewer. Left as
   * proposed, it is made again from the files this commit takes, so its list is true;
   * a message the person edited is theirs and goes as written.
   */
  private messageForCommit(message: string, decisions: readonly FileDecisionMsg[]): string {
    const data = this.data;
    if (!data) return message;
    const proposed = commitMessage(data.task, inPageOrder(data.files).slice(0, 20_000).filter((f) => !f.drift)).slice(0, 20_000);
    if (message.trim() !== proposed.trim()) return message;
    const status = new Map(data.files.map((f) => [f.path, f.status]));
    const taken = decisions.filter((d) => d.action === 'approve' || (d.action === 'hunks' && d.approved.length > 0));
    const files = taken.flatMap((d) => {
      const st = status.get(d.path);
      return st ? [{ path: d.path, status: st }] : [];
    });
    return files.length ? commitMessage(data.task, files) : message;
  }

  async apply(message: string, decisions: readonly FileDecisionMsg[], finish: boolean | 'if_plan_done' = 'if_plan_done'): Promise<ApplyReviewResult | undefined> {
    if (this.busy) return undefined;
    this.busy = true;
    this.post({ type: 'busy', busy: true, label: 'Committing…' });
    let r: ApplyReviewResult;
    message = this.messageForCommit(message, decisions);
    try {
      const api = await this.deps.host.api();
      const folder = this.deps.host.workspaceFolder;
      if (!folder) throw new Error('Open a folder first.');
      r = await this.deps.operations.run('committing the review…', () => api.applyReview({ taskId: this.taskId, message, decisions: [...decisions], finish }));
      // The Source Control view shows the new commit at once (the owner committed with git, in this folder).
      if (r.commit.sha) await refreshScm(folder.uri, this.deps.log);
    } catch (e) {
      this.deps.log.warn(`[review] ${this.taskId}: nothing was changed: ${errorMessage(e)}`);
      // Said once: where there is a way out to offer (git refused, or a surprise with its log) the
      // notification carries the reason and the page points to it; a refusal with none is told in the page.
      const notified = wayOutOffered(e);
      const text = notified ? 'Nothing was committed or changed: the notification says why and offers the way out.' : `Nothing was committed or changed. ${errorMessage(e)}`;
      this.post({ type: 'applied', ok: false, text: text.slice(0, 4_000), commit: null });
      if (notified) void offerWayOut(e, this.deps.log, () => this.apply(message, decisions, finish));
      return undefined;
    } finally {
      this.busy = false;
      this.post({ type: 'busy', busy: false, label: '' });
    }
    const subject = message.split('\n')[0]!.trim().slice(0, 500);
    const committed: CommittedMsg = {
      sha: r.commit.sha,
      subject,
      reason: r.commit.sha ? null : 'reason' in r.commit ? r.commit.reason.slice(0, 1_000) : null,
      committed: r.committed.slice(0, 20_000),
      discarded: r.reverted.slice(0, 20_000),
      left: r.left.slice(0, 20_000),
      finished: r.finished,
      canUndo: !!r.commit.sha,
    };
    this.last = { committed, preApplyCheckpointId: r.preApplyCheckpointId };
    const text = describe(r);
    this.deps.log.info(`[review] ${this.taskId}: ${text}`);
    this.post({ type: 'committed', committed });
    // The task's state changed while the apply held the panel busy (refreshes were skipped): list it again.
    void this.sendInit().catch((e) => this.deps.log.warn(`[review] refresh after the commit failed: ${errorMessage(e)}`));
    const undo = 'Undo Commit';
    void vscode.window.showInformationMessage(`Waypoint: ${text}`, ...(r.commit.sha ? [undo] : [])).then((a) => {
      if (a === undo) void this.undoCommit().catch((e) => void vscode.window.showErrorMessage(`Waypoint: ${errorMessage(e)}`));
    });
    return r;
  }

  /** Undoes this panel's last commit (see undoReviewCommit: only while HEAD is still that commit). */
  async undoCommit(): Promise<void> {
    const last = this.last;
    const sha = last?.committed.sha;
    if (!last || !sha) return void vscode.window.showWarningMessage('Waypoint: this review made no commit to undo.');
    const api = await this.deps.host.api();
    let state: string;
    try {
      ({ state } = await this.deps.operations.run('undoing the review’s commit…', () =>
        api.undoReviewCommit({ taskId: this.taskId, sha, committed: [...last.committed.committed], discarded: [...last.committed.discarded], preApplyCheckpointId: last.preApplyCheckpointId }),
      ));
    } catch (e) {
      void vscode.window.showWarningMessage(`Waypoint: ${errorMessage(e)}`);
      return this.sendInit();
    }
    this.last = undefined;
    const folder = this.deps.host.workspaceFolder;
    if (folder) await refreshScm(folder.uri, this.deps.log);
    const note = state === 'completed' ? ' The task stays completed (a completed task is final).' : '';
    void vscode.window.showInformationMessage(`Waypoint: commit ${sha.slice(0, 10)} undone; its changes are uncommitted in the working tree again${last.committed.discarded.length ? ' and the discarded changes are back' : ''}.${note}`);
    await this.sendInit();
  }
}

type HostInit = Extract<HostMessage, { type: 'init' }>;

export interface ShownContent {
  files: number;
  /** Wall-clock time (ms since the epoch) of the frame that drew it, as the page saw it. */
  at: number;
  /** How long after the page's own navigation began that frame was (the page's share). */
  pageMs: number;
  /** On the `pageMs` clock: when the page's script began to run, its listing arrived and was drawn, and its document's `load` came. */
  page: { scriptMs: number; receivedMs: number; drawnMs: number; loadMs: number };
  /** How long the host took to list the review before writing the page. */
  listingMs: number;
  /** Wall-clock time the host wrote the page's document. */
  pageSetAt: number;
  /** Wall-clock times the page's first `ready` reached the host, and the host posted the first listing. */
  readyAt: number;
  postedAt: number;
}

function describe(r: ApplyReviewResult): string {
  const n = (k: number, one: string) => `${k} ${one}${k === 1 ? '' : 's'}`;
  const discarded = r.reverted.length ? ` Discarded changes in ${n(r.reverted.length, 'file')} (Undo brings them back).` : '';
  const left = r.left.length ? ` ${n(r.left.length, 'file')} left uncommitted.` : '';
  const kept = r.conflicts.length ? ` ${n(r.conflicts.length, 'file')} changed while this ran ${r.conflicts.length === 1 ? 'was' : 'were'} kept as you have ${r.conflicts.length === 1 ? 'it' : 'them'}: ${r.conflicts.slice(0, 3).map((c) => c.path).join(', ')}${r.conflicts.length > 3 ? '…' : ''}.` : '';
  const task = r.finished ? ' The task is completed.' : ' The task stays open.';
  if (r.commit.sha) return `committed ${n(r.committed.length, 'file')} as ${r.commit.sha.slice(0, 10)}.${discarded}${kept}${left}${task}`;
  return `${'reason' in r.commit ? r.commit.reason : ''}${discarded}${kept}${left}${task}`;
}
