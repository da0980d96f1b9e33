import * as fs from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';

/**
 * Shared pieces of the fuzz tests (test/unit/fuzz.*.test.ts): hostile value
 * generators, bounded run counts, and a sentinel directory whose full listing
 * proves nothing was written outside the workspace it holds.
 *
 * Runs are bounded so `npm test` stays fast; WAYPOINT_FUZZ_RUNS multiplies them
 * for a longer local hunt, and WAYPOINT_FUZZ_SEED replays a printed failure.
 */
export function fuzzParams<T>(runs: number): fc.Parameters<T> {
  const scale = Number(process.env.WAYPOINT_FUZZ_RUNS ?? 1);
  const seed = process.env.WAYPOINT_FUZZ_SEED;
  return {
    numRuns: Math.max(1, Math.round(runs * (Number.isFinite(scale) && scale > 0 ? scale : 1))),
    ...(seed !== undefined ? { seed: Number(seed) } : {}),
    // A failing case is printed whole, so it can be read (and pasted into a test) as is.
    verbose: 1,
  };
}

/** Keys that pollute prototypes when an object is built by assignment. */
export const PROTO_KEYS = ['__proto__', 'constructor', 'prototype'] as const;

/** An object with an own `__proto__` key, as JSON.parse makes it (what a wire delivers). */
export function protoObject(key: (typeof PROTO_KEYS)[number] = '__proto__', inner: unknown = { polluted: 'yes' }): Record<string, unknown> {
  return JSON.parse(`{${JSON.stringify(key)}:${JSON.stringify(inner)},"x":1}`) as Record<string, unknown>;
}

/** `depth` nested arrays or objects around a value. */
export function nested(depth: number, kind: 'array' | 'object' = 'array'): unknown {
  let v: unknown = 'bottom';
  for (let i = 0; i < depth; i++) v = kind === 'array' ? [v] : { d: v };
  return v;
}

/** Strings an attacker or a broken agent sends: traversal, NUL, controls, RTL marks, huge. */
export const hostileString: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 20 }) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '',
      ' ',
      '__proto__',
      'constructor',
      'prototype',
      '../../etc/passwd',
      '/etc/passwd',
      'a\u0000b',
      'C:\\Windows\\x',
      '\u202eevil',
      'cafe\u0301',
      '<img src=x onerror=alert(1)>',
      '${process.exit(1)}',
      '%s%s%s%n',
      't_',
      'c_',
      '-',
      '--help',
    ),
  },
  { weight: 1, arbitrary: fc.integer({ min: 200, max: 300_000 }).map((n) => 'x'.repeat(n)) },
);

/** Any JSON a client may send in one argument, hostile shapes included. */
export const hostileJson: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 3, arbitrary: hostileString },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 3_000 }).map((d) => nested(d)) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 3_000 }).map((d) => nested(d, 'object')) },
  { weight: 1, arbitrary: fc.constantFrom(...PROTO_KEYS).map((k) => protoObject(k)) },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, 0, -1, 1.5, 2 ** 53, -(2 ** 60), 1e308) },
);

/** Every file and directory under `dir` with its size and mode, one line each, sorted. */
export function listingOf(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string, rel: string) => {
    for (const name of fs.readdirSync(d).sort()) {
      const abs = path.join(d, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = fs.lstatSync(abs);
      out.push(`${r} ${st.isDirectory() ? 'd' : st.isSymbolicLink() ? 'l' : 'f'} ${st.isDirectory() ? '' : st.size} ${(st.mode & 0o7777).toString(8)}`);
      if (st.isDirectory()) walk(abs, r);
    }
  };
  walk(dir, '');
  return out;
}

/** The listing of `parent` minus the subtree `inside` (the workspace that may change). */
export function listingOutside(parent: string, inside: string): string[] {
  const rel = path.relative(parent, inside);
  return listingOf(parent).filter((l) => !(l.startsWith(`${rel}/`) || l.startsWith(`${rel} `)));
}

/** A message a person can read: no stack frames, no "[object Object]", not empty. */
export function assertReadable(message: string, context: string): void {
  if (!message.trim()) throw new Error(`${context}: empty error message`);
  if (/\n\s+at .+\(.*:\d+:\d+\)|\n\s+at [^\s]+:\d+:\d+/.test(message)) throw new Error(`${context}: error message carries a stack trace:\n${message}`);
  if (message.includes('[object Object]')) throw new Error(`${context}: error message says [object Object]: ${message}`);
}

/** Throws when anything reached Object.prototype (prototype pollution). */
export function assertNoPollution(context: string): void {
  const probe = {} as Record<string, unknown>;
  for (const k of ['polluted', 'x', 'd']) {
    if (probe[k] !== undefined) throw new Error(`${context}: Object.prototype.${k} is ${String(probe[k])} (prototype pollution)`);
  }
  if (Object.getOwnPropertyNames(Object.prototype).length !== BASELINE_PROTO_KEYS) throw new Error(`${context}: Object.prototype gained a property`);
}
const BASELINE_PROTO_KEYS = Object.getOwnPropertyNames(Object.prototype).length;
