/**
 * Terminal commands under a task: each command a person or an
 * agent runs in a VS Code terminal while a task is active is bracketed by two
 * checkpoints, `command_start` when it begins and `command_end` when it ends, both
 * taken with the watcher's dirty set so they cost O(changes). The files that differ
 * between the two are the command's; who owns them is recorded with it: the agent
 * whose terminal it is, or the terminal (the person). `changesByOwner` reads that
 * owner for the interval ending in the `command_end`, so agent-only rollback and the
 * review's drift classify a `sed -i` typed by the person as theirs and one run by an
 * agent's terminal tool as the agent's.
 */
import { WaypointError } from '../model/errors';
import type { TerminalCommand } from '../model/schema';
import { ACTIVE_TASK_STATES } from '../model/stateMachine';
import { diffManifests } from '../snapshot';
import type { EngineCore } from './engineCore';
import { BeginCommandInput, EndCommandInput } from './inputs';

/** How many paths of each kind a command's record lists (the count says how many in all). */
export const MAX_COMMAND_FILES_LISTED = 500;

export interface CommandEnd {
  taskId: string;
  commandId: string;
  checkpointId: string | null;
  exitCode: number | null;
  changed: string[];
  created: string[];
  deleted: string[];
  filesTotal: number;
}

export class TerminalCommands {
  constructor(private readonly core: EngineCore) {}

  async begin(input: BeginCommandInput): Promise<{ taskId: string; commandId: string; checkpointId: string | null; owner: TerminalCommand['owner'] }> {
    const key = input.idempotencyKey ?? `command.start:${input.taskId}:${input.commandId}`;
    return this.core.run('command.start', key, async () => {
        const task = this.core.requireTask(input.taskId);
        if (!ACTIVE_TASK_STATES.includes(task.state)) {
          throw new WaypointError('illegal_transition', `Task ${task.id} is ${task.state}; a terminal command is recorded only under a running task.`, { taskId: task.id, state: task.state });
        }
        if (this.core.queries.command(task.id, input.commandId)) {
          throw new WaypointError('conflict', `Task ${task.id} already has a command '${input.commandId}'.`, { taskId: task.id, commandId: input.commandId });
        }
        const stepId = this.core.queries.steps(task.id).find((s) => s.status === 'in_progress')?.id ?? null;
        const owner: TerminalCommand['owner'] = input.agent ? 'agent' : 'terminal';
        const label = `before: ${input.commandLine.slice(0, 180) || '(command)'}`;
        const cp = this.core.workspaceSnapshots ? await this.core.captureCheckpoint(task, 'command_start', stepId, label, input.dirty) : null;
        const started = this.core.ev(
          'command.started',
          task,
          // An agent's terminal renews that agent's lease; a person's command does not speak for the driver.
          input.agent && task.lease?.owner ? task.lease.owner : null,
          { commandId: input.commandId, commandLine: input.commandLine, cwd: input.cwd ?? null, terminal: input.terminal, owner, agent: input.agent ?? null, stepId, checkpointId: cp?.checkpoint.id ?? null },
          `${key}#started`,
        );
        return { events: [started, ...(cp ? [cp.event] : [])], result: { taskId: task.id, commandId: input.commandId, checkpointId: cp?.checkpoint.id ?? null, owner } };
      }, { space: 'a command checkpoint' });
  }

  async end(input: EndCommandInput): Promise<CommandEnd> {
    const key = input.idempotencyKey ?? `command.end:${input.taskId}:${input.commandId}`;
    return this.core.run('command.end', key, async () => {
        const task = this.core.requireTask(input.taskId);
        const command = this.core.queries.command(task.id, input.commandId);
        if (!command) throw new WaypointError('not_found', `Task ${task.id} has no command '${input.commandId}'; start it first.`, { taskId: task.id, commandId: input.commandId });
        if (command.endedAt !== null) throw new WaypointError('illegal_transition', `Command '${input.commandId}' of task ${task.id} already ended.`, { taskId: task.id, commandId: input.commandId });
        const exitCode = input.exitCode ?? null;
        const before = command.beforeCheckpointId ? this.core.queries.checkpoint(command.beforeCheckpointId) : null;
        // A task that finished while the command ran takes no more checkpoints; the end (and exit code) is still recorded.
        const closed = task.state === 'completed' || task.state === 'abandoned';
        const cp =
          this.core.workspaceSnapshots && before?.manifestRef && !before.damaged && !closed
            ? await this.core.captureCheckpoint(task, 'command_end', command.stepId, `after: ${command.commandLine.slice(0, 170) || '(command)'} (exit ${exitCode ?? '?'})`, input.dirty)
            : null;
        const files = { changed: [] as string[], created: [] as string[], deleted: [] as string[], total: 0 };
        if (cp && before && this.core.workspaceSnapshots) {
          const ws = this.core.workspaceSnapshots;
          for (const ch of diffManifests(await ws.load(before), await ws.load(cp.checkpoint))) {
            files.total++;
            const list = ch.status === 'added' ? files.created : ch.status === 'deleted' ? files.deleted : files.changed;
            if (list.length < MAX_COMMAND_FILES_LISTED) list.push(ch.path);
          }
        }
        const result: CommandEnd = { taskId: task.id, commandId: command.id, checkpointId: cp?.checkpoint.id ?? null, exitCode, changed: files.changed, created: files.created, deleted: files.deleted, filesTotal: files.total };
        const ended = this.core.ev(
          'command.ended',
          task,
          command.owner === 'agent' && task.lease?.owner ? task.lease.owner : null,
          { commandId: command.id, exitCode, checkpointId: result.checkpointId, changed: files.changed, created: files.created, deleted: files.deleted, filesTotal: files.total },
          `${key}#ended`,
        );
        // The checkpoint first: the command's record names a checkpoint the projection already holds.
        return { events: [...(cp ? [cp.event] : []), ended], result };
      }, { space: 'a command checkpoint' });
  }
}
