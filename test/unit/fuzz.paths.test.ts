import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import { Engine } from '../../src/core/engine/engine';
import { localApi } from '../../src/core/engine/api';
import { isWaypointError } from '../../src/core/model/errors';
import { applyRestore, canonicalJson, pathKeyProblem, UnsafePathError, type ManifestEntry, type RestorePlan } from '../../src/core/snapshot/index';
import { assertReadable, fuzzParams, listingOf, listingOutside } from '../support/fuzz';
import { tmpDir } from '../support/tmp';
import { embeddedStore } from '../support/embedded';

/**
 * Hostile manifest paths — traversal, absolute, NUL, backslashes, NFD, case
 * collisions, overlong names and paths, .git/.waypoint inside, a parent that is a
 * symlink leading out — injected where a hostile or corrupt store would put them:
 * a checkpoint whose manifest names them (then rolled back to), the paths of a
 * rollback request, and a restore plan. The workspace sits in a sentinel directory
 * beside a canary directory; the sentinel's full listing outside the workspace
 * must never change, and every refusal must be a clear error that changed nothing.
 */
const segment = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('..', '.', '', 'a', 'A', 'src', '.git', '.GIT', '.waypoint', 'escape', 'cafe\u0301', 'café', 'x\u0000y', 'a\\..\\..', 'C:', '\u202e', 'con', 'x'.repeat(256)) },
  { weight: 1, arbitrary: fc.string({ maxLength: 6 }) },
);
/** A path key built from hostile segments, maybe absolute, maybe with Windows separators, maybe overlong. */
const hostileKey = fc.oneof(
  fc.tuple(fc.boolean(), fc.array(segment, { minLength: 1, maxLength: 5 }), fc.constantFrom('/', '\\')).map(([abs, segs, sep]) => (abs ? sep : '') + segs.join(sep)),
  fc.constantFrom('../outside/pwned', 'a/../../outside/pwned', 'escape/pwned', 'escape/../pwned', '.git/hooks/post-checkout', '.waypoint/waypoint.db', 'sub/.Git/config', 'a/'.repeat(2100) + 'x'),
  fc.string({ unit: 'binary', maxLength: 12 }),
);

describe('fuzz: manifest paths (manifests, rollback, restore)', function () {
  this.timeout(300_000);
  let sandbox: ReturnType<typeof tmpDir>;
  let ws: string;
  let engine: Engine;
  let taskId: string;
  let goodCheckpoint: string;
  let pwnedHash: string;
  let injected = 0;

  before(async () => {
    sandbox = tmpDir('wp-fuzz-paths-');
    ws = path.join(sandbox.dir, 'ws');
    const outside = path.join(sandbox.dir, 'outside');
    fs.mkdirSync(path.join(ws, 'src'), { recursive: true });
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(outside, 'canary.txt'), 'must never change\n');
    fs.writeFileSync(path.join(ws, 'src', 'a.ts'), 'export const a = 1;\n');
    // A parent that leads out of the workspace: writing escape/x would land in outside/.
    fs.symlinkSync(outside, path.join(ws, 'escape'));
    engine = await Engine.open({ workspace: ws, store: { lock: { waitMs: 200 } } });
    const t = await engine.startTask({ goal: 'paths fuzz target' });
    taskId = t.taskId;
    goodCheckpoint = t.baseCheckpointId;
    pwnedHash = (await engine.workspaceSnapshots!.blobs.put(Buffer.from('pwned\n'))).hash;
    await engine.workspaceSnapshots!.blobs.flush();
  });
  after(async () => {
    await engine?.close();
    sandbox?.cleanup();
  });

  const fileEntry = (): ManifestEntry => ({ type: 'file', hash: pwnedHash, size: 6, mode: 0o644, mtimeMs: 0, ino: 0 });
  const workspaceListing = () => listingOf(ws).filter((l) => !l.startsWith('.waypoint'));

  /** Records a checkpoint whose manifest holds `keys`, as a corrupt or hostile store on disk would. */
  async function hostileCheckpoint(keys: string[]): Promise<string> {
    const entries: Record<string, ManifestEntry> = { 'src/a.ts': fileEntry() };
    for (const k of keys) entries[k] = fileEntry();
    // Written as raw JSON text so even a __proto__ key is an own key of the object on disk.
    const body = `{"entries":{${Object.entries(entries).map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}},"full":true,"v":1}`;
    const { hash } = await engine.workspaceSnapshots!.blobs.put(Buffer.from(body, 'utf8'));
    await engine.workspaceSnapshots!.blobs.flush();
    const checkpointId = `c_fuzz${injected++}`;
    const data = { checkpointId, kind: 'manual' as const, stepId: null, label: 'hostile', parentId: null, manifestRef: hash, files: keys.length + 1, filesChanged: 0, bytes: 0 };
    await embeddedStore(engine).commit([{ type: 'checkpoint.created', taskId, corr: null, key: `fuzz:${checkpointId}`, by: null, data }]).durable;
    return checkpointId;
  }

  it('rollback paths: hostile paths are invalid input and change nothing', async () => {
    const outsideBefore = listingOutside(sandbox.dir, ws);
    await fc.assert(
      fc.asyncProperty(fc.array(hostileKey, { minLength: 1, maxLength: 3 }), async (paths) => {
        fc.pre(paths.some((p) => pathKeyProblem(p) !== null));
        const before = { files: workspaceListing(), seq: engine.eventLog.lastSeq };
        // At the door every caller passes (the operation table), before the engine plans anything.
        await assert.rejects(localApi(engine).rollback({ taskId, checkpointId: goodCheckpoint, paths }), (e: Error) => {
          assert.ok(isWaypointError(e) && e.code === 'invalid_input', `${e.stack}`);
          assertReadable(e.message, 'rollback paths refusal');
          return true;
        });
        assert.deepEqual(workspaceListing(), before.files);
        assert.equal(engine.eventLog.lastSeq, before.seq);
        assert.deepEqual(listingOutside(sandbox.dir, ws), outsideBefore);
      }),
      fuzzParams(60),
    );
  });

  it('restore plans: unsafe paths and case collisions are refused before anything is written', async () => {
    const outsideBefore = listingOutside(sandbox.dir, ws);
    const roots = [{ name: 'ws', dir: ws }];
    await fc.assert(
      fc.asyncProperty(fc.array(hostileKey, { minLength: 1, maxLength: 4 }), fc.boolean(), async (keys, caseInsensitive) => {
        const collide = caseInsensitive ? ['Case.txt', 'case.txt'] : [];
        const writes = [...new Set([...keys, ...collide])].map((p) => ({ path: p, entry: fileEntry(), expect: null }));
        const plan = { writes, removes: [], kept: [], unchanged: 0 } as unknown as RestorePlan;
        const expectRefusal = caseInsensitive || keys.some((k) => pathKeyProblem(k) !== null || k.startsWith('escape/'));
        fc.pre(expectRefusal);
        const before = workspaceListing();
        await assert.rejects(applyRestore(plan, roots, engine.workspaceSnapshots!.blobs, { caseInsensitive }), (e: Error) => {
          assert.ok(e instanceof UnsafePathError, `${e.stack}`);
          assertReadable(e.message, 'restore refusal');
          return true;
        });
        assert.deepEqual(workspaceListing(), before, `restore wrote before refusing ${JSON.stringify(keys)}`);
        assert.deepEqual(listingOutside(sandbox.dir, ws), outsideBefore);
      }),
      fuzzParams(80),
    );
  });
  // Last: its hostile checkpoints become the store's latest, which later scans start from.
  it('a checkpoint whose manifest names hostile paths: rolling back to it is refused, nothing is written anywhere', async () => {
    const outsideBefore = listingOutside(sandbox.dir, ws);
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(hostileKey, { minLength: 1, maxLength: 3 }), async (keys) => {
        const unsafe = keys.filter((k) => pathKeyProblem(k) !== null || k.startsWith('escape/'));
        const checkpointId = await hostileCheckpoint(keys);
        const before = { files: workspaceListing(), seq: engine.eventLog.lastSeq };
        let error: unknown;
        try {
          await engine.rollback({ taskId, checkpointId, reason: 'fuzz' });
        } catch (e) {
          error = e;
        }
        assert.deepEqual(listingOutside(sandbox.dir, ws), outsideBefore, `wrote outside the workspace for ${JSON.stringify(keys)}`);
        if (unsafe.length) {
          assert.ok(error, `rolled back to a manifest holding ${JSON.stringify(unsafe)}`);
          assert.ok(isWaypointError(error), `refusal is not a WaypointError: ${(error as Error).stack}`);
          assertReadable(error.message, 'hostile manifest refusal');
          assert.deepEqual(workspaceListing(), before.files, 'a refused rollback wrote nothing in the workspace');
          assert.equal(engine.eventLog.lastSeq, before.seq, 'a refused rollback recorded nothing');
          refused++;
        } else if (error) {
          assert.ok(isWaypointError(error), `failed with a non-Waypoint error: ${(error as Error).stack}`);
        } else {
          // A safe key was restored inside the workspace; put it back as it was.
          await engine.rollback({ taskId, checkpointId: goodCheckpoint, reason: 'reset' });
        }
      }),
      fuzzParams(60),
    );
    assert.ok(refused > 30, `${refused} refusals`);
    assert.equal(fs.readFileSync(path.join(sandbox.dir, 'outside', 'canary.txt'), 'utf8'), 'must never change\n');
  });
});
