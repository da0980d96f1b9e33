/**
 * Where each agent's hook events enter an owner's loopback endpoint: the table lives
 * with the recorder (src/hooks/agents.ts) and needs nothing heavy, so the CLI's fast hook
 * path can name a route without loading the engine.
 */
export { HOOK_AGENTS, HOOK_AGENT_NAMES, HOOK_ROUTES, isHookAgent, type HookAgent } from '../hooks/agents';
