import * as assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { Engine } from '../../src/core/engine';
import { WaypointError } from '../../src/core/model/errors';
import { PgEventLog, PgProjectionReader } from '../../src/core/store/postgres';
import { PgCluster } from '../support/pgCluster';
import { tmpDir } from '../support/tmp';

/**
 * The team store through a real PgBouncer (Debian's `pgbouncer`): in transaction mode
 * Waypoint cannot work (LISTEN, prepared statements, session limits) and says so
 * precisely, changing nothing; in session mode, told to pass Waypoint's session
 * settings by, it works. Fails, not skips, without PgBouncer installed.
 */

const PGBOUNCER = '/usr/sbin/pgbouncer';

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
}

async function startBouncer(cluster: PgCluster, mode: 'transaction' | 'session', extra = ''): Promise<{ url: string; proc: ChildProcess }> {
  assert.ok(fs.existsSync(PGBOUNCER), `PgBouncer is not installed (${PGBOUNCER}): apt-get install pgbouncer`);
  const dir = path.join(cluster.dir, `bouncer-${mode}`);
  fs.mkdirSync(dir, { recursive: true });
  const port = await freePort();
  fs.writeFileSync(path.join(dir, 'users.txt'), `"postgres" "${cluster.password}"\n`);
  fs.writeFileSync(
    path.join(dir, 'pgbouncer.ini'),
    `[databases]\nwaypoint = host=127.0.0.1 port=${cluster.port} dbname=waypoint user=postgres password=${cluster.password}\n` +
      `[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = ${port}\nunix_socket_dir =\nauth_type = plain\nauth_file = ${dir}/users.txt\npool_mode = ${mode}\n` +
      `logfile = ${dir}/pgbouncer.log\npidfile = ${dir}/pgbouncer.pid\n${extra}\n`,
  );
  spawnSync('chown', ['-R', 'postgres:postgres', dir]);
  const proc = spawn('runuser', ['-u', 'postgres', '--', PGBOUNCER, path.join(dir, 'pgbouncer.ini')], { stdio: 'ignore' });
  for (let i = 0; i < 50; i++) {
    const up = await new Promise<boolean>((r) => {
      const s = net.connect(port, '127.0.0.1', () => (s.end(), r(true))).on('error', () => r(false));
    });
    if (up) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return { url: `postgresql://postgres:${cluster.password}@127.0.0.1:${port}/waypoint`, proc };
}

describe('the team store through PgBouncer (real pgbouncer, real cluster)', function () {
  this.timeout(60_000);
  let cluster: PgCluster;
  const procs: ChildProcess[] = [];
  const dirs: { cleanup: () => void }[] = [];
  before(async () => {
    cluster = await PgCluster.create();
  });
  after(() => {
    for (const p of procs) p.kill('SIGTERM');
    for (const d of dirs) d.cleanup();
    cluster?.remove();
  });

  it('in transaction mode: refused with a precise message naming the pooler and what to do, password redacted, nothing written', async () => {
    const { url, proc } = await startBouncer(cluster, 'transaction');
    procs.push(proc);
    const ws = tmpDir('wp-pgb-');
    dirs.push(ws);
    for (const open of [
      () => PgEventLog.open({ url, workspace: { id: 'pgb-1', machine: 'm', path: '/pgb' } }),
      () => PgProjectionReader.open(url),
      () => Engine.open({ workspace: ws.dir, teamStore: url }),
    ]) {
      await assert.rejects(open(), (e: unknown) => {
        assert.ok(e instanceof WaypointError, String(e));
        assert.equal(e.code, 'invalid_input');
        assert.match(e.message, /connection pooler in transaction mode \(PgBouncer's pool_mode=transaction or statement\)/);
        assert.match(e.message, /statement_timeout/);
        assert.match(e.message, /pool_mode=session/);
        assert.ok(!e.message.includes(cluster.password), 'password redacted');
        return true;
      });
    }
    // Nothing reached the database: not even the schema.
    const direct = await PgProjectionReader.open(cluster.url());
    try {
      assert.deepEqual(await direct.listTasks({ allWorkspaces: true }), []);
    } finally {
      await direct.close();
    }
  });

  it('in session mode with Waypoint\'s settings let through: records and lists as directly', async () => {
    const { url, proc } = await startBouncer(cluster, 'session', 'ignore_startup_parameters = statement_timeout, idle_in_transaction_session_timeout');
    procs.push(proc);
    const ws = tmpDir('wp-pgb-');
    dirs.push(ws);
    const engine = await Engine.open({ workspace: ws.dir, teamStore: url });
    try {
      const { taskId } = await engine.startTask({ goal: 'through the pooler' });
      const reader = await PgProjectionReader.open(url);
      try {
        assert.ok((await reader.listTasks({ allWorkspaces: true })).some((l) => l.task.id === taskId));
      } finally {
        await reader.close();
      }
    } finally {
      await engine.close();
    }
  });
});
