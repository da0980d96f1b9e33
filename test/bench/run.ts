/**
 * `npm run bench`: every performance target of Waypoint, each measured side by side
 * with its named baseline in this one run, printed as tables with ratios.
 * These machines are noisy: figures are medians of repeated runs; read the ratios.
 * `--quick` runs smaller sizes (a smoke check, not the figures to report).
 */
import * as os from 'node:os';

interface Bench {
  name: string;
  /** Runs only when named with --only (it needs something the default run must not assume). */
  optIn?: boolean;
  load: () => Promise<{ main: (o: { quick?: boolean }) => Promise<unknown> }>;
}

const BENCHES: Bench[] = [
  { name: 'store', load: async () => require('./store.bench') },
  {
    name: 'snapshot',
    load: async () => {
      const m = require('./snapshot.bench');
      return { main: (o: { quick?: boolean }) => m.main(o.quick ? { runs: 1, firstRuns: 1 } : {}) };
    },
  },
  { name: 'mcp', load: async () => require('./mcp.bench') },
  { name: 'hooks', load: async () => require('./hooks.bench') },
  { name: 'fresh', load: async () => require('./fresh.bench') },
  // `task start` in a fresh clone (2,807 files): the whole process against a shadow git's init + add + commit.
  { name: 'clone', load: async () => require('./clone.bench') },
  // The same tree with the background owner a first call starts: first call, later calls, git.
  { name: 'background', load: async () => require('./background.bench') },
  { name: 'vscode', load: async () => require('./vscode.bench') },
  // 200,000 files (100,000 in one folder) with a background owner; minutes of set-up: `--only=large`.
  { name: 'large', optIn: true, load: async () => require('./large.bench') },
  // Needs PostgreSQL installed (it starts a throwaway cluster): `npm run bench -- --only=postgres`.
  { name: 'postgres', optIn: true, load: async () => require('./postgres.bench') },
  // The checkpoint with and without the team store's object upload (PostgreSQL too): `--only=pg-upload`.
  { name: 'pg-upload', optIn: true, load: async () => require('./pgUpload.bench') },
];

// Every bench measures the CLI as it was asked to (an owner it starts itself, or none);
// only the background bench lets a call start a background owner, and says so.
process.env.WAYPOINT_NO_DAEMON ??= '1';

async function run(): Promise<void> {
  const quick = process.argv.includes('--quick');
  const only = process.argv.find((a) => a.startsWith('--only='))?.slice(7);
  process.stdout.write(`# Waypoint benchmarks${quick ? ' (quick)' : ''}\n\n${os.cpus().length} cores, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}\n`);
  for (const b of BENCHES) {
    if (only ? b.name !== only : b.optIn) continue;
    const t0 = performance.now();
    await (await b.load()).main({ quick });
    process.stdout.write(`\n(${b.name}: ${((performance.now() - t0) / 1000).toFixed(1)} s)\n`);
  }
}

run().catch((e) => {
  console.error(e);
  process.exit(1);
});
