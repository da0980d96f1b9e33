import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { rootsOfFolders, rootNameOf } from '../../src/core/engine/workspaceRoots';
import { resolveStore, storeLocationOf } from '../../src/ownership/resolve';
import { storeDirOf } from '../../src/ownership/storeDirOf';
import { readLinkFile, storeRootsOf, writeStoreRoots } from '../../src/ownership/storeRoots';
import { Logger } from '../../src/core/log';
import { handleHook } from '../../src/hooks';
import type { SnapshotRoot } from '../../src/core/snapshot';
import { openEngine, tmpDir } from '../support/tmp';

/**
 * Every folder of a multi-root window: one store (in the first folder) with every
 * folder as a root, keys `folder/…`, checkpoints and rollbacks across all of them,
 * links so a CLI started in any folder finds that store, and the refusals that keep a
 * planted folder list or link from sending anything outside the person's folders.
 */
function write(file: string, text: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
}

function twoFolders(): { dir: string; app: string; lib: string; roots: SnapshotRoot[]; cleanup: () => void } {
  const t = tmpDir('wp-multiroot-');
  const app = path.join(t.dir, 'app');
  const lib = path.join(t.dir, 'lib');
  write(path.join(app, 'a.txt'), 'app one\n');
  write(path.join(lib, 'b.txt'), 'lib one\n');
  const { roots } = rootsOfFolders([
    { name: 'app', dir: app },
    { name: 'lib', dir: lib },
  ]);
  return { dir: t.dir, app, lib, roots, cleanup: t.cleanup };
}

describe('multi-root workspaces', () => {
  it('names roots as safe, unique, stable segments and leaves out nested and repeated folders', () => {
    const r = rootsOfFolders([
      { name: 'src', dir: '/w/one/src' },
      { name: 'src', dir: '/w/two/src' },
      { name: '../..', dir: '/w/up' },
      { name: 'a/b', dir: '/w/ab' },
      { name: 'inner', dir: '/w/one/src/inner' },
      { name: 'again', dir: '/w/one/src/' },
      { name: '.git', dir: '/w/dotgit' },
    ]);
    assert.deepEqual(
      r.roots.map((x) => x.name),
      ['src', 'src-2', 'up', 'a_b', 'git'],
    );
    assert.deepEqual(r.skipped.map((s) => s.dir).sort(), ['/w/one/src', '/w/one/src/inner'].sort());
    assert.equal(rootNameOf('', '/x/.waypoint'), 'waypoint');
    assert.equal(rootNameOf('...', '/x/...'), 'folder');
  });

  it('checkpoints, shows and rolls back both folders of one task, with paths as folder/…', async () => {
    const w = twoFolders();
    try {
      const engine = await openEngine(w.app, { snapshots: { roots: w.roots } });
      try {
        const { taskId } = await engine.startTask({ goal: 'change both folders', plan: [{ id: 's', title: 'edit' }] });
        write(path.join(w.app, 'a.txt'), 'app two\n');
        write(path.join(w.lib, 'b.txt'), 'lib two\n');
        write(path.join(w.lib, 'new.txt'), 'new\n');
        // A nested git repository is captured as plain files; its .git is never read or written.
        write(path.join(w.lib, 'vendor', 'x.txt'), 'vendored\n');
        execFileSync('git', ['init', '-q', path.join(w.lib, 'vendor')]);
        const head = fs.readFileSync(path.join(w.lib, 'vendor', '.git', 'HEAD'), 'utf8');
        await engine.checkpoint({ taskId, kind: 'manual', label: 'after' });
        const detail = engine.taskDetail(taskId);
        const base = detail.task.baseCheckpointId!;
        const d = await engine.diff({ from: base });
        assert.deepEqual(d.changes.map((c) => c.path).sort(), ['app/a.txt', 'lib/b.txt', 'lib/new.txt', 'lib/vendor/x.txt']);
        const r = await engine.rollback({ taskId, checkpointId: base });
        assert.ok(r.preRollbackCheckpointId);
        assert.equal(fs.readFileSync(path.join(w.app, 'a.txt'), 'utf8'), 'app one\n');
        assert.equal(fs.readFileSync(path.join(w.lib, 'b.txt'), 'utf8'), 'lib one\n');
        assert.equal(fs.existsSync(path.join(w.lib, 'new.txt')), false);
        assert.equal(fs.existsSync(path.join(w.lib, 'vendor', 'x.txt')), false);
        assert.equal(fs.readFileSync(path.join(w.lib, 'vendor', '.git', 'HEAD'), 'utf8'), head, 'the nested .git is left alone');
        // And back again: the rollback is undoable across both folders.
        await engine.undoRollback({ taskId });
        assert.equal(fs.readFileSync(path.join(w.lib, 'b.txt'), 'utf8'), 'lib two\n');
        assert.equal(fs.readFileSync(path.join(w.app, 'a.txt'), 'utf8'), 'app two\n');
      } finally {
        await engine.close();
      }
    } finally {
      w.cleanup();
    }
  });

  it('a folder added later is captured from then on, and a rollback to before it leaves it alone', async () => {
    const w = twoFolders();
    const extra = path.join(w.dir, 'docs');
    write(path.join(extra, 'readme.md'), 'docs\n');
    try {
      let engine = await openEngine(w.app, { snapshots: { roots: w.roots } });
      const { taskId } = await engine.startTask({ goal: 'g', plan: [{ id: 's', title: 's' }] });
      const base = engine.taskDetail(taskId).task.baseCheckpointId!;
      await engine.close();
      const three = rootsOfFolders([...w.roots, { name: 'docs', dir: extra }]).roots;
      engine = await openEngine(w.app, { snapshots: { roots: three } });
      try {
        write(path.join(w.app, 'a.txt'), 'changed\n');
        const c = await engine.checkpoint({ taskId, kind: 'manual' });
        assert.ok(c.checkpointId);
        const now = await engine.diff({ from: base });
        assert.ok(now.changes.some((x) => x.path === 'docs/readme.md'), 'the new folder shows as added since the base');
        const r = await engine.rollback({ taskId, checkpointId: base });
        assert.equal(fs.readFileSync(path.join(w.app, 'a.txt'), 'utf8'), 'app one\n');
        assert.equal(fs.readFileSync(path.join(extra, 'readme.md'), 'utf8'), 'docs\n', 'a folder the target never saw is kept');
        assert.deepEqual(r.kept.filter((k) => k.path === 'docs'), [{ path: 'docs', reason: 'not_captured_in_target' }]);
      } finally {
        await engine.close();
      }
      // A folder removed from the window: a rollback to a checkpoint that held it writes nothing there.
      engine = await openEngine(w.app, { snapshots: { roots: w.roots } });
      try {
        fs.writeFileSync(path.join(extra, 'readme.md'), 'edited outside\n');
        const last = engine.taskDetail(taskId).checkpoints.find((x) => x.id !== base && x.kind === 'manual')!;
        await engine.rollback({ taskId, checkpointId: last.id });
        assert.equal(fs.readFileSync(path.join(extra, 'readme.md'), 'utf8'), 'edited outside\n');
      } finally {
        await engine.close();
      }
      // A checkpoint of a single-folder time (keys without a folder name) is refused, changing nothing.
      engine = await openEngine(w.app);
      let single: { taskId: string; checkpointId: string };
      try {
        const t = await engine.startTask({ goal: 'single', plan: [{ id: 's', title: 's' }] });
        single = { taskId: t.taskId, checkpointId: engine.taskDetail(t.taskId).task.baseCheckpointId! };
      } finally {
        await engine.close();
      }
      engine = await openEngine(w.app, { snapshots: { roots: w.roots } });
      try {
        write(path.join(w.app, 'a.txt'), 'before the refusal\n');
        await assert.rejects(engine.rollback(single), /holds none of this window's folders/);
        assert.equal(fs.readFileSync(path.join(w.app, 'a.txt'), 'utf8'), 'before the refusal\n');
      } finally {
        await engine.close();
      }
    } finally {
      w.cleanup();
    }
  });

  it("an agent's hook edit in the second folder is keyed folder/… and belongs to its step", async () => {
    const w = twoFolders();
    try {
      const engine = await openEngine(w.app, { snapshots: { roots: w.roots } });
      try {
        const base = { session_id: 'sess-multi', cwd: w.lib };
        await handleHook(engine, 'claude-code', { ...base, hook_event_name: 'UserPromptSubmit', prompt: 'edit the library' });
        const edit = { ...base, tool_name: 'Edit', tool_use_id: 'toolu_multi', tool_input: { file_path: 'b.txt' } };
        await handleHook(engine, 'claude-code', { ...edit, hook_event_name: 'PreToolUse' });
        write(path.join(w.lib, 'b.txt'), 'edited by the agent\n');
        await handleHook(engine, 'claude-code', { ...edit, hook_event_name: 'PostToolUse' });
        const task = engine.tasks()[0]!;
        const around = engine.queries.checkpoints(task.id).filter((c) => c.kind === 'tool_start' || c.kind === 'tool_end');
        assert.deepEqual(around.map((c) => c.label), ['before Edit lib/b.txt', 'after Edit lib/b.txt']);
        const d = await engine.diff({ from: task.baseCheckpointId! });
        assert.deepEqual(d.changes.map((c) => c.path), ['lib/b.txt']);
      } finally {
        await engine.close();
      }
    } finally {
      w.cleanup();
    }
  });

  it('links every folder to the one store, so a CLI in any folder opens it with all the roots', async () => {
    const w = twoFolders();
    try {
      const storeDir = path.join(w.app, '.waypoint');
      assert.deepEqual(writeStoreRoots(storeDir, w.roots), []);
      assert.equal(readLinkFile(w.lib)?.store, storeDir);
      assert.equal(fs.readFileSync(path.join(w.lib, '.waypoint', '.gitignore'), 'utf8'), '*\n');
      assert.equal(storeDirOf(w.lib), storeDir);
      assert.equal(storeDirOf(w.app), storeDir);
      const at = storeLocationOf(w.lib);
      assert.equal(at.workspace, w.app);
      assert.deepEqual(at.roots, w.roots);
      // A CLI owning the store from the second folder checkpoints both.
      const log = new Logger(() => undefined);
      const keys = await resolveStore({
        workspace: w.lib,
        log,
        waitMs: 1000,
        serving: () => Promise.reject(new Error('no owner expected')),
        own: async (engine) => {
          try {
            const { taskId } = await engine.startTask({ goal: 'g', plan: [{ id: 's', title: 's' }] });
            const base = engine.taskDetail(taskId).task.baseCheckpointId!;
            const m = await engine.workspaceSnapshots!.load(engine.queries.checkpoint(base)!);
            return [...m.keys()].sort();
          } finally {
            await engine.close();
          }
        },
      });
      assert.deepEqual(keys, ['app/a.txt', 'lib/b.txt']);
      assert.equal(fs.existsSync(path.join(w.lib, '.waypoint', 'waypoint.db')), false, 'no second store in the linked folder');
      // Back to one folder: the list and the link go, and each folder has its own store again.
      writeStoreRoots(storeDir, [w.roots[0]!]);
      assert.equal(storeRootsOf(storeDir), null);
      writeStoreRoots(storeDir, w.roots);
      fs.rmSync(path.join(w.lib, '.waypoint', 'link.json'));
      assert.equal(storeDirOf(w.lib), path.join(w.lib, '.waypoint'));
    } finally {
      w.cleanup();
    }
  });

  it('refuses a planted folder list or link: nothing outside the folders that consented', async () => {
    const w = twoFolders();
    const victim = path.join(w.dir, 'victim');
    write(path.join(victim, 'secret.txt'), 'keep\n');
    try {
      const storeDir = path.join(w.app, '.waypoint');
      fs.mkdirSync(storeDir, { recursive: true });
      // A cloned repository ships a roots.json naming a folder that never linked to it.
      fs.writeFileSync(path.join(storeDir, 'roots.json'), JSON.stringify({ version: 1, roots: [{ name: 'app', dir: w.app }, { name: 'victim', dir: victim }] }));
      assert.throws(() => storeRootsOf(storeDir), /does not link back/);
      await assert.rejects(
        resolveStore({ workspace: w.app, log: new Logger(() => undefined), waitMs: 100, serving: () => Promise.reject(new Error('x')), own: async (e) => e.close() }),
        /does not link back/,
      );
      assert.equal(fs.readFileSync(path.join(victim, 'secret.txt'), 'utf8'), 'keep\n');
      // A first root that is an ancestor (`/`), not the folder holding the store, is refused too.
      fs.writeFileSync(path.join(storeDir, 'roots.json'), JSON.stringify({ version: 1, roots: [{ name: 'all', dir: w.dir }, { name: 'app', dir: w.app }] }));
      assert.throws(() => storeRootsOf(storeDir), /does not link back/);
      // Hostile names and shapes are refused as corrupt, before any folder is looked at.
      for (const bad of [{ version: 1, roots: [{ name: '..', dir: w.app }, { name: 'b', dir: w.lib }] }, { version: 1, roots: [{ name: 'a', dir: 'relative' }, { name: 'b', dir: w.lib }] }, { roots: [] }]) {
        fs.writeFileSync(path.join(storeDir, 'roots.json'), JSON.stringify(bad));
        assert.throws(() => storeRootsOf(storeDir), /not valid/);
      }
      fs.rmSync(path.join(storeDir, 'roots.json'));
      // A planted link to a store that does not list this folder is not followed.
      write(path.join(w.lib, '.waypoint', 'link.json'), JSON.stringify({ version: 1, store: path.join(victim, '.waypoint') }));
      assert.equal(storeDirOf(w.lib), path.join(w.lib, '.waypoint'));
      // Nor a link.json that is itself a symbolic link to a valid-looking one.
      writeStoreRoots(storeDir, w.roots);
      const real = path.join(w.dir, 'real-link.json');
      fs.renameSync(path.join(w.lib, '.waypoint', 'link.json'), real);
      fs.symlinkSync(real, path.join(w.lib, '.waypoint', 'link.json'));
      assert.equal(storeDirOf(w.lib), path.join(w.lib, '.waypoint'));
      assert.throws(() => storeRootsOf(storeDir), /does not link back/);
      // A `.waypoint` that is a symbolic link is never written through: the link is reported, not made.
      fs.rmSync(path.join(w.lib, '.waypoint'), { recursive: true });
      fs.mkdirSync(path.join(victim, 'store'));
      fs.symlinkSync(path.join(victim, 'store'), path.join(w.lib, '.waypoint'));
      const problems = writeStoreRoots(storeDir, w.roots);
      assert.equal(problems.length, 1);
      assert.match(problems[0]!.problem, /symbolic link/);
      assert.deepEqual(fs.readdirSync(path.join(victim, 'store')), []);
    } finally {
      w.cleanup();
    }
  });
});
