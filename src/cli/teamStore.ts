import { WaypointError } from '../core/model/errors';
import { isPostgresUrl } from '../core/store/postgres/connection';

/**
 * The team store this command uses: `--store URL`, else WAYPOINT_STORE, else none (the
 * embedded store, exactly as without either). Anything but a postgresql:// URL is a
 * clear refusal; the URL itself is never echoed (it may hold a password).
 */
export function teamStoreOf(values: Record<string, string | boolean | undefined>, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const flag = values.store;
  const raw = typeof flag === 'string' ? flag : env.WAYPOINT_STORE;
  if (raw === undefined || raw.trim() === '') return undefined;
  if (!isPostgresUrl(raw)) {
    throw new WaypointError('invalid_input', `${typeof flag === 'string' ? '--store' : 'WAYPOINT_STORE'} must be a postgresql:// (or postgres://) URL; leave it unset for the embedded store in .waypoint/.`);
  }
  return raw.trim();
}
