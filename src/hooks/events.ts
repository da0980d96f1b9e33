/**
 * What every agent's hooks say, in one vocabulary. Each adapter (adapters/*.ts) maps
 * its agent's documented payloads onto these; the recorder (recorder.ts) turns them
 * into tasks, turns, steps, shell calls and checkpoints without knowing the agent.
 */

/** How the recorder treats a tool call: edits and shell commands are bracketed by checkpoints, todo lists become the plan. */
export type ToolKind = 'edit' | 'shell' | 'todo' | 'other';

export type TodoStatus = 'pending' | 'in_progress' | 'completed' | 'cancelled';
export interface TodoItem {
  content: string;
  status: TodoStatus;
}

export interface ToolCall {
  /**
   * The agent's id for this call (tool_use_id…); repeats of a hook are recognised by it.
   * Agents that give none (Gemini CLI, Copilot CLI, Cline) have their before and after
   * hooks paired by the call's content, in order.
   */
  id: string | null;
  name: string;
  kind: ToolKind;
  /** Edits: the files named (as the agent gave them: absolute or relative to cwd). */
  files?: string[];
  /** Shell: the command line. */
  command?: string;
  /** Todo: the whole list as the agent now holds it. */
  todos?: TodoItem[];
  /** Todo, one item at a time (Claude Code's TaskCreate/TaskUpdate): the item the call created or changed. */
  planItem?: PlanItemChange;
  /** SQL the agent ran on its own todos table (Copilot CLI's `sql` tool): the plan is that table after it. */
  todoSql?: string;
}

/** One item of a plan the agent keeps item by item, named by the agent's own id for it. */
export interface PlanItemChange {
  id: string;
  /** Its words: given when it is created (later calls name it by id only). */
  content?: string;
  status?: TodoStatus;
}

export type HookEvent =
  | { type: 'session_start'; source: 'startup' | 'resume' | 'clear' | 'compact' | 'other' }
  /**
   * A turn begins with the person's words. `firstOnly`: the words were read from the agent's
   * record of the session's first prompt (Cline), so they are not a later turn's.
   */
  | { type: 'prompt'; prompt: string; firstOnly?: boolean }
  | { type: 'tool_before'; call: ToolCall }
  | { type: 'tool_after'; call: ToolCall; ok: boolean; error?: string; exitCode?: number; stdout?: string; stderr?: string }
  | { type: 'stop'; lastMessage?: string }
  /** The agent's answer, when the agent reports it apart from its stop (Cursor's afterAgentResponse). */
  | { type: 'agent_message'; text: string }
  /** A plan item created or changed, reported apart from the tool call (Claude Code's TaskCreated/TaskCompleted). */
  | { type: 'plan_item'; item: PlanItemChange }
  /** The turn ended on an error (Claude Code's StopFailure: the model API failed): the work stops unfinished. */
  | { type: 'turn_failed'; error: string; lastMessage?: string }
  | { type: 'compaction' }
  | { type: 'session_end'; reason?: string }
  /** A documented event the recorder has no use for (notifications, model calls…): valid, recorded nowhere. */
  | { type: 'ignored'; name: string };

/** One hook call, normalised. */
export interface HookEnvelope {
  sessionId: string;
  /** The agent's working directory, for resolving relative paths. */
  cwd?: string;
  /** Where the agent keeps the conversation (Claude Code, Gemini CLI, VS Code), read bounded for the last message. */
  transcriptPath?: string;
  event: HookEvent;
  /** A digest of the raw payload, so a prompt delivered twice is told from the same words typed again (set by handleHook). */
  digest?: string;
}

/** An adapter: the agent's raw payload (already JSON) → the envelope; throws a WaypointError('invalid_input') on a malformed one. */
export type HookAdapter = (raw: unknown) => HookEnvelope;
