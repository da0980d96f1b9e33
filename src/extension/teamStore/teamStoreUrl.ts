import { redactIn } from '../../core/store/postgres';

/**
 * The team store's URL as the `waypoint.teamStore.url` setting holds it — never with
 * a password — and the password, kept apart in VS Code's SecretStorage, put back
 * into it only in memory when connecting. Plain Node (no `vscode`), so the rules are
 * unit-tested: test/unit/teamStoreUrl.test.ts.
 */

/** libpq's sslmode values (pg passes them through; `no-verify` is pg's own). */
const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full', 'no-verify'];

/** Query parameters that would carry a secret (libpq's `password`, and anything that looks like one). */
const SECRET_PARAM = /pass|secret|token|key$/i;

export type ParsedTeamStoreUrl =
  | {
      ok: true;
      /** The URL as given, trimmed: what the setting holds (no password in it). */
      url: string;
      /** `user@host:port/database`: names the server in messages and keys its password in SecretStorage. */
      identity: string;
      /** `host:port/database`, for a view's description. */
      where: string;
      user: string | null;
    }
  | { ok: false; message: string };

/** Validates a URL for the setting or the Connect input; refuses one holding a password, with why and what to do instead. */
export function parseTeamStoreUrl(raw: string | undefined | null): ParsedTeamStoreUrl {
  const s = (raw ?? '').trim();
  if (!s) return { ok: false, message: 'Enter the PostgreSQL URL, e.g. postgresql://alice@db.example:5432/waypoint?sslmode=verify-full' };
  if (s.length > 2048) return { ok: false, message: 'The URL is longer than 2048 characters.' };
  if (!/^postgres(ql)?:\/\//i.test(s)) return { ok: false, message: 'The URL must start with postgresql:// (or postgres://).' };
  if (/[\s\u0000-\u001f]/.test(s)) return { ok: false, message: 'The URL must not contain spaces or control characters.' };
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    return { ok: false, message: 'This is not a valid URL: expected postgresql://user@host:port/database' };
  }
  // Checked before anything else about its parts, so a pasted URL with a password is never half-accepted.
  if (u.password || /^postgres(ql)?:\/\/[^/@?#]*:[^/@?#]*@/i.test(s)) {
    return { ok: false, message: 'Leave the password out of the URL: Waypoint asks for it separately and keeps it in VS Code’s secret storage, never in settings.' };
  }
  for (const k of u.searchParams.keys()) {
    if (SECRET_PARAM.test(k)) return { ok: false, message: `Leave '${k}' out of the URL: secrets are kept in VS Code’s secret storage, never in settings.` };
  }
  if (!u.hostname) return { ok: false, message: 'The URL names no host: expected postgresql://user@host:port/database' };
  if (u.port && !(Number(u.port) >= 1 && Number(u.port) <= 65535)) return { ok: false, message: `Port ${u.port} is out of range (1–65535).` };
  const mode = u.searchParams.get('sslmode');
  if (mode !== null && !SSL_MODES.includes(mode)) return { ok: false, message: `Unknown sslmode '${mode}': use one of ${SSL_MODES.join(', ')}.` };
  const user = u.username ? decodeURIComponent(u.username) : null;
  const db = decodeURIComponent(u.pathname.replace(/^\//, '')) || (user ?? '');
  const where = `${u.hostname}:${u.port || '5432'}${db ? `/${db}` : ''}`;
  return { ok: true, url: s, identity: `${user ? `${user}@` : ''}${where}`, where, user };
}

/** The connection string for pg: the setting's URL with the password put in (in memory only; never logged, never saved). */
export function withPassword(url: string, password: string | undefined): string {
  if (!password) return url;
  const u = new URL(url);
  // Encoded whole: URL's setter leaves '%' as it is, and pg decodes the password with decodeURIComponent.
  u.password = encodeURIComponent(password);
  return u.toString();
}

/** The SecretStorage key of the password for this server and user: a password is never sent to a server it was not given for. */
export function secretKey(identity: string): string {
  return `waypoint.teamStore.password:${identity}`;
}

export type ConnectFailureKind = 'unreachable' | 'auth' | 'tls' | 'database' | 'permission' | 'other';

/** Why a connection attempt failed, in words a person can act on (the cause redacted of the password). */
export function describeConnectFailure(e: unknown, connectionUrl: string, where: string): { kind: ConnectFailureKind; message: string } {
  const code = String((e as { code?: unknown })?.code ?? '');
  const raw = redactIn(e instanceof Error ? e.message : String(e), connectionUrl);
  const cause = raw.length > 300 ? `${raw.slice(0, 300)}…` : raw;
  if (code === '28P01' || code === '28000' || /password authentication failed|authentication failed|no pg_hba\.conf entry|client password must be a string|SASL/i.test(raw)) {
    const pwMissing = /client password must be a string|SASL: SCRAM-SERVER-FIRST-MESSAGE/i.test(raw);
    return {
      kind: 'auth',
      message: pwMissing ? `${where} asks for a password and none was given. Enter it when connecting.` : `${where} refused the user name or password (${cause}).`,
    };
  }
  if (
    /SSL|TLS|certificate|self[- ]signed|CERT_|ERR_TLS/i.test(raw) ||
    /^(DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|CERT_HAS_EXPIRED|ERR_TLS_CERT_ALTNAME_INVALID|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)$/.test(code)
  ) {
    return { kind: 'tls', message: `The TLS connection to ${where} failed (${cause}). Check sslmode and sslrootcert in the URL, or the server's certificate.` };
  }
  if (code === '3D000' || /database ".*" does not exist/i.test(raw)) return { kind: 'database', message: `${where}: ${cause}. Create the database, or name an existing one in the URL.` };
  if (code === '42501' || /permission denied/i.test(raw)) return { kind: 'permission', message: `${where} refused the user the rights Waypoint needs (${cause}). It needs to create and write the waypoint schema.` };
  if (
    /ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT|EAI_AGAIN|timeout|Connection terminated|Cannot connect/i.test(raw) ||
    ['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'EAI_AGAIN', 'store_unavailable'].includes(code)
  ) {
    return { kind: 'unreachable', message: `Cannot reach ${where} (${cause}). Check the host and port, and that the server is running and accepts connections from here.` };
  }
  return { kind: 'other', message: `Connecting to ${where} failed: ${cause}` };
}

/** The cause inside the store link's reason ("opening it failed: Cannot connect to the team store at URL: ECONNREFUSED …. Nothing acknowledged …"). */
export function outageCause(reason: string): string {
  const m = /team store at \S+: (.*?)(?:\. Nothing acknowledged.*)?$/s.exec(reason);
  const cause = (m?.[1] ?? reason).trim();
  return cause.length > 200 ? `${cause.slice(0, 200)}…` : cause;
}
