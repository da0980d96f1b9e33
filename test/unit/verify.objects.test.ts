import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { main } from '../../src/cli/main';
import { sha256Hex } from '../../src/core/snapshot';
import { isWaypointError } from '../../src/core/model/errors';
import { openEngine, tmpDir } from '../support/tmp';
import { localApi } from '../../src/core/engine/api';
import { embeddedStore } from '../support/embedded';

/**
 * `verify` proves more than the projections: every object a live checkpoint needs
 * (its manifest objects and its files' content) is there and hashes right. With the
 * blob store deleted it used to say ok, and afterwards no checkpoint could be taken
 * ("manifest … is corrupt or hostile") with no way out. Now verify names the damaged
 * checkpoints and fails; `--repair` stores again what the workspace still holds and
 * marks the rest damaged through an event (so a rebuild keeps the marks), after which
 * checkpoints work again and a rollback to a damaged one is refused with the reason.
 */

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let out = '';
  let err = '';
  const code = await main(args, {
    stdout: { write: (s: string) => ((out += s), true) } as never,
    stderr: { write: (s: string) => ((err += s), true) } as never,
  });
  return { code, stdout: out, stderr: err };
}

/** Exactly one JSON document (JSON.parse refuses a second one after the first). */
function oneJson(text: string): Record<string, unknown> {
  return JSON.parse(text) as Record<string, unknown>;
}

describe('verify: checkpoint objects, repair, damaged checkpoints', function () {
  this.timeout(60_000);

  it('with every blob deleted: verify fails naming the checkpoints; --repair marks them (an event), checkpoints and steps work again, a rollback to them is refused with the reason', async () => {
    const t = tmpDir('wp-verify-');
    try {
      const ws = t.dir;
      fs.writeFileSync(path.join(ws, 'a.txt'), 'A1\n');
      let e = await openEngine(ws);
      let task: string;
      let base: string;
      let cp1: string;
      try {
        const s = await e.startTask({ goal: 'g', plan: [{ id: 's1', title: 'one' }, { id: 's2', title: 'two' }] });
        task = s.taskId;
        base = s.baseCheckpointId;
        fs.writeFileSync(path.join(ws, 'a.txt'), 'A2\n');
        cp1 = (await e.checkpoint({ taskId: task, label: 'one' })).checkpointId;
        assert.equal((await e.verify()).ok, true, 'a whole store verifies');
      } finally {
        await e.close();
      }
      fs.rmSync(path.join(ws, '.waypoint', 'objects'), { recursive: true, force: true });

      const v = await cli(['verify', '--workspace', ws, '--json']);
      assert.equal(v.code, 1, `verify must fail: ${v.stdout} ${v.stderr}`);
      const doc = oneJson(v.stdout) as { ok: boolean; objects: { damaged: { checkpointId: string; marked: boolean }[] }; error: { code: string } };
      assert.equal(doc.ok, false);
      assert.deepEqual(doc.objects.damaged.map((d) => d.checkpointId).sort(), [base, cp1].sort());
      assert.equal(doc.error.code, 'corrupt');
      assert.match(v.stderr, new RegExp(`${base}|${cp1}`));
      const human = await cli(['verify', '--workspace', ws]);
      assert.equal(human.code, 1);
      assert.match(human.stdout, new RegExp(`DAMAGED ${base}`));

      const r = await cli(['verify', '--repair', '--workspace', ws, '--json']);
      assert.equal(r.code, 0, `${r.stdout} ${r.stderr}`);
      const rep = oneJson(r.stdout) as { ok: boolean; objects: { markedNow: string[]; damaged: { marked: boolean }[] } };
      assert.equal(rep.ok, true);
      assert.deepEqual(rep.objects.markedNow.sort(), [base, cp1].sort());
      assert.ok(rep.objects.damaged.every((d) => d.marked));

      // Checkpoints and steps work again; the damaged ones are refused as rollback targets, with the reason.
      const c2 = await cli(['checkpoint', '--task', task, '--label', 'after repair', '--workspace', ws, '--json']);
      assert.equal(c2.code, 0, c2.stderr);
      const st = await cli(['step', 'start', '--task', task, '--step', 's1', '--workspace', ws, '--json']);
      assert.equal(st.code, 0, st.stderr);
      const rb = await cli(['rollback', '--task', task, '--to', base, '--yes', '--workspace', ws, '--json']);
      assert.equal(rb.code, 1);
      assert.match(rb.stderr, new RegExp(`Checkpoint ${base} is damaged: .*manifest`));
      assert.equal(fs.readFileSync(path.join(ws, 'a.txt'), 'utf8'), 'A2\n', 'nothing was written');
      const again = await cli(['verify', '--workspace', ws, '--json']);
      assert.equal(again.code, 0, again.stdout);

      // The marks are part of the record: a rebuild from the events keeps them.
      e = await openEngine(ws);
      try {
        embeddedStore(e).rebuild();
        assert.ok(e.queries.checkpoint(base)?.damaged, 'still marked after a rebuild');
        assert.equal(e.queries.checkpoint(cp1)?.damaged !== undefined, true);
        assert.ok(embeddedStore(e).events().some((ev) => ev.type === 'checkpoint.damaged'));
        const v2 = await e.verify();
        assert.equal(v2.ok, true, JSON.stringify(v2));
        // A new checkpoint is whole: it rolls back.
        const c3 = JSON.parse(c2.stdout) as { checkpointId: string };
        fs.writeFileSync(path.join(ws, 'a.txt'), 'A3\n');
        await e.rollback({ taskId: task, checkpointId: c3.checkpointId });
        assert.equal(fs.readFileSync(path.join(ws, 'a.txt'), 'utf8'), 'A2\n');
        await assert.rejects(e.rollback({ taskId: task, checkpointId: cp1 }), (err: unknown) => isWaypointError(err) && err.code === 'corrupt' && err.message.includes(cp1));
        // Retention and storage reports still work beside damaged checkpoints, and keep the whole ones' content.
        await e.gc();
        const storage = await e.storage();
        assert.ok(storage.tasks.length >= 1);
        assert.equal((await e.verify()).ok, true);
        await assert.rejects(e.diff({ from: base }), /is damaged/);
      } finally {
        await e.close();
      }
    } finally {
      t.cleanup();
    }
  });

  it('restores from the workspace the lost content it still holds; only checkpoints needing content it lacks are marked', async () => {
    const t = tmpDir('wp-verify-');
    try {
      const ws = t.dir;
      fs.writeFileSync(path.join(ws, 'a.txt'), 'A1 only in the base checkpoint\n');
      fs.writeFileSync(path.join(ws, 'b.txt'), 'B1 still in the workspace\n');
      const e = await openEngine(ws);
      try {
        const s = await e.startTask({ goal: 'g' });
        fs.writeFileSync(path.join(ws, 'a.txt'), 'A2 now\n');
        const cp1 = (await e.checkpoint({ taskId: s.taskId })).checkpointId;
        // Lose the content of both original files (not the manifests).
        const lost = [sha256Hex(Buffer.from('A1 only in the base checkpoint\n')), sha256Hex(Buffer.from('B1 still in the workspace\n'))];
        await e.workspaceSnapshots!.blobs.deleteMany(lost);
        const v = await e.verify();
        assert.equal(v.ok, false);
        assert.deepEqual(v.objects!.damaged.map((d) => d.checkpointId).sort(), [s.baseCheckpointId, cp1].sort());
        assert.match(v.objects!.damaged.find((d) => d.checkpointId === cp1)!.reason, /b\.txt/);

        const r = await e.verify({ repair: true });
        assert.equal(r.ok, true, JSON.stringify(r));
        assert.equal(r.objects!.restored, 1, 'B1 came back from the workspace');
        assert.deepEqual(r.objects!.markedNow, [s.baseCheckpointId], 'the base still lacks A1');
        assert.equal(e.workspaceSnapshots!.blobs.status(lost[1]), 'ok');
        // cp1 is whole again: a rollback to it works; the base is refused with the reason.
        fs.writeFileSync(path.join(ws, 'b.txt'), 'changed\n');
        await e.rollback({ taskId: s.taskId, checkpointId: cp1 });
        assert.equal(fs.readFileSync(path.join(ws, 'b.txt'), 'utf8'), 'B1 still in the workspace\n');
        await assert.rejects(e.rollback({ taskId: s.taskId, checkpointId: s.baseCheckpointId }), /is damaged: the content of 1 of its 2 files is missing or corrupt in the store \(a\.txt\)/);
        // A repair with nothing left to do marks nothing more.
        const again = await e.verify({ repair: true });
        assert.deepEqual(again.objects!.markedNow, []);
        await assert.rejects(localApi(e).verify({ repair: 'yes' } as never), (err: unknown) => isWaypointError(err) && err.code === 'invalid_input');
      } finally {
        await e.close();
      }
    } finally {
      t.cleanup();
    }
  });

  it('a lost full manifest damages every checkpoint stored as a delta of it, however far down the chain', async () => {
    const t = tmpDir('wp-verify-');
    try {
      const ws = t.dir;
      fs.writeFileSync(path.join(ws, 'a.txt'), 'a\n');
      const e = await openEngine(ws);
      try {
        const s = await e.startTask({ goal: 'g' });
        const ids = [s.baseCheckpointId];
        for (let i = 0; i < 3; i++) {
          fs.writeFileSync(path.join(ws, 'a.txt'), `a${i}\n`);
          ids.push((await e.checkpoint({ taskId: s.taskId })).checkpointId);
        }
        const baseRef = e.queries.checkpoint(s.baseCheckpointId)!.manifestRef!;
        await e.workspaceSnapshots!.blobs.deleteMany([baseRef]);
        const v = await e.verify();
        assert.equal(v.ok, false);
        assert.deepEqual(v.objects!.damaged.map((d) => d.checkpointId), ids);
        for (const d of v.objects!.damaged) assert.match(d.reason, new RegExp(`manifest object ${baseRef.slice(0, 12)}… is missing`));
      } finally {
        await e.close();
      }
    } finally {
      t.cleanup();
    }
  });

  it('verify --json prints exactly one JSON document on a projection mismatch too (it printed the report and then an error document)', async () => {
    const t = tmpDir('wp-verify-');
    try {
      const e = await openEngine(t.dir, { snapshots: false });
      try {
        await e.startTask({ goal: 'g' });
        // A projection that drifted from the events, written to disk as the database.
        embeddedStore(e).db.run("UPDATE tasks SET state = 'completed'");
        await embeddedStore(e).exportNow();
      } finally {
        await embeddedStore(e).simulateCrash();
      }
      const v = await cli(['verify', '--workspace', t.dir, '--json']);
      assert.equal(v.code, 1);
      const doc = oneJson(v.stdout) as { ok: boolean; differences: { table: string }[]; error: { code: string; message: string } };
      assert.equal(doc.ok, false);
      assert.deepEqual(doc.differences.map((d) => d.table), ['tasks']);
      assert.match(doc.error.message, /verify --rebuild/);
      const fixed = await cli(['verify', '--rebuild', '--workspace', t.dir, '--json']);
      assert.equal(fixed.code, 0, fixed.stdout);
      assert.equal((oneJson(fixed.stdout) as { ok: boolean }).ok, true);
    } finally {
      t.cleanup();
    }
  });

  it('a corrupt blob (wrong bytes under its name) is found, replaced from the workspace by --repair', async () => {
    const t = tmpDir('wp-verify-');
    try {
      const ws = t.dir;
      fs.writeFileSync(path.join(ws, 'a.txt'), 'content that stays\n');
      const e = await openEngine(ws, { snapshots: {} });
      try {
        const s = await e.startTask({ goal: 'g' });
        const h = sha256Hex(Buffer.from('content that stays\n'));
        const blobs = e.workspaceSnapshots!.blobs;
        // Overwrite the object's bytes in its pack, keeping the length: still found, no longer right.
        const packDir = path.join(ws, '.waypoint', 'objects', 'pack');
        let hit = false;
        for (const name of fs.readdirSync(packDir)) {
          const file = path.join(packDir, name);
          const buf = fs.readFileSync(file);
          const at = buf.indexOf(Buffer.from('content that stays'));
          if (at >= 0) {
            buf.write('CONTENT', at);
            fs.writeFileSync(file, buf);
            hit = true;
          }
        }
        assert.ok(hit, 'found the raw object in a pack');
        const v = await e.verify();
        assert.equal(v.ok, false);
        assert.equal(v.objects!.damaged[0]!.checkpointId, s.baseCheckpointId);
        const r = await e.verify({ repair: true });
        assert.equal(r.objects!.restored, 1);
        assert.deepEqual(r.objects!.markedNow, []);
        assert.equal(r.ok, true);
        assert.equal(blobs.status(h), 'ok');
      } finally {
        await e.close();
      }
    } finally {
      t.cleanup();
    }
  });
});
