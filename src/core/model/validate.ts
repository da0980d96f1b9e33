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
