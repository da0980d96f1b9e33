import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { applyPatch } from 'diff';
import { main } from '../../src/cli/main';
import { Engine } from '../../src/core/engine/engine';
import { sha256Hex } from '../../src/core/snapshot/blobStore';
import { openPostgresBackend } from '../../src/core/store/postgres/backend';
import { CHUNK_BYTES } from '../../src/core/store/postgres/pgBlobs';
import type { ObjectUpload } from '../../src/core/store/postgres/objectUpload';
import { TeamReview } from '../../src/core/store/postgres/teamReview';
import { PgCluster } from '../support/pgCluster';
import { tmpDir } from '../support/tmp';

/**
 * Issue 16's blobs and manifests in the team store, against a real throwaway cluster:
 * every checkpoint's objects are uploaded after it is durable, shared across workspaces
 * (one copy each), and another machine reviews the task's changes byte for byte with
 * only the store's URL; the upload survives the server stopping mid-way; a missing or
 * altered object is a clear error, never wrong content.
 */

function sink(): { stream: Writable; text: () => string } {
  let buf = '';
  const stream = new Writable({
    write(chunk, _enc, cb) {
      buf += chunk.toString();
      cb();
    },
  });
  return { stream, text: () => buf };
}

async function withEnv<T>(env: Record<string, string | undefined>, fn: () => Promise<T>): Promise<T> {
  const saved: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(env)) {
    saved[k] = process.env[k];
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  try {
    return await fn();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

async function cli(argv: string[], env: Record<string, string | undefined> = {}): Promise<{ code: number; out: string; err: string }> {
  const out = sink();
  const err = sink();
  const code = await withEnv(env, () => main(argv, { stdout: out.stream as never, stderr: err.stream as never }));
  return { code, out: out.text(), err: err.text() };
}

const upload = (e: Engine) => e.objectUpload as ObjectUpload;

async function idle(e: Engine, ms = 60_000): Promise<void> {
  await Promise.race([upload(e).idle(), new Promise((_r, reject) => setTimeout(() => reject(new Error(`upload not idle after ${ms} ms: ${JSON.stringify(upload(e).stats)}`)), ms))]);
}

describe('blobs and manifests in the team store (real cluster)', function () {
  this.timeout(180_000);
  let cluster: PgCluster;
  const dirs: { cleanup: () => void }[] = [];
  before(async () => {
    cluster = await PgCluster.create();
  });
  after(() => {
    for (const d of dirs) d.cleanup();
    cluster?.remove();
  });
  const workspace = () => {
    const t = tmpDir('wp-pg-blobs-');
    dirs.push(t);
    return t.dir;
  };
  const open = (w: string, machine: string, uploadObjects = true) =>
    withEnv({ WAYPOINT_MACHINE: machine }, async () => {
      const dir = path.join(w, '.waypoint');
      const backend = await openPostgresBackend({ url: cluster.url(), storeDir: dir, workspacePath: w, lock: { waitMs: 200 }, uploadObjects });
      return Engine.open({ workspace: w, backend });
    });
  const workspaceIdOf = (w: string) => (JSON.parse(fs.readFileSync(path.join(w, '.waypoint', 'workspace-id.json'), 'utf8')) as { id: string }).id;
  const rowsFor = (hash: string) => Number(cluster.psql(`SELECT count(*) FROM waypoint.blobs WHERE hash = '${hash}'`).trim());

  it('two workspaces holding identical content store one copy of it', async () => {
    const shared = Buffer.from('export const answer = 42;\n'.repeat(50));
    const [w1, w2] = [workspace(), workspace()];
    for (const [w, own] of [
      [w1, 'one'],
      [w2, 'two'],
    ] as const) {
      fs.writeFileSync(path.join(w, 'shared.ts'), shared);
      fs.writeFileSync(path.join(w, 'own.txt'), `only in ${own}\n`);
    }
    const e1 = await open(w1, 'laptop');
    const e2 = await open(w2, 'ci-runner');
    try {
      await e1.startTask({ goal: 'one' });
      await e2.startTask({ goal: 'two' });
      await Promise.all([idle(e1), idle(e2)]);
    } finally {
      await e1.close();
      await e2.close();
    }
    assert.equal(rowsFor(sha256Hex(shared)), 1);
    assert.equal(rowsFor(sha256Hex(Buffer.from('only in one\n'))), 1);
    assert.equal(rowsFor(sha256Hex(Buffer.from('only in two\n'))), 1);
  });

  it('another machine (other folder, other WAYPOINT_MACHINE) reads the task’s checkpoints and diff byte-exact, big files chunked', async () => {
    const w = workspace();
    const elsewhere = workspace();
    const before = 'line one\nline two\nline three\n';
    fs.writeFileSync(path.join(w, 'edit.txt'), before);
    fs.writeFileSync(path.join(w, 'gone.txt'), 'to be deleted\n');
    fs.mkdirSync(path.join(w, 'src'));
    fs.writeFileSync(path.join(w, 'src', 'keep.ts'), 'unchanged\n');
    const e = await open(w, 'laptop');
    let taskId: string;
    let big: Buffer;
    try {
      taskId = (await e.startTask({ goal: 'edit things' })).taskId;
      fs.writeFileSync(path.join(w, 'edit.txt'), 'line one\nline 2, changed\nline three\nline four\n');
      fs.rmSync(path.join(w, 'gone.txt'));
      fs.writeFileSync(path.join(w, 'src', 'new.ts'), 'export {};\n');
      // Over one chunk, under the 5 MB capture limit: stored in parts, read back whole.
      big = randomBytes(CHUNK_BYTES * 2 + 12345);
      big[0] = 0; // binary
      fs.writeFileSync(path.join(w, 'big.bin'), big);
      await e.checkpoint({ taskId, label: 'after the edits' });
    } finally {
      // Closing drains the upload (the CLI's case: the command exits after its checkpoint is uploaded).
      await e.close();
    }
    const id = workspaceIdOf(w);
    const env = { WAYPOINT_STORE: cluster.url(), WAYPOINT_MACHINE: 'reviewer-desk' };
    const cps = await cli(['checkpoints', '--task', taskId, '--workspace', id, '--json'], env);
    assert.equal(cps.code, 0, cps.err);
    const list = JSON.parse(cps.out) as { workspace: { machine: string; path: string }; checkpoints: { id: string; kind: string; uploaded: boolean; label: string | null }[] };
    assert.deepEqual(list.workspace.machine, 'laptop');
    assert.deepEqual(
      list.checkpoints.map((c) => [c.kind, c.uploaded]),
      [
        ['task_base', true],
        ['manual', true],
      ],
    );
    const human = await cli(['checkpoints', '--task', taskId, '--workspace', id], env);
    assert.match(human.out, /CHECKPOINT\s+KIND\s+TAKEN\s+FILES\s+CHANGED\s+IN STORE\s+LABEL/);
    assert.match(human.out, /after the edits/);

    const d = await cli(['diff', '--task', taskId, '--workspace', id, '--patch', '--json'], env);
    assert.equal(d.code, 0, d.err);
    const r = JSON.parse(d.out) as { from: string; to: string; changes: { path: string; status: string; patch?: string | null; note?: string; after: { hash?: string } | null }[] };
    assert.deepEqual([r.from, r.to], [list.checkpoints[0]!.id, list.checkpoints[1]!.id]);
    assert.deepEqual(
      r.changes.map((c) => [c.path, c.status]),
      [
        ['big.bin', 'added'],
        ['edit.txt', 'modified'],
        ['gone.txt', 'deleted'],
        ['src/new.ts', 'added'],
      ],
    );
    const byPath = new Map(r.changes.map((c) => [c.path, c]));
    // The unified diff rebuilds the new content exactly from the old.
    assert.equal(applyPatch(before, byPath.get('edit.txt')!.patch!), fs.readFileSync(path.join(w, 'edit.txt'), 'utf8'));
    assert.equal(applyPatch('', byPath.get('src/new.ts')!.patch!), 'export {};\n');
    assert.equal(applyPatch('to be deleted\n', byPath.get('gone.txt')!.patch!), '');
    assert.equal(byPath.get('big.bin')!.note, 'binary');
    // The big file's bytes, as another machine reads them from the store.
    const review = await TeamReview.open(cluster.url(), id);
    try {
      const h = byPath.get('big.bin')!.after!.hash!;
      assert.equal(h, sha256Hex(big!));
      assert.equal(Number(cluster.psql(`SELECT chunks FROM waypoint.blobs WHERE hash = '${h}'`).trim()), 3);
      const one = await review.changes({ taskId, path: 'edit.txt', patch: true });
      assert.deepEqual(
        one.changes.map((c) => c.path),
        ['edit.txt'],
      );
    } finally {
      await review.close();
    }
    // The human form, from a folder that has nothing of the workspace.
    const text = await cli(['diff', '--task', taskId, '--workspace', id, '--patch'], env);
    assert.equal(text.code, 0, text.err);
    assert.match(text.out, /\+line 2, changed/);
    assert.match(text.out, /modified\s+edit\.txt\s+\+2 -1/);
    assert.ok(!fs.existsSync(path.join(elsewhere, '.waypoint')));

    // Anything that needs the files is refused, naming the machine that holds them.
    const rb = await cli(['rollback', '--task', taskId, '--to', list.checkpoints[0]!.id, '--yes', '--workspace', id], env);
    assert.equal(rb.code, 1);
    assert.match(rb.err, /needs workspace .* files, and they are not here: use machine laptop/);
    const ck = await cli(['checkpoint', '--task', taskId, '--workspace', id], env);
    assert.equal(ck.code, 1);
    assert.match(ck.err, /machine laptop/);
    assert.equal(fs.readFileSync(path.join(w, 'edit.txt'), 'utf8'), 'line one\nline 2, changed\nline three\nline four\n');
    // A chunked object missing one of its parts is corrupt, not shorter content.
    cluster.psql(`DELETE FROM waypoint.blob_chunks WHERE hash = '${sha256Hex(big!)}' AND idx = 1`);
    const cut = await cli(['diff', '--task', taskId, '--workspace', id, '--json'], env);
    assert.equal(cut.code, 1);
    assert.equal(JSON.parse(cut.out).error.code, 'corrupt');
    assert.match(JSON.parse(cut.out).error.message, /has 2 of its 3 parts/);
  });

  it('checkpoints recorded while uploads did not run (a crash, a closed editor) are uploaded by the next run, from the cursor', async () => {
    const w = workspace();
    fs.writeFileSync(path.join(w, 'a.txt'), 'first\n');
    const e = await open(w, 'laptop', false);
    let taskId: string;
    try {
      taskId = (await e.startTask({ goal: 'offline upload' })).taskId;
      fs.writeFileSync(path.join(w, 'a.txt'), 'second\n');
      await e.checkpoint({ taskId });
    } finally {
      await e.close();
    }
    const id = workspaceIdOf(w);
    const env = { WAYPOINT_STORE: cluster.url(), WAYPOINT_MACHINE: 'reviewer-desk' };
    const early = await cli(['diff', '--task', taskId, '--workspace', id, '--json'], env);
    assert.equal(early.code, 1);
    assert.equal(JSON.parse(early.out).error.code, 'not_found');
    assert.match(early.err, /not in the team store yet/);
    assert.equal(rowsFor(sha256Hex(Buffer.from('second\n'))), 0);
    const again = await open(w, 'laptop');
    try {
      await idle(again);
      assert.equal(upload(again).stats.checkpoints, 2);
    } finally {
      await again.close();
    }
    const d = await cli(['diff', '--task', taskId, '--workspace', id, '--patch', '--json'], env);
    assert.equal(d.code, 0, d.err);
    assert.equal(applyPatch('first\n', JSON.parse(d.out).changes[0].patch), 'second\n');
    // The cursor moved past both: a third run uploads nothing again.
    const third = await open(w, 'laptop');
    try {
      await idle(third);
      assert.equal(upload(third).stats.objects, 0);
    } finally {
      await third.close();
    }
  });

  it('the server stopped (-m immediate) mid-upload and restarted: the upload completes, nothing lost or duplicated', async () => {
    const w = workspace();
    fs.writeFileSync(path.join(w, 'seed.txt'), 'seed\n');
    const e = await open(w, 'laptop');
    const files = new Map<string, Buffer>();
    try {
      const { taskId } = await e.startTask({ goal: 'a big change' });
      await idle(e);
      // ~24 MB of incompressible content: several bounded transactions.
      for (let i = 0; i < 48; i++) {
        const b = randomBytes(512 * 1024);
        files.set(`f${i}.bin`, b);
        fs.writeFileSync(path.join(w, `f${i}.bin`), b);
      }
      await e.checkpoint({ taskId });
      // Stop the server once part of the upload is in: some, not all, of the new blobs.
      const expected = [...files.values()].map(sha256Hex);
      const inList = expected.map((h) => `'${h}'`).join(',');
      const count = () => Number(cluster.psql(`SELECT count(*) FROM waypoint.blobs WHERE hash IN (${inList})`).trim());
      const t0 = Date.now();
      let seen = 0;
      while (Date.now() - t0 < 60_000) {
        seen = count();
        if (seen > 0) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      await cluster.stopAsync('immediate');
      const stoppedWith = seen;
      await new Promise((r) => setTimeout(r, 1500));
      await cluster.startAsync();
      await idle(e, 90_000);
      assert.equal(count(), expected.length, `all ${expected.length} blobs present (had ${stoppedWith} when the server stopped)`);
      // The server really went away part-way (else this test would prove nothing), and the uploader came back for the rest.
      assert.ok(stoppedWith < expected.length, `the server stopped before the upload ended (${stoppedWith} of ${expected.length} in)`);
      assert.ok(upload(e).stats.retries >= 1, JSON.stringify(upload(e).stats));
      // The primary key says no duplicates; the content says nothing was cut short.
      const review = await TeamReview.open(cluster.url(), workspaceIdOf(w));
      try {
        const r = await review.changes({ taskId });
        assert.equal(r.changes.length, files.size);
        for (const c of r.changes) {
          assert.equal(c.status, 'added');
          assert.equal((c.after as { hash: string }).hash, sha256Hex(files.get(c.path)!));
        }
      } finally {
        await review.close();
      }
    } finally {
      await e.close().catch(() => undefined);
    }
  });

  it('hostile input: unknown ids, a malformed id, a tampered or missing object: clear errors, never wrong content', async () => {
    const w = workspace();
    fs.writeFileSync(path.join(w, 'x.txt'), 'original\n');
    const e = await open(w, 'laptop');
    let taskId: string;
    try {
      taskId = (await e.startTask({ goal: 'hostile' })).taskId;
      fs.writeFileSync(path.join(w, 'x.txt'), 'changed\n');
      fs.writeFileSync(path.join(w, 'y.txt'), 'another\n');
      await e.checkpoint({ taskId });
    } finally {
      await e.close();
    }
    const id = workspaceIdOf(w);
    const env = { WAYPOINT_STORE: cluster.url(), WAYPOINT_MACHINE: 'reviewer-desk' };
    const run = (args: string[]) => cli([...args, '--json'], env);
    const errorOf = (r: { code: number; out: string }) => {
      assert.equal(r.code, 1, r.out);
      return JSON.parse(r.out).error as { code: string; message: string };
    };
    assert.equal(errorOf(await run(['diff', '--task', taskId, '--workspace', '00000000-0000-4000-8000-000000000000'])).code, 'not_found');
    assert.equal(errorOf(await run(['diff', '--task', 'no-such-task', '--workspace', id])).code, 'not_found');
    assert.match(errorOf(await run(['diff', '--task', taskId, '--to', 'cp_nope', '--workspace', id])).message, /has no checkpoint 'cp_nope'/);
    assert.equal(errorOf(await run(['diff', '--task', taskId, '--path', '../etc/passwd', '--workspace', id])).code, 'invalid_input');
    // Without a team store, an id is not a folder here.
    const noStore = await cli(['diff', '--task', taskId, '--workspace', id, '--json'], { WAYPOINT_STORE: undefined });
    assert.equal(noStore.code, 1);
    assert.match(JSON.parse(noStore.out).error.message, /give --store/);

    const h = sha256Hex(Buffer.from('changed\n'));
    // Tampered: the row's bytes no longer hash to its name.
    cluster.psql(`UPDATE waypoint.blobs SET data = convert_to('evil\n', 'UTF8'), size = 5 WHERE hash = '${h}'`);
    const t = await run(['diff', '--task', taskId, '--workspace', id, '--patch']);
    const te = errorOf(t);
    assert.equal(te.code, 'corrupt');
    assert.match(te.message, /does not hash to its name/);
    assert.doesNotMatch(t.out, /evil/);
    // Its size altered alone is caught too.
    cluster.psql(`UPDATE waypoint.blobs SET data = convert_to('changed\n', 'UTF8'), size = 99 WHERE hash = '${h}'`);
    assert.equal(errorOf(await run(['diff', '--task', taskId, '--workspace', id])).code, 'corrupt');
    // Missing.
    cluster.psql(`DELETE FROM waypoint.blobs WHERE hash = '${h}'`);
    assert.match(errorOf(await run(['diff', '--task', taskId, '--workspace', id])).message, /is not in the team store/);
    // A tampered manifest object.
    const cps = JSON.parse((await run(['checkpoints', '--task', taskId, '--workspace', id])).out).checkpoints as { manifestRef: string }[];
    const ref = cps[1]!.manifestRef;
    cluster.psql(`UPDATE waypoint.blobs SET data = convert_to('{"v":1,"full":true,"entries":{"../x":{}}}', 'UTF8') WHERE hash = '${ref}'`);
    assert.equal(errorOf(await run(['diff', '--task', taskId, '--workspace', id])).code, 'corrupt');
  });
});
