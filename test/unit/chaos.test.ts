import * as assert from 'node:assert/strict';
import { runChaos } from '../chaos/driver';
import { PHASES } from '../chaos/phases';
import { table } from '../chaos/report';

/**
 * A slice of the crash matrix (`npm run chaos` runs ≥1,000 kills): the same
 * driver, fixed seeds, every phase — event floods, checkpoints, rollbacks, review
 * applies, MCP sessions — with real child processes SIGKILLed and the invariants
 * checked after each kill. WAYPOINT_CHAOS_SLICE_KILLS sets kills per phase and seed.
 */
const SEEDS = [20261130, 8];
const KILLS = Number(process.env.WAYPOINT_CHAOS_SLICE_KILLS ?? 6);

describe('crash matrix slice (SIGKILL in every phase, invariants after each kill)', function () {
  this.timeout(0);
  for (const seed of SEEDS) {
    it(`seed ${seed}: ${KILLS} kills in each of ${PHASES.length} phases, 0 violations`, async () => {
      const r = await runChaos({ seed, phases: PHASES, killsPerPhase: KILLS, jobs: 2 });
      process.stdout.write(`${table(r.phases).replace(/^/gm, '      ')}\n`);
      assert.equal(r.first, null, r.first ? `seed ${seed}, phase ${r.first.phase}, kill ${r.first.kill}: ${r.first.message} (replay: npm run chaos -- --seed=${seed} --phase=${r.first.phase} --kills=${r.first.kill})` : '');
      for (const p of r.phases) {
        assert.equal(p.kills, KILLS, `${p.phase} ran ${p.kills} kills`);
        // Killing a workload that acknowledged nothing would prove nothing.
        assert.ok(p.acked > 0 && p.checks > p.kills, `${p.phase} acknowledged ${p.acked} calls and made ${p.checks} checks`);
      }
    });
  }
});
