import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import { main } from '../../src/cli/main';
import type { Engine } from '../../src/core/engine/engine';
import { STORE_CLAIM_HEADER } from '../../src/core/store/folderIdentity';
import { startOwnerEndpoint, type OwnerEndpoint } from '../../src/mcp/owner';
import { ownOrRelay } from '../../src/ownership/ownOrRelay';
import { openEngine, tmpDir } from '../support/tmp';

/**
 * The one own-or-relay switch (src/ownership/ownOrRelay.ts), which `waypoint mcp`, the
 * CLI, a window's store link and `waypoint serve` all go through: free → own; held
 * without an endpoint → wait, saying by whom; served → relay, with this folder's claim.
 */
describe('ownership: one switch decides own, relay or wait', function () {
  this.timeout(30_000);
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine | undefined;
  let endpoint: OwnerEndpoint | undefined;
  const storeDir = () => path.join(ws.dir, '.waypoint');

  beforeEach(() => {
    ws = tmpDir('wp-switch-');
  });
  afterEach(async () => {
    await endpoint?.close();
    await engine?.close();
    endpoint = undefined;
    engine = undefined;
    ws.cleanup();
  });

  it('free → own; held without an endpoint → wait, naming the holder; served → relay with the claim', async () => {
    assert.deepEqual(ownOrRelay(storeDir()), { kind: 'own' });
    engine = await openEngine(ws.dir);
    const held = ownOrRelay(storeDir());
    assert.equal(held.kind, 'wait');
    assert.match(held.kind === 'wait' ? held.reason : '', new RegExp(`held by .*pid ${process.pid}.*serves no endpoint`));
    endpoint = await startOwnerEndpoint({ engine });
    const served = ownOrRelay(storeDir());
    assert.equal(served.kind, 'relay');
    if (served.kind !== 'relay') return;
    assert.equal(served.discovery.url, endpoint.http.url);
    assert.equal(served.owner.pid, process.pid);
    assert.ok(served.headers[STORE_CLAIM_HEADER], 'every relayed call says which store it means');
  });

  it('waypoint serve on a store another process serves is refused with who and where, and changes nothing', async () => {
    engine = await openEngine(ws.dir);
    endpoint = await startOwnerEndpoint({ engine });
    const seq = engine.eventLog.lastSeq;
    let out = '';
    let err = '';
    const io = { stdout: { write: (s: string) => ((out += s), true) } as never, stderr: { write: (s: string) => ((err += s), true) } as never };
    const code = await main(['serve', '--workspace', ws.dir], io);
    assert.equal(code, 1, `${out}\n${err}`);
    assert.match(err, new RegExp(`already served by .*pid ${process.pid}.* at ${endpoint.http.url.replace(/[.]/g, '\\.')}`));
    assert.equal(out, '');
    assert.equal(engine.eventLog.lastSeq, seq);
    const still = ownOrRelay(storeDir());
    assert.equal(still.kind === 'relay' && still.discovery.url, endpoint.http.url, 'the serving owner is untouched');
  });
});
