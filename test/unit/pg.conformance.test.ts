import * as assert from 'node:assert/strict';
import { Engine } from '../../src/core/engine/engine';
import { isWaypointError } from '../../src/core/model/errors';
import { PgCluster } from '../support/pgCluster';
import { tmpDir } from '../support/tmp';

/**
 * One definition of the store conformance cases (idempotency, state machine, the
 * side-effect ledger, replay on reopen, fencing), run against both backends: the
 * embedded sql.js store and the PostgreSQL team store on a throwaway cluster.
 */

interface Backend {
  name: string;
  open(workspace: string): Promise<Engine>;
}

function conformance(b: () => Backend): void {
  const dirs: { cleanup: () => void }[] = [];
  const engines: Engine[] = [];
  const open = async (w: string) => {
    const e = await b().open(w);
    engines.push(e);
    return e;
  };
  const ws = () => {
    const t = tmpDir('wp-conf-');
    dirs.push(t);
    return t.dir;
  };
  afterEach(async () => {
    for (const e of engines.splice(0)) await e.close().catch(() => undefined);
    for (const d of dirs.splice(0)) d.cleanup();
  });

  it('idempotency: a repeated call answers the recorded result and appends nothing; a key reused for another operation is refused', async () => {
    const e = await open(ws());
    const a = await e.startTask({ goal: 'g', idempotencyKey: 'start-1' });
    const n = (await e.events()).length;
    const again = await e.startTask({ goal: 'g', idempotencyKey: 'start-1' });
    assert.equal(again.taskId, a.taskId);
    assert.equal((await e.events()).length, n);
    await assert.rejects(e.abandonTask({ taskId: a.taskId, idempotencyKey: 'start-1' }), (x: unknown) => isWaypointError(x) && x.code === 'conflict');
  });

  it('state machine: an illegal transition is refused and changes nothing', async () => {
    const e = await open(ws());
    const { taskId } = await e.startTask({ goal: 'g' });
    await e.abandonTask({ taskId });
    const n = (await e.events()).length;
    await assert.rejects(e.startStep({ taskId, stepId: 'x', title: 'x' }), (x: unknown) => isWaypointError(x) && x.code === 'illegal_transition');
    assert.equal((await e.events()).length, n);
    assert.equal(e.queries.task(taskId).state, 'abandoned');
  });

  it('side-effect ledger: done answers already_done with its result; an open intent is in_doubt, also after a reopen (replay)', async () => {
    const w = ws();
    let e = await open(w);
    const { taskId } = await e.startTask({ goal: 'g', leaseTtlMs: 3_600_000 });
    assert.equal((await e.beginSideEffect({ taskId, key: 'mail', kind: 'http', description: 'send' })).decision, 'proceed');
    await e.endSideEffect({ taskId, key: 'mail', ok: true, result: { id: 7 } });
    const done = await e.beginSideEffect({ taskId, key: 'mail', kind: 'http', description: 'send' });
    assert.deepEqual([done.decision, done.result], ['already_done', { id: 7 }]);
    await e.beginSideEffect({ taskId, key: 'migrate', kind: 'db', description: 'migrate' });
    await e.close();
    engines.splice(engines.indexOf(e), 1);
    e = await open(w);
    assert.equal((await e.beginSideEffect({ taskId, key: 'migrate', kind: 'db', description: 'migrate' })).decision, 'in_doubt');
    assert.equal((await e.beginSideEffect({ taskId, key: 'mail', kind: 'http', description: 'send' })).decision, 'already_done');
    const v = await e.verify({});
    assert.equal(v.ok, true, JSON.stringify(v));
  });
}

describe('store conformance: embedded sql.js', function () {
  this.timeout(60_000);
  conformance(() => ({ name: 'embedded', open: (w) => Engine.open({ workspace: w, store: { lock: { waitMs: 200 } } }) }));
});

describe('store conformance: PostgreSQL (real cluster)', function () {
  this.timeout(60_000);
  let cluster: PgCluster;
  before(async () => {
    cluster = await PgCluster.create();
  });
  after(() => cluster?.remove());
  conformance(() => ({ name: 'postgresql', open: (w) => Engine.open({ workspace: w, teamStore: cluster.url(), store: { lock: { waitMs: 200 } } }) }));

  it('fencing: a writer replaced on another machine (same workspace id) is refused with lost_ownership, and nothing of it is recorded', async () => {
    const a = tmpDir('wp-conf-fence-');
    const b = tmpDir('wp-conf-fence-');
    try {
      const e1 = await Engine.open({ workspace: a.dir, teamStore: cluster.url() });
      const { taskId } = await e1.startTask({ goal: 'g' });
      // The second machine: a copy of the workspace's identity, its own folder and lock.
      const fs = await import('node:fs');
      fs.mkdirSync(`${b.dir}/.waypoint`, { recursive: true, mode: 0o700 });
      fs.copyFileSync(`${a.dir}/.waypoint/workspace-id.json`, `${b.dir}/.waypoint/workspace-id.json`);
      // Another machine by name: the same id used from another folder of this machine would be a copy, given its own id.
      const machine = process.env.WAYPOINT_MACHINE;
      process.env.WAYPOINT_MACHINE = 'the-second-machine';
      let e2: Engine;
      try {
        e2 = await Engine.open({ workspace: b.dir, teamStore: cluster.url() });
      } finally {
        if (machine === undefined) delete process.env.WAYPOINT_MACHINE;
        else process.env.WAYPOINT_MACHINE = machine;
      }
      try {
        assert.equal(e2.queries.task(taskId).state, 'running', 'the new writer folded the history');
        const before = (await e2.events()).length;
        await assert.rejects(e1.abandonTask({ taskId }), (x: unknown) => isWaypointError(x) && x.code === 'lost_ownership');
        assert.equal((await e2.events()).length, before);
        await e2.abandonTask({ taskId });
      } finally {
        await e2.close();
        await e1.close().catch(() => undefined);
      }
    } finally {
      a.cleanup();
      b.cleanup();
    }
  });
});
