import * as path from 'node:path';
import * as vscode from 'vscode';
import { errorMessage } from '../core/model/errors';
import type { Task } from '../core/model/schema';
import { isWorking } from '../core/model/taskStates';
import { Disposable } from './disposable';
import { WINDOW_OWNER_PREFIX, type EngineHost } from './engineHost';
import { settings } from './settings';
import { tasksOnly } from './storeReads';
import { plural } from '../core/model/plural';

/**
 * Captures work no agent reports. A FileSystemWatcher collects the paths that
 * change; while a task is active, a burst of activity is checkpointed once it has
 * been quiet for the configured period, passing the dirty set so the checkpoint
 * costs O(changes). Terminal commands run during a task are recorded (shell
 * integration's start/end, with exit codes), and a terminal that closes while its
 * task is running marks the task interrupted.
 *
 * While this window relays, its terminals are still its own and are recorded
 * through the owner; file activity is checkpointed through the owner only when the
 * owner is not another VS Code window (which watches the same folder itself: two
 * watchers would record every burst twice).
 */
interface StartedCommand {
  key: string;
  taskId: string;
}

export class AutoCheckpoints extends Disposable {
  private dirty = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  private readonly terminalTasks = new Map<vscode.Terminal, string>();
  private commandSeq = 0;
  private readonly _onDidCheckpoint = this.register(new vscode.EventEmitter<{ taskId: string; checkpointId: string; dirty: number }>());
  readonly onDidCheckpoint = this._onDidCheckpoint.event;

  constructor(
    private readonly host: EngineHost,
    private readonly log: vscode.LogOutputChannel,
  ) {
    super();
    const watcher = this.register(vscode.workspace.createFileSystemWatcher('**/*'));
    const note = (uri: vscode.Uri) => this.noteChange(uri);
    this.register(watcher.onDidChange(note));
    this.register(watcher.onDidCreate(note));
    this.register(watcher.onDidDelete(note));
    const shell = vscode.window as unknown as {
      onDidStartTerminalShellExecution?: vscode.Event<{ terminal: vscode.Terminal; execution: { commandLine: { value: string } } }>;
      onDidEndTerminalShellExecution?: vscode.Event<{ terminal: vscode.Terminal; execution: { commandLine: { value: string } }; exitCode: number | undefined }>;
    };
    // Shell integration events exist from VS Code 1.93; older hosts simply do not record commands.
    const keys = new WeakMap<object, Promise<StartedCommand | undefined>>();
    if (shell.onDidStartTerminalShellExecution) {
      // The start is recorded under its key before anything is awaited, so an end that comes quickly finds it.
      this.register(shell.onDidStartTerminalShellExecution((e) => keys.set(e.execution, this.onCommandStart(e.terminal, e.execution))));
    }
    if (shell.onDidEndTerminalShellExecution) {
      this.register(shell.onDidEndTerminalShellExecution((e) => void this.onCommandEnd(e.execution, e.exitCode, keys)));
    }
    this.register(vscode.window.onDidCloseTerminal((t) => void this.onTerminalClosed(t)));
    this.register({ dispose: () => clearTimeout(this.timer) });
  }

  private async activeTask(): Promise<Task | undefined> {
    const mode = this.host.mode.kind;
    if (mode !== 'owner' && mode !== 'relay') return undefined;
    // Only the latest (the query orders by updated_at): listing every active task cost more
    // than the hinted checkpoint itself in a store of 1,000 running tasks.
    const tasks = await tasksOnly(this.host, { states: ['running', 'waiting_tool'], limit: 1 }).catch(() => []);
    return tasks[0];
  }

  /** Whether file activity in this window is ours to checkpoint (see the class comment). */
  private watchesFiles(): boolean {
    const m = this.host.mode;
    return m.kind === 'owner' || (m.kind === 'relay' && !m.owner.ownerId.startsWith(WINDOW_OWNER_PREFIX));
  }

  noteChange(uri: vscode.Uri): void {
    if (uri.scheme !== 'file') return;
    // Any folder of the window: every one of them is supervised (see windowFolders.ts).
    const folder = vscode.workspace.getWorkspaceFolder(uri);
    if (!folder || folder.uri.scheme !== 'file') return;
    const rel = path.relative(folder.uri.fsPath, uri.fsPath);
    const store = settings(folder.uri).storageLocation;
    if (!rel || rel.startsWith('..') || path.isAbsolute(rel)) return;
    const first = rel.split(path.sep)[0];
    if (first === '.git' || first === store || first === '.waypoint') return;
    if (!this.watchesFiles()) return;
    this.dirty.add(uri.fsPath);
    // Cheap test first while owning; relaying, the flush asks the owner whether a task is active.
    const engine = this.host.current;
    if (engine && !engine.tasks({ states: ['running', 'waiting_tool'], limit: 1 }).length) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.flush(), settings(folder.uri).autoCheckpointQuietMs);
  }

  /** Takes the auto checkpoint now (tests call this instead of waiting for the quiet period). */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.running = this.running.then(async () => {
      if (this.dirty.size === 0 || !this.watchesFiles()) return;
      const task = await this.activeTask();
      if (!task) return;
      const dirty = [...this.dirty];
      this.dirty = new Set();
      try {
        const engine = await this.host.api();
        const r = await engine.checkpoint({ taskId: task.id, kind: 'auto', label: `${dirty.length} file change${dirty.length === 1 ? '' : 's'}`, dirty });
        this.log.info(`[auto] checkpoint ${r.checkpointId} for ${task.id}: ${plural(r.filesChanged, 'file')} changed`);
        this._onDidCheckpoint.fire({ taskId: task.id, checkpointId: r.checkpointId, dirty: dirty.length });
      } catch (e) {
        for (const p of dirty) this.dirty.add(p);
        this.log.warn(`[auto] checkpoint failed: ${errorMessage(e)}`);
      }
    });
    return this.running;
  }

  private async onCommandStart(terminal: vscode.Terminal, execution: { commandLine: { value: string } }): Promise<StartedCommand | undefined> {
    const key = `terminal:${Date.now()}-${++this.commandSeq}`;
    const task = await this.activeTask();
    if (!task) return undefined;
    this.terminalTasks.set(terminal, task.id);
    try {
      const engine = await this.host.api();
      await engine.beginSideEffect({ taskId: task.id, key, kind: 'terminal', description: execution.commandLine.value.slice(0, 2000) || '(command)', args: { terminal: terminal.name } });
      return { key, taskId: task.id };
    } catch (e) {
      this.log.warn(`[terminal] could not record command: ${errorMessage(e)}`);
      return undefined;
    }
  }

  private async onCommandEnd(execution: object, exitCode: number | undefined, keys: WeakMap<object, Promise<StartedCommand | undefined>>): Promise<void> {
    const started = await keys.get(execution);
    if (!started) return;
    const { key, taskId } = started;
    try {
      const engine = await this.host.api();
      await engine.endSideEffect({
        taskId,
        key,
        ok: exitCode === 0,
        result: { exitCode: exitCode ?? null },
        error: exitCode === 0 ? undefined : `exit code ${exitCode ?? 'unknown'}`,
      });
    } catch (e) {
      this.log.warn(`[terminal] could not record the outcome: ${errorMessage(e)}`);
    }
  }

  private async onTerminalClosed(terminal: vscode.Terminal): Promise<void> {
    const taskId = this.terminalTasks.get(terminal);
    this.terminalTasks.delete(terminal);
    if (!taskId) return;
    try {
      const engine = await this.host.api();
      const task = (await engine.taskDetail(taskId).catch(() => undefined))?.task;
      if (!task || !isWorking(task)) return;
      await engine.interruptTask({ taskId, reason: `terminal “${terminal.name}” closed while the task was running` });
    } catch (e) {
      this.log.warn(`[terminal] could not mark ${taskId} interrupted: ${errorMessage(e)}`);
    }
  }
}
