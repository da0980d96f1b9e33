import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Engine } from '../../src/core/engine/engine';
import { openEngine, tmpDir } from '../support/tmp';
import { waitFor } from '../support/mcp';

/** Threads of this process (Linux): each stat worker is one or more of them. */
const threads = (): number => fs.readdirSync('/proc/self/task').length;

// A process that owns the store for one call (a CLI call, a hook) ends its stat workers as
// each scan ends: what follows the scan is where its memory peaks. A long-lived owner keeps
// them for its next rescan. 4,200 files: past the 4,000 from which a rescan lstats on workers.
describe('stat workers of a one-call process', function () {
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine | undefined;
  before(function () {
    if (process.platform !== 'linux') this.skip();
  });
  beforeEach(() => {
    ws = tmpDir();
    for (let d = 0; d < 42; d++) {
      fs.mkdirSync(path.join(ws.dir, `d${d}`));
      for (let f = 0; f < 100; f++) fs.writeFileSync(path.join(ws.dir, `d${d}`, `f${f}.txt`), `${d}/${f}\n`);
    }
  });
  afterEach(async () => {
    await engine?.close();
    engine = undefined;
    ws.cleanup();
  });

  async function twoRescans(releaseWorkersAfterScan: boolean): Promise<{ baseline: number; after: number[]; changed: number[] }> {
    engine = await openEngine(ws.dir, { snapshots: { releaseWorkersAfterScan } });
    const baseline = threads();
    const { taskId } = await engine.startTask({ goal: 'rescans' });
    const after: number[] = [];
    const changed: number[] = [];
    for (let i = 1; i <= 2; i++) {
      fs.writeFileSync(path.join(ws.dir, 'd7', `f${i}.txt`), `edit ${i}\n`);
      const cp = await engine.checkpoint({ taskId, label: `edit ${i}` });
      changed.push(cp.filesChanged);
      if (releaseWorkersAfterScan) await waitFor('the stat workers to end', () => threads() <= baseline, 10_000);
      after.push(threads());
    }
    return { baseline, after, changed };
  }

  it('with releaseWorkersAfterScan, no worker outlives a scan, and the next rescan starts them again and sees its change', async () => {
    const r = await twoRescans(true);
    assert.deepEqual(r.changed, [1, 1]);
    for (const n of r.after) assert.ok(n <= r.baseline, `${n} threads after a scan, ${r.baseline} before`);
  });

  it('without it (a long-lived owner), the workers stay for the next rescan', async () => {
    const r = await twoRescans(false);
    assert.deepEqual(r.changed, [1, 1]);
    for (const n of r.after) assert.ok(n > r.baseline, `${n} threads after a scan, ${r.baseline} before: the workers were ended`);
  });
});
