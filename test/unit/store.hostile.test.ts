import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { main } from '../../src/cli/main';
import { Logger } from '../../src/core/log';
import { isWaypointError } from '../../src/core/model/errors';
import { StoreLink } from '../../src/ownership/storeLink';
import { openEngine, tmpDir } from '../support/tmp';
import { embeddedStore } from '../support/embedded';

/**
 * A cloned repository is hostile input: its `.waypoint` (or anything in it) may be a
 * symbolic link to a directory of the attacker's choosing — another user's, or a
 * place the victim can write and the attacker can read. Every door refuses such a
 * store with a clear error and writes nothing through the link; and everything the
 * store creates is private to the user (files 0600, directories 0700), whatever
 * the umask, since packs and journals hold copies of workspace files.
 */

/** Every path under `dir` with its type and mode (lstat: links are not followed). */
function listing(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string) => {
    for (const name of fs.readdirSync(d)) {
      const p = path.join(d, name);
      const st = fs.lstatSync(p);
      out.set(path.relative(dir, p), `${st.isDirectory() ? 'd' : st.isSymbolicLink() ? 'l' : 'f'} ${(st.mode & 0o777).toString(8)} ${st.size} ${st.mtimeMs}`);
      if (st.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out;
}

function sink(): { write: (s: string) => boolean; text: () => string } {
  let buf = '';
  return {
    write: (s: string) => {
      buf += s;
      return true;
    },
    text: () => buf,
  };
}

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = sink();
  const err = sink();
  const code = await main(args, { stdout: out as never, stderr: err as never });
  return { code, stdout: out.text(), stderr: err.text() };
}

/** A workspace with a store that has history: a task, a checkpoint of real content, an export (db, prev, archive). */
async function populated(ws: string): Promise<void> {
  fs.writeFileSync(path.join(ws, 'secret.txt'), 'private content of the workspace\n');
  const e = await openEngine(ws, { store: { exportThresholdBytes: 1 } });
  try {
    const t = await e.startTask({ goal: 'g' });
    fs.writeFileSync(path.join(ws, 'secret.txt'), 'changed private content\n');
    await e.checkpoint({ taskId: t.taskId });
    await embeddedStore(e).exportNow();
    await e.checkpoint({ taskId: t.taskId, label: 'again' });
    await embeddedStore(e).exportNow();
  } finally {
    await e.close();
  }
}

describe('store: symlinks and file modes (hostile clones)', function () {
  this.timeout(60_000);

  it('refuses a .waypoint that is a symlink: the engine, and every CLI command, exit 1 with a clear error and write nothing there', async () => {
    const ws = tmpDir('wp-hostile-');
    const elsewhere = tmpDir('wp-elsewhere-');
    try {
      fs.writeFileSync(path.join(elsewhere.dir, 'theirs.txt'), 'not yours\n');
      fs.symlinkSync(elsewhere.dir, path.join(ws.dir, '.waypoint'));
      const before = listing(elsewhere.dir);
      await assert.rejects(openEngine(ws.dir), (e: unknown) => isWaypointError(e) && e.code === 'unsafe_path' && /\.waypoint.*symbolic link/.test(e.message));
      for (const args of [['init'], ['tasks'], ['task', 'start', '--goal', 'g'], ['checkpoint'], ['verify'], ['events']]) {
        const r = await cli([...args, '--workspace', ws.dir, '--json']);
        assert.equal(r.code, 1, `${args.join(' ')}: exit ${r.code}, stderr ${r.stderr}`);
        assert.match(r.stderr, /symbolic link/, `${args.join(' ')}: ${r.stderr}`);
        assert.equal(JSON.parse(r.stdout).error.code, 'unsafe_path');
      }
      assert.deepEqual(listing(elsewhere.dir), before, 'nothing was written through the link');
      // A dangling link is refused too (mkdir would otherwise create its target's parent chain or fail oddly).
      fs.rmSync(path.join(ws.dir, '.waypoint'));
      fs.symlinkSync(path.join(elsewhere.dir, 'nope'), path.join(ws.dir, '.waypoint'));
      await assert.rejects(openEngine(ws.dir), (e: unknown) => isWaypointError(e) && e.code === 'unsafe_path');
      assert.equal(fs.existsSync(path.join(elsewhere.dir, 'nope')), false);
    } finally {
      ws.cleanup();
      elsewhere.cleanup();
    }
  });

  it("the editor's store link refuses a linked store too, and says why", async () => {
    const ws = tmpDir('wp-hostile-');
    const elsewhere = tmpDir('wp-elsewhere-');
    const lines: string[] = [];
    const link = new StoreLink({
      storeDir: path.join(ws.dir, '.waypoint'),
      log: new Logger((_l, line) => lines.push(line), 'test', 'debug'),
      openEngine: () => openEngine(ws.dir),
      pollMs: 100,
    });
    try {
      fs.symlinkSync(elsewhere.dir, path.join(ws.dir, '.waypoint'));
      await assert.rejects(link.ready(3_000), /symbolic link/);
      assert.equal(link.mode.kind, 'waiting');
      assert.deepEqual(fs.readdirSync(elsewhere.dir), []);
    } finally {
      await link.close();
      ws.cleanup();
      elsewhere.cleanup();
    }
  });

  for (const entry of ['objects', 'objects/pack', '.gitignore', 'owner.lock', 'waypoint.db', 'waypoint.db.prev', 'archive', 'journal', 'mcp.json', 'hooks.log']) {
    it(`refuses a store whose ${entry} is a symlink, and writes nothing through it`, async () => {
      const ws = tmpDir('wp-hostile-');
      const elsewhere = tmpDir('wp-elsewhere-');
      try {
        await populated(ws.dir);
        const store = path.join(ws.dir, '.waypoint');
        let name = entry;
        if (entry === 'journal') name = fs.readdirSync(store).filter((n) => n.endsWith('.wal')).sort().pop()!;
        const victim = path.join(store, name);
        const target = path.join(elsewhere.dir, 'target');
        if (fs.existsSync(victim) && fs.lstatSync(victim).isDirectory()) fs.cpSync(victim, target, { recursive: true });
        else if (fs.existsSync(victim)) fs.copyFileSync(victim, target);
        else fs.writeFileSync(target, '{}');
        fs.rmSync(victim, { recursive: true, force: true });
        fs.symlinkSync(target, victim);
        const before = listing(elsewhere.dir);
        await assert.rejects(
          openEngine(ws.dir),
          (e: unknown) => isWaypointError(e) && e.code === 'unsafe_path' && e.message.includes(name) && /symbolic link/.test(e.message),
        );
        const r = await cli(['tasks', '--workspace', ws.dir, '--json']);
        assert.equal(r.code, 1, r.stderr);
        assert.match(r.stderr, /symbolic link/);
        assert.deepEqual(listing(elsewhere.dir), before, 'nothing was written through the link');
        assert.ok(fs.lstatSync(victim).isSymbolicLink(), 'the link itself is left for the person to inspect');
      } finally {
        ws.cleanup();
        elsewhere.cleanup();
      }
    });
  }

  it('creates every store file 0600 and every directory 0700 under a umask of 022 (packs, journals, database, archive, lock)', async () => {
    const ws = tmpDir('wp-modes-');
    const old = process.umask(0o022);
    try {
      fs.writeFileSync(path.join(ws.dir, 'secret.txt'), 'private content of the workspace\n');
      // A bulk first checkpoint (worker-written raw packs, compacted in the background) and loose writes after it.
      for (let i = 0; i < 300; i++) fs.writeFileSync(path.join(ws.dir, `f${i}.txt`), `file ${i} `.repeat(200));
      const e = await openEngine(ws.dir, { store: { exportThresholdBytes: 1 } });
      const seen = new Map<string, string>();
      try {
        const t = await e.startTask({ goal: 'g' });
        await e.workspaceSnapshots!.whenCompacted();
        fs.writeFileSync(path.join(ws.dir, 'secret.txt'), 'changed\n');
        await e.checkpoint({ taskId: t.taskId });
        await embeddedStore(e).exportNow();
        await e.checkpoint({ taskId: t.taskId, label: 'again' });
        await embeddedStore(e).exportNow();
        // While it runs: the lock and the live journal.
        for (const [k, v] of listing(path.join(ws.dir, '.waypoint'))) seen.set(k, v);
      } finally {
        await e.close();
      }
      for (const [k, v] of listing(path.join(ws.dir, '.waypoint'))) seen.set(k, v);
      const kinds = [...seen.keys()].join(' ');
      for (const want of ['owner.lock', 'waypoint.db', 'waypoint.db.prev', '.gitignore', 'objects', 'objects/pack', 'archive']) assert.ok(seen.has(want), `${want} among ${kinds}`);
      assert.ok([...seen.keys()].some((k) => k.endsWith('.wal')), 'a journal segment');
      assert.ok([...seen.keys()].some((k) => k.endsWith('.pack')), 'a pack');
      const wrong = [...seen].filter(([, v]) => {
        const [type, mode] = v.split(' ');
        return type === 'd' ? mode !== '700' : mode !== '600';
      });
      assert.deepEqual(wrong, [], 'files 0600, directories 0700');
      assert.equal(fs.statSync(path.join(ws.dir, '.waypoint')).mode & 0o777, 0o700);
    } finally {
      process.umask(old);
      ws.cleanup();
    }
  });
});
