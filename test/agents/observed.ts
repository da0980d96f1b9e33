import fs from 'node:fs';
import path from 'node:path';
import type { RecordedRequest } from './scriptedServer';
import { repoRoot } from './install';

/**
 * What a real agent showed in a run: the tools it offered the model (its own list, and the
 * deferred ones it names for ToolSearch) and the hook events it sent with their fields.
 * Written to test-output/agents/<agent>-<version>.json for the drift check; with
 * WAYPOINT_RECORD_FIXTURES=1 the hook payloads also become the fixture the unit tests
 * replay (test/fixtures/hooks-real/<agent>/session.jsonl, machine paths as ${VARS}).
 */
export interface Observed {
  agent: string;
  version: string;
  tools: string[];
  deferredTools: string[];
  hookEvents: Record<string, string[]>;
}

/** Cline names its events only by their data key (its `hookName` is its own internal name). */
const CLINE_EVENT_KEYS: Record<string, string> = { taskStart: 'TaskStart', taskResume: 'TaskResume', taskCancel: 'TaskCancel', taskComplete: 'TaskComplete', userPromptSubmit: 'UserPromptSubmit', preToolUse: 'PreToolUse', postToolUse: 'PostToolUse', preCompact: 'PreCompact' };
const clineEventOf = (p: Record<string, unknown>): string | undefined => {
  const key = Object.keys(p).find((k) => Object.hasOwn(CLINE_EVENT_KEYS, k));
  return key ? CLINE_EVENT_KEYS[key] : undefined;
};

export function deferredToolsIn(requests: readonly RecordedRequest[]): string[] {
  const names = new Set<string>();
  for (const q of requests) {
    const text = JSON.stringify((q.body as { messages?: unknown }).messages ?? '');
    for (const m of text.matchAll(/load tool schemas before calling them:((?:\\n[A-Za-z0-9_]+)+)/g)) for (const n of m[1].split('\\n')) if (n) names.add(n);
  }
  return [...names].sort();
}

const keysOf = (v: unknown, prefix: string) => (v && typeof v === 'object' && !Array.isArray(v) ? Object.keys(v).map((k) => `${prefix}${k}`) : []);

/**
 * A payload's event name and fields. opencode's plugin hands on `{hook, directory, input,
 * output}` (an event as `{hook: "event", event: {type, properties}}`): named by the hook or
 * `event <type>`, its fields those of input, output and the event's properties.
 */
function nameAndFields(p: Record<string, unknown>): [string, string[]] {
  if (typeof p.hook === 'string') {
    const event = p.event as { type?: string; properties?: unknown } | undefined;
    if (p.hook === 'event') return [`event ${String(event?.type)}`, keysOf(event?.properties, 'properties.')];
    return [p.hook, [...keysOf(p.input, 'input.'), ...keysOf(p.output, 'output.')]];
  }
  return [String(p.hook_event_name ?? p.hookEventName ?? clineEventOf(p) ?? '?'), Object.keys(p)];
}

export function recordObserved(agent: string, version: string, requests: readonly RecordedRequest[], captureFile: string, vars: Record<string, string>): Observed {
  const lines = fs.existsSync(captureFile) ? fs.readFileSync(captureFile, 'utf8').split('\n').filter(Boolean) : [];
  const hookEvents: Record<string, Set<string>> = {};
  for (const line of lines) {
    const p = JSON.parse(line) as Record<string, unknown>;
    const [name, keys] = nameAndFields(p);
    const fields = (hookEvents[name] ??= new Set());
    for (const k of keys) fields.add(k);
  }
  const observed: Observed = {
    agent,
    version,
    tools: [...new Set(requests.filter((q) => q.main).flatMap((q) => q.tools))].sort(),
    deferredTools: deferredToolsIn(requests),
    hookEvents: Object.fromEntries(Object.keys(hookEvents).sort().map((k) => [k, [...hookEvents[k]].sort()])),
  };
  const out = path.join(repoRoot, 'test-output', 'agents', `${agent}-${version}.json`);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, JSON.stringify(observed, null, 2) + '\n');
  if (process.env.WAYPOINT_RECORD_FIXTURES === '1') {
    // Longest first, so a path inside another is replaced by its own name.
    const subs = Object.entries(vars).sort(([, a], [, b]) => b.length - a.length);
    const templ = (s: string) => subs.reduce((acc, [k, v]) => acc.replaceAll(v, `\${${k}}`), s);
    const dir = path.join(repoRoot, 'test', 'fixtures', 'hooks-real', agent);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'session.jsonl'), lines.map(templ).join('\n') + '\n');
    fs.writeFileSync(path.join(dir, 'observed.json'), JSON.stringify(observed, null, 2) + '\n');
  }
  return observed;
}
