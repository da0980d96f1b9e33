import { Client, Pool, types as pgTypes, type ClientConfig, type PoolConfig } from 'pg';
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
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => (oid === 20 ? (v: string) => Number(v) : pgTypes.getTypeParser(oid, format as 'text'))) as typeof pgTypes.getTypeParser,
};

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
  };
}

export async function connectClient(url: string, o: ConnectOptions = {}): Promise<Client> {
  const client = new Client(config(url, o));
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
  const pool = new Pool({ ...(config(url, o) as PoolConfig), max: o.max ?? 4 });
  // An idle client whose server went away: the next checkout reconnects; nothing to do here.
  pool.on('error', () => undefined);
  return pool;
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
  const why = redactIn(errorMessage(e) || String((e as { code?: string })?.code ?? 'unknown error'), url);
  return new WaypointError('store_unavailable', `Cannot ${doing} the team store at ${redactUrl(url)}: ${why}. Nothing acknowledged is lost; try again when the database is reachable.`, {
    store: redactUrl(url),
  });
}
