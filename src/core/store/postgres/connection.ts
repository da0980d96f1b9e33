import type { Client, ClientConfig, Pool, PoolConfig } from 'pg';
import type * as Pg from 'pg';

/** `pg`, loaded on first use: only a team store needs it, and every CLI call would pay for its load. */
const pg = (): typeof Pg => require('pg') as typeof Pg;
import { WaypointError, errorMessage } from '../../model/errors';

/**
 * Connecting to the team store: the URL as the person wrote it (TLS parameters such
 * as `sslmode`, `sslrootcert` pass straight through to `pg`), and every message that
 * names it with the credentials redacted — a team database's password must never
 * reach a log, a terminal or a file in the workspace.
 */

/** True for a value of WAYPOINT_STORE / --store that selects PostgreSQL. */
export function isPostgresUrl(s: string | undefined | null): s is string {
  return !!s && /^postgres(ql)?:\/\//i.test(s.trim());
}

/** The URL with its password (and any password-like query parameter) replaced by `***`. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    for (const k of [...u.searchParams.keys()]) if (/pass|secret|token|key/i.test(k)) u.searchParams.set(k, '***');
    return u.toString();
  } catch {
    // Not parseable as a URL: hide everything between the scheme and the host.
    return url.replace(/(\/\/)[^@/]*@/, '$1***@');
  }
}

/** Removes every occurrence of the URL's password from a message (pg's own errors may quote the URL). */
export function redactIn(message: string, url: string): string {
  let out = message.split(url).join(redactUrl(url));
  try {
    const pw = decodeURIComponent(new URL(url).password);
    if (pw.length >= 3) out = out.split(pw).join('***');
  } catch {
    // the URL did not parse: the split above already replaced it whole
  }
  return out;
}

/** bigint columns (seq, epoch, ms timestamps) as JS numbers: every value Waypoint stores fits in 2^53. */
const TYPES = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => (oid === 20 ? (v: string) => Number(v) : pg().types.getTypeParser(oid, format as 'text'))) as typeof Pg.types.getTypeParser,
};

/**
 * Server-side limits every Waypoint session sets, so a fleet's clients cannot hold the
 * database hostage: a statement that runs (or waits on a lock) longer than this is
 * cancelled and reported, and a session left idle inside a transaction (a process
 * frozen mid-sweep) is ended, releasing its row locks. WAYPOINT_PG_STATEMENT_TIMEOUT_MS
 * overrides the first (0: none).
 */
export const STATEMENT_TIMEOUT_MS = 30_000;
const IDLE_IN_TRANSACTION_TIMEOUT_MS = 60_000;
/** TCP keepalive probes start after this much silence: a machine that vanished is noticed in about a minute, not at the OS default of two hours. */
const KEEPALIVE_IDLE_MS = 10_000;
/** Connections per process in the shared pool (readers, the sweep, the upload); WAYPOINT_PG_POOL_MAX overrides. */
export const POOL_MAX = 6;

function envInt(name: string, fallback: number): number {
  const v = Number(process.env[name]);
  return Number.isInteger(v) && v >= 0 ? v : fallback;
}

export interface ConnectOptions {
  /** Give up connecting after this long (ms). */
  connectTimeoutMs?: number;
  /** application_name, visible in pg_stat_activity. */
  application?: string;
}

function config(url: string, o: ConnectOptions): ClientConfig {
  return {
    connectionString: url,
    connectionTimeoutMillis: o.connectTimeoutMs ?? 5000,
    application_name: o.application ?? 'waypoint',
    types: TYPES,
    // A connection dropped by a stopped server is noticed at once rather than at the next query's timeout.
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
    // Sent as startup parameters: no SET round trip, and a pooler that cannot carry
    // session settings (PgBouncer in transaction mode) refuses them at once, which
    // `unavailable` turns into a precise message (see docs/team-store.md).
    statement_timeout: envInt('WAYPOINT_PG_STATEMENT_TIMEOUT_MS', STATEMENT_TIMEOUT_MS),
    idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_TIMEOUT_MS,
  };
}

export async function connectClient(url: string, o: ConnectOptions = {}): Promise<Client> {
  const client = new (pg().Client)(config(url, o));
  // Until its owner attaches its own handler: a server that goes away mid-open (stopped,
  // restarted) makes the client emit 'error', which with no listener would crash the
  // process; the query in flight rejects anyway, and that rejection is what callers handle.
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (e) {
    await client.end().catch(() => undefined);
    throw unavailable(e, url);
  }
  return client;
}

export function createPool(url: string, o: ConnectOptions & { max?: number } = {}): Pool {
  const pool = new (pg().Pool)({ ...(config(url, o) as PoolConfig), max: o.max ?? 4, idleTimeoutMillis: 30_000 });
  // An idle client whose server went away: the next checkout reconnects; nothing to do here.
  pool.on('error', () => undefined);
  return pool;
}

const shared = new Map<string, { pool: Pool; refs: number }>();

/**
 * This process's one pool for a store URL, shared by its readers, the lease sweep and
 * the object upload, bounded by POOL_MAX (WAYPOINT_PG_POOL_MAX): a window or a
 * `waypoint serve` with many workspaces opens a bounded number of connections, not one
 * pool per reader. The writer's connection and a LISTEN connection stay their own
 * (one holds its prepared commit, the other waits for notifications). Release when done:
 * the pool ends with its last user.
 */
export function sharedPool(url: string, o: ConnectOptions = {}): { pool: Pool; release: () => Promise<void> } {
  let e = shared.get(url);
  if (!e) {
    e = { pool: createPool(url, { ...o, application: o.application ?? 'waypoint pool', max: envInt('WAYPOINT_PG_POOL_MAX', POOL_MAX) || POOL_MAX }), refs: 0 };
    shared.set(url, e);
  }
  e.refs++;
  const entry = e;
  let released = false;
  return {
    pool: entry.pool,
    release: async () => {
      if (released) return;
      released = true;
      if (--entry.refs > 0) return;
      if (shared.get(url) === entry) shared.delete(url);
      await entry.pool.end().catch(() => undefined);
    },
  };
}

/**
 * A connection pooler that cannot carry a session (PgBouncer with pool_mode=transaction
 * or statement) between Waypoint and PostgreSQL. Waypoint relies on sessions: LISTEN
 * (live views, alerts, a replaced writer told at once), its prepared commit statement,
 * and its session limits. Refused with what to do instead, rather than half working.
 */
export function poolerRefusal(url: string, what: string): WaypointError {
  return new WaypointError(
    'invalid_input',
    `The team store at ${redactUrl(url)} is reached through a connection pooler in transaction mode (PgBouncer's pool_mode=transaction or statement): ${what}. ` +
      'Waypoint needs a session per connection (LISTEN/NOTIFY for live updates, alerts and takeovers; prepared statements; its statement_timeout). ' +
      "Point the URL at PostgreSQL itself, or at a PgBouncer database with pool_mode=session and " +
      'ignore_startup_parameters = statement_timeout, idle_in_transaction_session_timeout (the server\'s own limits then apply).',
    { store: redactUrl(url), pooler: true },
  );
}

/** PgBouncer's own refusals, which name what a transaction pool cannot carry. */
function poolerSymptom(e: unknown): string | null {
  const m = errorMessage(e);
  if (/unsupported startup parameter/i.test(m)) return `it refused the session setting Waypoint sends (${m.replace(/^.*unsupported startup parameter:?\s*/i, '').trim() || 'a startup parameter'})`;
  if ((e as { code?: string })?.code === '26000' && /prepared statement/i.test(m)) return `a statement prepared on this connection was gone at its next use (${m})`;
  return null;
}

/** Errors that mean "the server cannot be reached or went away", as opposed to a refused statement. */
export function isConnectionError(e: unknown): boolean {
  const code = (e as { code?: string })?.code ?? '';
  if (['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'].includes(code)) return true;
  // 08: connection exception; 57P01-3: admin shutdown, crash shutdown, cannot connect now (starting up / recovering).
  if (/^08/.test(code) || ['57P01', '57P02', '57P03', '53300'].includes(code)) return true;
  return /Connection terminated|connection timeout|timeout expired|Client has encountered a connection error|not queryable|the database system is (starting up|shutting down|in recovery)/i.test(errorMessage(e));
}

/** A clear, redacted `store_unavailable` error for a failure to reach the team store. */
export function unavailable(e: unknown, url: string, doing = 'connect to'): WaypointError {
  if (e instanceof WaypointError) return e;
  const pooler = poolerSymptom(e);
  if (pooler) return poolerRefusal(url, pooler);
  const why = redactIn(errorMessage(e) || String((e as { code?: string })?.code ?? 'unknown error'), url);
  return new WaypointError('store_unavailable', `Cannot ${doing} the team store at ${redactUrl(url)}: ${why}. Nothing acknowledged is lost; try again when the database is reachable.`, {
    store: redactUrl(url),
  });
}
