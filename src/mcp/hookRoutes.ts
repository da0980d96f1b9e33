/**
 * Where each agent's hook events enter an owner's loopback endpoint. Kept apart from the
 * recorders so the CLI's fast hook path can name a route without loading the engine.
 */
export const HOOK_ROUTES = {
  'claude-code': '/hooks/claude-code',
} as const;

export type HookAgent = keyof typeof HOOK_ROUTES;

export function isHookAgent(name: string): name is HookAgent {
  return Object.prototype.hasOwnProperty.call(HOOK_ROUTES, name);
}
