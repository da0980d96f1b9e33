/**
 * Whose terminal a command ran in (no `vscode` import, so plain Node tests cover it).
 * An agent's terminal tool names the terminal it opens (Copilot's `run_in_terminal`,
 * for one); `waypoint.terminal.agentTerminals` maps those name prefixes to agents.
 */
/** The agent whose terminal this is, by the settings' name prefixes or the task's own agent name; undefined for a person's terminal. */
export function terminalAgent(terminalName: string, agentTerminals: Readonly<Record<string, string>>, taskAgent: string | null): string | undefined {
  const name = terminalName.trim().toLowerCase();
  for (const [prefix, agent] of Object.entries(agentTerminals)) if (prefix.trim() && name.startsWith(prefix.trim().toLowerCase())) return agent;
  if (taskAgent && name.startsWith(taskAgent.trim().toLowerCase())) return taskAgent;
  return undefined;
}

