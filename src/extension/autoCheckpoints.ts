import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { errorMessage } from '../core/model/errors';
import { tempPathFor } from '../core/store/fsutil';
import type { Task } from '../core/model/schema';
import { isWorking } from '../core/model/taskStates';
import { Disposable } from './disposable';
import { WINDOW_OWNER_PREFIX, type EngineHost } from './engineHost';
import { settings } from './settings';
import { tasksOnly } from './storeReads';
import { plural } from '../core/model/plural';
import { HistoryRetention } from './workspaceHistory';
import { terminalAgent } from './terminalOwners';
import type { CommandEnd } from '../core/engine/terminalCommands';

/**
 * Captures work no agent reports. A FileSystemWatcher collects the paths that
 * change; while a task is active, a burst of activity is checkpointed once it has
 * been quiet for the configured period, passing the dirty set so the checkpoint
 * costs O(changes). With no task active the burst goes into the day's Workspace
 * history instead (after `waypoint.history.quietPeriodMs`; HistoryRetention keeps it
 * within budget). Terminal commands run during a task (shell integration's start and
 * end) are bracketed by checkpoints taken with the same dirty set: the command's
 * line, cwd, exit code and the files it changed are recorded, owned by the agent
 * whose terminal it is (`waypoint.terminal.agentTerminals`) or else by the person.
 * A terminal that closes while its task is running marks the task interrupted.
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

/**
 * How long a command's end waits for the watcher to report what it wrote: file events
 * arrive a little after the shell says the command ended.
 */
export const COMMAND_SETTLE_MS = 500;
/** …and then until the watcher has been quiet this long, for at most COMMAND_SETTLE_MAX_MS. */
const COMMAND_QUIET_MS = 250;
const COMMAND_SETTLE_MAX_MS = 3000;
/**
 * A command's start reaches this host on another channel than the watcher's events, and
 * on a loaded machine after the events of what the command then wrote (found by CI: a
 * quick command's new and edited files went into the checkpoint of the state before it,
 * and its record said it changed nothing but a deletion). So the paths reported in the
 * last moment before the start event are left for the command's end, not taken into the
 * state before it: a file saved less than this long before a command is counted with it.
 */
const COMMAND_START_GRACE_MS = 1500;
/** The longest a command's end waits for the watcher to catch up while it keeps reporting (see watcherCaughtUp). */
const FENCE_MAX_MS = 60_000;
/**
 * While a command runs, the bursts it writes wait for its end checkpoint (so its files
 * are its own), but not for ever: a watch or a server that never ends lets the auto
 * checkpoints go on after this long.
 */
const COMMAND_HOLD_MS = 5 * 60_000;

type ShellExecution = { commandLine: { value: string }; cwd?: vscode.Uri };

export class AutoCheckpoints extends Disposable {
  private dirty = new Set<string>();
  /** When the watcher reported each dirty path (see COMMAND_START_GRACE_MS). */
  private notedAt = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  private readonly terminalTasks = new Map<vscode.Terminal, string>();
  private commandSeq = 0;
  /** When the watcher last reported a change in the workspace (a command's end waits for it to go quiet). */
  private lastNoteAt = 0;
  /** When the watcher last reported anything, the store's own files included (it is still catching up). */
  private lastReportAt = 0;
  /** Fence files written and not yet reported back by the watcher, by name (see watcherCaughtUp). */
  private readonly fences = new Map<string, () => void>();
  /** Start times of the commands begun and not yet ended, by key. */
  private readonly openCommands = new Map<string, number>();
  private historyTimer: NodeJS.Timeout | undefined;
  /** Command records not yet written (starts and ends), so tests and teardown can wait for them. */
  private readonly pendingCommands = new Set<Promise<unknown>>();
  private readonly retention: HistoryRetention;
  private readonly _onDidCheckpoint = this.register(new vscode.EventEmitter<{ taskId: string; checkpointId: string; dirty: number }>());
  readonly onDidCheckpoint = this._onDidCheckpoint.event;
  private readonly _onDidRecordCommand = this.register(new vscode.EventEmitter<CommandEnd>());
  /** Fires when a terminal command's end (exit code, files) is recorded. */
  readonly onDidRecordCommand = this._onDidRecordCommand.event;

  constructor(
    private readonly host: EngineHost,
    private readonly log: vscode.LogOutputChannel,
  ) {
    super();
    this.retention = this.register(new HistoryRetention(host, log));
    const watcher = this.register(vscode.workspace.createFileSystemWatcher('**/*'));
    const note = (uri: vscode.Uri) => this.noteChange(uri);
    this.register(watcher.onDidChange(note));
    this.register(watcher.onDidCreate(note));
    this.register(watcher.onDidDelete(note));
    const shell = vscode.window as unknown as {
      onDidStartTerminalShellExecution?: vscode.Event<{ terminal: vscode.Terminal; execution: ShellExecution }>;
      onDidEndTerminalShellExecution?: vscode.Event<{ terminal: vscode.Terminal; execution: ShellExecution; exitCode: number | undefined }>;
    };
    // Shell integration events exist from VS Code 1.93; older hosts simply do not record commands.
    const keys = new WeakMap<object, Promise<StartedCommand | undefined>>();
    if (shell.onDidStartTerminalShellExecution) {
      // The start is recorded under its key before anything is awaited, so an end that comes quickly finds it.
      // The paths changed before the command are taken now, in the event itself: a fast command's
      // own writes must not reach the checkpoint of the state before it.
      this.register(shell.onDidStartTerminalShellExecution((e) => keys.set(e.execution, this.track(this.onCommandStart(e.terminal, e.execution, this.takeDirty(Date.now() - COMMAND_START_GRACE_MS))))));
    }
    if (shell.onDidEndTerminalShellExecution) {
      this.register(shell.onDidEndTerminalShellExecution((e) => void this.track(this.onCommandEnd(e.execution, e.exitCode, keys))));
    }
    this.register(vscode.window.onDidCloseTerminal((t) => void this.onTerminalClosed(t)));
    this.register({ dispose: () => (clearTimeout(this.timer), clearTimeout(this.historyTimer)) });
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.pendingCommands.add(p);
    void p.finally(() => this.pendingCommands.delete(p));
    return p;
  }

  /** Resolves once every terminal command begun so far has its start and end recorded (or given up). */
  async commandsSettled(): Promise<void> {
    while (this.pendingCommands.size) await Promise.allSettled([...this.pendingCommands]);
    await this.running;
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
    this.lastReportAt = Date.now();
    if (this.fences.size) {
      const seen = this.fences.get(path.basename(uri.fsPath));
      if (seen) return seen();
    }
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
    this.notedAt.set(uri.fsPath, this.lastReportAt);
    this.lastNoteAt = this.lastReportAt;
    // Per file event, so a synchronous look while owning: it only chooses which timer runs. Whatever
    // the flush then records goes through the engine API (relaying, the flush asks the owner).
    const engine = this.host.current;
    if (engine && !engine.tasks({ states: ['running', 'waiting_tool'], limit: 1 }).length) {
      const history = settings(folder.uri).history;
      if (!history.enabled) return;
      clearTimeout(this.historyTimer);
      this.historyTimer = setTimeout(() => void this.flush(), history.quietPeriodMs);
      return;
    }
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.flush(), settings(folder.uri).autoCheckpointQuietMs);
  }

  /**
   * Takes the watcher's dirty set (the paths changed since the last checkpoint) for a
   * checkpoint that now covers them; with `reportedBy`, only the paths reported by then
   * (the rest stay dirty).
   */
  private takeDirty(reportedBy?: number): string[] {
    if (reportedBy === undefined) {
      const dirty = [...this.dirty];
      this.dirty = new Set();
      this.notedAt = new Map();
      return dirty;
    }
    const taken: string[] = [];
    for (const p of this.dirty) {
      if ((this.notedAt.get(p) ?? 0) > reportedBy) continue;
      taken.push(p);
      this.dirty.delete(p);
      this.notedAt.delete(p);
    }
    return taken;
  }

  /** Takes the auto checkpoint (or, with no task active, the history checkpoint) now; tests call this instead of waiting for the quiet period. */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    clearTimeout(this.historyTimer);
    this.running = this.running.then(async () => {
      if (this.dirty.size === 0 || !this.watchesFiles()) return;
      const t0 = performance.now();
      const task = await this.activeTask();
      const lookupMs = performance.now() - t0;
      if (!task) return this.recordHistory();
      const holding = [...this.openCommands.values()].some((t) => Date.now() - t < COMMAND_HOLD_MS);
      if (holding) {
        // A command is running: its end checkpoint takes these paths; look again after another quiet period.
        const folder = this.host.workspaceFolder;
        this.timer = setTimeout(() => void this.flush(), folder ? settings(folder.uri).autoCheckpointQuietMs : 2000);
        return;
      }
      const dirty = this.takeDirty();
      try {
        const engine = await this.host.api();
        const r = await engine.checkpoint({ taskId: task.id, kind: 'auto', label: `${dirty.length} file change${dirty.length === 1 ? '' : 's'}`, dirty });
        this.log.info(`[auto] checkpoint ${r.checkpointId} for ${task.id}: ${plural(r.filesChanged, 'file')} changed (${plural(dirty.length, 'path')} from the watcher; ${Math.round(performance.now() - t0)} ms, the task lookup ${Math.round(lookupMs)} ms)`);
        this._onDidCheckpoint.fire({ taskId: task.id, checkpointId: r.checkpointId, dirty: dirty.length });
      } catch (e) {
        for (const p of dirty) this.dirty.add(p);
        this.log.warn(`[auto] checkpoint failed: ${errorMessage(e)}`);
      }
    });
    return this.running;
  }

  /** With no task active: the dirty set into today's Workspace history (when the setting allows). */
  private async recordHistory(): Promise<void> {
    const folder = this.host.workspaceFolder;
    if (!folder || !settings(folder.uri).history.enabled) {
      // Nothing records it; the next task's checkpoints rescan what they need from their own base.
      this.takeDirty();
      return;
    }
    const dirty = this.takeDirty();
    try {
      const engine = await this.host.api();
      const r = await engine.recordHistory({ dirty, label: `${dirty.length} file change${dirty.length === 1 ? '' : 's'}` });
      if (r.checkpointId) {
        this.log.info(`[history] checkpoint ${r.checkpointId} in ${r.taskId}: ${plural(r.filesChanged, 'file')} changed`);
        this._onDidCheckpoint.fire({ taskId: r.taskId, checkpointId: r.checkpointId, dirty: dirty.length });
      }
      this.retention.recorded();
    } catch (e) {
      for (const p of dirty) this.dirty.add(p);
      this.log.warn(`[history] checkpoint failed: ${errorMessage(e)}`);
    }
  }

  /** Runs fn in line with the auto checkpoints, so a command's checkpoints and a burst's never interleave. */
  private serialized<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.running.then(fn);
    this.running = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  private async onCommandStart(terminal: vscode.Terminal, execution: ShellExecution, dirty: string[]): Promise<StartedCommand | undefined> {
    const key = `term-${Date.now()}-${++this.commandSeq}`;
    const giveBack = () => {
      for (const p of dirty) this.dirty.add(p);
    };
    const task = this.watchesFiles() ? await this.activeTask() : undefined;
    if (!task) {
      giveBack();
      return undefined;
    }
    this.terminalTasks.set(terminal, task.id);
    const folder = this.host.workspaceFolder;
    const agent = terminalAgent(terminal.name, folder ? settings(folder.uri).agentTerminals : {}, task.agent);
    return this.serialized(async () => {
      // The start checkpoint covers what changed before the command: the pending burst goes into it.
      clearTimeout(this.timer);
      try {
        const engine = await this.host.api();
        const r = await engine.beginCommand({
          taskId: task.id,
          commandId: key,
          commandLine: execution.commandLine.value.slice(0, 10_000),
          cwd: execution.cwd?.fsPath.slice(0, 4096),
          terminal: terminal.name.slice(0, 200) || 'terminal',
          ...(agent ? { agent: agent.slice(0, 100) } : {}),
          dirty,
        });
        this.openCommands.set(key, Date.now());
        this.log.info(`[terminal] ${key} started under ${task.id} (${r.owner}${agent ? ` ${agent}` : ''}): ${execution.commandLine.value.slice(0, 200)}`);
        return { key, taskId: task.id };
      } catch (e) {
        giveBack();
        this.log.warn(`[terminal] could not record command: ${errorMessage(e)}`);
        return undefined;
      }
    });
  }

  private async onCommandEnd(execution: object, exitCode: number | undefined, keys: WeakMap<object, Promise<StartedCommand | undefined>>): Promise<void> {
    const started = await keys.get(execution);
    if (!started) return;
    // File events arrive after the shell's end: wait for the watcher to report what the command wrote.
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const endAt = Date.now();
    // How late depends on the load and on what else the watcher is handing on: a fixed wait
    // alone, on a loaded CI machine, recorded a command's three files as none.
    await Promise.all([sleep(COMMAND_SETTLE_MS), this.watcherCaughtUp()]);
    while (Date.now() - this.lastNoteAt < COMMAND_QUIET_MS && Date.now() - endAt < COMMAND_SETTLE_MAX_MS) await sleep(COMMAND_QUIET_MS);
    const { key, taskId } = started;
    this.openCommands.delete(key);
    await this.serialized(async () => {
      clearTimeout(this.timer);
      const dirty = this.takeDirty();
      try {
        const engine = await this.host.api();
        const r = await engine.endCommand({ taskId, commandId: key, exitCode: exitCode ?? null, dirty });
        this.log.info(`[terminal] ${key} ended (exit ${exitCode ?? '?'}): ${plural(r.filesTotal, 'file')} changed`);
        this._onDidRecordCommand.fire(r);
      } catch (e) {
        for (const p of dirty) this.dirty.add(p);
        this.log.warn(`[terminal] could not record the outcome: ${errorMessage(e)}`);
      }
    });
  }

  /**
   * Resolves true once the file watcher has reported every write made before the call:
   * a fence file written now in the store's folder (whose events are otherwise ignored)
   * comes back through the workspace's recursive watcher, which hands events on in the
   * order the kernel queued them, so the writes before it have been reported by then
   * (through it, or sooner). A command that wrote thousands of files has its events
   * handed on for seconds after it ended, so the wait goes on while the watcher keeps
   * reporting anything; it gives up (false) once the watcher has
   * been silent for COMMAND_SETTLE_MAX_MS (the fence excluded from watching, say), after
   * FENCE_MAX_MS in all, or when the fence cannot be written.
   */
  private async watcherCaughtUp(): Promise<boolean> {
    const folder = this.host.workspaceFolder;
    if (!folder || folder.uri.scheme !== 'file') return false;
    const dir = path.resolve(folder.uri.fsPath, settings(folder.uri).storageLocation);
    // Named as the store's temp files are: a fence left behind by a crash is swept when the store next opens.
    const file = tempPathFor(path.join(dir, 'watch-fence'));
    const name = path.basename(file);
    let seen = false;
    this.fences.set(name, () => void (seen = true));
    let written = false;
    try {
      // As the store writes: into its own directory only (lstat: not a link put in its place), O_EXCL.
      if (!(await fs.promises.lstat(dir)).isDirectory()) return false;
      await fs.promises.writeFile(file, '', { flag: 'wx', mode: 0o600 });
      written = true;
      const start = Date.now();
      while (!seen) {
        const now = Date.now();
        if (now - Math.max(start, this.lastReportAt) > COMMAND_SETTLE_MAX_MS || now - start > FENCE_MAX_MS) return false;
        await new Promise((r) => setTimeout(r, 50));
      }
      return true;
    } catch {
      return false;
    } finally {
      this.fences.delete(name);
      if (written) await fs.promises.rm(file, { force: true }).catch(() => undefined);
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
