/**
 * Every refusal Waypoint makes is a WaypointError with a machine-readable code and a
 * message a person can act on. Surfaces map codes to their own conventions (CLI exit
 * codes, MCP tool errors, VS Code notifications) in one place each.
 */
export type WaypointErrorCode =
  | 'invalid_input' // malformed arguments, schema violations
  | 'not_found' // unknown task, step, checkpoint, side effect
  | 'illegal_transition' // a state machine refused the move
  | 'conflict' // an idempotency key reused for a different operation, a plan cycle…
  | 'locked' // another process owns the store
  | 'corrupt' // a file on disk failed validation
  | 'unsafe_path' // a path that would leave the workspace
  | 'lost_ownership' // this process was replaced as the store's owner (stalled past its lease); it accepts no more writes
  | 'io' // the disk refused
  | 'store_unavailable' // the team store (PostgreSQL) cannot be reached; nothing acknowledged is lost, retry later
  | 'retry_later' // a step's retry backoff has not passed; details.retryAt says when it may start
  | 'held' // the task waits for a person (details.hold): retries used up, side effects in doubt
  | 'limit'; // a documented cap would be exceeded (details.limit says which and how much); nothing changed

export class WaypointError extends Error {
  constructor(
    readonly code: WaypointErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'WaypointError';
  }
}

export function isWaypointError(e: unknown): e is WaypointError {
  return e instanceof WaypointError;
}

export function notFound(what: string, id: string): WaypointError {
  return new WaypointError('not_found', `Unknown ${what} '${id}'.`, { what, id });
}

/** Readable text for any thrown value, for logs and surfaces. */
export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}
