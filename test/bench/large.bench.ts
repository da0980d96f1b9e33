/**
 * A Chromium-sized tree (200,000 files, 100,000 of them in one folder) with a background
 * owner, side by side with git on a copy of the same tree: a checkpoint after 10 files
 * change (target ≤ 0.25× `git add -A && git commit`), then a rollback of those rounds
 * and its undo (against `git checkout`), with the owner's resident size after each. The
 * first call (which starts the owner and scans everything) is reported, not a target here
 * (see --only=background).
 *
 *   npm run bench -- --only=large      (WAYPOINT_BENCH_FILES=N for another size)
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { GIT, content, run, type Timed } from './fresh.bench';
import { benchDir, fmtMs, median, printTable, type Row } from './util';

const ROOT = path.resolve(__dirname, '..', '..');
const CLI = path.join(ROOT, 'dist', 'cli.js');
const FILES = 200_000;
const CHANGED = 10;
const ON = { WAYPOINT_NO_DAEMON: '', WAYPOINT_DAEMON: '1', WAYPOINT_DAEMON_IDLE_SECONDS: '900' };

/** Half the files in one folder (`flat/`), the rest in folders of 20 under 100 packages. */
function relOf(i: number, files: number): string {
  const half = Math.floor(files / 2);
  if (i < half) return `flat/f${i}.ts`;
  const j = i - half;
  const d = Math.floor(j / 20);
  return `pkg${d % 100}/dir${Math.floor(d / 100)}/m${j}.ts`;
}

type Status = { owner: { pid: number; background: boolean } | null; status?: { rssBytes: number; watch: { kind: string; dirs?: number; reason?: string; hinted?: number } } };

/** The owner's status; one busy with a long job answers its status later: asked again for up to a minute. */
function status(ws: string): Status {
  for (const until = Date.now() + 60_000; ; ) {
    const r = spawnSync(process.execPath, [CLI, 'status', '--json', '--workspace', ws], { encoding: 'utf8', env: { ...process.env, WAYPOINT_NO_DAEMON: '1' } });
    if (r.status !== 0) throw new Error(`status exited ${r.status}: ${r.stderr}`);
    const s = JSON.parse(r.stdout) as Status;
    if (!s.owner || s.status || Date.now() > until) return s;
  }
}

export async function main(o: { quick?: boolean } = {}): Promise<Row[]> {
  spawnSync(process.execPath, ['esbuild.js'], { cwd: ROOT, stdio: 'ignore' });
  const files = Number(process.env.WAYPOINT_BENCH_FILES) || (o.quick ? 20_000 : FILES);
  const rounds = o.quick ? 2 : 5;
  const { dir, cleanup } = benchDir('wp-bench-large-');
  const log = (s: string) => process.stderr.write(`[large] ${s}\n`);
  const ws = path.join(dir, 'ws');
  const gws = path.join(dir, 'git-ws');
  let ownerPid = 0;
  try {
    for (const tree of [ws, gws]) {
      let lastDir = '';
      for (let i = 0; i < files; i++) {
        const f = path.join(tree, relOf(i, files));
        const d = path.dirname(f);
        if (d !== lastDir) fs.mkdirSync((lastDir = d), { recursive: true });
        fs.writeFileSync(f, content(i, 0));
      }
    }
    const old = new Date(Date.now() - 3600_000);
    for (const tree of [ws, gws]) for (let i = 0; i < files; i++) fs.utimesSync(path.join(tree, relOf(i, files)), old, old);
    log(`trees: ${files} files each (${Math.floor(files / 2)} in one folder)`);
    run('git', ['init', '-q'], gws);
    const gitBase = run('git', [...GIT, 'add', '-A'], gws);
    run('git', [...GIT, 'commit', '-q', '-m', 'base'], gws);
    const started = run(process.execPath, [CLI, 'task', 'start', '--workspace', ws, '--goal', 'large-tree bench', '--lease-ttl', '86400', '--json'], ws, ON);
    const taskId = (JSON.parse(started.out) as { taskId: string }).taskId;
    const s0 = status(ws);
    if (!s0.owner?.background) throw new Error(`no background owner after the first call: ${JSON.stringify(s0)}`);
    ownerPid = s0.owner.pid;
    log(`first call (starts the owner, scans everything): ${fmtMs(started.ms)}; git add -A of the base: ${fmtMs(gitBase.ms)}; owner ${(s0.status!.rssBytes / 2 ** 20).toFixed(0)} MB, ${JSON.stringify(s0.status!.watch)}`);
    // The checkpoint the rounds start from (the watcher vouches for lists after it).
    const base = JSON.parse(run(process.execPath, [CLI, 'checkpoint', '--workspace', ws, '--task', taskId, '--json'], ws, ON).out) as { checkpointId: string };
    const wp: Timed[] = [];
    const git: number[] = [];
    for (let r = 1; r <= rounds; r++) {
      // Half of the changed files in the big folder, half elsewhere.
      const picked = Array.from({ length: CHANGED }, (_, k) => (k % 2 === 0 ? (r * 7919 + k * 4801) % Math.floor(files / 2) : Math.floor(files / 2) + ((r * 6007 + k * 3301) % (files - Math.floor(files / 2)))));
      for (const tree of [ws, gws]) for (const i of picked) fs.writeFileSync(path.join(tree, relOf(i, files)), content(i, r));
      const add = run('git', [...GIT, 'add', '-A'], gws);
      const commit = run('git', [...GIT, 'commit', '-q', '-m', `round ${r}`], gws);
      git.push(add.ms + commit.ms);
      const cp = run(process.execPath, [CLI, 'checkpoint', '--workspace', ws, '--task', taskId, '--label', `round ${r}`, '--json'], ws, ON);
      const changed = (JSON.parse(cp.out) as { filesChanged: number }).filesChanged;
      if (changed !== CHANGED) throw new Error(`round ${r}: the checkpoint saw ${changed} files changed, not ${CHANGED}`);
      wp.push(cp);
      log(`round ${r}: waypoint ${fmtMs(cp.ms)}, git ${fmtMs(add.ms + commit.ms)}`);
    }
    const afterRounds = status(ws);
    // Back to before the rounds (50 files), and the undo; git's checkout of the same.
    const rb = run(process.execPath, [CLI, 'rollback', '--workspace', ws, '--task', taskId, '--to', base.checkpointId, '--yes', '--json'], ws, ON);
    const gitRb = run('git', [...GIT, 'checkout', '-q', `HEAD~${rounds}`, '--', '.'], gws);
    const afterRollback = status(ws);
    const undo = run(process.execPath, [CLI, 'rollback', '--workspace', ws, '--task', taskId, '--undo', '--yes', '--json'], ws, ON);
    const gitUndo = run('git', [...GIT, 'checkout', '-q', 'HEAD', '--', '.'], gws);
    const afterUndo = status(ws);
    const mb = (s: Status) => (s.status ? s.status.rssBytes / 2 ** 20 : NaN);
    const w = median(wp.map((x) => x.ms));
    const g = median(git);
    const n = files.toLocaleString('en');
    const rows: Row[] = [
      { measure: `checkpoint, ${n} files, ${CHANGED} changed, background owner (median of ${rounds})`, waypoint: fmtMs(w), baseline: `${fmtMs(g)} git add -A && git commit`, ratio: `${(w / g).toFixed(2)}×`, target: '≤ 0.25×', ok: w / g <= 0.25 },
      { measure: `rollback of ${rounds * CHANGED} files (whole command)`, waypoint: fmtMs(rb.ms), baseline: `${fmtMs(gitRb.ms)} git checkout`, ratio: `${(rb.ms / gitRb.ms).toFixed(2)}×`, target: '(info)', ok: null },
      { measure: 'its undo (whole command)', waypoint: fmtMs(undo.ms), baseline: `${fmtMs(gitUndo.ms)} git checkout`, ratio: `${(undo.ms / gitUndo.ms).toFixed(2)}×`, target: '(info)', ok: null },
      { measure: 'first call: starts the owner, scans everything (info)', waypoint: fmtMs(started.ms), baseline: `${fmtMs(gitBase.ms)} git add -A (base)`, ratio: '-', target: '(info; see --only=background)', ok: null },
      { measure: 'owner resident size after the checkpoints / the rollback / the undo', waypoint: `${mb(afterRounds).toFixed(0)} / ${mb(afterRollback).toFixed(0)} / ${mb(afterUndo).toFixed(0)} MB`, baseline: '-', ratio: '-', target: '(info: it leaves if it stays past 512 MB for 90 s between calls)', ok: null },
      { measure: 'peak RSS of the calling CLI processes', waypoint: `${Math.max(...wp.map((x) => x.rssMb), rb.rssMb, undo.rssMb).toFixed(0)} MB`, baseline: '-', ratio: '-', target: '≤ 150 MB', ok: Math.max(...wp.map((x) => x.rssMb), rb.rssMb, undo.rssMb) <= 150 },
    ];
    log(`watch: ${JSON.stringify(afterUndo.status?.watch)}`);
    printTable(`A large tree (${n} files, half in one folder), background owner`, rows);
    return rows;
  } finally {
    if (ownerPid) {
      try {
        process.kill(ownerPid, 'SIGTERM');
      } catch {
        // gone already
      }
      for (let until = Date.now() + 30_000; Date.now() < until; ) {
        try {
          process.kill(ownerPid, 0);
        } catch {
          break;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    cleanup();
  }
}

if (require.main === module) void main({ quick: process.argv.includes('--quick') });
