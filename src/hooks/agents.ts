/**
 * The agents `waypoint hook <agent>` records, where their events enter an owner's
 * loopback endpoint, and what the hook prints on stdout. Kept apart from the recorder
 * so the CLI's fast hook path can name a route without loading the engine.
 *
 * stdout: Claude Code, Codex and Qwen Code add a UserPromptSubmit hook's stdout to the
 * conversation, so their hooks print nothing; Cursor, Gemini CLI and Cline parse
 * stdout as their JSON answer, so theirs print the answer that decides nothing.
 * opencode's plugin (connectHooks.ts) reads no answer: nothing printed.
 */
export const HOOK_AGENTS = {
  'claude-code': { route: '/hooks/claude-code', label: 'Claude Code', stdout: '' },
  vscode: { route: '/hooks/vscode', label: 'VS Code agent', stdout: '' },
  'copilot-cli': { route: '/hooks/copilot-cli', label: 'Copilot CLI', stdout: '' },
  cursor: { route: '/hooks/cursor', label: 'Cursor', stdout: '{}' },
  'gemini-cli': { route: '/hooks/gemini-cli', label: 'Gemini CLI', stdout: '{}' },
  codex: { route: '/hooks/codex', label: 'Codex', stdout: '' },
  cline: { route: '/hooks/cline', label: 'Cline', stdout: '{"cancel":false}' },
  'qwen-code': { route: '/hooks/qwen-code', label: 'Qwen Code', stdout: '' },
  opencode: { route: '/hooks/opencode', label: 'opencode', stdout: '' },
} as const;

export type HookAgent = keyof typeof HOOK_AGENTS;
export const HOOK_AGENT_NAMES = Object.keys(HOOK_AGENTS) as HookAgent[];

export const HOOK_ROUTES = Object.fromEntries(HOOK_AGENT_NAMES.map((a) => [a, HOOK_AGENTS[a].route])) as { [A in HookAgent]: (typeof HOOK_AGENTS)[A]['route'] };

export function isHookAgent(name: string): name is HookAgent {
  return Object.prototype.hasOwnProperty.call(HOOK_AGENTS, name);
}
