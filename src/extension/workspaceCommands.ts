import * as vscode from 'vscode';
import type { WorkspaceOperations } from './workspaceOperations';
import type { EngineApi } from '../core/engine/api';
import type { ForkResult, RollbackResult } from '../core/engine/engine';
import type { CheckpointMeta, Step, Task } from '../core/model/schema';
import { checkpointUri, EMPTY_SIDE, objectUri } from './checkpointFs';
import { keyUri } from './windowFolders';
import { ago } from './presentation';
import { ChangesPreview, chooseFiles, type PreviewFile } from './rollbackPreview';
import { localTime } from './resume/words';
import { settings } from './settings';
import { z } from 'zod';
import type { EngineHost } from './engineHost';
import { taskDetail, type TaskDetail } from './storeReads';
import { CheckpointNode, TaskNode } from './tasksTree';
import { plural } from '../core/model/plural';
import { displayText } from '../core/model/displayText';
import { checkpointChanges, checkpointWithStep, isShownCheckpoint } from './labelText';

/** Programmatic arguments to Roll Back to Checkpoint. */
const RollbackArgs = z.object({ taskId: z.string().min(1), checkpointId: z.string().min(1), paths: z.array(z.string().min(1)).min(1).optional(), mode: z.enum(['all', 'agent-only']).optional(), confirmed: z.boolean().optional() });
type RollbackMode = 'all' | 'agent-only';
/** Programmatic arguments to Undo Last Rollback (the notification's Undo button passes `confirmed`). */
const UndoArgs = z.object({ taskId: z.string().min(1), confirmed: z.literal(true) });
/** Programmatic arguments to Fork Task from Checkpoint (the Task Timeline's "fork here"); `goal` skips the input box. */
const ForkArgs = z.strictObject({ checkpointId: z.string().min(1).max(64), goal: z.string().min(1).max(10_000).optional() });

/**
 * The commands that change or compare the workspace: roll back (with a preview in
 * the multi-file diff editor, a modal confirmation and Undo), undo, compare a
 * checkpoint with the workspace or with its predecessor, storage and pruning.
 */
export interface WorkspaceCommandDeps {
  /** Where the store is: the in-process engine while owning, the owner's API while relaying. */
  host: EngineHost;
  folder: () => vscode.WorkspaceFolder;
  pickTask: (arg: unknown, filter: (t: Task) => boolean, placeHolder: string) => Promise<Task | undefined>;
  /** The one serialized runner (progress, `waypoint.busy`) for what changes the workspace. */
  operations: WorkspaceOperations;
}


export function checkpointTitle(steps: readonly Step[], c: CheckpointMeta, checkpoints: readonly CheckpointMeta[] = []): string {
  // The tree's name (a count or an id in the stored label gives way to words).
  return checkpointWithStep(c, checkpoints, steps);
}

export class WorkspaceCommands {
  constructor(private readonly d: WorkspaceCommandDeps) {}

  private api(): Promise<EngineApi> {
    return this.d.host.api();
  }

  /** The file a key names: in a multi-root window, inside the folder its first segment names. */
  private fileUri(key: string): vscode.Uri {
    return keyUri(key) ?? vscode.Uri.joinPath(this.d.folder().uri, ...key.split('/'));
  }

  private async pickCheckpoint(detail: TaskDetail, placeHolder = `Roll “${detail.task.title}” back to which checkpoint?`): Promise<CheckpointMeta | undefined> {
    const task = detail.task;
    const cps = detail.checkpoints
      .filter((c) => c.manifestRef && !c.damaged && isShownCheckpoint(c))
      .reverse();
    if (!cps.length) {
      void vscode.window.showInformationMessage(`Waypoint: “${displayText(task.title)}” has no checkpoint with file contents.`);
      return undefined;
    }
    const pick = await vscode.window.showQuickPick(
      cps.map((c) => ({
        label: `$(${c.kind === 'pre_rollback' ? 'history' : 'git-commit'}) ${checkpointTitle(detail.steps, c, detail.checkpoints)}`,
        description: `${new Date(c.createdAt).toLocaleTimeString()} · ${ago(c.createdAt)} · ${checkpointChanges(c)}`,
        c,
      })),
      { placeHolder, matchOnDescription: true },
    );
    return pick?.c;
  }

  /** Resolves (task, checkpoint) from a tree node, from `{ taskId, checkpointId }` (other extensions, tests), or asks. */
  private async target(arg: unknown): Promise<{ engine: EngineApi; task: Task; steps: Step[]; checkpoint: CheckpointMeta } | undefined> {
    const engine = await this.api();
    const direct = RollbackArgs.safeParse(arg);
    if (direct.success) {
      const d = await taskDetail(this.d.host, direct.data.taskId);
      const c = d.checkpoints.find((x) => x.id === direct.data.checkpointId);
      if (!c) throw new Error(`Unknown checkpoint '${direct.data.checkpointId}'.`);
      return { engine, task: d.task, steps: d.steps, checkpoint: c };
    }
    if (arg instanceof CheckpointNode) {
      const taskId = arg.checkpoint.taskId;
      const d = taskId ? await taskDetail(this.d.host, taskId).catch(() => undefined) : undefined;
      const c = d?.checkpoints.find((x) => x.id === arg.checkpoint.id);
      if (!d || !c) throw new Error('That checkpoint no longer exists.');
      return { engine, task: d.task, steps: d.steps, checkpoint: c };
    }
    // Every task with a restorable checkpoint: a task_base always has one, so list the tasks and let the pick below say if not.
    const task = await this.d.pickTask(arg instanceof TaskNode || typeof arg === 'string' ? arg : undefined, (t) => !!t.baseCheckpointId, 'Roll back which task?');
    if (!task) return undefined;
    const d = await taskDetail(this.d.host, task.id);
    const checkpoint = await this.pickCheckpoint(d);
    return checkpoint ? { engine, task: d.task, steps: d.steps, checkpoint } : undefined;
  }

  async rollback(arg: unknown): Promise<RollbackResult | undefined> {
    const t = await this.target(arg);
    if (!t) return undefined;
    const { engine, task, checkpoint } = t;
    const title = checkpointTitle(t.steps, checkpoint);
    const direct = RollbackArgs.safeParse(arg);
    // A caller that already confirmed (an agent request the person approved, a test) skips the preview and the choice.
    if (direct.success && direct.data.confirmed) return this.applyRollback(engine, task, checkpoint, title, direct.data.paths, direct.data.mode ?? 'all');
    const comparing = (mode: RollbackMode) =>
      vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: 'Waypoint: comparing the workspace with the checkpoint…' }, () =>
        engine.rollbackPreview({ taskId: task.id, checkpointId: checkpoint.id, mode }),
      );
    let preview = await comparing('all');
    if (preview.changes.length === 0) {
      void vscode.window.showInformationMessage(`Waypoint: the workspace already matches “${displayText(title)}”.`);
      return preview;
    }
    const when = localTime(checkpoint.createdAt, Date.now());
    // The person's edits are among the files: ask whether they go too, before showing what would change.
    const mode = preview.personChanged?.length ? await this.askWhose(task, title, when, preview) : 'all';
    if (!mode) return undefined;
    if (mode === 'agent-only') {
      preview = await comparing('agent-only');
      if (preview.changes.length === 0) {
        const left = preview.conflicts.length ? ` ${plural(preview.conflicts.length, 'file')} changed by both of you ${preview.conflicts.length === 1 ? 'is' : 'are'} left for you: ${preview.conflicts.slice(0, 3).join(', ')}${preview.conflicts.length > 3 ? '…' : ''}.` : '';
        void vscode.window.showInformationMessage(`Waypoint: nothing of the agent’s is left to roll back to “${displayText(title)}”.${left}`);
        return preview;
      }
    }
    // Deletes first: they are what a person may not expect to lose.
    const ordered = [...preview.changes.filter((c) => c.action === 'delete'), ...preview.changes.filter((c) => c.action !== 'delete')];
    const files: PreviewFile[] = ordered.map((c) => ({
      key: c.path,
      left: c.action === 'create' ? checkpointUri(EMPTY_SIDE, c.path) : this.fileUri(c.path),
      right: c.action === 'delete' ? checkpointUri(EMPTY_SIDE, c.path) : c.mergedHash ? objectUri(c.mergedHash, c.path) : checkpointUri(checkpoint.id, c.path),
      action: c.action === 'create' ? 'restore' : c.action === 'modify' ? 'revert' : 'delete',
      note: c.createdOutsideTask
        ? '$(warning) Not created by a step of this task (yours, or another tool’s, since the checkpoint)'
        : c.agentHunksOnly
          ? '$(person) Only the agent’s changes are reverted; yours in it are kept'
          : preview.personChanged?.includes(c.path)
            ? '$(warning) Holds your edits too: they are rolled back with the agent’s (Undo brings them back)'
            : undefined,
    }));
    const n = files.length;
    const previewTitle = mode === 'agent-only' ? `Roll back the agent’s changes since “${displayText(title)}” (${when})` : `Roll back to “${displayText(title)}” (${when})`;
    const shown = await ChangesPreview.open(previewTitle, files, (k) => this.fileUri(k));
    const abandons = preview.abandonedSteps.length ? ` · steps after it become abandoned: ${this.stepTitles(t.steps, preview.abandonedSteps)}` : '';
    const leftForYou = preview.conflicts.length ? ` · left for you (both changed them): ${preview.conflicts.slice(0, 3).join(', ')}${preview.conflicts.length > 3 ? '…' : ''}` : '';
    const chosen = await chooseFiles({
      title: `${mode === 'agent-only' ? 'Roll back the agent’s changes in' : 'Roll back'} ${plural(n, 'file')} to “${displayText(title)}” (${when})${abandons}${leftForYou}`,
      placeholder: 'Uncheck files to keep; Enter rolls back, Escape changes nothing',
      files,
      preview: shown,
      confirmLabel: 'Roll Back the Checked Files',
    });
    if (!chosen) {
      await shown.close();
      return undefined;
    }
    // All files: a whole rollback (the steps after the checkpoint are abandoned); some: only those files, steps untouched.
    const paths = chosen.length === n ? undefined : chosen;
    const r = await this.applyRollback(engine, task, checkpoint, title, paths, mode);
    await shown.close();
    return r;
  }

  /**
   * A whole rollback would take the person's edits too: only the agent's changes (a
   * three-way merge keeps the person's hunks; files where both changed the same lines
   * are left for them), or everything. The safe choice comes first.
   */
  private async askWhose(task: Task, title: string, when: string, preview: RollbackResult): Promise<RollbackMode | undefined> {
    const mine = preview.personChanged ?? [];
    const names = `${mine.slice(0, 3).join(', ')}${mine.length > 3 ? '…' : ''}`;
    type Item = vscode.QuickPickItem & { mode: RollbackMode };
    const items: Item[] = [
      {
        mode: 'agent-only',
        label: '$(hubot) Only the Agent’s Changes',
        description: 'keep your edits',
        detail: `Your edits stay (${names}); a file where you both changed the same lines is left for you.`,
      },
      {
        mode: 'all',
        label: '$(discard) Everything',
        description: `every file back to ${when}`,
        detail: `Your edits in ${plural(mine.length, 'file')} go too (${names}); Undo Last Rollback brings them back.`,
      },
    ];
    const pick = await vscode.window.showQuickPick(items, {
      title: `Roll back “${displayText(task.title)}”: you edited ${mine.length} of its files too`,
      placeHolder: 'Roll back only the agent’s changes, or everything? Escape changes nothing',
      ignoreFocusOut: true,
    });
    return pick?.mode;
  }

  private stepTitles(steps: readonly Step[], ids: readonly string[]): string {
    return ids.map((id) => steps.find((s) => s.id === id)?.title ?? id).join(', ');
  }

  private async applyRollback(engine: EngineApi, task: Task, checkpoint: CheckpointMeta, title: string, paths: string[] | undefined, mode: RollbackMode): Promise<RollbackResult> {
    const r = await this.d.operations.run(mode === 'agent-only' ? `rolling back the agent’s changes since “${displayText(title)}”…` : `rolling back to “${displayText(title)}”…`, () =>
      engine.rollback({ taskId: task.id, checkpointId: checkpoint.id, mode, ...(paths ? { paths } : {}) }),
    );
    const n = r.filesWritten + r.filesRemoved;
    const conflicts = r.conflicts.length ? ` ${r.conflicts.length} file${r.conflicts.length === 1 ? ' was' : 's were'} left for you: ${r.conflicts.slice(0, 3).join(', ')}${r.conflicts.length > 3 ? '…' : ''}.` : '';
    void vscode.window.showInformationMessage(`Waypoint: rolled back ${n} file${n === 1 ? '' : 's'} to “${displayText(title)}”.${conflicts}`, 'Undo').then((a) => {
      if (a === 'Undo') void vscode.commands.executeCommand('waypoint.undoRollback', { taskId: task.id, confirmed: true });
    });
    return r;
  }

  /**
   * Fork Task from Checkpoint: from a checkpoint row, `{ checkpointId }`, or a pick of
   * task and checkpoint. Shows what the workspace will become (the diff editor, as a
   * rollback does), asks for the new task's goal, forks with progress and offers Undo
   * (the fork's own rollback) and the original task.
   */
  async fork(arg: unknown): Promise<ForkResult | undefined> {
    const engine = await this.api();
    let checkpointId: string;
    let goal: string | undefined;
    const direct = ForkArgs.safeParse(arg);
    if (direct.success) ({ checkpointId, goal } = direct.data);
    else if (arg instanceof CheckpointNode) checkpointId = arg.checkpoint.id;
    else if (arg !== undefined && !(arg instanceof TaskNode) && typeof arg !== 'string') throw new Error(`Fork Task from Checkpoint takes a checkpoint in the Waypoint view or { checkpointId }: ${direct.error.issues[0]?.message ?? 'not that'}.`);
    else {
      const task = await this.d.pickTask(arg, (t) => !!t.baseCheckpointId, 'Fork which task?');
      if (!task) return undefined;
      const c = await this.pickCheckpoint(await taskDetail(this.d.host, task.id), `Fork “${displayText(task.title)}” from which checkpoint?`);
      if (!c) return undefined;
      checkpointId = c.id;
    }
    // The preview validates the checkpoint (unknown, damaged, of a deleted task) before anything is asked.
    const preview = await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: 'Waypoint: comparing the workspace with the checkpoint…' }, () =>
      engine.forkTask({ checkpointId, preview: true }),
    );
    const original = await taskDetail(this.d.host, preview.forkedFrom.taskId);
    const cp = original.checkpoints.find((c) => c.id === checkpointId);
    const title = cp ? checkpointTitle(original.steps, cp) : checkpointId;
    // The preview is open while the person decides and closed once they have (the goal given or Escape),
    // so no diff of a workspace that is about to change is left behind.
    const shown =
      preview.changes.length && goal === undefined
        ? await ChangesPreview.open(
            `Fork from: ${title}`,
            preview.changes.map((c) => ({
              key: c.path,
              left: c.action === 'create' ? checkpointUri(EMPTY_SIDE, c.path) : this.fileUri(c.path),
              right: c.action === 'delete' ? checkpointUri(EMPTY_SIDE, c.path) : checkpointUri(checkpointId, c.path),
              action: c.action === 'create' ? 'restore' : c.action === 'modify' ? 'revert' : 'delete',
            })),
            (k) => this.fileUri(k),
          )
        : undefined;
    if (goal === undefined) {
      const n = preview.changes.length;
      try {
        goal = await vscode.window.showInputBox({
          title: `Fork “${displayText(original.task.title)}” from ${displayText(title)}`,
          prompt:
            `The new task's goal. ${n ? `The workspace becomes the checkpoint (${plural(n, 'file')} change; the current state is saved first, so Undo brings it back).` : 'The workspace already matches the checkpoint.'} ` +
            `Inherits: ${preview.inherited.join(', ') || 'no finished step'}. Left behind: ${preview.leftBehind.join(', ') || 'nothing'}. The original task stays as it is.`,
          value: `Fork of: ${original.task.goal}`,
          ignoreFocusOut: true,
          validateInput: (v) => (v.trim() ? undefined : 'The goal must not be empty.'),
        });
      } finally {
        await shown?.close();
      }
      if (goal === undefined) return undefined;
    }
    const r = await this.d.operations.run(`forking from ${title}…`, () =>
      engine.forkTask({ checkpointId, goal: goal.trim(), owner: { id: this.d.host.ownerId, pid: process.pid } }),
    );
    const forkId = r.taskId!;
    await vscode.commands.executeCommand('waypoint.revealTask', forkId);
    void vscode.window
      .showInformationMessage(`Waypoint: started a fork of “${displayText(original.task.title)}” from ${displayText(title)} (${plural(r.filesWritten + r.filesRemoved, 'file')} restored).`, 'Undo', 'Show Original')
      .then((a) => {
        if (a === 'Undo') void vscode.commands.executeCommand('waypoint.undoRollback', forkId);
        if (a === 'Show Original') void vscode.commands.executeCommand('waypoint.revealTask', original.task.id);
      });
    return r;
  }

  async undo(arg: unknown): Promise<RollbackResult | undefined> {
    const engine = await this.api();
    const undoable = new Set(await engine.undoableTaskIds());
    const ref = UndoArgs.safeParse(arg);
    const task = await this.d.pickTask(ref.success ? ref.data.taskId : arg, (t) => undoable.has(t.id), 'Undo the last rollback of which task?');
    if (!task) return undefined;
    const last = await engine.lastUndoableRollback(task.id);
    if (!last) {
      void vscode.window.showInformationMessage(`Waypoint: “${displayText(task.title)}” has no rollback to undo.`);
      return undefined;
    }
    // A confirmed caller (the rollback notification's own Undo button, a test) applies at once.
    if (!ref.success) {
      const preview = await engine.undoRollbackPreview(task.id);
      const d = await taskDetail(this.d.host, task.id);
      const pre = d.checkpoints.find((c) => c.id === last.preRollbackCheckpointId);
      const when = pre ? localTime(pre.createdAt, Date.now()) : 'before the rollback';
      const restored = d.steps.filter((s) => s.status === 'abandoned').length;
      const title = `Undo the rollback of “${displayText(task.title)}”: back to the files of ${when}`;
      if (preview.changes.length) {
        const shown = await ChangesPreview.open(title, preview.changes.map((c) => ({
          key: c.path,
          left: c.action === 'create' ? checkpointUri(EMPTY_SIDE, c.path) : this.fileUri(c.path),
          right: c.action === 'delete' ? checkpointUri(EMPTY_SIDE, c.path) : checkpointUri(last.preRollbackCheckpointId, c.path),
          action: c.action,
        })), (k) => this.fileUri(k));
        const ok = await vscode.window.showInformationMessage(
          `Undo the rollback of “${displayText(task.title)}”? ${preview.changes.length} file${preview.changes.length === 1 ? '' : 's'} go back to how they were at ${when} (the diff is open)${restored ? ', and the steps it abandoned get their status back' : ''}.`,
          'Undo Rollback',
        );
        await shown.close();
        if (ok !== 'Undo Rollback') return undefined;
      } else {
        const ok = await vscode.window.showInformationMessage(`Undo the rollback of “${displayText(task.title)}”? The files already match; only the steps it abandoned get their status back.`, 'Undo Rollback');
        if (ok !== 'Undo Rollback') return undefined;
      }
    }
    const r = await this.d.operations.run('undoing the last rollback…', () => engine.undoRollback({ taskId: task.id }));
    const n = r.filesWritten + r.filesRemoved;
    const steps = r.restoredSteps.length ? `; ${r.restoredSteps.length} step${r.restoredSteps.length === 1 ? '' : 's'} back as before` : '';
    void vscode.window.showInformationMessage(`Waypoint: undid the rollback of “${displayText(task.title)}” (${n} file${n === 1 ? '' : 's'}${steps}).`);
    return r;
  }

  /** A tree node, or `{ taskId, checkpointId }` (the timeline, other extensions). */
  async compareWithWorkspace(arg: unknown): Promise<void> {
    const direct = RollbackArgs.safeParse(arg);
    if (!(arg instanceof CheckpointNode) && !direct.success) throw new Error('Choose a checkpoint in the Waypoint view.');
    const engine = await this.api();
    let c: CheckpointMeta;
    let steps: Step[];
    if (direct.success) {
      const d = await taskDetail(this.d.host, direct.data.taskId);
      const found = d.checkpoints.find((x) => x.id === direct.data.checkpointId);
      if (!found) throw new Error(`Unknown checkpoint '${direct.data.checkpointId}'.`);
      c = found;
      steps = d.steps;
    } else {
      c = (arg as CheckpointNode).checkpoint;
      steps = await this.stepsOf(c);
    }
    const diff = await vscode.window.withProgress({ location: vscode.ProgressLocation.Window, title: 'Waypoint: comparing' }, () => engine.diff({ from: c.id }));
    if (!diff.changes.length) {
      void vscode.window.showInformationMessage('Waypoint: the workspace matches this checkpoint.');
      return;
    }
    await this.showChanges(
      `${checkpointTitle(steps, c)} ↔ Workspace`,
      diff.changes.map((x) => ({
        key: x.path,
        left: x.status === 'added' ? checkpointUri(EMPTY_SIDE, x.path) : checkpointUri(c.id, x.path),
        right: x.status === 'deleted' ? checkpointUri(EMPTY_SIDE, x.path) : this.fileUri(x.path),
      })),
    );
  }

  async compareWithPrevious(arg: unknown): Promise<void> {
    if (!(arg instanceof CheckpointNode)) throw new Error('Choose a checkpoint in the Waypoint view.');
    const engine = await this.api();
    const c = arg.checkpoint;
    const steps = await this.stepsOf(c);
    if (!c.parentId) {
      void vscode.window.showInformationMessage('Waypoint: this is the first checkpoint; there is nothing before it.');
      return;
    }
    const diff = await engine.diff({ from: c.parentId, to: c.id });
    if (!diff.changes.length) {
      void vscode.window.showInformationMessage('Waypoint: nothing changed between this checkpoint and the one before it.');
      return;
    }
    await this.showChanges(
      `${checkpointTitle(steps, c)}: changes since the previous checkpoint`,
      diff.changes.map((x) => ({
        key: x.path,
        left: x.status === 'added' ? checkpointUri(EMPTY_SIDE, x.path) : checkpointUri(c.parentId!, x.path),
        right: x.status === 'deleted' ? checkpointUri(EMPTY_SIDE, x.path) : checkpointUri(c.id, x.path),
      })),
    );
  }

  private async stepsOf(c: CheckpointMeta): Promise<Step[]> {
    return c.taskId ? (await taskDetail(this.d.host, c.taskId).catch(() => undefined))?.steps ?? [] : [];
  }

  /** One file → VS Code's diff editor; several → its multi-file diff editor. */
  private async showChanges(title: string, files: { key: string; left: vscode.Uri; right: vscode.Uri }[]): Promise<void> {
    if (files.length === 1) {
      const f = files[0];
      await vscode.commands.executeCommand('vscode.diff', f.left, f.right, `${f.key} (${title})`, { preview: true });
      return;
    }
    await vscode.commands.executeCommand(
      'vscode.changes',
      title,
      files.map((f) => [this.fileUri(f.key), f.left, f.right]),
    );
  }

  async prune(): Promise<void> {
    const engine = await this.api();
    const s = settings();
    const r = await this.d.operations.run('pruning checkpoints and collecting garbage…', () =>
      engine.gc({
        maxPerTask: s.retention.maxCheckpointsPerTask || undefined,
        maxAgeDays: s.retention.maxAgeDays || undefined,
        maxTotalBytes: s.retention.maxTotalMB ? s.retention.maxTotalMB * 1_000_000 : undefined,
      }),
    );
    void vscode.window.showInformationMessage(
      `Waypoint: pruned ${plural(r.pruned.length, 'checkpoint')}, freed ${(r.bytesFreed / 1e6).toFixed(1)} MB; the store now holds ${(r.totalBytes / 1e6).toFixed(1)} MB.`,
    );
  }
}
