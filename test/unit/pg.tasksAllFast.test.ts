import * as assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { main } from '../../src/cli/main';
import { fastTasksAll, parseTasksAllArgs } from '../../src/cli/tasksAllFast';
import { PgEventLog } from '../../src/core/store/postgres';
import { PgCluster } from '../support/pgCluster';
import { started } from '../support/tmp';

/** The `tasks --all` fast path answers exactly what the full CLI answers, and hands everything else to it. */
describe('tasks --all fast path (real cluster)', function () {
  this.timeout(60_000);
  let cluster: PgCluster;
  before(async () => {
    cluster = await PgCluster.create();
  });
  after(() => cluster?.remove());

  it('takes only tasks --all on a postgresql store, with --json, --store and --workspace', () => {
    const env = { WAYPOINT_STORE: 'postgresql://u@h/db' };
    assert.deepEqual(parseTasksAllArgs(['tasks', '--all', '--json'], env), { store: 'postgresql://u@h/db', json: true });
    assert.deepEqual(parseTasksAllArgs(['tasks', '--all', '--store=postgres://x/y', '-w', '/tmp'], {}), { store: 'postgres://x/y', json: false });
    assert.equal(parseTasksAllArgs(['tasks', '--json'], env), null);
    assert.equal(parseTasksAllArgs(['tasks', '--all', '--state', 'running'], env), null);
    assert.equal(parseTasksAllArgs(['tasks', '--all', '--limit', '3'], env), null);
    assert.equal(parseTasksAllArgs(['tasks', '--all'], {}), null);
    assert.equal(parseTasksAllArgs(['tasks', '--all', '--store', 'sqlite://x'], {}), null);
    assert.equal(parseTasksAllArgs(['task', '--all'], env), null);
  });

  it('prints what the full CLI prints (json and table), and declines a store without the schema or out of reach', async () => {
    const url = cluster.url();
    // A store nobody has opened yet: no schema, so the full CLI (which creates it) answers.
    assert.equal((await fastTasksAll(['tasks', '--all', '--json', '--store', url])).handled, false);
    const log = await PgEventLog.open({ url, workspace: { id: randomUUID(), machine: 'fast\u0000m', path: '/fast/1' } });
    await (await log.append([started(1), started(2)])).durable;
    await log.close();
    for (const flags of [['--json'], []]) {
      const fast = await fastTasksAll(['tasks', '--all', ...flags, '--store', url]);
      assert.ok(fast.handled);
      let buf = '';
      const out = new Writable({
        write(c, _e, cb) {
          buf += c.toString();
          cb();
        },
      });
      const code = await main(['tasks', '--all', ...flags, '--store', url], { stdout: out as never, stderr: new Writable({ write: (_c, _e, cb) => cb() }) as never });
      assert.equal(code, 0);
      assert.equal(fast.output, buf);
    }
    assert.equal((await fastTasksAll(['tasks', '--all', '--store', 'postgresql://nobody@127.0.0.1:1/none'])).handled, false);
  });
});
