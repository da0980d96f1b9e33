// `npm run agents:drift`: installs the newest release of each agent the real-agent suite
// pins (every entry of test/agents/versions.json), runs the suite once against all of
// them, and reports the tool names and hook events that are new or gone since the
// pinned version (from what the scripted server and the capture hook recorded:
// test-output/agents/<agent>-<version>.json against the fixture's observed.json).
// Exit 1 when the suite fails on the newest versions or an agent could not be checked;
// drift alone is a report (docs/agents.md keeps the dated findings).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ensureInstalled, pins, repoRoot, type AgentName } from '../test/agents/install';
import type { Observed } from '../test/agents/observed';

function diff(label: string, before: readonly string[], after: readonly string[]): string[] {
  const added = after.filter((x) => !before.includes(x));
  const gone = before.filter((x) => !after.includes(x));
  return [...(added.length ? [`  ${label} new: ${added.join(', ')}`] : []), ...(gone.length ? [`  ${label} gone: ${gone.join(', ')}`] : [])];
}

/** The registry's `latest` release of a package, or an error naming the package and npm's reason. */
function newestVersion(pkg: string): string {
  const r = spawnSync('npm', ['view', pkg, 'version'], { encoding: 'utf8' });
  const v = (r.stdout ?? '').trim().split('\n').pop()?.trim() ?? '';
  if (r.status !== 0 || !/^\d+\.\d+\.\d+/.test(v)) throw new Error(`npm view ${pkg} version failed (${r.status ?? r.signal}): ${(r.stderr || r.stdout || '').trim().split('\n').slice(-3).join(' ')}`);
  return v;
}

/** The environment variable that makes the suite run `agent` at another version (see test/agents/install.ts). */
const versionVar = (agent: string) => `WAYPOINT_AGENT_VERSION_${agent.replace(/-/g, '_').toUpperCase()}`;
const observedFile = (agent: string, version: string) => path.join(repoRoot, 'test-output', 'agents', `${agent}-${version}.json`);

let failed = false;
const newest = new Map<AgentName, string>();
for (const [agent, pin] of Object.entries(pins()) as [AgentName, { package: string; version: string }][]) {
  try {
    const latest = newestVersion(pin.package);
    process.stdout.write(`=== ${agent} (${pin.package}): pinned ${pin.version}, newest ${latest}\n`);
    ensureInstalled(agent, latest);
    // A record left by an earlier run would pass for this run's if the suite stopped before writing one.
    fs.rmSync(observedFile(agent, latest), { force: true });
    newest.set(agent, latest);
  } catch (e) {
    failed = true;
    process.stdout.write(`${agent}: NOT CHECKED: ${(e as Error).message}\n`);
  }
}

if (newest.size) {
  // One run with every agent at its newest release: the suite's cost once, not once per agent.
  const env = { ...process.env, ...Object.fromEntries([...newest].map(([agent, v]) => [versionVar(agent), v])) };
  const r = spawnSync('npm', ['run', '--silent', 'test:agents'], { cwd: repoRoot, env, stdio: 'inherit' });
  if (r.status !== 0) {
    failed = true;
    process.stdout.write(`\nthe suite FAILED against ${[...newest].map(([a, v]) => `${a} ${v}`).join(', ')} (the failures are listed above)\n`);
  }
}

process.stdout.write('\n=== drift since the recorded fixtures\n');
for (const [agent, latest] of newest) {
  const now = observedFile(agent, latest);
  const was = path.join(repoRoot, 'test', 'fixtures', 'hooks-real', agent, 'observed.json');
  if (!fs.existsSync(now) || !fs.existsSync(was)) {
    process.stdout.write(`${agent}: nothing to compare (missing: ${[now, was].filter((f) => !fs.existsSync(f)).map((f) => path.relative(repoRoot, f)).join(', ')})\n`);
    continue;
  }
  const a = JSON.parse(fs.readFileSync(was, 'utf8')) as Observed;
  const b = JSON.parse(fs.readFileSync(now, 'utf8')) as Observed;
  const lines = [
    ...diff('tools', a.tools, b.tools),
    ...diff('deferred tools', a.deferredTools, b.deferredTools),
    ...diff('hook events', Object.keys(a.hookEvents), Object.keys(b.hookEvents)),
    ...Object.keys(b.hookEvents)
      .filter((e) => a.hookEvents[e])
      .flatMap((e) => diff(`${e} fields`, a.hookEvents[e], b.hookEvents[e])),
  ];
  process.stdout.write(lines.length ? `${agent} ${a.version} → ${b.version}:\n${lines.join('\n')}\n` : `${agent} ${a.version} → ${b.version}: no tool or hook event drift\n`);
}
process.exit(failed ? 1 : 0);
