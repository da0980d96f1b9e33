import * as assert from 'node:assert/strict';
import { describeConnectFailure, outageCause, parseTeamStoreUrl, secretKey, withPassword } from '../../src/extension/teamStore/teamStoreUrl';
import { folderName, groupByMachine } from '../../src/extension/teamStore/teamListing';
import type { TaskListing } from '../../src/core/store/eventLog';

/**
 * The rules of the `waypoint.teamStore.url` setting and Connect's input: a URL
 * without a password, the password put back only in memory, keyed per server and
 * user; and the Team Store view's grouping. Plain Node: these modules import no vscode.
 */
describe('team store URL and password handling', () => {
  it('accepts a URL without a password and names its server', () => {
    const p = parseTeamStoreUrl('  postgresql://alice@db.example:6543/waypoint?sslmode=verify-full&sslrootcert=/etc/ca.pem ');
    assert.ok(p.ok);
    assert.equal(p.url, 'postgresql://alice@db.example:6543/waypoint?sslmode=verify-full&sslrootcert=/etc/ca.pem');
    assert.equal(p.identity, 'alice@db.example:6543/waypoint');
    assert.equal(p.where, 'db.example:6543/waypoint');
    assert.equal(p.user, 'alice');
    const bare = parseTeamStoreUrl('postgres://db.example');
    assert.ok(bare.ok);
    assert.equal(bare.identity, 'db.example:5432');
  });

  it('refuses a URL holding a password, saying where the password goes instead', () => {
    for (const url of ['postgresql://alice:s3cret@db.example/waypoint', 'postgresql://alice:@db.example/waypoint', 'postgresql://:pw@db.example/w']) {
      const p = parseTeamStoreUrl(url);
      assert.equal(p.ok, false, url);
      assert.match((p as { message: string }).message, /Leave the password out of the URL.*secret storage/);
      assert.doesNotMatch((p as { message: string }).message, /s3cret/);
    }
    const q = parseTeamStoreUrl('postgresql://alice@db.example/waypoint?password=s3cret');
    assert.equal(q.ok, false);
    assert.match((q as { message: string }).message, /Leave 'password' out of the URL/);
    assert.equal(parseTeamStoreUrl('postgresql://alice@db.example/waypoint?sslpassword=x').ok, false);
  });

  it('refuses what is not a usable PostgreSQL URL, with a clear message', () => {
    const cases: [string, RegExp][] = [
      ['', /Enter the PostgreSQL URL/],
      ['mysql://db.example/x', /must start with postgresql:\/\//],
      ['postgresql://', /not a valid URL|names no host/],
      ['postgresql://db.example:99999/w', /not a valid URL|out of range/],
      ['postgresql://db.example/w?sslmode=sometimes', /Unknown sslmode 'sometimes'/],
      ['postgresql://db example/w', /spaces/],
      [`postgresql://db.example/${'x'.repeat(3000)}`, /longer than 2048/],
    ];
    for (const [url, why] of cases) {
      const p = parseTeamStoreUrl(url);
      assert.equal(p.ok, false, url);
      assert.match((p as { message: string }).message, why, url);
    }
  });

  it('puts the password back in memory only, encoded, and keys it per server and user', () => {
    const url = 'postgresql://alice@db.example:5432/waypoint?sslmode=require';
    const full = withPassword(url, 'p@ss:w/rd%');
    const u = new URL(full);
    assert.equal(decodeURIComponent(u.password), 'p@ss:w/rd%');
    assert.equal(u.username, 'alice');
    assert.equal(u.searchParams.get('sslmode'), 'require');
    assert.equal(withPassword(url, ''), url);
    assert.equal(withPassword(url, undefined), url);
    const a = parseTeamStoreUrl(url);
    const b = parseTeamStoreUrl('postgresql://alice@other.example:5432/waypoint');
    const c = parseTeamStoreUrl('postgresql://bob@db.example:5432/waypoint');
    assert.ok(a.ok && b.ok && c.ok);
    assert.equal(secretKey(a.identity), 'waypoint.teamStore.password:alice@db.example:5432/waypoint');
    assert.notEqual(secretKey(a.identity), secretKey(b.identity), 'another server never gets this password');
    assert.notEqual(secretKey(a.identity), secretKey(c.identity), 'another user never gets this password');
    // TLS parameters do not change which server the password is for.
    const d = parseTeamStoreUrl('postgresql://alice@db.example/waypoint');
    assert.ok(d.ok);
    assert.equal(secretKey(d.identity), secretKey(a.identity));
  });

  it('says why a connection failed, by kind, without the password', () => {
    const url = withPassword('postgresql://alice@db.example/waypoint', 'hunter22');
    const err = (message: string, code?: string) => Object.assign(new Error(message), code ? { code } : {});
    const kinds: [Error, string][] = [
      [err('password authentication failed for user "alice"', '28P01'), 'auth'],
      [err('SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string'), 'auth'],
      [err('The server does not support SSL connections'), 'tls'],
      [err('self-signed certificate in certificate chain', 'SELF_SIGNED_CERT_IN_CHAIN'), 'tls'],
      [err('database "nope" does not exist', '3D000'), 'database'],
      [err('permission denied for database waypoint', '42501'), 'permission'],
      [err(`Cannot connect to the team store at ${url}: connect ECONNREFUSED 127.0.0.1:5432`), 'unreachable'],
      [err('getaddrinfo ENOTFOUND db.example', 'ENOTFOUND'), 'unreachable'],
      [err('something odd'), 'other'],
    ];
    for (const [e, kind] of kinds) {
      const d = describeConnectFailure(e, url, 'db.example:5432/waypoint');
      assert.equal(d.kind, kind, e.message);
      assert.match(d.message, /db\.example:5432\/waypoint/);
      assert.doesNotMatch(d.message, /hunter22/);
    }
    assert.match(describeConnectFailure(kinds[1][0], url, 'x').message, /asks for a password and none was given/);
  });

  it('finds the cause in the store link’s reason for the outage notice', () => {
    const reason = 'opening it failed: Cannot connect to the team store at postgresql://postgres:***@127.0.0.1:5999/waypoint: connect ECONNREFUSED 127.0.0.1:5999. Nothing acknowledged is lost; try again when the database is reachable.';
    assert.equal(outageCause(reason), 'connect ECONNREFUSED 127.0.0.1:5999');
    assert.equal(outageCause('something else'), 'something else');
  });
});

describe('team store view grouping', () => {
  const task = (id: string, updatedAt: number): TaskListing['task'] => ({ id, title: id, goal: id, agent: null, state: 'running', attempt: 1, createdAt: 0, updatedAt });
  const l = (machine: string, wsId: string, path: string, t: TaskListing['task']): TaskListing => ({ workspace: { id: wsId, machine, path }, task: t });

  it('groups by machine then workspace, this machine and this workspace first, newest activity first', () => {
    const listings = [
      l('zeta', 'w1', '/src/api', task('a', 50)),
      l('alpha', 'w2', '/home/x/web', task('b', 10)),
      l('alpha', 'w3', '/home/x/cli', task('c', 40)),
      l('mine', 'w4', '/work/here', task('d', 5)),
      l('mine', 'w5', '/work/other', task('e', 90)),
      l('alpha', 'w2', '/home/x/web', task('f', 30)),
    ];
    const g = groupByMachine(listings, { machine: 'mine', workspacePath: '/work/here' });
    assert.deepEqual(
      g.map((m) => [m.name, m.here, m.taskCount]),
      [
        ['mine', true, 2],
        ['alpha', false, 3],
        ['zeta', false, 1],
      ],
    );
    assert.deepEqual(
      g[0].workspaces.map((w) => [w.path, w.here]),
      [
        ['/work/here', true],
        ['/work/other', false],
      ],
    );
    assert.deepEqual(
      g[1].workspaces.map((w) => [w.path, w.updatedAt, w.tasks.map((t) => t.id)]),
      [
        ['/home/x/cli', 40, ['c']],
        ['/home/x/web', 30, ['b', 'f']],
      ],
    );
    // By id when known: the same path on the same machine under another id is another workspace (a re-clone).
    const byId = groupByMachine(listings, { machine: 'mine', workspacePath: '/work/here', workspaceId: 'w5' });
    assert.deepEqual(
      byId[0].workspaces.map((w) => [w.id, w.here]),
      [
        ['w5', true],
        ['w4', false],
      ],
    );
    assert.deepEqual(groupByMachine([], { machine: 'mine' }), []);
  });

  it('names a folder by its last segment, from any machine’s path style', () => {
    assert.equal(folderName('/home/alice/src/api'), 'api');
    assert.equal(folderName('C:\\Users\\bob\\web\\'), 'web');
    assert.equal(folderName('/'), '/');
  });
});
