import { parseArgs, type ParseArgsConfig } from 'node:util';

/**
 * Argument parsing for `waypoint`, on Node's own util.parseArgs. A usage error is
 * its own class so the CLI can exit 2 for it and 1 for refusals.
 */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export type OptionSpec = NonNullable<ParseArgsConfig['options']>;

export const COMMON_OPTIONS: OptionSpec = {
  workspace: { type: 'string', short: 'w' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  'lock-wait': { type: 'string' },
  owner: { type: 'string' },
  'max-file-size-mb': { type: 'string' },
  /** The team store (postgresql://…); WAYPOINT_STORE when absent. */
  store: { type: 'string' },
};

export function parse(argv: string[], options: OptionSpec): Record<string, string | boolean | undefined> {
  try {
    const { values, positionals } = parseArgs({ args: argv, options: { ...COMMON_OPTIONS, ...options }, allowPositionals: true, strict: true });
    if (positionals.length) throw new UsageError(`Unexpected argument '${positionals[0]}'.`);
    return values as Record<string, string | boolean | undefined>;
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError((e as Error).message);
  }
}

export function required(values: Record<string, unknown>, name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v.length === 0) throw new UsageError(`Missing --${name}.`);
  return v;
}

export function optional(values: Record<string, unknown>, name: string): string | undefined {
  const v = values[name];
  return typeof v === 'string' ? v : undefined;
}

/** Parses a JSON option, refusing (not a usage error: the value is bad input) with the option's name. */
export function jsonOption(values: Record<string, unknown>, name: string): unknown {
  const v = optional(values, name);
  if (v === undefined) return undefined;
  try {
    return JSON.parse(v);
  } catch (e) {
    throw new UsageError(`--${name} is not valid JSON: ${(e as Error).message}`);
  }
}

export function intOption(values: Record<string, unknown>, name: string): number | undefined {
  const v = optional(values, name);
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new UsageError(`--${name} must be a whole number, not '${v}'.`);
  // Past 2^53 a number is no longer exact, and SQLite refuses it as a datatype mismatch.
  if (!Number.isSafeInteger(Number(v))) throw new UsageError(`--${name} must be at most ${Number.MAX_SAFE_INTEGER}, not ${v}.`);
  return Number(v);
}
