import * as assert from 'node:assert/strict';
import * as net from 'node:net';
import { checkTeamStore } from '../../src/extension/teamStore/teamStoreCheck';
import { parseTeamStoreUrl, withPassword } from '../../src/extension/teamStore/teamStoreUrl';
import { PgCluster } from '../support/pgCluster';

/**
 * Connect to Team Store's test, against a real throwaway PostgreSQL (it fails, not
 * skips, without one): the right password passes (a password with URL-special
 * characters included, put back into the URL in memory only); a wrong or missing
 * password, TLS the server does not offer, a missing database and a closed port each
 * fail with their own clear words and never echo the password.
 */
describe('team store connection check (real PostgreSQL)', function () {
  this.timeout(120_000);
  let pg: PgCluster;
  const password = 'p@ss:w/rd%#?x';
  let base: string;

  before(async () => {
    pg = await PgCluster.create();
    pg.psql(`CREATE ROLE alice LOGIN CREATEDB PASSWORD '${password}'; GRANT ALL ON DATABASE waypoint TO alice; ALTER DATABASE waypoint OWNER TO alice;`);
    base = `postgresql://alice@127.0.0.1:${pg.port}/waypoint`;
  });
  after(() => pg?.remove());

  const where = (url: string) => {
    const p = parseTeamStoreUrl(url);
    assert.ok(p.ok, url);
    return p.where;
  };

  it('passes with the right password (special characters included) and creates the schema', async () => {
    assert.equal(await checkTeamStore(withPassword(base, password), where(base)), undefined);
    assert.equal(pg.psql(`SELECT count(*) FROM information_schema.tables WHERE table_schema = 'waypoint' AND table_name = 'tasks'`).trim(), '1');
  });

  it('says the password was refused, or that none was given, without echoing it', async () => {
    const wrong = await checkTeamStore(withPassword(base, 'not-the-password'), where(base));
    assert.equal(wrong?.kind, 'auth');
    assert.match(wrong!.message, /refused the user name or password/);
    assert.doesNotMatch(wrong!.message, /not-the-password/);
    const none = await checkTeamStore(base, where(base));
    assert.equal(none?.kind, 'auth');
    assert.match(none!.message, /asks for a password and none was given/);
  });

  it('says TLS failed when the URL asks for TLS the server does not offer', async () => {
    const url = `${base}?sslmode=require`;
    const r = await checkTeamStore(withPassword(url, password), where(url));
    assert.equal(r?.kind, 'tls');
    assert.match(r!.message, /TLS connection to 127\.0\.0\.1:\d+\/waypoint failed.*sslmode/);
  });

  it('names a missing database, and a port nobody listens on', async () => {
    const missing = `postgresql://alice@127.0.0.1:${pg.port}/nope`;
    const m = await checkTeamStore(withPassword(missing, password), where(missing));
    assert.equal(m?.kind, 'database');
    const closed = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const port = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(port));
      });
    });
    const down = `postgresql://alice@127.0.0.1:${closed}/waypoint`;
    const d = await checkTeamStore(withPassword(down, password), where(down), 3000);
    assert.equal(d?.kind, 'unreachable');
    assert.match(d!.message, /Cannot reach 127\.0\.0\.1:\d+\/waypoint/);
    assert.doesNotMatch(d!.message, new RegExp(password.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  });
});
