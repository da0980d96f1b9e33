import * as fs from 'node:fs';
import * as path from 'node:path';
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { writeFileAtomicSync } from '../core/store/fsutil';
import { STORE_DIR_MODE, STORE_FILE_MODE } from '../core/store/storeDir';
import { WaypointError } from '../core/model/errors';
import { readRegularSync } from '../core/snapshot/noBlockRead';

/**
 * What the recorder remembers of one agent session between hook processes, in
 * `.waypoint/hooks/<agent>-<session>.json`: the task it drives, the turn under way
 * and the tool calls already seen (so a hook delivered twice changes nothing). The
 * store holds the facts; this holds only how to find them again.
 */
const Counts = z.strictObject({ edit: z.number().int().nonnegative(), shell: z.number().int().nonnegative(), todo: z.number().int().nonnegative(), other: z.number().int().nonnegative() });
export type ToolCounts = z.infer<typeof Counts>;
export const zeroCounts = (): ToolCounts => ({ edit: 0, shell: 0, todo: 0, other: 0 });

const Turn = z.strictObject({
  n: z.number().int().positive(),
  prompt: z.string().max(4000),
  /** The ad hoc step holding this turn's work while no todo item is in progress. */
  stepId: z.string().nullable(),
  tools: Counts,
  compactions: z.number().int().nonnegative(),
  startedAt: z.number().int(),
  /** The agent's answer when it reported one before the stop. */
  lastMessage: z.string().max(4000).nullable().optional(),
});
export type TurnState = z.infer<typeof Turn>;

const OpenCall = z.strictObject({ stepId: z.string(), kind: z.enum(['edit', 'shell']) });

const SessionState = z.strictObject({
  v: z.literal(2),
  sessionId: z.string(),
  taskId: z.string().nullable(),
  generation: z.number().int().nonnegative(),
  /** Digests of prompt events already handled. */
  seenPrompts: z.array(z.string()).max(200),
  /** `pre:<id>` / `post:<id>` of tool calls already handled. */
  seenCalls: z.array(z.string()).max(1000),
  /** Tool calls between their before and after hooks: the step their work belongs to. */
  open: z.record(z.string(), OpenCall),
  turns: z.number().int().nonnegative(),
  turn: Turn.nullable(),
  /** Compactions seen while no turn was under way, counted into the next one. */
  pendingCompactions: z.number().int().nonnegative(),
  /**
   * The plan of an agent that keeps it item by item (Claude Code's Tasks): each item by the
   * agent's id, so a later update naming only the id finds its words. Absent until one is seen.
   */
  planItems: z
    .array(z.strictObject({ id: z.string().max(200), content: z.string().max(2000), status: z.enum(['pending', 'in_progress', 'completed', 'cancelled']) }))
    .max(500)
    .optional(),
});
export type SessionState = z.infer<typeof SessionState>;

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

export function freshSession(sessionId: string): SessionState {
  return { v: 2, sessionId, taskId: null, generation: 0, seenPrompts: [], seenCalls: [], open: {}, turns: 0, turn: null, pendingCompactions: 0 };
}

export class SessionFile {
  readonly file: string;
  constructor(storeDir: string, agent: string, sessionId: string) {
    const name = /^[A-Za-z0-9_-]{1,100}$/.test(sessionId) ? sessionId : sha(sessionId).slice(0, 32);
    this.file = path.join(storeDir, 'hooks', `${agent}-${name}.json`);
  }
  /** A missing or damaged file is a fresh session: the task is found again by its idempotency key. */
  read(sessionId: string): SessionState {
    try {
      // Not readFileSync: a session file swapped for a FIFO must not hang the hook (read as missing).
      const s = SessionState.parse(JSON.parse(readRegularSync(this.file)?.bytes.toString('utf8') ?? ''));
      return s.sessionId === sessionId ? s : freshSession(sessionId);
    } catch {
      return freshSession(sessionId);
    }
  }
  /** Private like the rest of the store (0700 directory, 0600 file), whatever the umask: it names the person's prompts. */
  write(s: SessionState): void {
    const dir = path.dirname(this.file);
    fs.mkdirSync(dir, { recursive: true, mode: STORE_DIR_MODE });
    const st = fs.lstatSync(dir);
    if (!st.isDirectory()) throw new WaypointError('unsafe_path', `Refusing to write hook state: ${dir} is not a directory (a symbolic link is never followed).`, { path: dir });
    // An older version made it 0755: tightened when it is ours.
    if (st.mode & 0o077 && (process.getuid === undefined || st.uid === process.getuid())) fs.chmodSync(dir, STORE_DIR_MODE);
    writeFileAtomicSync(this.file, JSON.stringify(s), STORE_FILE_MODE);
  }
}

export function remember(list: readonly string[], item: string, max: number): string[] {
  return [...list, item].slice(-max);
}
