import * as vscode from 'vscode';
import { displayText } from '../core/model/displayText';

/**
 * The inspect-then-decide part of a rollback (and of its undo): the changes open
 * in VS Code's diff editors first, then a non-modal pick lists the files — all
 * checked — so the person can read any diff, uncheck what to keep, and confirm
 * with Enter or step back with Escape. The preview tabs are closed afterwards so
 * no out-of-date diff is left open.
 */
export interface PreviewFile {
  /** Workspace-relative path. */
  key: string;
  left: vscode.Uri;
  right: vscode.Uri;
  /** What confirming does to it: "restore", "revert", "delete". */
  action: string;
  /** A warning shown under the file (e.g. a delete of a file no step created). */
  note?: string;
}

const ACTION_ICON: Record<string, string> = { restore: 'diff-added', revert: 'diff-modified', delete: 'diff-removed' };

const _onDidShowChoice = new vscode.EventEmitter<{ files: number; at: number }>();
/** Fires when a preview's file list is on screen, its diff already open (the bench's "preview on screen"). */
export const onDidShowChoice = _onDidShowChoice.event;

/** Resolves when a tab whose label `matches` is open (now or later), or after `timeoutMs`. */
function tabShown(matches: (label: string) => boolean, timeoutMs: number): Promise<void> {
  const open = () => vscode.window.tabGroups.all.some((g) => g.tabs.some((t) => matches(t.label)));
  if (open()) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      sub.dispose();
      resolve();
    };
    const sub = vscode.window.tabGroups.onDidChangeTabs(() => open() && done());
    const timer = setTimeout(done, timeoutMs);
  });
}

export class ChangesPreview {
  private constructor(
    private readonly labels: string[],
    private readonly multiTitle?: string,
  ) {}

  /** One file → the diff editor; several → the multi-file diff editor, titled `title` (no internal ids). */
  static async open(rawTitle: string, files: PreviewFile[], fileUri: (key: string) => vscode.Uri): Promise<ChangesPreview> {
    // File names and titles are recorded text: a U+202E in a name must not make it read as another.
    const title = displayText(rawTitle);
    if (files.length === 1) {
      const f = files[0];
      const label = `${displayText(f.key)} (${title})`;
      await vscode.commands.executeCommand('vscode.diff', f.left, f.right, label, { preview: true });
      return new ChangesPreview([label]);
    }
    const opened = vscode.commands.executeCommand('vscode.changes', title, files.map((f) => [fileUri(f.key), f.left, f.right]));
    // The multi-file diff's command may settle only once every file's diff is computed (or, in
    // code-server, not at all): the list must not wait for it, only for its tab to be on screen
    // (at most a second, should the tab never be seen).
    await Promise.race([opened.then(() => undefined, () => undefined), tabShown((label) => label === title || label.startsWith(`${title} (`), 1_000)]);
    // VS Code appends the file count to the tab's label ("… (2 files)").
    return new ChangesPreview([title], title);
  }

  /** Opens one file's diff beside the list (from the pick's item button). */
  async showFile(f: PreviewFile, title: string): Promise<void> {
    const label = `${displayText(f.key)} (${displayText(title)})`;
    this.labels.push(label);
    await vscode.commands.executeCommand('vscode.diff', f.left, f.right, label, { preview: true, preserveFocus: true });
  }

  /** Closes every tab this preview opened (matched by the titles it gave them). */
  async close(): Promise<void> {
    const tabs = vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) => this.labels.includes(t.label) || (this.multiTitle !== undefined && t.label.startsWith(`${this.multiTitle} (`)));
    if (tabs.length) await vscode.window.tabGroups.close(tabs, true);
  }
}

/**
 * Asks which files to restore; answers the checked keys (all of them by default),
 * or undefined when the person pressed Escape. `ignoreFocusOut` keeps the list
 * open while the person scrolls the diff.
 */
export async function chooseFiles(opts: { title: string; placeholder: string; files: PreviewFile[]; preview: ChangesPreview; confirmLabel: string }): Promise<string[] | undefined> {
  type Item = vscode.QuickPickItem & { file: PreviewFile };
  const openDiff: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon('diff'), tooltip: 'Show this file’s diff' };
  const qp = vscode.window.createQuickPick<Item>();
  qp.title = displayText(opts.title);
  qp.placeholder = opts.placeholder;
  qp.canSelectMany = true;
  qp.ignoreFocusOut = true;
  qp.matchOnDescription = true;
  qp.items = opts.files.map((f) => ({
    label: `$(${ACTION_ICON[f.action] ?? 'diff'}) ${displayText(f.key)}`,
    description: f.action,
    detail: f.note === undefined ? undefined : displayText(f.note),
    buttons: [openDiff],
    file: f,
  }));
  qp.selectedItems = qp.items;
  qp.buttons = [{ iconPath: new vscode.ThemeIcon('check'), tooltip: opts.confirmLabel }];
  return new Promise<string[] | undefined>((resolve) => {
    let done = false;
    const finish = (v: string[] | undefined) => {
      if (done) return;
      done = true;
      resolve(v);
      qp.dispose();
    };
    const accept = () => {
      if (qp.selectedItems.length === 0) {
        qp.placeholder = 'Check at least one file, or press Escape to change nothing.';
        return;
      }
      finish(qp.selectedItems.map((i) => i.file.key));
    };
    qp.onDidAccept(accept);
    qp.onDidTriggerButton(accept);
    qp.onDidTriggerItemButton((e) => void opts.preview.showFile(e.item.file, opts.title));
    qp.onDidHide(() => finish(undefined));
    qp.show();
    _onDidShowChoice.fire({ files: opts.files.length, at: Date.now() });
  });
}
