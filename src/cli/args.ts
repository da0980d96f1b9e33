import { parseArgs, type ParseArgsConfig } from 'node:util';
import { didYouMean } from './suggest';

import { UsageError } from './usageError';

/** Argument parsing for `waypoint`, on Node's own util.parseArgs. */
export { UsageError };

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
  /** The engine's log lines on stderr (WAYPOINT_LOG=debug|info|warn|error sets the level). */
  verbose: { type: 'boolean' },
};

export function parse(argv: string[], options: OptionSpec): Record<string, string | boolean | undefined> {
  try {
    const { values, positionals } = parseArgs({ args: argv, options: { ...COMMON_OPTIONS, ...options }, allowPositionals: true, strict: true });
    if (positionals.length) throw new UsageError(`Unexpected argument '${positionals[0]}'.`);
    return values as Record<string, string | boolean | undefined>;
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError(unknownOption(e, { ...COMMON_OPTIONS, ...options }) ?? (e as Error).message);
  }
}

/** parseArgs' own words for an unknown option name a `--` workaround no one wants: say what is meant. */
function unknownOption(e: unknown, options: OptionSpec): string | undefined {
  if ((e as { code?: string }).code !== 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return undefined;
  const m = /Unknown option '(-{1,2}[^']*)'/.exec((e as Error).message);
  if (!m) return undefined;
  const given = m[1];
  const name = given.replace(/^-+/, '').split('=')[0];
  const valid = Object.keys(options).filter((o) => o !== 'help');
  return `unknown option ${given}${didYouMean(name, valid, (o) => `--${o}`)} (valid here: ${valid.map((o) => `--${o}`).join(', ')})`;
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
