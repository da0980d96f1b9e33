import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/**
 * The real agents the suite drives, each pinned in versions.json and installed with
 * npm into `.agents-cache/<agent>-<version>/` (git-ignored). An install already in the
 * cache is used as it is, so a second run costs no network and no time.
 */
// Under tsx an ES module importer leaves no usable __dirname: the suite runs from the repository's root then.
export const agentsDir = typeof __dirname === 'string' && path.isAbsolute(__dirname) ? __dirname : path.join(process.cwd(), 'test', 'agents');
export const repoRoot = path.resolve(agentsDir, '..', '..');
export const cacheRoot = path.join(repoRoot, '.agents-cache');

export type AgentName = 'claude-code' | 'codex' | 'gemini-cli' | 'copilot-cli' | 'qwen-code' | 'cline' | 'opencode';
interface Pin {
  package: string;
  version: string;
}

export function pins(): Record<AgentName, Pin> {
  return JSON.parse(fs.readFileSync(path.join(agentsDir, 'versions.json'), 'utf8')) as Record<AgentName, Pin>;
}

/** The version the suite runs: WAYPOINT_AGENT_VERSION_<AGENT> (the drift check sets it) or the pin. */
export function versionOf(agent: AgentName): string {
  return process.env[`WAYPOINT_AGENT_VERSION_${agent.replace(/-/g, '_').toUpperCase()}`] || pins()[agent].version;
}

export function installDir(agent: AgentName, version = versionOf(agent)): string {
  return path.join(cacheRoot, `${agent}-${version}`);
}

/** The binary's path once installed (the native one, not the npm wrapper that finds it). */
export function binaryIn(agent: AgentName, dir: string): string {
  switch (agent) {
    case 'claude-code': {
      const arch = process.arch === 'arm64' ? 'arm64' : 'x64';
      const native = path.join(dir, 'node_modules', '@anthropic-ai', `claude-code-${process.platform}-${arch}`, process.platform === 'win32' ? 'claude.exe' : 'claude');
      return fs.existsSync(native) ? native : path.join(dir, 'node_modules', '.bin', 'claude');
    }
    case 'codex': {
      // The npm wrapper only finds and runs the native binary its platform package holds.
      const triple = `${process.arch === 'arm64' ? 'aarch64' : 'x86_64'}-${process.platform === 'darwin' ? 'apple-darwin' : 'unknown-linux-musl'}`;
      const native = path.join(dir, 'node_modules', '@openai', `codex-${process.platform}-${process.arch}`, 'vendor', triple, 'bin', 'codex');
      return fs.existsSync(native) ? native : path.join(dir, 'node_modules', '.bin', 'codex');
    }
    case 'gemini-cli':
      // One bundled ES module, run by the node on PATH (its shebang).
      return path.join(dir, 'node_modules', '@google', 'gemini-cli', 'bundle', 'gemini.js');
    case 'copilot-cli': {
      // The npm loader only finds and runs the single-file native binary of its platform package.
      const native = path.join(dir, 'node_modules', '@github', `copilot-${process.platform}-${process.arch}`, process.platform === 'win32' ? 'copilot.exe' : 'copilot');
      return fs.existsSync(native) ? native : path.join(dir, 'node_modules', '.bin', 'copilot');
    }
    case 'qwen-code':
      // The bundled ES module the npm bin (cli-entry.js, which only relaunches it with --expose-gc) runs.
      return path.join(dir, 'node_modules', '@qwen-code', 'qwen-code', 'cli.js');
    case 'cline': {
      // The npm bin is a Node resolver for the Bun-compiled binary of the platform package.
      const native = path.join(dir, 'node_modules', '@cline', `cli-${process.platform}-${process.arch}`, 'bin', process.platform === 'win32' ? 'cline.exe' : 'cline');
      return fs.existsSync(native) ? native : path.join(dir, 'node_modules', '.bin', 'cline');
    }
    case 'opencode': {
      // The npm wrapper only finds and runs the Bun-compiled binary of its platform package.
      const native = path.join(dir, 'node_modules', `opencode-${process.platform === 'win32' ? 'windows' : process.platform}-${process.arch}`, 'bin', process.platform === 'win32' ? 'opencode.exe' : 'opencode');
      return fs.existsSync(native) ? native : path.join(dir, 'node_modules', '.bin', 'opencode');
    }
  }
}

export function ensureInstalled(agent: AgentName, version = versionOf(agent)): string {
  const dir = installDir(agent, version);
  const bin = binaryIn(agent, dir);
  if (fs.existsSync(bin)) return bin;
  fs.mkdirSync(dir, { recursive: true });
  const spec = `${pins()[agent].package}@${version}`;
  process.stderr.write(`installing ${spec} into ${path.relative(repoRoot, dir)}\n`);
  execFileSync('npm', ['install', '--prefix', dir, '--no-audit', '--no-fund', '--loglevel=error', '--engine-strict=false', spec], { stdio: ['ignore', 'inherit', 'inherit'] });
  const after = binaryIn(agent, dir);
  if (!fs.existsSync(after)) throw new Error(`${spec} installed, but its binary is not at ${after}`);
  return after;
}

export function agentBinary(agent: AgentName): string {
  const bin = binaryIn(agent, installDir(agent));
  if (!fs.existsSync(bin)) throw new Error(`${agent} ${versionOf(agent)} is not installed: run 'node --import tsx test/agents/install.ts'`);
  return bin;
}

if (require.main === module) {
  const only = process.argv.slice(2) as AgentName[];
  for (const agent of only.length ? only : (Object.keys(pins()) as AgentName[])) process.stdout.write(`${agent} ${versionOf(agent)}: ${ensureInstalled(agent)}\n`);
}

/**
 * How long one agent run may take before it is killed. A scripted session is a minute on a
 * quiet machine, but every hook is a process of its own and CI runs this suite beside the
 * unit tests on two cores: at load 25 a Claude Code session took 86 s before its last hooks.
 */
export const AGENT_RUN_TIMEOUT_MS = 300_000;
