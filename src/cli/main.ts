import * as fs from 'node:fs';
import type { z } from 'zod';
import * as path from 'node:path';
import { isNoSpace, type Engine, type RollbackResult } from '../core/engine/engine';
import { notCapturedWarning } from '../core/engine/notCaptured';
import { DEFAULT_RPC_TIMEOUT_MS, RpcTransportError, localApi, remoteApi, type EngineApi } from '../core/engine/api';
import { resolveStore } from '../ownership/resolve';
import { findWorkspace, storeDirOf } from '../ownership/storeDirOf';
import { describeOwner } from '../core/store/ownerLock';
import { startWhenAllowed } from '../core/engine/retryPolicy';
import { WaypointError, errorMessage, isWaypointError } from '../core/model/errors';
import { Plan } from '../core/model/schema';
import { parseInput } from '../core/model/validate';
import { UsageError, intOption, jsonOption, optional, parse, required } from './args';
import { tasksTable, taskDetail } from './format';
import { statsText } from './statsFormat';
import type { Command, Ctx } from './command';
import { MCP_COMMANDS, usePrereadHookInput } from './mcpCommands';
import { UNLOCK_COMMANDS } from './unlock';
import { BACKGROUND_COMMANDS } from './backgroundCommands';
import { awaitStartingOwnerOf, closeStartingOwner } from './backgroundAfterCall';
import { listAllTasks } from './tasksAll';
import { teamStoreOf } from './teamStore';
import { checkpointsTable, isWorkspaceIdArg, notOnThisMachine, teamCheckpoints, teamDiff, teamTaskDetail } from './teamReview';
import { plural } from '../core/model/plural';
import { displayText } from '../core/model/displayText';
import { stateOption, stepIdCheck, unknownCommand, workspacePath } from './suggest';
import { confirmChange } from './confirm';
import { cliLogger } from './logLevel';
import { TIMELINE_COMMAND } from './timeline';
import { teamStoreHint } from './teamHint';
import { PLAN_FORMAT } from './planFormat';

/**
 * `waypoint` — the command line over the engine. Every subcommand takes
 * `--workspace DIR` (default: the current directory) and `--json`.
 * Exit codes: 0 ok, 1 refused (bad input, illegal move; reason on stderr), 2 usage.
 */

const s = (short?: string) => ({ type: 'string' as const, ...(short ? { short } : {}) });
const b = { type: 'boolean' as const };

function readPlanFile(file: string): z.output<typeof Plan> {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new WaypointError('invalid_input', `Cannot read plan file ${file}: ${errorMessage(e)}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new WaypointError('invalid_input', `Plan file ${file} is not valid JSON: ${errorMessage(e)}`);
  }
  return parseInput(Plan, raw, `plan file ${file}`);
}

/** How long the owner may take to answer the first, cheap question before it counts as unreachable. */
const PROBE_TIMEOUT_MS = 10_000;

/** How long a relayed call may take (`WAYPOINT_RPC_TIMEOUT` seconds; 120 by default). */
function rpcTimeoutMs(): number {
  const v = process.env.WAYPOINT_RPC_TIMEOUT;
  if (v === undefined || v === '') return DEFAULT_RPC_TIMEOUT_MS;
  if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 86_400) throw new UsageError(`WAYPOINT_RPC_TIMEOUT must be a whole number of seconds from 1 to 86400, not '${v}'.`);
  return Number(v) * 1000;
}

/**
 * The remote API, but a call the owner never received (refused, or no connection) is
 * made once more against whoever holds the store by then — often this process, taking a
 * dead owner's store over. A call that may have arrived is never repeated.
 */
function retryUndelivered(remote: EngineApi, again: () => Promise<EngineApi>): EngineApi {
  const calls = remote as unknown as Record<string, ((a?: unknown) => Promise<unknown>) | undefined>;
  return new Proxy({} as EngineApi, {
    get: (_t, name) => {
      const first = typeof name === 'string' ? calls[name] : undefined;
      if (!first) return undefined;
      return async (arg?: unknown) => {
        try {
          return await first(arg);
        } catch (e) {
          if (!(e instanceof RpcTransportError) || e.delivered) throw e;
          const next = (await again()) as unknown as Record<string, (a?: unknown) => Promise<unknown>>;
          return next[name as string](arg);
        }
      };
    },
  });
}

/** `verify` found damage and already printed its one JSON document (the report, holding the error): exit 1, print nothing more. */
class VerifyFailed extends WaypointError {
  constructor(message: string) {
    super('corrupt', message);
  }
}

/** `--since`: an ISO date or time, or a span back from now (`7d`, `12h`). */
function sinceOption(v: string): number {
  const span = /^(\d{1,5})([dh])$/.exec(v);
  if (span) return Date.now() - Number(span[1]) * (span[2] === 'd' ? 86_400_000 : 3_600_000);
  const t = /^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(v) ? Date.parse(v) : NaN;
  if (Number.isNaN(t)) throw new UsageError(`--since must be a date (2026-11-30, 2026-11-30T09:00Z) or a span like 7d or 12h, not '${v}'.`);
  return t;
}

function owner(values: Ctx['values']) {
  const id = optional(values, 'owner');
  return id ? { id } : undefined;
}

/** A rollback's conflicts, each with why it was left as it is (changed by both, or changed on disk while the rollback ran). */
function leftForYou(r: { conflicts: string[]; kept: { path: string; reason: string }[] }): string {
  if (r.conflicts.length === 0) return '';
  const why = new Map(r.kept.map((k) => [k.path, k.reason]));
  return `\nLeft as you have ${r.conflicts.length === 1 ? 'it' : 'them'} (not rolled back):\n${r.conflicts.map((p) => `  ${p}  (${why.get(p) ?? 'changed by both'})`).join('\n')}`;
}

export const COMMANDS: Record<string, Command> = {
  init: {
    summary: 'create the store in <workspace>/.waypoint',
    usage: 'waypoint init',
    options: {},
    async run(c) {
      const info = await (await c.engine()).info();
      c.out(`Waypoint store ready in ${info.storeDir}${info.relayed ? ` (owned by pid ${info.pid})` : ''}`, info);
    },
  },
  'task start': {
    summary: 'start a task (takes its base checkpoint)',
    usage: `waypoint task start --goal G [--title T] [--plan FILE] [--agent NAME] [--key K] [--lease-ttl SECONDS] [--max-attempts N] [--backoff-ms MS]\n\n${PLAN_FORMAT}`,
    options: { goal: s('g'), title: s(), plan: s(), agent: s(), key: s(), 'lease-ttl': s(), 'max-attempts': s(), 'backoff-ms': s() },
    async run(c) {
      const goal = required(c.values, 'goal');
      const planFile = optional(c.values, 'plan');
      const ttl = intOption(c.values, 'lease-ttl');
      const maxAttempts = intOption(c.values, 'max-attempts');
      const backoffMs = intOption(c.values, 'backoff-ms');
      const retry = maxAttempts === undefined && backoffMs === undefined ? undefined : { maxAttempts, backoffMs };
      const plan = planFile ? readPlanFile(planFile) : undefined;
      const e = await c.engine();
      const r = await e.startTask({
        goal,
        title: optional(c.values, 'title'),
        plan,
        agent: optional(c.values, 'agent'),
        idempotencyKey: optional(c.values, 'key'),
        leaseTtlMs: ttl === undefined ? undefined : ttl * 1000,
        owner: owner(c.values),
        retry,
      });
      c.out(`Started task ${r.taskId} (base checkpoint ${r.baseCheckpointId})`, r);
    },
  },
  'task plan': {
    summary: 'add steps to a task’s plan',
    usage: `waypoint task plan --task ID --plan FILE [--key K]\n\n${PLAN_FORMAT}`,
    options: { task: s('t'), plan: s(), key: s() },
    async run(c) {
      const plan = readPlanFile(required(c.values, 'plan'));
      const r = await (await c.engine()).extendPlan({ taskId: required(c.values, 'task'), plan, idempotencyKey: optional(c.values, 'key'), owner: owner(c.values) });
      c.out(`Added ${plural(r.added.length, 'step')} to ${r.taskId}`, r);
    },
  },
  'task complete': {
    summary: 'the agent is done: the task waits for review',
    usage: 'waypoint task complete --task ID [--summary S] [--key K]',
    options: { task: s('t'), summary: s(), key: s() },
    async run(c) {
      const r = await (await c.engine()).requestReview({ taskId: required(c.values, 'task'), summary: optional(c.values, 'summary'), idempotencyKey: optional(c.values, 'key'), owner: owner(c.values) });
      c.out(`Task ${r.taskId} is ${r.state}`, r);
    },
  },
  'task approve': {
    summary: 'accept a reviewed task (completed)',
    usage: 'waypoint task approve --task ID [--summary S] [--commit SHA] [--key K]',
    options: { task: s('t'), summary: s(), commit: s(), key: s() },
    async run(c) {
      const r = await (await c.engine()).completeTask({
        taskId: required(c.values, 'task'),
        summary: optional(c.values, 'summary'),
        commit: optional(c.values, 'commit'),
        idempotencyKey: optional(c.values, 'key'),
      });
      c.out(`Task ${r.taskId} is ${r.state}`, r);
    },
  },
  'task abandon': {
    summary: 'give a task up',
    usage: 'waypoint task abandon --task ID [--reason R] [--key K]',
    options: { task: s('t'), reason: s(), key: s() },
    async run(c) {
      const r = await (await c.engine()).abandonTask({ taskId: required(c.values, 'task'), reason: optional(c.values, 'reason'), idempotencyKey: optional(c.values, 'key') });
      c.out(`Task ${r.taskId} is ${r.state}`, r);
    },
  },
  'task suspend': {
    summary: 'pause a task on purpose',
    usage: 'waypoint task suspend --task ID [--reason R]',
    options: { task: s('t'), reason: s(), key: s() },
    async run(c) {
      const r = await (await c.engine()).suspendTask({ taskId: required(c.values, 'task'), reason: optional(c.values, 'reason'), idempotencyKey: optional(c.values, 'key') });
      c.out(`Task ${r.taskId} is ${r.state}`, r);
    },
  },
  'task resume': {
    summary: 'resume a task under the caller and print its resume context',
    usage: 'waypoint task resume --task ID [--lease-ttl SECONDS] [--key K]',
    options: { task: s('t'), 'lease-ttl': s(), key: s() },
    async run(c) {
      const ttl = intOption(c.values, 'lease-ttl');
      const ctx = await (await c.engine()).resumeTask({
        taskId: required(c.values, 'task'),
        leaseTtlMs: ttl === undefined ? undefined : ttl * 1000,
        idempotencyKey: optional(c.values, 'key'),
        owner: owner(c.values),
      });
      c.out(ctx.markdown, ctx);
    },
  },
  'task delete': {
    summary: 'delete a task that is not running (its events stay in the log)',
    usage: 'waypoint task delete --task ID',
    options: { task: s('t'), key: s() },
    async run(c) {
      const r = await (await c.engine()).deleteTask({ taskId: required(c.values, 'task'), idempotencyKey: optional(c.values, 'key') });
      c.out(`Deleted task ${r.taskId}`, r);
    },
  },
  heartbeat: {
    summary: 'renew the lease of a task you drive',
    usage: 'waypoint heartbeat --task ID',
    options: { task: s('t') },
    async run(c) {
      const r = await (await c.engine()).heartbeat({ taskId: required(c.values, 'task'), owner: owner(c.values) });
      c.out(`Lease of ${r.taskId} renewed until ${r.expiresAt ? new Date(r.expiresAt).toISOString() : '-'}`, r);
    },
  },
  tasks: {
    summary: 'list tasks',
    usage: 'waypoint tasks [--state STATE[,STATE]] [--limit N] [--all]',
    readOnly: true,
    options: { state: s(), limit: s(), all: b },
    async run(c) {
      const states = stateOption(optional(c.values, 'state'));
      if (c.values.all === true) return listAllTasks(c, states, intOption(c.values, 'limit'));
      const tasks = await (await c.engine()).tasks({ states: states as never, limit: intOption(c.values, 'limit') });
      const p = (t: (typeof tasks)[number]) => (t.progress.total ? `${t.progress.done}/${t.progress.total}` : '-');
      const hint = tasks.length === 0 ? teamStoreHint(c.workspace, c.teamStore) : null;
      c.out(
        hint ? `${tasksTable(tasks, p as never)}\n${hint}` : tasksTable(tasks, p as never),
        tasks.map((t) => ({ ...t, progress: p(t) })),
      );
    },
  },
  show: {
    summary: 'one task in detail (--workspace ID: a task on another machine, from the team store)',
    usage: 'waypoint show --task ID [--workspace DIR | --workspace WORKSPACE_ID --store URL]',
    readOnly: true,
    options: { task: s('t') },
    readsTeamStore: true,
    async run(c) {
      const taskId = required(c.values, 'task');
      const d = c.workspaceId ? await teamTaskDetail(c, taskId) : await (await c.engine()).taskDetail(taskId);
      c.out(taskDetail(d), d);
    },
  },
  timeline: TIMELINE_COMMAND,
  'step start': {
    summary: 'start a plan step (or an ad hoc one); takes a step_start checkpoint',
    usage: 'waypoint step start --task ID [--step ID [--ad-hoc]] [--title T] [--inputs JSON] [--depends-on A,B] [--key K] [--wait]\n  --step names a step of the task; a step not in it is refused unless --ad-hoc (no --step: a new ad hoc step).',
    options: { task: s('t'), step: s(), 'ad-hoc': b, title: s(), inputs: s(), 'depends-on': s(), key: s(), wait: b },
    async run(c) {
      const e = await c.engine();
      const stepId = optional(c.values, 'step');
      if (stepId !== undefined && c.values['ad-hoc'] !== true) {
        const taskId = required(c.values, 'task');
        const refused = stepIdCheck(taskId, stepId, (await e.taskDetail(taskId)).steps);
        if (refused) throw refused;
      }
      const args = {
        taskId: required(c.values, 'task'),
        stepId: optional(c.values, 'step'),
        title: optional(c.values, 'title'),
        inputs: jsonOption(c.values, 'inputs'),
        dependsOn: optional(c.values, 'depends-on')?.split(',').filter(Boolean),
        idempotencyKey: optional(c.values, 'key'),
        owner: owner(c.values),
      };
      // --wait waits here rather than in the engine, so a long backoff never outlasts a relayed call's timeout.
      const sleep = (ms: number) => {
        process.stderr.write(`waypoint: waiting ${Math.ceil(ms / 1000)} s for the retry backoff of step ${args.stepId ?? ''} to pass…\n`);
        return new Promise<void>((r) => setTimeout(r, ms));
      };
      const r = c.values.wait === true ? await startWhenAllowed(() => e.startStep(args), Date.now, sleep, Number.MAX_SAFE_INTEGER) : await e.startStep(args);
      c.out(`Step ${r.stepId} started (attempt ${r.attempt} of ${r.maxAttempts}, checkpoint ${r.checkpointId})`, r);
    },
  },
  'step complete': {
    summary: 'complete a step; takes a step_end checkpoint',
    usage: 'waypoint step complete --task ID --step ID [--outputs JSON] [--summary S] [--key K]',
    options: { task: s('t'), step: s(), outputs: s(), summary: s(), key: s() },
    async run(c) {
      const r = await (await c.engine()).completeStep({
        taskId: required(c.values, 'task'),
        stepId: required(c.values, 'step'),
        outputs: jsonOption(c.values, 'outputs'),
        summary: optional(c.values, 'summary'),
        idempotencyKey: optional(c.values, 'key'),
        owner: owner(c.values),
      });
      c.out(`Step ${r.stepId} completed (checkpoint ${r.checkpointId}, ${plural(r.filesChanged, 'file')} changed)`, r);
    },
  },
  'step fail': {
    summary: 'fail a step; without --recoverable THE WHOLE TASK FAILS (--recoverable keeps the step retryable)',
    usage: 'waypoint step fail --task ID --step ID --error MSG [--recoverable] [--key K]\n  Without --recoverable the task fails with the step (a failed task can be resumed, or forked). With it, the step may be retried.',
    options: { task: s('t'), step: s(), error: s(), recoverable: b, key: s() },
    async run(c) {
      const r = await (await c.engine()).failStep({
        taskId: required(c.values, 'task'),
        stepId: required(c.values, 'step'),
        error: required(c.values, 'error'),
        recoverable: c.values.recoverable === true,
        idempotencyKey: optional(c.values, 'key'),
        owner: owner(c.values),
      });
      const human = r.hold
        ? `Step ${r.stepId} failed; the task waits for a person: ${r.hold.reason}.`
        : r.retry
          ? `Step ${r.stepId} failed; it may retry as attempt ${r.retry.attempt} of ${r.retry.maxAttempts} at ${new Date(r.retry.retryAt).toLocaleTimeString()} (in ${Math.ceil(r.retry.backoffMs / 1000)} s)`
          : r.state === 'failed'
            ? `Step ${r.stepId} failed, and the task failed with it (a step failed without --recoverable ends its task). Next time, use --recoverable to keep it retryable.`
            : `Step ${r.stepId} failed; task is ${r.state}`;
      c.out(human, r);
    },
  },
  'step skip': {
    summary: 'skip a pending step',
    usage: 'waypoint step skip --task ID --step ID [--reason R]',
    options: { task: s('t'), step: s(), reason: s(), key: s() },
    async run(c) {
      const r = await (await c.engine()).skipStep({ taskId: required(c.values, 'task'), stepId: required(c.values, 'step'), reason: optional(c.values, 'reason'), idempotencyKey: optional(c.values, 'key') });
      c.out(`Step ${r.stepId} skipped`, r);
    },
  },
  'step grant': {
    summary: 'let a step that used its attempts try again (a person’s answer to a task waiting for one)',
    usage: 'waypoint step grant --task ID --step ID [--attempts N] [--reason R]',
    options: { task: s('t'), step: s(), attempts: s(), reason: s(), key: s() },
    async run(c) {
      const r = await (await c.engine()).grantAttempts({
        taskId: required(c.values, 'task'),
        stepId: required(c.values, 'step'),
        attempts: intOption(c.values, 'attempts'),
        reason: optional(c.values, 'reason'),
        idempotencyKey: optional(c.values, 'key'),
        owner: owner(c.values),
      });
      c.out(`Step ${r.stepId} may try ${plural(r.attempts, 'more time')} (${r.maxAttempts} attempts in all); task is ${r.state}`, r);
    },
  },
  checkpoint: {
    summary: 'take a manual checkpoint (--dirty: paths known to have changed, so only they are examined)',
    usage: 'waypoint checkpoint --task ID [--label L] [--dirty PATH,…] [--key K]',
    options: { task: s('t'), label: s(), dirty: s(), key: s() },
    async run(c) {
      const r = await (await c.engine()).checkpoint({
        taskId: required(c.values, 'task'),
        label: optional(c.values, 'label'),
        dirty: optional(c.values, 'dirty')?.split(',').filter(Boolean).map((p) => workspacePath(c.workspace, p, '--dirty')),
        idempotencyKey: optional(c.values, 'key'),
      });
      c.out(`Checkpoint ${r.checkpointId} (${plural(r.filesChanged, 'file')} changed)`, r);
    },
  },
  checkpoints: {
    summary: "a task's checkpoints (--workspace ID: a workspace on another machine, read from the team store)",
    usage: 'waypoint checkpoints --task ID [--workspace DIR | --workspace WORKSPACE_ID --store URL]',
    readOnly: true,
    options: { task: s('t') },
    readsTeamStore: true,
    async run(c) {
      const taskId = required(c.values, 'task');
      if (c.workspaceId) return teamCheckpoints(c, taskId);
      const list = (await (await c.engine()).taskDetail(taskId)).checkpoints;
      c.out(checkpointsTable(list, false), { taskId, checkpoints: list });
    },
  },
  diff: {
    summary: 'what changed between two checkpoints, or from a checkpoint to the workspace now (--workspace ID: a task on another machine, from the team store)',
    usage: 'waypoint diff (--from CP | --task ID) [--to CP] [--path P]  |  waypoint diff --workspace WORKSPACE_ID --task ID [--from CP] [--to CP] [--path P] [--patch]\n  --task alone: from the task’s base checkpoint; no --to: to the workspace now.',
    readOnly: true,
    options: { from: s(), to: s(), task: s('t'), path: s(), patch: b },
    readsTeamStore: true,
    async run(c) {
      if (c.workspaceId) {
        // Default from the task's base to its latest checkpoint: the whole of its changes.
        return teamDiff(c, { taskId: required(c.values, 'task'), from: optional(c.values, 'from'), to: optional(c.values, 'to'), path: optional(c.values, 'path'), patch: c.values.patch === true });
      }
      if (c.values.patch !== undefined) throw new UsageError('--patch is read from the team store (with --workspace WORKSPACE_ID); here, `waypoint diff` lists the changed files with their line counts.');
      const e = await c.engine();
      const taskId = optional(c.values, 'task');
      // --task alone: the task's whole change, from its base checkpoint to the workspace now.
      const from = optional(c.values, 'from') ?? (taskId !== undefined ? ((await e.taskDetail(taskId)).task.baseCheckpointId ?? undefined) : undefined);
      if (from === undefined) throw new UsageError(taskId !== undefined ? `Task ${taskId} has no base checkpoint; give --from CP.` : 'Missing --from (or --task ID: from its base checkpoint).');
      const onlyPath = optional(c.values, 'path');
      const all = await e.diff({ from, to: optional(c.values, 'to') });
      const r = onlyPath === undefined ? all : { ...all, changes: all.changes.filter((x) => x.path === onlyPath || x.path.startsWith(`${onlyPath.replace(/\/+$/, '')}/`)) };
      const human = r.changes.length
        ? r.changes.map((x) => `${x.status.padEnd(12)} ${x.path}${!x.lines ? '' : x.lines.binary ? '  (binary)' : `  +${x.lines.added} -${x.lines.removed}`}`).join('\n')
        : `No changes from ${r.from} to ${r.to}.`;
      c.out(human, r);
    },
  },
  rollback: {
    summary: 'roll the workspace back to a checkpoint, or undo the last rollback (--undo); shows what would change and applies only with --yes (or a "y" at a terminal)',
    usage: 'waypoint rollback --task ID (--to CP [--paths P,…] [--agent-only] | --undo) [--preview] [--yes]',
    options: { task: s('t'), to: s(), paths: s(), 'agent-only': b, preview: b, yes: b, undo: b, key: s() },
    async run(c) {
      const e = await c.engine();
      const taskId = required(c.values, 'task');
      const fileList = (r: RollbackResult) =>
        [
          ...r.changes.map((x) => `  ${x.action.padEnd(7)} ${x.path}${x.createdOutsideTask ? '  (not created by a step of this task: made by you or another tool; undo brings it back)' : ''}${x.agentHunksOnly ? '  (only the agent’s changes; yours in it are kept)' : ''}`),
          ...r.kept.map((k) => `  keep    ${k.path}  (${k.reason})`),
        ].join('\n') || '  (nothing)';
      if (c.values.undo) {
        if (c.values.to) throw new UsageError('Give either --to CP or --undo, not both.');
        const preview = await e.undoRollbackPreview(taskId);
        const head = `Undoing the last rollback (back to ${preview.targetCheckpointId}) would change ${plural(preview.changes.length, 'file')}${preview.restoredSteps.length ? ` and give steps ${preview.restoredSteps.join(', ')} their status back` : ''}:\n${fileList(preview)}`;
        if (c.values.preview) return c.out(head, preview);
        await confirmChange(c, head);
        const r = await e.undoRollback({ taskId, idempotencyKey: optional(c.values, 'key') });
        // An undo is not itself undone by --undo (that finds the rollback before it): going back is a rollback to the checkpoint the undo took first.
        c.out(
          `Undid the last rollback: ${plural(r.filesWritten, 'file')} written, ${r.filesRemoved} removed.${leftForYou(r)}` +
            (r.preRollbackCheckpointId ? `\nTo go back to how the files were before this undo: waypoint rollback --task ${r.taskId} --to ${r.preRollbackCheckpointId}` : ''),
          r,
        );
        return;
      }
      const asked = {
        taskId,
        checkpointId: required(c.values, 'to'),
        paths: optional(c.values, 'paths')?.split(',').filter(Boolean).map((p) => workspacePath(c.workspace, p, '--paths')),
        mode: c.values['agent-only'] ? ('agent-only' as const) : ('all' as const),
      };
      const args = { ...asked, idempotencyKey: optional(c.values, 'key') };
      const preview = await e.rollbackPreview(asked);
      const head = `Rolling back to ${args.checkpointId} would change ${plural(preview.changes.length, 'file')}${preview.abandonedSteps.length ? ` and abandon ${preview.abandonedSteps.length === 1 ? 'step' : 'steps'} ${preview.abandonedSteps.join(', ')}` : ''}:\n${fileList(preview)}`;
      if (c.values.preview) return c.out(head, preview);
      await confirmChange(c, head);
      const r = await e.rollback(args);
      c.out(
        `Rolled back to ${r.targetCheckpointId}: ${plural(r.filesWritten, 'file')} written, ${r.filesRemoved} removed.` +
          (r.merged?.length ? `\nOnly the agent’s changes were undone in: ${r.merged.join(', ')} (yours kept)` : '') +
          leftForYou(r) +
          `\nUndo with: waypoint rollback --task ${r.taskId} --undo --yes`,
        r,
      );
    },
  },
  fork: {
    summary: 'start a new task from a checkpoint of another (the workspace goes to it, undoably; the original stays as it was); shows what would change and applies only with --yes (or a "y" at a terminal)',
    usage: 'waypoint fork --checkpoint CP [--goal G] [--title T] [--plan FILE] [--agent NAME] [--key K] [--lease-ttl SECONDS] [--preview] [--yes]',
    options: { checkpoint: s('c'), goal: s('g'), title: s(), plan: s(), agent: s(), key: s(), 'lease-ttl': s(), preview: b, yes: b },
    async run(c) {
      const planFile = optional(c.values, 'plan');
      const ttl = intOption(c.values, 'lease-ttl');
      const e = await c.engine();
      const args = {
        checkpointId: required(c.values, 'checkpoint'),
        goal: optional(c.values, 'goal'),
        title: optional(c.values, 'title'),
        plan: planFile ? readPlanFile(planFile) : undefined,
        agent: optional(c.values, 'agent'),
        idempotencyKey: optional(c.values, 'key'),
        leaseTtlMs: ttl === undefined ? undefined : ttl * 1000,
        owner: owner(c.values),
      };
      const lines = (ids: string[]) => (ids.length ? ids.join(', ') : 'none');
      const describe = (r: Awaited<ReturnType<EngineApi['forkTask']>>) => {
        const list = [...r.changes.map((x) => `  ${x.action.padEnd(7)} ${x.path}`), ...r.kept.map((k) => `  keep    ${k.path}  (${k.reason})`)].join('\n') || '  (no file changes)';
        const head = r.preview
          ? `Forking from ${r.forkedFrom.checkpointId} (task ${r.forkedFrom.taskId}) would change ${plural(r.changes.length, 'file')}:`
          : `Started task ${r.taskId}, forked from task ${r.forkedFrom.taskId} at ${r.forkedFrom.checkpointId} (base checkpoint ${r.baseCheckpointId}): ${plural(r.filesWritten, 'file')} written, ${r.filesRemoved} removed:`;
        const tail = [`Inherits: ${lines(r.inherited)}`, `Left behind: ${lines(r.leftBehind)}`, `Plan: ${lines(r.plan)}`];
        if (!r.preview) tail.push(`Undo the workspace change with: waypoint rollback --task ${r.taskId} --undo`);
        return [head, list, ...tail].join('\n');
      };
      if (c.values.preview || c.values.yes !== true) {
        const preview = await e.forkTask({ ...args, preview: true });
        if (c.values.preview) return c.out(describe(preview), preview);
        await confirmChange(c, describe(preview));
      }
      const r = await e.forkTask(args);
      c.out(describe(r), r);
    },
  },
  stats: {
    summary: 'metrics: tasks by state, interruptions, retries, step durations (median, p95), checkpoints, side effects, per agent and per day',
    usage: 'waypoint stats [--task ID] [--since DATE|Nd|Nh]',
    readOnly: true,
    options: { task: s('t'), since: s() },
    async run(c) {
      const since = optional(c.values, 'since');
      const r = await (await c.engine()).stats({ taskId: optional(c.values, 'task'), since: since === undefined ? undefined : sinceOption(since) });
      c.out(statsText(r), r);
    },
  },
  storage: {
    summary: 'bytes used by checkpoints, per task (unique and shared) and in total',
    usage: 'waypoint storage',
    readOnly: true,
    options: {},
    async run(c) {
      const r = await (await c.engine()).storage();
      const mb = (n: number) => `${(n / 1e6).toFixed(2)} MB`;
      const human = [
        `Blob store: ${mb(r.totalBytes)} on disk, ${r.blobs} file blobs referenced (${mb(r.referencedBytes)}, deduplicated)`,
        ...r.tasks.map((t) => `  ${t.taskId}  ${String(t.checkpoints).padStart(4)} checkpoints  ${mb(t.uniqueBytes).padStart(10)} unique  ${mb(t.sharedBytes).padStart(10)} shared  ${t.title ?? ''}`),
      ].join('\n');
      c.out(human, r);
    },
  },
  gc: {
    summary: 'apply the retention policy and delete blobs no checkpoint needs',
    usage: 'waypoint gc [--max-per-task N] [--max-age-days D] [--max-total-mb M]',
    options: { 'max-per-task': s(), 'max-age-days': s(), 'max-total-mb': s() },
    async run(c) {
      const mbLimit = intOption(c.values, 'max-total-mb');
      const r = await (await c.engine()).gc({
        maxPerTask: intOption(c.values, 'max-per-task'),
        maxAgeDays: intOption(c.values, 'max-age-days'),
        maxTotalBytes: mbLimit === undefined ? undefined : mbLimit * 1_000_000,
      });
      c.out(`Pruned ${plural(r.pruned.length, 'checkpoint')}; deleted ${plural(r.blobsDeleted, 'blob')}, freed ${(r.bytesFreed / 1e6).toFixed(2)} MB; store now ${(r.totalBytes / 1e6).toFixed(2)} MB.`, r);
    },
  },
  'effect begin': {
    summary: 'record a side effect’s intent before running it; answers proceed / already_done / in_doubt',
    usage: 'waypoint effect begin --task ID --key K --kind KIND --description D [--args JSON] [--step ID]',
    options: { task: s('t'), key: s(), kind: s(), description: s(), args: s(), step: s() },
    async run(c) {
      const r = await (await c.engine()).beginSideEffect({
        taskId: required(c.values, 'task'),
        key: required(c.values, 'key'),
        kind: required(c.values, 'kind'),
        description: required(c.values, 'description'),
        args: jsonOption(c.values, 'args'),
        stepId: optional(c.values, 'step'),
        owner: owner(c.values),
      });
      const human = {
        proceed: `proceed: intent for '${r.key}' is recorded; run it, then: waypoint effect end --task ${r.taskId} --key ${r.key} --ok`,
        already_done: `already_done: '${r.key}' ran before; do not repeat it. Result: ${JSON.stringify(r.result ?? null)}`,
        in_doubt: `in_doubt: '${r.key}' was begun with no recorded outcome; verify whether it happened before repeating it`,
      }[r.decision];
      c.out(human, r);
    },
  },
  'effect end': {
    summary: 'record a side effect’s outcome',
    usage: 'waypoint effect end --task ID --key K (--ok [--result JSON] | --error MSG) [--by person]',
    options: { task: s('t'), key: s(), ok: b, result: s(), error: s(), by: s(), 'idempotency-key': s() },
    async run(c) {
      const ok = c.values.ok === true;
      const error = optional(c.values, 'error');
      if (ok === (error !== undefined)) throw new UsageError('Give exactly one of --ok or --error MSG.');
      const by = optional(c.values, 'by');
      if (by !== undefined && by !== 'agent' && by !== 'person') throw new UsageError("--by must be 'agent' or 'person'.");
      const r = await (await c.engine()).endSideEffect({
        taskId: required(c.values, 'task'),
        key: required(c.values, 'key'),
        ok,
        result: jsonOption(c.values, 'result'),
        error,
        by: by as 'agent' | 'person' | undefined,
        idempotencyKey: optional(c.values, 'idempotency-key'),
        owner: owner(c.values),
      });
      c.out(`Side effect '${r.key}' is ${r.state}`, r);
    },
  },
  'resume-context': {
    summary: 'print what an agent needs to continue a task (JSON with --json, else Markdown)',
    usage: 'waypoint resume-context --task ID',
    readOnly: true,
    options: { task: s('t') },
    async run(c) {
      const ctx = await (await c.engine()).resumeContext(required(c.values, 'task'));
      c.out(ctx.markdown, ctx);
    },
  },
  events: {
    summary: 'print the event log',
    usage: 'waypoint events [--task ID] [--after SEQ] [--limit N]',
    readOnly: true,
    options: { task: s('t'), after: s(), limit: s() },
    async run(c) {
      const events = await (await c.engine()).events({ taskId: optional(c.values, 'task'), afterSeq: intOption(c.values, 'after'), limit: intOption(c.values, 'limit') });
      c.out(
        events.map((e) => `${String(e.seq).padStart(6)} ${new Date(e.ts).toISOString()} ${e.type.padEnd(22)} ${e.taskId ?? ''} ${JSON.stringify(e.data)}`).join('\n') || '(no events)',
        events,
      );
    },
  },
  verify: {
    summary: 'prove the store whole: projections equal a rebuild, every checkpoint’s objects present and hashing right (--repair restores and marks, --rebuild rewrites projections)',
    usage: 'waypoint verify [--repair] [--rebuild]',
    readOnly: true,
    options: { rebuild: b, repair: b },
    async run(c) {
      const e = await c.engine();
      if (c.values.rebuild) await e.rebuild();
      const r = await e.verify({ repair: c.values.repair === true });
      const damaged = r.objects?.damaged ?? [];
      const unmarked = damaged.filter((d) => !d.marked);
      const lines: string[] = [];
      lines.push(
        r.differences.length
          ? `MISMATCH: ${r.differences.map((d) => `${d.table} (live ${d.live} rows, rebuilt ${d.rebuilt})`).join(', ')}`
          : `${r.events} events; every projection equals its rebuild from the events${c.values.rebuild ? ' (rebuilt)' : ''}`,
      );
      if (r.objects) {
        lines.push(`${plural(r.objects.checkpoints, 'checkpoint')}, ${plural(r.objects.blobs, 'object')} read and hashed${r.objects.restored ? `; restored ${r.objects.restored} from the workspace` : ''}`);
        for (const d of damaged) lines.push(`DAMAGED ${d.checkpointId}${d.taskId ? ` (task ${d.taskId})` : ''}: ${d.reason}${d.marked ? ' [marked]' : ''}`);
      }
      let failure: string | null = null;
      if (r.differences.length) failure = 'Projections differ from a rebuild; run `waypoint verify --rebuild` to repair them.';
      else if (unmarked.length) {
        failure = `${unmarked.length === 1 ? '1 checkpoint is' : `${unmarked.length} checkpoints are`} damaged (${unmarked.map((d) => d.checkpointId).join(', ')}). \`waypoint verify --repair\` stores again what this folder still holds and marks the rest unusable for good (rollbacks to them are then refused): run it once you know they were made in this folder and their content is gone everywhere, not held by a copy of it or another machine.`;
      }
      const human = `${failure ? 'FAILED' : 'ok'}: ${lines.join('\n')}`;
      if (!failure) {
        c.out(human, { ...r, rebuilt: c.values.rebuild === true });
        return;
      }
      // Exactly one JSON document either way: the report, with the refusal in it (exit 1).
      if (c.json) {
        c.out(human, { ...r, rebuilt: c.values.rebuild === true, error: { code: 'corrupt', message: failure } });
        throw new VerifyFailed(failure);
      }
      c.out(human, null);
      throw new WaypointError('corrupt', failure);
    },
  },
  ...MCP_COMMANDS,
  ...UNLOCK_COMMANDS,
  ...BACKGROUND_COMMANDS,
};

function helpText(): string {
  const names = Object.keys(COMMANDS);
  const w = Math.max(...names.map((n) => n.length));
  return [
    'waypoint — durable records of AI agent tasks',
    '',
    'Usage: waypoint <command> [options] [--workspace DIR] [--json]',
    '',
    ...names.map((n) => `  ${n.padEnd(w)}  ${COMMANDS[n].summary}`),
    '',
    'Checkpoints record files over --max-file-size-mb N (default 5; or WAYPOINT_MAX_FILE_SIZE_MB) without content,',
    'and say on stderr what they did not capture; no rollback deletes or changes those paths.',
    '',
    'Team store: --store postgresql://… (or WAYPOINT_STORE) on any command records into PostgreSQL;',
    "'waypoint tasks --all' lists every workspace's tasks there. WAYPOINT_MACHINE names this machine.",
    "'waypoint checkpoints' and 'waypoint diff' take --workspace WORKSPACE_ID (from 'tasks --all --json') to review a task of",
    'a workspace on another machine from the team store; its files are restored only on the machine that holds them.',
    '',
    'Commands that change the workspace’s files (rollback, rollback --undo, fork) show what they would change and apply',
    'only with --yes, or on a "y" at a terminal. step fail without --recoverable fails the whole task.',
    "step start --step ID refuses an id the task does not have unless --ad-hoc. 'waypoint <command> --help' shows its options.",
    '',
    PLAN_FORMAT,
    '',
    'stderr carries errors and the warnings you need; --verbose (or WAYPOINT_LOG=debug|info|warn|error) adds the engine’s log.',
    '',
    'Exit codes: 0 ok, 1 refused (reason on stderr), 2 usage.',
  ].join('\n');
}

/** Global options may come before the command words (`waypoint --workspace X task start …`). */
const GLOBAL_WITH_VALUE = new Set(['--workspace', '-w', '--lock-wait', '--owner', '--max-file-size-mb', '--store']);

function commandWords(argv: string[]): number[] {
  const words: number[] = [];
  for (let i = 0; i < argv.length && words.length < 2; i++) {
    const a = argv[i];
    if (GLOBAL_WITH_VALUE.has(a)) i++;
    else if (!a.startsWith('-')) words.push(i);
  }
  return words;
}

/** Own properties only: a command word such as `__proto__` or `constructor` must not find Object.prototype. */
function commandNamed(name: string): Command | undefined {
  return Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
}

function resolveCommand(argv: string[]): { name: string; rest: string[] } | null {
  const words = commandWords(argv);
  const pick = (idx: number[]) => ({ name: idx.map((i) => argv[i]).join(' '), rest: argv.filter((_, i) => !idx.includes(i)) });
  if (words.length === 2 && words[1] === words[0] + 1 && commandNamed(`${argv[words[0]]} ${argv[words[1]]}`)) return pick(words);
  if (words.length >= 1 && commandNamed(argv[words[0]])) return pick([words[0]]);
  return null;
}

/**
 * `--max-file-size-mb` (or WAYPOINT_MAX_FILE_SIZE_MB): files over it are recorded
 * without content (reported, never deleted by a rollback). VS Code's owner takes
 * `waypoint.maxFileSizeMB` instead.
 */
function maxFileSizeOption(values: Record<string, unknown>): number | undefined {
  const raw = optional(values, 'max-file-size-mb') ?? process.env.WAYPOINT_MAX_FILE_SIZE_MB;
  if (raw === undefined || raw === '') return undefined;
  const mb = /^\d+(\.\d+)?$/.test(raw) ? Number(raw) : NaN;
  if (!(mb > 0 && mb <= 1024)) throw new UsageError(`--max-file-size-mb must be a number of megabytes above 0 and at most 1024, not '${raw}'.`);
  return Math.round(mb * 1024 * 1024);
}

/** A reading command in a folder where nothing was ever recorded: said plainly, and no store is created. */
function noStoreHere(workspace: string, searched: boolean): WaypointError {
  const where = searched ? `${workspace} or any folder above it (up to its repository's root)` : workspace;
  return new WaypointError('not_found', `There is no Waypoint store in ${where}: nothing has been recorded here. Run the command in your workspace (or give --workspace DIR); 'waypoint task start' or 'waypoint init' creates a store.`, { workspace });
}

/** The workspace argv names (or the current directory), for an error message. */
function workspaceOf(argv: string[]): string {
  const i = argv.findIndex((a) => a === '--workspace' || a === '-w');
  return path.resolve(i >= 0 && argv[i + 1] !== undefined ? argv[i + 1] : process.cwd());
}

export async function main(argv: string[], io = { stdout: process.stdout, stderr: process.stderr }): Promise<number> {
  const wantsJson = argv.includes('--json');
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') {
    io.stdout.write(helpText() + '\n');
    return argv.length === 0 ? 2 : 0;
  }
  const found = resolveCommand(argv);
  let engine: Engine | undefined;
  let api: EngineApi | undefined;
  /** Where the command ran, once known (for the team store hint on an unknown task). */
  let teamAt: { workspace: string; teamStore: string | undefined } | undefined;
  try {
    if (!found) throw new UsageError(unknownCommand(commandWords(argv).map((i) => argv[i]), Object.keys(COMMANDS)));
    const cmd = commandNamed(found.name)!;
    const values = parse(found.rest, cmd.options);
    if (values.help) {
      io.stdout.write(`${cmd.usage}\n\n${cmd.summary}\n`);
      return 0;
    }
    const teamStore = teamStoreOf(values);
    const workspaceArg = optional(values, 'workspace');
    // `--workspace <id>`: a workspace of the team store that is not a folder here. Only
    // reading commands take one; the rest need its files, which only its machine holds.
    const workspaceId = isWorkspaceIdArg(workspaceArg) ? workspaceArg : undefined;
    if (workspaceId !== undefined && (!cmd.readsTeamStore || !teamStore)) throw await notOnThisMachine(teamStore, workspaceId, found.name);
    // With no --workspace, the workspace is found as git finds its repository (see findWorkspace).
    const workspace = workspaceId !== undefined ? process.cwd() : workspaceArg !== undefined ? path.resolve(workspaceArg) : findWorkspace(process.cwd());
    if (!fs.existsSync(workspace) || !fs.statSync(workspace).isDirectory()) {
      throw new WaypointError('invalid_input', `Workspace ${workspace} is not a directory.`);
    }
    teamAt = { workspace, teamStore };
    const lockWait = intOption(values, 'lock-wait');
    const maxFileBytes = maxFileSizeOption(values);
    const log = cliLogger(values.verbose === true, (line) => io.stderr.write(`waypoint: ${displayText(line, { multiline: true })}\n`));
    const ctx: Ctx = {
      values,
      json: values.json === true,
      workspace,
      teamStore,
      workspaceId,
      engine: async () => {
        if (workspaceId !== undefined) throw await notOnThisMachine(teamStore, workspaceId, found.name);
        if (cmd.readOnly && !fs.existsSync(storeDirOf(workspace))) throw noStoreHere(workspace, workspaceArg === undefined);
        const resolve = (retry: boolean): Promise<EngineApi> =>
          resolveStore<EngineApi>({
            workspace,
            log,
            waitMs: lockWait ?? 5000,
            maxFileBytes,
            teamStore,
            // Nobody owns the store: relay to the background owner another call is starting,
            // if one is; else this call owns the store, and starts one when it is done (below).
            ...awaitStartingOwnerOf(workspace, teamStore),
            serving: async (d, lock, claim) => {
              if (maxFileBytes !== undefined) io.stderr.write(`waypoint: note: --max-file-size-mb applies when this command owns the store; the store's owner (${d.url}) applies its own limit.\n`);
              // Ask a cheap question first, with a short timeout: a stopped, dying or dead owner
              // is found out before any real call is sent, and resolveStore looks again (taking
              // over a dead one) or fails naming it.
              await remoteApi(d, { timeoutMs: PROBE_TIMEOUT_MS, headers: claim }).info();
              const remote = remoteApi(d, { owner: describeOwner(lock), timeoutMs: rpcTimeoutMs(), headers: claim });
              // An owner that went away after the probe never received the call: look again once.
              return retry ? retryUndelivered(remote, () => resolve(false).then((a) => (api = a))) : remote;
            },
            own: async (e) => {
              engine = e;
              return localApi(e);
            },
          });
        api ??= await resolve(true);
        return api;
      },
      out: (human, json) => {
        // Text output carries recorded text (goals, titles, errors, file names): escaped, so none of it acts on the terminal.
        io.stdout.write((values.json ? JSON.stringify(json, null, 2) : displayText(human, { multiline: true })) + '\n');
        // A checkpoint that did not capture everything says so on stderr, --json or not (the JSON has the list).
        const warning = notCapturedWarning(json);
        if (warning) io.stderr.write(`waypoint: ${warning}\n`);
      },
    };
    await cmd.run(ctx);
    return 0;
  } catch (e) {
    const usage = e instanceof UsageError;
    const code = usage ? 'usage' : isWaypointError(e) ? e.code : 'internal';
    // A full disk met outside the engine's own wording still says where.
    let message = !isWaypointError(e) && isNoSpace(e) ? `No space left on the disk holding ${workspaceOf(argv)}: ${errorMessage(e)}. Free some space and try again.` : errorMessage(e);
    const hint = isWaypointError(e) && e.code === 'not_found' && /^Unknown task\b/.test(message) && teamAt ? teamStoreHint(teamAt.workspace, teamAt.teamStore) : null;
    if (hint) message = `${message} ${hint}`;
    io.stderr.write(`waypoint: ${displayText(message, { multiline: true })}\n`);
    if (usage && found) io.stderr.write(`usage: ${commandNamed(found.name)!.usage}\n`);
    // A refusal an agent acts on (when to retry, what the person must decide) carries its details.
    const details = isWaypointError(e) && (e.code === 'retry_later' || e.code === 'held' || e.code === 'limit') && e.details ? { details: e.details } : {};
    if (wantsJson && !(e instanceof VerifyFailed)) io.stdout.write(JSON.stringify({ error: { code, message, ...details } }) + '\n');
    return usage ? 2 : 1;
  } finally {
    if (engine) {
      // This call owned the store: a background owner takes it from here. Started before the
      // close, so its own start (Node, its modules) overlaps the close; it waits for the lock.
      await closeStartingOwner(engine, teamAt?.teamStore).catch((e) => io.stderr.write(`waypoint: closing the store failed: ${errorMessage(e)}\n`));
    }
  }
}

/**
 * Runs the CLI as a process: prints, exits with the command's code. Invariant 8: no door
 * exits 0 having done nothing — if the event loop drains while the command is still
 * pending (a promise nothing will ever settle), say so and fail.
 * `hookInput` is a hook event the fast path already read from stdin.
 */
export function runAsCli(argv: string[], o: { hookInput?: string } = {}): void {
  if (o.hookInput !== undefined) usePrereadHookInput(o.hookInput);
  let settled = false;
  process.once('beforeExit', () => {
    if (settled) return;
    process.stderr.write('waypoint: the command stopped before it finished (nothing was left to wait for); its outcome is unknown.\n');
    process.exit(1);
  });
  main(argv).then(
    (code) => {
      settled = true;
      exitFlushed(code);
    },
    (e) => {
      process.stderr.write(`waypoint: ${errorMessage(e)}\n`);
      exitFlushed(1);
    },
  );
}

/**
 * Exits once stdout and stderr have handed everything written to the OS. Writes to a
 * pipe are asynchronous in Node, so `process.exit` right after a large write (say
 * `tasks --all --json | jq` over 10,000 tasks) cut the output off mid-JSON; a write's
 * callback runs only after every earlier write on that stream went out.
 */
function exitFlushed(code: number): void {
  let pending = 2;
  const done = (): void => {
    if (--pending === 0) process.exit(code);
  };
  for (const s of [process.stdout, process.stderr]) {
    if (s.writableLength === 0 || s.destroyed) done();
    else s.write('', () => done());
  }
}

if (require.main === module) runAsCli(process.argv.slice(2));
