import { z } from 'zod';
import { displayText } from '../../model/displayText';

/**
 * Alerts the team store sends to everyone connected to it (NOTIFY `waypoint_alerts`),
 * and the one decision of what a person is told about them. Pure: the sweeper builds
 * the payload, the editor's thin listener shows what `alertNotice` returns.
 *
 * Anyone with access to the database may NOTIFY the channel, so a payload is input like
 * any other: parsed with zod, bounded, and shown only through `alertNotice`, which
 * escapes what it quotes (control characters and bidi overrides, as all recorded text).
 */

export const ALERT_CHANNEL = 'waypoint_alerts';

/** NOTIFY payloads must stay under 8,000 bytes: each field is cut to a bound well inside it. */
const BOUNDS = { title: 200, path: 600, machine: 200, reason: 400, owner: 200 } as const;

export const TeamAlert = z
  .object({
    kind: z.literal('task.interrupted'),
    /** workspace id, machine and folder of the task */
    w: z.string().min(1).max(200),
    machine: z.string().max(BOUNDS.machine),
    path: z.string().max(BOUNDS.path),
    task: z.string().min(1).max(200),
    title: z.string().max(BOUNDS.title),
    reason: z.string().max(BOUNDS.reason),
    /** the expired lease's holder (an agent session, a CLI) */
    owner: z.string().max(BOUNDS.owner).nullable(),
    /** when the sweep interrupted it, by the server's clock (ms) */
    at: z.number().int().nonnegative(),
    /** who swept: machine and process */
    by: z.string().max(200),
  })
  .strict();
export type TeamAlert = z.infer<typeof TeamAlert>;

const cut = (s: string, n: number): string => (s.length <= n ? s : s.slice(0, n - 1) + '…');

/** The payload for a swept task, each field cut to its bound. */
export function interruptedAlert(a: Omit<TeamAlert, 'kind'>): string {
  const alert: TeamAlert = {
    kind: 'task.interrupted',
    w: a.w,
    machine: cut(a.machine, BOUNDS.machine),
    path: cut(a.path, BOUNDS.path),
    task: a.task,
    title: cut(a.title, BOUNDS.title),
    reason: cut(a.reason, BOUNDS.reason),
    owner: a.owner === null ? null : cut(a.owner, BOUNDS.owner),
    at: a.at,
    by: cut(a.by, 200),
  };
  return JSON.stringify(alert);
}

/** A NOTIFY payload as an alert, or null when it is not one (malformed, unknown kind, out of bounds). */
export function parseTeamAlert(payload: string | undefined): TeamAlert | null {
  if (!payload || payload.length > 8000) return null;
  try {
    const r = TeamAlert.safeParse(JSON.parse(payload));
    return r.success ? r.data : null;
  } catch {
    return null;
  }
}

export interface AlertContext {
  /** The workspace ids this window records into the team store (its own tasks show in its Tasks view anyway). */
  ownWorkspaces: ReadonlySet<string>;
  /** Alerts already shown (`w/task/at`), so a repeated NOTIFY is told once. */
  shown: Set<string>;
  /** The person turned team alerts off. */
  muted: boolean;
  /** The folder's name from its path (the last segment), for the message. */
  folderName?: (path: string) => string;
}

export interface AlertNotice {
  severity: 'warning';
  message: string;
  /** What the notification's button shows the task in. */
  taskId: string;
  workspaceId: string;
  /** The window's own workspace: reveal in the Tasks view rather than the Team Store view. */
  own: boolean;
}

const lastSegment = (p: string): string => {
  const parts = p.split(/[\\/]+/).filter(Boolean);
  return parts[parts.length - 1] ?? p;
};

/**
 * What a person is told about an alert, or null for nothing: muted, or told already.
 * The words say which task, on which machine and folder, and that its agent stopped
 * answering (the lease ran out); the reason's owner id and UTC stamp stay in the record.
 */
export function alertNotice(a: TeamAlert, ctx: AlertContext): AlertNotice | null {
  if (ctx.muted) return null;
  const id = `${a.w}/${a.task}/${a.at}`;
  if (ctx.shown.has(id)) return null;
  ctx.shown.add(id);
  // A long-lived window sees many alerts: remember a bounded number of them.
  if (ctx.shown.size > 1000) ctx.shown.delete(ctx.shown.values().next().value as string);
  const own = ctx.ownWorkspaces.has(a.w);
  const title = displayText(a.title.trim() || a.task);
  const folder = displayText((ctx.folderName ?? lastSegment)(a.path));
  const machine = displayText(a.machine);
  const where = own ? `in this workspace (${folder})` : `on ${machine} (${folder})`;
  return {
    severity: 'warning',
    message: `Task "${title}" ${where} was interrupted: its agent stopped answering.`,
    taskId: a.task,
    workspaceId: a.w,
    own,
  };
}
