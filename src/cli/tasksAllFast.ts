import { connectClient, isPostgresUrl } from '../core/store/postgres/connection';
import { PG_SCHEMA, PG_SCHEMA_VERSION } from '../core/store/postgres/schema';
import { hasExpiredLeases } from '../core/store/postgres/leaseDue';
import { queryTaskListings, queryTaskListingsJson } from '../core/store/postgres/taskListing';
import { listingJson, listingTable } from './tasksAllFormat';

/**
 * `waypoint tasks --all [--json]` on the team store without loading the full CLI.
 * Listing 10,000 tasks is one query of ~70 ms; loading the full CLI's bundle (sql.js,
 * the engine, the MCP SDK) to run it cost several times that. This path loads `pg`, the
 * listing query and its printing — the same modules the full CLI uses for them — and
 * answers. Anything else (another flag, no team store, a schema this Waypoint does
 * not know or has not created, any failure) is handed to the full CLI, which does
 * exactly what it did before and reports errors in its usual way.
 */
export type FastListOutcome = { handled: true; output: string } | { handled: false };

/** `tasks --all [--json] [--store URL] [--workspace DIR]`: the store URL and --json; null for anything else. */
export function parseTasksAllArgs(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): { store: string; json: boolean } | null {
  if (argv[0] !== 'tasks') return null;
  let all = false;
  let json = false;
  let store: string | undefined;
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--all') all = true;
    else if (a === '--json') json = true;
    else if (a === '--store' && i + 1 < argv.length) store = argv[++i];
    else if (a.startsWith('--store=')) store = a.slice('--store='.length);
    // The listing does not depend on the workspace (it lists them all).
    else if ((a === '--workspace' || a === '-w') && i + 1 < argv.length) i++;
    else if (a.startsWith('--workspace=')) continue;
    else return null;
  }
  const url = (store ?? env.WAYPOINT_STORE ?? '').trim();
  return all && isPostgresUrl(url) ? { store: url, json } : null;
}

export async function fastTasksAll(argv: readonly string[]): Promise<FastListOutcome> {
  const args = parseTasksAllArgs(argv);
  if (!args) return { handled: false };
  let client;
  try {
    client = await connectClient(args.store, { application: 'waypoint tasks --all' });
    const c = client;
    // Only a schema at this Waypoint's version is read here; creating one or refusing a newer one is the full CLI's.
    const v = await c.query<{ v: string | null }>(`SELECT (SELECT v FROM ${PG_SCHEMA}.meta WHERE k = 'schema_version') AS v`);
    if (Number(v.rows[0]?.v) !== PG_SCHEMA_VERSION) return { handled: false };
    // A lease due for the store-wide sweep: the full CLI sweeps (it has the fold code) and then lists.
    if (await hasExpiredLeases(c)) return { handled: false };
    const rows = async (sql: string, params: unknown[]) => (await c.query(sql, params)).rows as Record<string, unknown>[];
    const json = args.json ? await queryTaskListingsJson(rows, {}) : null;
    if (json !== null) return { handled: true, output: json + '\n' };
    const listings = await queryTaskListings(rows, {});
    return { handled: true, output: (args.json ? JSON.stringify(listingJson(listings), null, 2) : listingTable(listings, false)) + '\n' };
  } catch {
    return { handled: false };
  } finally {
    // Closing waits ~5 ms for the server to end its session: the listing is printed
    // meanwhile (the Terminate message is on the socket before this returns).
    client?.end().catch(() => undefined);
  }
}
