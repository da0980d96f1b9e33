// `npm run agents:drift`: installs the newest release of each agent the real-agent suite
// pins, runs the suite against it, and reports the tool names and hook events that are
// new or gone since the pinned version (from what the scripted server and the capture
// hook recorded: test-output/agents/<agent>-<version>.json against the fixture's
// observed.json). Exit 1 when the suite fails on the newest version; drift alone is a report.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ensureInstalled, pins, repoRoot, type AgentName } from '../test/agents/install';
import type { Observed } from '../test/agents/observed';

function diff(label: string, before: readonly string[], after: readonly string[]): string[] {
  const added = after.filter((x) => !before.includes(x));
  const gone = before.filter((x) => !after.includes(x));
  return [...(added.length ? [`  ${label} new: ${added.join(', ')}`] : []), ...(gone.length ? [`  ${label} gone: ${gone.join(', ')}`] : [])];
}

let failed = false;
for (const [agent, pin] of Object.entries(pins()) as [AgentName, { package: string; version: string }][]) {
  const latest = execFileSync('npm', ['view', pin.package, 'version'], { encoding: 'utf8' }).trim();
  process.stdout.write(`\n=== ${agent}: pinned ${pin.version}, newest ${latest}\n`);
  ensureInstalled(agent, latest);
  const env = { ...process.env, [`WAYPOINT_AGENT_VERSION_${agent.replace(/-/g, '_').toUpperCase()}`]: latest };
  const r = spawnSync('npm', ['run', '--silent', 'test:agents'], { cwd: repoRoot, env, stdio: 'inherit' });
  if (r.status !== 0) {
    failed = true;
    process.stdout.write(`${agent} ${latest}: the suite FAILED\n`);
  }
  const now = path.join(repoRoot, 'test-output', 'agents', `${agent}-${latest}.json`);
  const was = path.join(repoRoot, 'test', 'fixtures', 'hooks-real', agent, 'observed.json');
  if (!fs.existsSync(now) || !fs.existsSync(was)) {
    process.stdout.write(`${agent}: nothing to compare (${fs.existsSync(now) ? '' : now} ${fs.existsSync(was) ? '' : was})\n`);
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
