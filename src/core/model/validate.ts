import { z } from 'zod';
import { WaypointError } from './errors';

/**
 * Parses input with a zod schema and turns a failure into one readable sentence
 * per problem ("plan[2].id: may hold only letters…"), so every surface shows the
 * same clear refusal.
 */
export function parseInput<S extends z.ZodType>(schema: S, value: unknown, what: string): z.infer<S> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  throw new WaypointError('invalid_input', `Invalid ${what}: ${formatZodError(r.error)}`, {
    issues: r.error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message })),
  });
}

export function formatZodError(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((i) => {
      const where = i.path.length ? i.path.map((p) => (typeof p === 'number' ? `[${p}]` : String(p))).join('.').replace(/\.\[/g, '[') : 'value';
      return `${where}: ${i.message}`;
    })
    .join('; ') + (error.issues.length > 5 ? `; and ${error.issues.length - 5} more` : '');
}

/** JSON payloads from agents are bounded so a single call cannot bloat the journal. */
export const MAX_JSON_BYTES = 256 * 1024;

export function boundedJson(value: unknown, what: string, max = MAX_JSON_BYTES): unknown {
  if (value === undefined) return null;
  let text: string;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    throw new WaypointError('invalid_input', `Invalid ${what}: not serialisable as JSON (${(e as Error).message}).`);
  }
  if (text === undefined) return null;
  if (Buffer.byteLength(text) > max) {
    throw new WaypointError('invalid_input', `Invalid ${what}: ${Buffer.byteLength(text)} bytes of JSON, at most ${max} allowed.`);
  }
  // Round-trip so prototype keys such as __proto__ become plain data, never prototypes.
  return JSON.parse(text);
}

/**
 * Free-form JSON from agents (step inputs and outputs, side-effect arguments and
 * results) nests at most this deep. Real payloads stay far below it; 4,000-deep
 * arguments were accepted before and made `resume-context --json` 81 MB, since
 * every level of a pretty-printed document indents every line below it.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * Whether `value` nests arrays/objects more than `limit` deep. Iterative, and stops
 * at the first path past the limit, so a hostile value 100,000 deep costs nothing
 * and cannot overflow the stack.
 */
export function nestsDeeperThan(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  const seen = new Set<object>();
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth + 1 > limit) return true;
    // A cycle is not JSON (the size check reports it); do not walk it forever.
    if (seen.has(v)) continue;
    seen.add(v);
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
  }
  return false;
}

/**
 * The zod schema of free-form agent JSON at the door: at most MAX_JSON_DEPTH deep and
 * MAX_JSON_BYTES serialised, refused as `invalid_input` (through parseInput) before
 * anything is recorded. Events keep accepting any JSON (`JsonValue`), so a journal
 * written before these limits still replays.
 */
export const FreeJson = z.unknown().superRefine((v, ctx) => {
  if (v === undefined) return;
  if (nestsDeeperThan(v, MAX_JSON_DEPTH)) {
    ctx.addIssue({ code: 'custom', message: `nests more than ${MAX_JSON_DEPTH} levels of arrays or objects` });
    return;
  }
  let text: string | undefined;
  try {
    text = JSON.stringify(v);
  } catch (e) {
    ctx.addIssue({ code: 'custom', message: `is not serialisable as JSON (${(e as Error).message})` });
    return;
  }
  const bytes = text === undefined ? 0 : Buffer.byteLength(text);
  if (bytes > MAX_JSON_BYTES) ctx.addIssue({ code: 'custom', message: `is ${bytes} bytes of JSON, at most ${MAX_JSON_BYTES} allowed` });
});
