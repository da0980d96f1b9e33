import type { EngineApi } from '../core/engine/api';
import type { OptionSpec } from './args';

/** What a CLI command gets: its parsed options, the engine (opened on first use) and an output sink. */
export interface Ctx {
  values: Record<string, string | boolean | undefined>;
  json: boolean;
  /** The workspace directory (absolute). */
  workspace: string;
  /** The engine: this process's own, or the store owner's through its endpoint (opened on first use). */
  engine: () => Promise<EngineApi>;
  /** The team store URL (--store or WAYPOINT_STORE), or undefined for the embedded store. */
  teamStore: string | undefined;
  /**
   * Set when `--workspace` named a workspace of the team store by its id, not a folder
   * here (only commands with `readsTeamStore`: they read it from the store, never open it).
   */
  workspaceId?: string;
  /** Prints `json` with --json, otherwise `human`. */
  out: (human: string, json: unknown) => void;
}

export interface Command {
  summary: string;
  usage: string;
  options: OptionSpec;
  /** Accepts `--workspace <id>` of a workspace on another machine (read from the team store). */
  readsTeamStore?: true;
  /** Only reads what is recorded: in a folder with no store it says so and creates none. */
  readOnly?: true;
  run(ctx: Ctx): Promise<void>;
}
