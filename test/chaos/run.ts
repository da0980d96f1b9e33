/**
 * `npm run chaos [-- --seed=N] [--kills=N] [--phase=NAME[,NAME]] [--jobs=N]`: the crash
 * matrix. Kills are spread evenly over the chosen phases (default: all five, 1,000
 * kills); --jobs runs that many phases side by side.
 * Exit 0 with 0 violations; otherwise 1, after printing the seed, phase and kill
 * number of the first violation and the command that replays it.
 */
import { randomInt } from 'node:crypto';
import { runChaos } from './driver';
import { table } from './report';
import { PHASES, type Phase } from './phases';

function parse(argv: string[]): { seed: number; kills: number; phases: Phase[]; jobs: number } {
  const opts: Record<string, string> = {};
  for (const a of argv) {
    const m = /^--(seed|kills|phase|jobs)=(.+)$/.exec(a);
    if (!m) throw new Error(`unknown argument ${a}; use --seed=N, --kills=N, --phase=${PHASES.join('|')}, --jobs=N`);
    opts[m[1]!] = m[2]!;
  }
  const seed = opts.seed !== undefined ? Number(opts.seed) : randomInt(0, 2 ** 31);
  const kills = Number(opts.kills ?? 1000);
  if (!Number.isInteger(seed) || seed < 0 || seed >= 2 ** 32) throw new Error(`--seed must be an integer in [0, 2^32), not ${opts.seed}`);
  if (!Number.isInteger(kills) || kills < 1) throw new Error(`--kills must be a positive integer, not ${opts.kills}`);
  const phases = (opts.phase?.split(',') ?? [...PHASES]) as Phase[];
  for (const p of phases) if (!PHASES.includes(p)) throw new Error(`unknown phase ${p}; phases: ${PHASES.join(', ')}`);
  const jobs = Number(opts.jobs ?? 1);
  if (!Number.isInteger(jobs) || jobs < 1) throw new Error(`--jobs must be a positive integer, not ${opts.jobs}`);
  return { seed, kills, phases, jobs };
}

async function main(): Promise<void> {
  let args: ReturnType<typeof parse>;
  try {
    args = parse(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n`);
    process.exit(2);
  }
  const killsPerPhase = Math.ceil(args.kills / args.phases.length);
  process.stdout.write(`chaos: seed ${args.seed}, ${killsPerPhase} kills in each of ${args.phases.join(', ')}\n`);
  const t0 = Date.now();
  const r = await runChaos({ seed: args.seed, phases: args.phases, killsPerPhase, jobs: args.jobs, log: (l) => process.stdout.write(`${l}\n`) });
  process.stdout.write(`\n${table(r.phases)}\n\n${((Date.now() - t0) / 1000).toFixed(0)} s\n`);
  if (r.first) {
    process.stdout.write(
      `\nFIRST VIOLATION: seed ${r.seed}, phase ${r.first.phase}, kill ${r.first.kill}: ${r.first.message}\n` +
        `replay: npm run chaos -- --seed=${r.seed} --phase=${r.first.phase} --kills=${r.first.kill}\n`,
    );
    process.exit(1);
  }
  process.stdout.write('0 violations\n');
}

main().catch((e) => {
  process.stderr.write(`${(e as Error).stack}\n`);
  process.exit(1);
});
