import type { AgentCli } from './agentClis';

/**
 * Which ways of handing a resume context over work here, decided from what the
 * editor and the machine have (pure, so it is unit-tested without an editor):
 * the chat only where its command exists, AI features are on and a chat model
 * answers (code-server, or VS Code signed out, has none, and opening the chat there
 * did nothing at all); each agent CLI found on PATH; the clipboard always.
 */
export type Delivery = { how: 'chat' } | { how: 'cli'; cli: AgentCli; path: string } | { how: 'clipboard' };

/** The command that opens the chat view with a query (VS Code's own, also used by Copilot Chat). */
export const CHAT_COMMAND = 'workbench.action.chat.open';

export interface DeliveryEnvironment {
  /** Every command id the editor has registered. */
  commands: readonly string[];
  /** `chat.disableAIFeatures`. */
  aiFeaturesOff: boolean;
  /** How many chat models `vscode.lm` offers (0: the chat would open with nobody to answer). */
  chatModels: number;
  /** Agent CLIs on PATH, the task's own agent first. */
  clis: readonly { cli: AgentCli; path: string }[];
}

export function offeredDeliveries(env: DeliveryEnvironment): Delivery[] {
  const out: Delivery[] = [];
  if (env.commands.includes(CHAT_COMMAND) && !env.aiFeaturesOff && env.chatModels > 0) out.push({ how: 'chat' });
  for (const f of env.clis) out.push({ how: 'cli', cli: f.cli, path: f.path });
  out.push({ how: 'clipboard' });
  return out;
}

/** How the picker and the log name a delivery ("Start Claude Code in a Terminal"). */
export function deliveryLabel(d: Delivery): string {
  if (d.how === 'chat') return 'Open in Chat';
  if (d.how === 'cli') return `Start ${d.cli.name} in a Terminal`;
  return 'Copy to Clipboard';
}
