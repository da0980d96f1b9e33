import { execFile, execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';

/**
 * A throwaway PostgreSQL cluster for tests and the benchmark: `initdb` into a fresh
 * temp dir owned by the `postgres` user, a random free port on 127.0.0.1, its
 * socket in the temp dir, `synchronous_commit=on` (every COMMIT waits for its WAL
 * flush, the durability Waypoint promises), and password authentication over TCP so
 * the tests see a URL with credentials (and can check they are never echoed).
 *
 * No mock and no shared server: the system cluster on 5432 is never touched. Debian's
 * binaries are found under /usr/lib/postgresql/<major>/bin; when none is installed
 * `start` throws, so a suite fails loudly instead of skipping (CI installs PostgreSQL).
 */

const PG_LIB = '/usr/lib/postgresql';

/** The newest installed Debian PostgreSQL's bin dir. Throws, naming what is missing, when there is none. */
export function pgBinDir(): string {
  const versions = fs.existsSync(PG_LIB)
    ? fs
        .readdirSync(PG_LIB)
        .filter((v) => fs.existsSync(path.join(PG_LIB, v, 'bin', 'pg_ctl')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (!versions.length) {
    throw new Error(`PostgreSQL is not installed: no ${PG_LIB}/<version>/bin/pg_ctl. Install Debian's 'postgresql' package (CI does); these tests need a real server.`);
  }
  return path.join(PG_LIB, versions[0], 'bin');
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

export interface PgClusterOptions {
  /** Extra `postgresql.conf` lines. */
  conf?: Record<string, string | number>;
}

export class PgCluster {
  private running = false;

  private constructor(
    readonly dir: string,
    readonly bin: string,
    private _port: number,
    readonly password: string,
  ) {}

  get port(): number {
    return this._port;
  }

  get dataDir(): string {
    return path.join(this.dir, 'data');
  }

  get socketDir(): string {
    return path.join(this.dir, 'sock');
  }

  /** A URL with the password in it, as a person would set WAYPOINT_STORE. */
  url(database = 'waypoint'): string {
    return `postgresql://postgres:${this.password}@127.0.0.1:${this.port}/${database}`;
  }

  /** Creates and starts a new cluster with a `waypoint` database. */
  static async create(opts: PgClusterOptions = {}): Promise<PgCluster> {
    const bin = pgBinDir();
    const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'wp-pg-')));
    const cluster = new PgCluster(dir, bin, await freePort(), randomBytes(12).toString('hex'));
    try {
      fs.mkdirSync(cluster.socketDir);
      const pwfile = path.join(dir, 'pwfile');
      fs.writeFileSync(pwfile, cluster.password, { mode: 0o600 });
      chownToPostgres(dir);
      cluster.asPostgres('initdb', ['-D', cluster.dataDir, '-U', 'postgres', `--pwfile=${pwfile}`, '--auth-local=trust', '--auth-host=scram-sha-256', '-E', 'UTF8', '--no-instructions']);
      fs.rmSync(pwfile);
      const conf = {
        port: cluster.port,
        listen_addresses: "'127.0.0.1'",
        unix_socket_directories: `'${cluster.socketDir}'`,
        synchronous_commit: 'on',
        fsync: 'on',
        max_connections: 200,
        shared_buffers: "'64MB'",
        logging_collector: 'off',
        ...(opts.conf ?? {}),
      };
      fs.appendFileSync(path.join(cluster.dataDir, 'postgresql.conf'), '\n' + Object.entries(conf).map(([k, v]) => `${k} = ${v}`).join('\n') + '\n');
      await cluster.startOnFreePort(opts.conf?.port === undefined);
      cluster.asPostgres('createdb', ['-h', cluster.socketDir, '-p', String(cluster.port), '-U', 'postgres', 'waypoint']);
      return cluster;
    } catch (e) {
      cluster.remove();
      throw e;
    }
  }

  private asPostgres(tool: string, args: string[]): string {
    const r = spawnSync('runuser', ['-u', 'postgres', '--', path.join(this.bin, tool), ...args], { encoding: 'utf8', timeout: 60_000 });
    if (r.status !== 0) throw new Error(`${tool} ${args.join(' ')} failed (${r.status ?? r.signal}): ${r.stderr || r.stdout}`);
    return r.stdout;
  }

  /**
   * The first start. A port found free can be taken before the server binds it: by
   * another test worker's cluster or server (mocha --parallel), or any other process.
   * Then the server says so in its log, and it is started again on another free port
   * (a later `port` line in postgresql.conf wins over an earlier one).
   */
  private async startOnFreePort(mayMove: boolean): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.start();
        return;
      } catch (e) {
        if (!mayMove || attempt >= 3 || !/could not bind|Address already in use|could not create any TCP\/IP sockets/i.test(this.serverLog())) throw e;
        this._port = await freePort();
        fs.appendFileSync(path.join(this.dataDir, 'postgresql.conf'), `port = ${this._port}\n`);
      }
    }
  }

  async start(): Promise<void> {
    this.asPostgres('pg_ctl', ['-D', this.dataDir, '-l', path.join(this.dir, 'server.log'), '-w', '-t', '60', 'start']);
    this.running = true;
  }

  /** Stops the server: `fast` (clean), or `immediate` (no checkpoint; recovery replays the WAL on the next start, like a crash). */
  stop(mode: 'fast' | 'immediate' = 'fast'): void {
    if (!this.running) return;
    this.asPostgres('pg_ctl', ['-D', this.dataDir, '-m', mode, '-w', '-t', '60', 'stop']);
    this.running = false;
  }

  /** `stop` without blocking the event loop (for stopping the server while in-process calls run). */
  async stopAsync(mode: 'fast' | 'immediate' = 'immediate'): Promise<void> {
    if (!this.running) return;
    await new Promise<void>((resolve, reject) =>
      execFile('runuser', ['-u', 'postgres', '--', path.join(this.bin, 'pg_ctl'), '-D', this.dataDir, '-m', mode, '-w', '-t', '60', 'stop'], (e) => (e ? reject(e) : resolve())),
    );
    this.running = false;
  }

  /** `start` without blocking the event loop. */
  async startAsync(): Promise<void> {
    await new Promise<void>((resolve, reject) =>
      execFile('runuser', ['-u', 'postgres', '--', path.join(this.bin, 'pg_ctl'), '-D', this.dataDir, '-l', path.join(this.dir, 'server.log'), '-w', '-t', '60', 'start'], (e) => (e ? reject(e) : resolve())),
    );
    this.running = true;
  }

  async restart(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    this.stop(mode);
    await this.start();
  }

  /**
   * `restart` without blocking the event loop, the server down for `downMs` between stop
   * and start (a crash with `immediate`: recovery replays the WAL). Returns how long the
   * server was unreachable, stop to started, in ms.
   */
  async restartAsync(mode: 'fast' | 'immediate' = 'immediate', downMs = 0): Promise<number> {
    const t0 = performance.now();
    await this.stopAsync(mode);
    if (downMs > 0) await new Promise((r) => setTimeout(r, downMs));
    await this.startAsync();
    return performance.now() - t0;
  }

  /** Runs SQL through psql over the socket (for test setup and inspection). */
  psql(sql: string, database = 'waypoint'): string {
    return this.asPostgres('psql', ['-h', this.socketDir, '-p', String(this.port), '-U', 'postgres', '-d', database, '-XAtq', '-v', 'ON_ERROR_STOP=1', '-c', sql]);
  }

  /** The server's log (for a failing test's message). */
  serverLog(): string {
    try {
      return fs.readFileSync(path.join(this.dir, 'server.log'), 'utf8');
    } catch {
      return '';
    }
  }

  /** Stops the server at once and deletes everything. */
  remove(): void {
    try {
      this.stop('immediate');
    } catch {
      // already down, or never started: the directory goes anyway
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

function chownToPostgres(dir: string): void {
  execFileSync('chown', ['-R', 'postgres:postgres', dir]);
  fs.chmodSync(dir, 0o700);
}
