import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Engine } from '../../src/core/engine/engine';
import { openEngine, tmpDir } from '../support/tmp';

/**
 * `tasks({ limit })` as the auto checkpoint asks it on every watcher event and flush:
 * the same tasks, leases and order as the whole list, cut to the first few (each one's
 * lease read on its own instead of every lease of the store).
 */
describe('queries: tasks with a small limit', () => {
  let sandbox: ReturnType<typeof tmpDir>;
  let engine: Engine;
  beforeEach(async () => {
    sandbox = tmpDir('wp-queries-');
    const ws = path.join(sandbox.dir, 'ws');
    fs.mkdirSync(ws);
    fs.writeFileSync(path.join(ws, 'a.txt'), 'a\n');
    engine = await openEngine(ws);
  });
  afterEach(async () => {
    await engine.close();
    sandbox.cleanup();
  });

  it('gives the latest active tasks with their leases, as the unlimited list does', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push((await engine.startTask({ goal: `task ${i}`, leaseTtlMs: 60_000 + i })).taskId);
    const all = engine.tasks({ states: ['running', 'waiting_tool'] });
    for (const limit of [1, 3, 8, 9, 20]) assert.deepEqual(engine.tasks({ states: ['running', 'waiting_tool'], limit }), all.slice(0, limit), `limit ${limit}`);
    const [latest] = engine.tasks({ states: ['running'], limit: 1 });
    assert.ok(latest && all[0] && latest.id === all[0].id);
    assert.ok(latest.lease, 'the lease is read for a limited list too');
    assert.deepEqual(latest.lease, all[0].lease);
  });
});
