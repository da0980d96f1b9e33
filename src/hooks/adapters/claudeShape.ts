import type { HookEvent, ToolCall } from '../events';

type SessionSource = Extract<HookEvent, { type: 'session_start' }>['source'];
type ToolOutcome = Omit<Extract<HookEvent, { type: 'tool_after' }>, 'type' | 'call'>;

/** The fields of a Claude Code-shaped payload the shared events read. */
export interface ClaudeShapedPayload {
  tool_name?: string;
  prompt?: string;
  reason?: string;
  source?: string;
}

/** What differs between the agents that send Claude Code's hook names: each adapter reads these its own way. */
export interface ClaudeShapedReading {
  /** The tool call the payload names (read only when it names a tool). */
  call: () => ToolCall;
  /** PostToolUse: how the finished call went, from the agent's own response shape. */
  outcome: (call: ToolCall) => ToolOutcome;
  /** PostToolUseFailure: the error in words. */
  failure: () => string;
  /** SessionStart: the session's origin, from the agent's own `source` words. */
  source: (source: string | undefined) => SessionSource;
  /** Stop: the agent's last message, for an agent that sends one. */
  lastMessage?: () => string | undefined;
}

/**
 * The events Claude Code, Codex, Qwen Code, VS Code's agent hooks and Copilot CLI send
 * under the same names with the same meaning (SessionStart, UserPromptSubmit, the tool
 * hooks, Stop, PreCompact, SessionEnd), read once. An adapter handles its agent's own
 * events first and passes the rest here; a name none of them uses is ignored.
 */
export function claudeShapedEvent(name: string, p: ClaudeShapedPayload, r: ClaudeShapedReading): HookEvent {
  switch (name) {
    case 'SessionStart':
      return { type: 'session_start', source: r.source(p.source) };
    case 'UserPromptSubmit':
      return { type: 'prompt', prompt: p.prompt ?? '' };
    case 'PreToolUse':
      return p.tool_name ? { type: 'tool_before', call: r.call() } : { type: 'ignored', name };
    case 'PostToolUse': {
      if (!p.tool_name) return { type: 'ignored', name };
      const call = r.call();
      return { type: 'tool_after', call, ...r.outcome(call) };
    }
    case 'PostToolUseFailure':
      return p.tool_name ? { type: 'tool_after', call: r.call(), ok: false, error: r.failure() } : { type: 'ignored', name };
    case 'Stop':
      return r.lastMessage ? { type: 'stop', lastMessage: r.lastMessage() } : { type: 'stop' };
    case 'PreCompact':
      return { type: 'compaction' };
    case 'SessionEnd':
      return { type: 'session_end', reason: p.reason };
    default:
      return { type: 'ignored', name };
  }
}

/** A `source` word the agent uses as Waypoint's, anything else as `other`. */
export function sourceAmong(source: string | undefined, known: readonly SessionSource[]): SessionSource {
  return known.find((k) => k === source) ?? 'other';
}
