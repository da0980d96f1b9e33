import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { AGENT_RUN_TIMEOUT_MS, agentBinary, agentsDir } from './install';

/**
 * Runs the real Claude Code binary offline: its model API is the scripted server
 * (ANTHROPIC_BASE_URL), its home a fresh folder, and everything that would reach
 * another host (telemetry, error reports, auto-update, non-essential traffic) is off
 * through its own variables. No --dangerously-skip-permissions (refused as root):
 * the tools are allowed by --allowedTools and the accept-edits mode.
 */
export const CLAUDE_OFFLINE_ENV = {
  DISABLE_TELEMETRY: '1',
  DISABLE_AUTOUPDATER: '1',
  DISABLE_ERROR_REPORTING: '1',
  DISABLE_BUG_COMMAND: '1',
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
  CLAUDE_CODE_ENABLE_TASKS: '1',
  ANTHROPIC_API_KEY: 'sk-ant-scripted',
} as const;

export const CLAUDE_ALLOWED_TOOLS = ['Bash', 'Edit', 'Write', 'Read', 'MultiEdit', 'TodoWrite', 'TaskCreate', 'TaskUpdate', 'TaskList', 'TaskGet', 'ToolSearch', 'Agent', 'Task'];

export interface ClaudeRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The `--output-format json` result, when the output held one. */
  result: { session_id?: string; is_error?: boolean; result?: string } | null;
}

export async function runClaude(opts: { cwd: string; home: string; baseUrl: string; prompt: string; args?: string[]; env?: Record<string, string>; timeoutMs?: number }): Promise<ClaudeRun> {
  const bin = agentBinary('claude-code');
  fs.mkdirSync(opts.home, { recursive: true });
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: opts.home, USER: process.env.USER ?? 'root', LANG: 'C.UTF-8', ...CLAUDE_OFFLINE_ENV, ANTHROPIC_BASE_URL: opts.baseUrl, ...opts.env };
  const child = spawn(bin, ['-p', opts.prompt, '--output-format', 'json', '--permission-mode', 'acceptEdits', '--allowedTools', CLAUDE_ALLOWED_TOOLS.join(','), ...(opts.args ?? [])], {
    cwd: opts.cwd,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? AGENT_RUN_TIMEOUT_MS);
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  clearTimeout(timer);
  let result: ClaudeRun['result'] = null;
  try {
    result = JSON.parse(stdout.trim().split('\n').pop() ?? '') as ClaudeRun['result'];
  } catch {
    result = null;
  }
  return { code, stdout, stderr, result };
}

/** Adds a hook on `events` that runs captureHook.cjs (payload capture and the person's edit) to the project's .claude/settings.json. */
export function addCaptureHooks(ws: string, events: readonly string[]): void {
  const file = path.join(ws, '.claude', 'settings.json');
  const command = `node ${JSON.stringify(path.join(agentsDir, 'captureHook.cjs'))}`;
  const hooks = Object.fromEntries(events.map((e) => [e, [{ hooks: [{ type: 'command', command, timeout: 30 }] }]]));
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify({ hooks }, null, 2) + '\n');
}

/** Every hook event Claude Code documents (and the ones seen in its binary): captured to learn what the real one sends. */
export const CLAUDE_ALL_EVENTS = [
  'SessionStart',
  'SessionEnd',
  'UserPromptSubmit',
  'PreToolUse',
  'PostToolUse',
  'PostToolUseFailure',
  'PostToolBatch',
  'PermissionRequest',
  'Notification',
  'Stop',
  'StopFailure',
  'SubagentStart',
  'SubagentStop',
  'PreCompact',
  'PostCompact',
  'TaskCreated',
  'TaskCompleted',
  'TeammateIdle',
  'WorktreeCreate',
  'WorktreeRemove',
  'CwdChanged',
  'FileChanged',
  'InstructionsLoaded',
  'ConfigChange',
  'Elicitation',
  'ElicitationResult',
] as const;
