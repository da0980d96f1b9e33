import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as path from 'node:path';

/**
 * The fleet soak's short version (`npm run soak -- --fleet --short`, test/soak/fleet.ts):
 * 3 machine names × 2 workspaces, 6 agents, 45 s against a throwaway PostgreSQL cluster,
 * with the server crashed (`pg_ctl stop -m immediate`) and restarted, every connection
 * cut by a proxy, and a workspace's process SIGKILLed and taken over on another machine.
 * It checks from PostgreSQL that every acknowledged call is there, once, in order, that
 * the stored projections equal a rebuild, and that the killed process's tasks were shown
 * interrupted within the bound; this test passes when it does. Like the other pg.* tests
 * it needs Debian's PostgreSQL installed (CI has it) and fails loudly without it.
 */

const RUN = path.join(__dirname, '..', 'soak', 'run.ts');

describe('fleet soak, short version (real cluster, crashes, cut connections, killed processes)', function () {
  // About a minute at load 1: 45 s of chaos, the processes' start, the takeover's wait for the sweep, the checks. Generous for a loaded CI machine.
  this.timeout(300_000);

  it('every acknowledged event present, no duplicate, in order, projections equal a rebuild, killed tasks interrupted within the bound', async () => {
    const t0 = Date.now();
    const { code, out } = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const child = spawn(process.execPath, ['--import', 'tsx', RUN, '--fleet', '--short', `--seed=${Number(process.env.WAYPOINT_FLEET_SEED ?? 1)}`], { stdio: ['ignore', 'pipe', 'pipe'] });
      let text = '';
      child.stdout!.on('data', (d) => (text += d));
      child.stderr!.on('data', (d) => (text += d));
      child.on('exit', (c) => resolve({ code: c, out: text }));
    });
    const table = out.slice(out.indexOf('## fleet soak'));
    console.log(`      [fleet] ${((Date.now() - t0) / 1000).toFixed(0)} s\n${table.replace(/^/gm, '      ')}`);
    assert.equal(code, 0, `the fleet soak failed:\n${out.slice(-6000)}`);
    assert.match(out, /fleet soak: passed/);
    assert.match(out, /\| acknowledged but missing \| 0 \|/);
  });
});
