import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * Agent command lines Resume can start in a terminal with the resume prompt as
 * their first message. Found by a PATH lookup (never by running them: a `--version`
 * of an unknown binary is a side effect we do not want). Pure apart from the file
 * system check, so it is unit-tested in plain Node.
 */
export interface AgentCli {
  /** The binary's name on PATH. */
  bin: string;
  /** How the person knows it. */
  name: string;
  /** The arguments that start it interactively with `prompt` as the first message. */
  args: (prompt: string) => string[];
}

/**
 * Each CLI's documented way to open its interactive session with a first prompt:
 * - Claude Code: `claude "query"` starts the REPL with an initial prompt (code.claude.com/docs/en/cli-reference);
 * - Codex CLI: `codex "..."` is the initial prompt of the interactive TUI (`codex exec` is the one-shot mode; developers.openai.com/codex/cli);
 * - Gemini CLI: `gemini -i "query"` (`--prompt-interactive`) executes it and continues interactively (geminicli.com/docs/cli/cli-reference);
 * - GitHub Copilot CLI: `copilot -i "prompt"` opens the interactive screen with it (`-p` would run it headless and exit);
 * - Qwen Code: `qwen -i "prompt"` (`--prompt-interactive`, its 0.24.4 `--help`; a bare positional prompt is one-shot);
 * - opencode: `opencode --prompt "prompt"` opens its TUI and sends it (1.18.33, seen in a terminal; `opencode run` is one-shot).
 */
export const AGENT_CLIS: readonly AgentCli[] = [
  { bin: 'claude', name: 'Claude Code', args: (p) => [p] },
  { bin: 'codex', name: 'Codex CLI', args: (p) => [p] },
  { bin: 'gemini', name: 'Gemini CLI', args: (p) => ['-i', p] },
  { bin: 'copilot', name: 'GitHub Copilot CLI', args: (p) => ['-i', p] },
  { bin: 'qwen', name: 'Qwen Code', args: (p) => ['-i', p] },
  { bin: 'opencode', name: 'opencode', args: (p) => ['--prompt', p] },
];

/** The executable `bin` resolves to on `pathEnv` (with Windows' PATHEXT), or undefined. */
export function findOnPath(bin: string, pathEnv = process.env.PATH ?? '', platform = process.platform, pathExt = process.env.PATHEXT ?? '.EXE;.CMD;.BAT'): string | undefined {
  const exts = platform === 'win32' ? ['', ...pathExt.split(';').filter(Boolean)] : [''];
  for (const dir of pathEnv.split(platform === 'win32' ? ';' : ':')) {
    if (!dir) continue;
    for (const ext of exts) {
      const p = path.join(dir, bin + ext);
      try {
        const st = fs.statSync(p);
        if (!st.isFile()) continue;
        if (platform !== 'win32') fs.accessSync(p, fs.constants.X_OK);
        return p;
      } catch {
        // not here; keep looking
      }
    }
  }
  return undefined;
}

/** The agent CLIs installed here, the task's own agent first (a task Claude Code began is best resumed by it). */
export function installedAgentClis(taskAgent: string | null, pathEnv?: string, platform?: NodeJS.Platform): { cli: AgentCli; path: string }[] {
  const found = AGENT_CLIS.flatMap((cli) => {
    const p = findOnPath(cli.bin, pathEnv, platform);
    return p ? [{ cli, path: p }] : [];
  });
  const agent = (taskAgent ?? '').toLowerCase();
  const own = (c: AgentCli) => agent !== '' && (agent.includes(c.bin) || agent.includes(c.name.toLowerCase()));
  return [...found.filter((f) => own(f.cli)), ...found.filter((f) => !own(f.cli))];
}
