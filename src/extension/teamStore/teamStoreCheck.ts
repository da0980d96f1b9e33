import { PgProjectionReader } from '../../core/store/postgres';
import { describeConnectFailure } from './teamStoreUrl';

/** How long a connection test waits for the server before calling it unreachable. */
export const CHECK_TIMEOUT_MS = 10_000;

/**
 * Connect's test, before anything is saved: a real connection with the given
 * credentials that must answer, accept them, hold (or let Waypoint create) its schema,
 * and list. Undefined when all of that works, else why not in words a person can act
 * on. Plain Node, so it is tested against a real server (test/unit/teamStoreCheck.test.ts).
 */
export async function checkTeamStore(connectionUrl: string, where: string, timeoutMs = CHECK_TIMEOUT_MS): Promise<ReturnType<typeof describeConnectFailure> | undefined> {
  let reader: PgProjectionReader | undefined;
  try {
    reader = await PgProjectionReader.open(connectionUrl, { connectTimeoutMs: timeoutMs });
    await reader.listTasks({ allWorkspaces: true, limit: 1 });
    return undefined;
  } catch (e) {
    return describeConnectFailure(e, connectionUrl, where);
  } finally {
    await reader?.close();
  }
}
